// Copyright the dsh-code-runtime-v8 authors. MIT license.
// URL and URLSearchParams. Parsing and the component setters are the WHATWG
// algorithms of the `url` crate (op_dsh_url_parse / op_dsh_url_set); the
// form-urlencoded list and the inspect rendering follow Node's. A lazy
// module (14_lazy_globals.js).
//
// Takes: primordials, native (ops, protocol), api (setToStringTag),
// nodeErrors, lazyGlobals (the encoding module). Makes URL, URLSearchParams.
"use strict";

const {
  primordials: p,
  native: { ops, protocol },
  api: { setToStringTag },
  nodeErrors: { nodeError, nodeCppError, invalidArgType, missingArgs, invalidThis },
  lazyGlobals: { load },
} = dsh;
// The module's own TextDecoder, not the global a program can replace.
const { utf8Encode, TextDecoder } = load("encoding");
const { String, TypeError, ArrayPrototypePush, ArrayPrototypeJoin, StringPrototypeCharCodeAt, NumberPrototypeToString, StringPrototypeToUpperCase } = p;
const inspectCustom = p.SymbolFor("nodejs.util.inspect.custom");

const HEX_PAIR = new p.RegExp("^[0-9a-fA-F]{2}$");
// Indices of the components the ops return, and the ops' setter numbers
// (crates/sandbox-ext/src/lib.rs defines both).
const { href: HREF, origin: ORIGIN, protocol: PROTOCOL, username: USERNAME, password: PASSWORD, host: HOST, hostname: HOSTNAME, port: PORT, pathname: PATHNAME, search: SEARCH, hash: HASH } =
  protocol.urlParts;
const {
  protocol: SET_PROTOCOL,
  username: SET_USERNAME,
  password: SET_PASSWORD,
  host: SET_HOST,
  hostname: SET_HOSTNAME,
  port: SET_PORT,
  pathname: SET_PATHNAME,
  search: SET_SEARCH,
  hash: SET_HASH,
} = protocol.urlSetters;

// Cross-class access to private state, handed out by static blocks.
let attachParams;
let refreshParams;
let setUrlSearch;

function percentDecode(text) {
  const bytes = [];
  for (let i = 0; i < text.length; i++) {
    const c = StringPrototypeCharCodeAt(text, i);
    if (c === 0x25 && i + 2 < text.length) {
      const hex = p.StringPrototypeSlice(text, i + 1, i + 3);
      const value = p.Number("0x" + hex);
      if (hex.length === 2 && p.RegExpTest(HEX_PAIR, hex)) {
        ArrayPrototypePush(bytes, value);
        i += 2;
        continue;
      }
    }
    // Encode a surrogate pair together, so it is one code point.
    const pair = c >= 0xd800 && c <= 0xdbff && i + 1 < text.length;
    const encoded = utf8Encode(p.StringPrototypeSlice(text, i, pair ? i + 2 : i + 1));
    if (pair) i++;
    for (let k = 0; k < encoded.length; k++) ArrayPrototypePush(bytes, encoded[k]);
  }
  return new TextDecoder().decode(new p.Uint8Array(bytes));
}

function formEncode(text) {
  const bytes = utf8Encode(p.StringPrototypeToWellFormed(String(text)));
  let out = "";
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    if ((b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) || b === 0x2a || b === 0x2d || b === 0x2e || b === 0x5f) {
      out += p.StringFromCharCode(b);
    } else if (b === 0x20) {
      out += "+";
    } else {
      out += "%" + StringPrototypeToUpperCase(p.StringPrototypePadStart(NumberPrototypeToString(b, 16), 2, "0"));
    }
  }
  return out;
}

function parseForm(input) {
  const list = [];
  const pieces = p.StringSplitLiteral(input, "&");
  for (let i = 0; i < pieces.length; i++) {
    const piece = pieces[i];
    if (piece === "") continue;
    const eq = p.StringPrototypeIndexOf(piece, "=");
    const name = eq === -1 ? piece : p.StringPrototypeSlice(piece, 0, eq);
    const value = eq === -1 ? "" : p.StringPrototypeSlice(piece, eq + 1);
    ArrayPrototypePush(list, percentDecode(p.StringReplaceAllLiteral(name, "+", " ")), percentDecode(p.StringReplaceAllLiteral(value, "+", " ")));
  }
  return list;
}

// What each URLSearchParams Iterator yields.
const KEYS = 0;
const VALUES = 1;
const ENTRIES = 2;
// The params' [name, value, name, value, ...] list, a static block's.
let listOf;

/**
 * Node's URLSearchParams Iterator: live (each step reads the params' list
 * as it is then), printed as what it has left.
 */
class URLSearchParamsIterator {
  #params;
  #kind;
  #index = 0;
  constructor(params, kind) {
    this.#params = params;
    this.#kind = kind;
  }
  next() {
    URLSearchParamsIterator.#check(this);
    const list = listOf(this.#params);
    const at = this.#index;
    if (at >= list.length) return { value: undefined, done: true };
    this.#index = at + 2;
    return { value: this.#item(list, at), done: false };
  }
  [inspectCustom](depth, options, inspect) {
    URLSearchParamsIterator.#check(this);
    if (typeof depth === "number" && depth < 0) return "[Object]";
    const inner = { __proto__: null, ...options };
    if (depth !== null) inner.depth = depth - 1;
    const list = listOf(this.#params);
    const left = [];
    for (let i = this.#index; i < list.length; i += 2) ArrayPrototypePush(left, this.#item(list, i));
    const broken = p.StringPrototypeIncludes(inspect(left, inner), "\n");
    const shown = p.ArrayPrototypeMap(left, (item) => inspect(item, inner));
    return `URLSearchParams Iterator {${broken ? `\n  ${ArrayPrototypeJoin(shown, ",\n  ")}` : ` ${ArrayPrototypeJoin(shown, ", ")}`} }`;
  }
  /** What the pair at `at` of `list` gives, by this iterator's kind. */
  #item(list, at) {
    const kind = this.#kind;
    return kind === KEYS ? list[at] : kind === VALUES ? list[at + 1] : [list[at], list[at + 1]];
  }
  static #check(value) {
    if (typeof value !== "object" || value === null || !(#params in value)) throw invalidThis("URLSearchParamsIterator");
  }
}
// Web IDL's iterator prototype object: no constructor, %IteratorPrototype%
// its prototype, next enumerable.
delete URLSearchParamsIterator.prototype.constructor;
p.ObjectSetPrototypeOf(URLSearchParamsIterator.prototype, p.IteratorPrototype);
p.ObjectDefineProperty(URLSearchParamsIterator.prototype, "next", { __proto__: null, enumerable: true });
setToStringTag(URLSearchParamsIterator, "URLSearchParams Iterator");
/**
 * Node's error for a URL that does not parse: `make` is nodeCppError where
 * Node's C++ throws it (the constructor's parse: the code not in the
 * stack's header), nodeError where its JS does (the href setter).
 */
function invalidUrl(input, base, make) {
  const error = make(TypeError, "ERR_INVALID_URL", "Invalid URL");
  error.input = String(input);
  if (base !== undefined) error.base = String(base);
  return error;
}
/** Node's error for a query pair that is not a [name, value] tuple. */
const invalidTuple = () => nodeError(TypeError, "ERR_INVALID_TUPLE", "Each query pair must be an iterable [name, value] tuple");

class URLSearchParams {
  #list = [];
  #url = null;
  constructor(init = undefined) {
    // As Node's, a host object structuredClone refuses (crates/sandbox-ext/src/structured_clone.rs).
    ops.op_dsh_host_object(this, null);
    if (init === undefined || init === null) return;
    if (typeof init === "object" || typeof init === "function") {
      if (typeof init[p.SymbolIterator] === "function") {
        // As Node: every pair taken first, then each checked.
        const pairs = [];
        for (const pair of init) {
          if (pair === null || (typeof pair !== "object" && typeof pair !== "function") || typeof pair[p.SymbolIterator] !== "function") throw invalidTuple();
          ArrayPrototypePush(pairs, [...pair]);
        }
        for (let i = 0; i < pairs.length; i++) {
          if (pairs[i].length !== 2) throw invalidTuple();
          ArrayPrototypePush(this.#list, String(pairs[i][0]), String(pairs[i][1]));
        }
      } else {
        const keys = p.ReflectOwnKeys(init);
        for (let i = 0; i < keys.length; i++) {
          const key = keys[i];
          if (typeof key === "string" && p.ObjectPrototypePropertyIsEnumerable(init, key)) ArrayPrototypePush(this.#list, key, String(init[key]));
        }
      }
      return;
    }
    let text = String(init);
    if (text[0] === "?") text = p.StringPrototypeSlice(text, 1);
    this.#list = parseForm(text);
  }
  static {
    listOf = (params) => params.#list;
  }
  static {
    attachParams = (params, url, search) => {
      params.#url = url;
      params.#list = parseForm(p.StringPrototypeSlice(search, 1));
    };
    refreshParams = (params, search) => {
      params.#list = parseForm(p.StringPrototypeSlice(search, 1));
    };
  }
  #update() {
    if (this.#url !== null) setUrlSearch(this.#url, this.toString());
  }
  get size() {
    return this.#list.length / 2;
  }
  append(name, value) {
    if (arguments.length < 2) throw missingArgs(["name", "value"]);
    ArrayPrototypePush(this.#list, String(name), String(value));
    this.#update();
  }
  delete(name, value = undefined) {
    if (arguments.length < 1) throw missingArgs(["name"]);
    name = String(name);
    const out = [];
    for (let i = 0; i < this.#list.length; i += 2) {
      if (this.#list[i] === name && (value === undefined || this.#list[i + 1] === String(value))) continue;
      ArrayPrototypePush(out, this.#list[i], this.#list[i + 1]);
    }
    this.#list = out;
    this.#update();
  }
  get(name) {
    if (arguments.length < 1) throw missingArgs(["name"]);
    name = String(name);
    for (let i = 0; i < this.#list.length; i += 2) if (this.#list[i] === name) return this.#list[i + 1];
    return null;
  }
  getAll(name) {
    if (arguments.length < 1) throw missingArgs(["name"]);
    name = String(name);
    const out = [];
    for (let i = 0; i < this.#list.length; i += 2) if (this.#list[i] === name) ArrayPrototypePush(out, this.#list[i + 1]);
    return out;
  }
  has(name, value = undefined) {
    if (arguments.length < 1) throw missingArgs(["name"]);
    name = String(name);
    for (let i = 0; i < this.#list.length; i += 2) {
      if (this.#list[i] === name && (value === undefined || this.#list[i + 1] === String(value))) return true;
    }
    return false;
  }
  set(name, value) {
    if (arguments.length < 2) throw missingArgs(["name", "value"]);
    name = String(name);
    value = String(value);
    const out = [];
    let found = false;
    for (let i = 0; i < this.#list.length; i += 2) {
      if (this.#list[i] === name) {
        if (found) continue;
        found = true;
        ArrayPrototypePush(out, name, value);
      } else {
        ArrayPrototypePush(out, this.#list[i], this.#list[i + 1]);
      }
    }
    if (!found) ArrayPrototypePush(out, name, value);
    this.#list = out;
    this.#update();
  }
  sort() {
    const pairs = [];
    for (let i = 0; i < this.#list.length; i += 2) ArrayPrototypePush(pairs, [this.#list[i], this.#list[i + 1]]);
    // Stable sort by UTF-16 code units of the name.
    p.ArrayPrototypeSort(pairs, (a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    const out = [];
    for (let i = 0; i < pairs.length; i++) ArrayPrototypePush(out, pairs[i][0], pairs[i][1]);
    this.#list = out;
    this.#update();
  }
  entries() {
    return new URLSearchParamsIterator(this, ENTRIES);
  }
  forEach(callback, thisArg = undefined) {
    if (typeof callback !== "function") throw invalidArgType("callback", "Function", callback);
    for (let i = 0; i < this.#list.length; i += 2) p.ReflectApply(callback, thisArg, [this.#list[i + 1], this.#list[i], this]);
  }
  keys() {
    return new URLSearchParamsIterator(this, KEYS);
  }
  values() {
    return new URLSearchParamsIterator(this, VALUES);
  }
  toString() {
    const out = [];
    for (let i = 0; i < this.#list.length; i += 2) ArrayPrototypePush(out, formEncode(this.#list[i]) + "=" + formEncode(this.#list[i + 1]));
    return ArrayPrototypeJoin(out, "&");
  }
  [inspectCustom](depth, options, inspect) {
    if (typeof depth === "number" && depth < 0) return "[Object]";
    const inner = { __proto__: null, ...options, depth: depth - 1 };
    const output = [];
    for (let i = 0; i < this.#list.length; i += 2) ArrayPrototypePush(output, `${inspect(this.#list[i], inner)} => ${inspect(this.#list[i + 1], inner)}`);
    let length = -2;
    for (let i = 0; i < output.length; i++) length += output[i].length + 2;
    if (length > options.breakLength) return `URLSearchParams {\n  ${ArrayPrototypeJoin(output, ",\n  ")} }`;
    if (output.length) return `URLSearchParams { ${ArrayPrototypeJoin(output, ", ")} }`;
    return "URLSearchParams {}";
  }
}
// After the class's own members, in Node's order: the tag (a value, as
// Web IDL's), then the iterator, which is entries itself.
setToStringTag(URLSearchParams);
p.ObjectDefineProperty(URLSearchParams.prototype, p.SymbolIterator, { __proto__: null, value: URLSearchParams.prototype.entries, writable: true, configurable: true });

class URL {
  #parts;
  #searchParams;
  constructor(url, base = undefined) {
    if (arguments.length === 0) throw missingArgs(["url"]);
    // As Node's, a host object structuredClone refuses (crates/sandbox-ext/src/structured_clone.rs).
    ops.op_dsh_host_object(this, null);
    const parts = ops.op_dsh_url_parse(String(url), base === undefined ? undefined : String(base));
    if (parts === null || parts === undefined) {
      throw invalidUrl(url, base, nodeCppError);
    }
    this.#parts = parts;
  }
  static canParse(url, base = undefined) {
    if (arguments.length === 0) throw missingArgs(["url"]);
    const parts = ops.op_dsh_url_parse(String(url), base === undefined ? undefined : String(base));
    return parts !== null && parts !== undefined;
  }
  static parse(url, base = undefined) {
    return URL.canParse(url, base) ? new URL(url, base) : null;
  }
  static {
    setUrlSearch = (url, search) => url.#set(SET_SEARCH, search);
  }
  #set(setter, value) {
    const parts = ops.op_dsh_url_set(this.#parts[HREF], setter, String(value));
    if (parts === null || parts === undefined) return;
    this.#parts = parts;
    if (setter !== SET_SEARCH || value === undefined) {
      if (this.#searchParams !== undefined) refreshParams(this.#searchParams, this.#parts[SEARCH]);
    }
  }
  // Node's order of the prototype's members, toString first.
  toString() { return this.#parts[HREF]; }
  get href() { return this.#parts[HREF]; }
  set href(v) {
    const parts = ops.op_dsh_url_parse(String(v), undefined);
    if (parts === null || parts === undefined) throw invalidUrl(v, undefined, nodeError);
    this.#parts = parts;
    if (this.#searchParams !== undefined) refreshParams(this.#searchParams, this.#parts[SEARCH]);
  }
  get origin() { return this.#parts[ORIGIN]; }
  get protocol() { return this.#parts[PROTOCOL]; }
  set protocol(v) { this.#set(SET_PROTOCOL, v); }
  get username() { return this.#parts[USERNAME]; }
  set username(v) { this.#set(SET_USERNAME, v); }
  get password() { return this.#parts[PASSWORD]; }
  set password(v) { this.#set(SET_PASSWORD, v); }
  get host() { return this.#parts[HOST]; }
  set host(v) { this.#set(SET_HOST, v); }
  get hostname() { return this.#parts[HOSTNAME]; }
  set hostname(v) { this.#set(SET_HOSTNAME, v); }
  get port() { return this.#parts[PORT]; }
  set port(v) { this.#set(SET_PORT, v); }
  get pathname() { return this.#parts[PATHNAME]; }
  set pathname(v) { this.#set(SET_PATHNAME, v); }
  get search() { return this.#parts[SEARCH]; }
  set search(v) {
    this.#set(SET_SEARCH, v);
    if (this.#searchParams !== undefined) refreshParams(this.#searchParams, this.#parts[SEARCH]);
  }
  get searchParams() {
    if (this.#searchParams === undefined) {
      this.#searchParams = new URLSearchParams();
      attachParams(this.#searchParams, this, this.#parts[SEARCH]);
    }
    return this.#searchParams;
  }
  get hash() { return this.#parts[HASH]; }
  set hash(v) { this.#set(SET_HASH, v); }
  toJSON() { return this.#parts[HREF]; }
  [inspectCustom](depth, options, inspect) {
    if (typeof depth === "number" && depth < 0) return this;
    const obj = { __proto__: { constructor: URL } };
    obj.href = this.href;
    obj.origin = this.origin;
    obj.protocol = this.protocol;
    obj.username = this.username;
    obj.password = this.password;
    obj.host = this.host;
    obj.hostname = this.hostname;
    obj.port = this.port;
    obj.pathname = this.pathname;
    obj.search = this.search;
    obj.searchParams = this.searchParams;
    obj.hash = this.hash;
    return `URL ${inspect(obj, options)}`;
  }
}
setToStringTag(URL);

return { __proto__: null, URL, URLSearchParams };
