// Copyright the dsh-code-runtime-v8 authors. MIT license.
// TextEncoder, TextDecoder (utf-8, utf-16le, latin1), atob and btoa,
// behaving as Node's do. A lazy module (14_lazy_globals.js).
//
// Takes: primordials, native (core), api (setToStringTag), nodeErrors, lazyGlobals (the
// domException module), and `host` (its Node line). Makes TextEncoder,
// TextDecoder, atob, btoa; gives the other modules utf8Encode.
"use strict";

const {
  primordials: p,
  native: { core },
  api: { setToStringTag },
  nodeErrors: { nodeError, nodeCppError, invalidArgType, missingArgs, invalidThis: nodeInvalidThis },
  lazyGlobals: { load },
} = dsh;
const { domException } = load("domException");
const { Uint8Array, String, StringFromCharCode, StringPrototypeCharCodeAt, StringPrototypeToLowerCase, StringPrototypeTrim, TypeError, RangeError } = p;

/**
 * UTF-8 of `str` (a lone surrogate becomes U+FFFD), stopping before the
 * first code point that would not fit in `limit` bytes. Serves both
 * encode() (no limit) and encodeInto() (the destination's length).
 * @returns [bytes, UTF-16 units read]
 */
function utf8EncodePrefix(str, limit) {
  const bytes = new Uint8Array(p.MathMin(str.length * 3, limit));
  let n = 0;
  let i = 0;
  for (; i < str.length; i++) {
    let c = StringPrototypeCharCodeAt(str, i);
    let units = 1;
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < str.length) {
      const d = StringPrototypeCharCodeAt(str, i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        units = 2;
      }
    }
    if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
    const size = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    if (n + size > limit) break;
    if (size === 1) {
      bytes[n++] = c;
    } else if (size === 2) {
      bytes[n++] = 0xc0 | (c >> 6);
      bytes[n++] = 0x80 | (c & 63);
    } else if (size === 3) {
      bytes[n++] = 0xe0 | (c >> 12);
      bytes[n++] = 0x80 | ((c >> 6) & 63);
      bytes[n++] = 0x80 | (c & 63);
    } else {
      bytes[n++] = 0xf0 | (c >> 18);
      bytes[n++] = 0x80 | ((c >> 12) & 63);
      bytes[n++] = 0x80 | ((c >> 6) & 63);
      bytes[n++] = 0x80 | (c & 63);
    }
    i += units - 1;
  }
  // A copy through the captured constructor, not the prototype's slice().
  return [new Uint8Array(p.TypedArrayPrototypeSubarray(bytes, 0, n)), i];
}

function utf8Encode(input) {
  return utf8EncodePrefix(String(input), Infinity)[0];
}

const inspectCustom = p.SymbolFor("nodejs.util.inspect.custom");

/**
 * The constructor Node's getConstructorOf finds: the first own
 * `constructor` on the prototype chain that is a function.
 */
function constructorOf(object) {
  for (let proto = p.ObjectGetPrototypeOf(object); proto !== null; proto = p.ObjectGetPrototypeOf(proto)) {
    const own = p.ObjectGetOwnPropertyDescriptor(proto, "constructor");
    if (own !== undefined && typeof own.value === "function") return own.value;
  }
  return null;
}

// Each class's brand check, a static block's.
let isEncoder;
let isDecoder;

class TextEncoder {
  #brand = true;
  get encoding() {
    if (!isEncoder(this)) throw invalidThis("TextEncoder");
    return "utf-8";
  }
  encode(input = "") {
    if (!isEncoder(this)) throw invalidThis("TextEncoder");
    return utf8Encode(`${input}`);
  }
  encodeInto(source, destination) {
    if (!isEncoder(this)) throw invalidThis("TextEncoder");
    if (typeof source !== "string") throw invalidArgType("src", "string", source);
    if (!core.isTypedArray(destination) || p.TypedArrayPrototypeGetSymbolToStringTag(destination) !== "Uint8Array") {
      throw invalidArgType("dest", "Uint8Array", destination);
    }
    // Only whole code points are written.
    // Indexed, not destructured: destructuring runs the program-mutable
    // array iterator.
    const prefix = utf8EncodePrefix(source, destination.length);
    p.TypedArrayPrototypeSet(destination, prefix[0], 0);
    return { read: prefix[1], written: prefix[0].length };
  }
  // Node's: a plain object's rendering of its encoding.
  [inspectCustom](depth, options, inspect) {
    if (!isEncoder(this)) throw invalidThis("TextEncoder");
    // Node returns the object itself, which its inspect then names in
    // brackets (its instances hold symbol-keyed members, so they are not
    // printed as an empty object): the same text.
    const constructor = constructorOf(this) || TextEncoder;
    if (typeof depth === "number" && depth < 0) return `[${constructor.name}]`;
    const shown = { __proto__: { constructor } };
    shown.encoding = this.encoding;
    return inspect(shown, options);
  }
  static {
    isEncoder = (value) => value !== null && typeof value === "object" && #brand in value;
  }
}

// What windows-1252 (which the Latin-1 labels name) makes of bytes 0x80 to
// 0x9f, WHATWG's index: the euro sign, typographic quotes, dashes; the
// five bytes it leaves unassigned keep their own code points, and every
// other byte is Latin-1's.
const WINDOWS_1252_0X80 =
  "\u20ac\u0081\u201a\u0192\u201e\u2026\u2020\u2021\u02c6\u2030\u0160\u2039\u0152\u008d\u017d\u008f" +
  "\u0090\u2018\u2019\u201c\u201d\u2022\u2013\u2014\u02dc\u2122\u0161\u203a\u0153\u009d\u017e\u0178";
// The Encoding Standard's labels of the three encodings, as Node takes them.
const LABELS = { __proto__: null };
const ENCODINGS = [
  ["utf-8", ["unicode-1-1-utf-8", "unicode11utf8", "unicode20utf8", "utf-8", "utf8", "x-unicode20utf8"]],
  ["utf-16le", ["csunicode", "iso-10646-ucs-2", "ucs-2", "unicode", "unicodefeff", "utf-16", "utf-16le"]],
  [
    "windows-1252",
    ["ansi_x3.4-1968", "ascii", "cp1252", "cp819", "csisolatin1", "ibm819", "iso-8859-1", "iso-ir-100", "iso8859-1", "iso88591", "iso_8859-1", "iso_8859-1:1987", "l1", "latin1", "us-ascii", "windows-1252", "x-cp1252"],
  ],
];
for (let e = 0; e < ENCODINGS.length; e++) {
  const labels = ENCODINGS[e][1];
  for (let i = 0; i < labels.length; i++) LABELS[labels[i]] = ENCODINGS[e][0];
}

/**
 * The bytes decode() reads: a view's, or a whole ArrayBuffer or
 * SharedArrayBuffer. Anything else is refused as the harness's Node
 * refuses it, in the words of its decoder for `encoding`: utf-8's and
 * utf-16le's are C++ (a fixed message, a plain toString); windows-1252's
 * is C++ in Node 22 and JS (Node's argument error, naming what it got)
 * from Node 24.
 */
function bytesOf(input, encoding) {
  if (input === undefined) return new Uint8Array(0);
  if (p.ArrayBufferIsView(input)) return new Uint8Array(input.buffer, input.byteOffset, input.byteLength);
  if (core.isAnyArrayBuffer(input)) return new Uint8Array(input);
  if (encoding === "windows-1252" && host.nodeMajor >= 24) throw invalidArgType("input", ["ArrayBuffer", "ArrayBufferView"], input);
  const message =
    encoding === "windows-1252"
      ? 'The "input" argument must be an instance of ArrayBuffer, SharedArrayBuffer, or ArrayBufferView.'
      : `The "${encoding === "utf-8" ? "list" : "input"}" argument must be an instance of SharedArrayBuffer, ArrayBuffer or ArrayBufferView.`;
  throw nodeCppError(TypeError, "ERR_INVALID_ARG_TYPE", message);
}

class TextDecoder {
  #encoding;
  #fatal;
  #ignoreBOM;
  #pending = [];
  // No code point of the stream decoded yet: a BOM there is not text.
  #atStart = true;
  constructor(label = "utf-8", options = {}) {
    const encoding = LABELS[StringPrototypeToLowerCase(StringPrototypeTrim(String(label)))];
    if (encoding === undefined) throw nodeError(RangeError, "ERR_ENCODING_NOT_SUPPORTED", `The "${label}" encoding is not supported`);
    this.#encoding = encoding;
    this.#fatal = !!(options && options.fatal);
    this.#ignoreBOM = !!(options && options.ignoreBOM);
  }
  decode(input, options = {}) {
    if (!isDecoder(this)) throw invalidThis("TextDecoder");
    let bytes = bytesOf(input, this.#encoding);
    if (this.#pending.length) {
      const joined = new Uint8Array(this.#pending.length + bytes.length);
      for (let i = 0; i < this.#pending.length; i++) joined[i] = this.#pending[i];
      p.TypedArrayPrototypeSet(joined, bytes, this.#pending.length);
      bytes = joined;
      this.#pending = [];
    }
    const stream = !!(options && options.stream);
    if (this.#encoding === "windows-1252") {
      let out = "";
      for (let i = 0; i < bytes.length; i++) {
        const b = bytes[i];
        out += b >= 0x80 && b < 0xa0 ? WINDOWS_1252_0X80[b - 0x80] : StringFromCharCode(b);
      }
      return out;
    }
    let out = this.#encoding === "utf-16le" ? this.#utf16le(bytes, stream) : this.#utf8(bytes, stream);
    // The stream's first code point, if it is a BOM, is not text; the
    // next decode that is not streamed starts a new stream.
    if (this.#atStart && out.length > 0) {
      this.#atStart = false;
      if (!this.#ignoreBOM && StringPrototypeCharCodeAt(out, 0) === 0xfeff) out = p.StringPrototypeSlice(out, 1);
    }
    if (!stream) this.#atStart = true;
    return out;
  }
  get encoding() {
    if (!isDecoder(this)) throw invalidThis("TextDecoder");
    return this.#encoding;
  }
  get fatal() {
    if (!isDecoder(this)) throw invalidThis("TextDecoder");
    return this.#fatal;
  }
  get ignoreBOM() {
    if (!isDecoder(this)) throw invalidThis("TextDecoder");
    return this.#ignoreBOM;
  }
  // Node's: its class's name and its three members.
  [inspectCustom](depth, options, inspect) {
    if (!isDecoder(this)) throw invalidThis("TextDecoder");
    const constructor = constructorOf(this) || TextDecoder;
    // As TextEncoder's (above).
    if (typeof depth === "number" && depth < 0) return `[${constructor.name}]`;
    const shown = { __proto__: { constructor } };
    shown.encoding = this.#encoding;
    shown.fatal = this.#fatal;
    shown.ignoreBOM = this.#ignoreBOM;
    return `${constructor.name} ${inspect(shown)}`;
  }
  static {
    isDecoder = (value) => value !== null && typeof value === "object" && #encoding in value;
  }
  /** A streamed chunk's last bytes from `from`, kept for the next chunk. */
  #keep(bytes, from) {
    const rest = [];
    for (let k = from; k < bytes.length; k++) rest[rest.length] = bytes[k];
    this.#pending = rest;
  }
  /** A byte sequence that is not the encoding's: U+FFFD, or Node's error when fatal. */
  #invalid() {
    if (this.#fatal) throw nodeCppError(TypeError, "ERR_ENCODING_INVALID_ENCODED_DATA", `The encoded data was not valid for encoding ${this.#encoding}`);
    return "\ufffd";
  }
  #utf16le(bytes, stream) {
    let end = bytes.length - (bytes.length % 2);
    // A streamed chunk that ends in a high surrogate leaves it for its pair.
    if (stream && end >= 2) {
      const last = bytes[end - 2] | (bytes[end - 1] << 8);
      if (last >= 0xd800 && last <= 0xdbff) end -= 2;
    }
    let out = "";
    for (let i = 0; i < end; i += 2) {
      const unit = bytes[i] | (bytes[i + 1] << 8);
      if (unit < 0xd800 || unit > 0xdfff) {
        out += StringFromCharCode(unit);
      } else if (unit <= 0xdbff && i + 2 < end) {
        const low = bytes[i + 2] | (bytes[i + 3] << 8);
        if (low >= 0xdc00 && low <= 0xdfff) {
          out += StringFromCharCode(unit, low);
          i += 2;
        } else {
          out += this.#invalid();
        }
      } else {
        out += this.#invalid();
      }
    }
    if (end < bytes.length) {
      if (stream) {
        this.#keep(bytes, end);
      } else {
        out += this.#invalid();
      }
    }
    return out;
  }
  #utf8(bytes, stream) {
    let out = "";
    let i = 0;
    while (i < bytes.length) {
      const b = bytes[i];
      let need = 0;
      let cp = 0;
      let lower = 0x80;
      let upper = 0xbf;
      if (b < 0x80) {
        out += StringFromCharCode(b);
        i++;
        continue;
      } else if (b >= 0xc2 && b <= 0xdf) {
        need = 1;
        cp = b & 0x1f;
      } else if (b >= 0xe0 && b <= 0xef) {
        need = 2;
        cp = b & 0xf;
        if (b === 0xe0) lower = 0xa0;
        if (b === 0xed) upper = 0x9f;
      } else if (b >= 0xf0 && b <= 0xf4) {
        need = 3;
        cp = b & 0x7;
        if (b === 0xf0) lower = 0x90;
        if (b === 0xf4) upper = 0x8f;
      } else {
        out += this.#invalid();
        i++;
        continue;
      }
      let j = 1;
      for (; j <= need; j++) {
        if (i + j >= bytes.length) break;
        const c = bytes[i + j];
        if (c < (j === 1 ? lower : 0x80) || c > (j === 1 ? upper : 0xbf)) break;
        cp = (cp << 6) | (c & 0x3f);
      }
      if (j <= need) {
        if (i + j >= bytes.length && stream) {
          this.#keep(bytes, i);
          return out;
        }
        out += this.#invalid();
        i += j;
        continue;
      }
      out += p.StringFromCodePoint(cp);
      i += need + 1;
    }
    return out;
  }
}

// Node 26's TextEncoder checks its receiver by a private member: V8's words.
const invalidThis = (type) =>
  type === "TextEncoder" && host.nodeMajor >= 26 ? new TypeError("Receiver must be an instance of class TextEncoder") : nodeInvalidThis(type);
// As Node's: the members enumerable, the tag its name.
const SHAPES = [
  [TextEncoder, ["encoding", "encode", "encodeInto"]],
  [TextDecoder, ["decode", "encoding", "fatal", "ignoreBOM"]],
];
for (let c = 0; c < SHAPES.length; c++) {
  const members = SHAPES[c][1];
  for (let i = 0; i < members.length; i++) p.ObjectDefineProperty(SHAPES[c][0].prototype, members[i], { __proto__: null, enumerable: true });
  setToStringTag(SHAPES[c][0]);
}

const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const invalidCharacter = (message, caller) => domException(message, "InvalidCharacterError", caller);

/** Node's error for atob() and btoa() called with nothing. */
const missingInput = (caller) => missingArgs(["input"], caller);

function btoa(data) {
  if (arguments.length === 0) throw missingInput(btoa);
  const str = String(data);
  let out = "";
  for (let i = 0; i < str.length; i += 3) {
    const a = StringPrototypeCharCodeAt(str, i);
    const b = i + 1 < str.length ? StringPrototypeCharCodeAt(str, i + 1) : 0;
    const c = i + 2 < str.length ? StringPrototypeCharCodeAt(str, i + 2) : 0;
    if (a > 255 || b > 255 || c > 255) throw invalidCharacter("Invalid character", btoa);
    const n = (a << 16) | (b << 8) | c;
    out += B64[(n >> 18) & 63] + B64[(n >> 12) & 63] + (i + 1 < str.length ? B64[(n >> 6) & 63] : "=") + (i + 2 < str.length ? B64[n & 63] : "=");
  }
  return out;
}

// The characters forgiving-base64 admits (WHATWG infra), ASCII whitespace
// first, as Node's atob lists them.
const ASCII_WHITESPACE = " \t\n\f\r";

/**
 * Forgiving-base64 decode, checked as Node's atob checks it: any other
 * character, an `=` before the end or more than two of them, or `=` where
 * the length leaves a remainder, is "Invalid character"; a length that
 * leaves one character over, "not correctly encoded".
 */
function atob(data) {
  if (arguments.length === 0) throw missingInput(atob);
  const input = `${data}`;
  let str = "";
  let equalSigns = 0;
  for (let i = 0; i < input.length; i++) {
    const c = input[i];
    if (p.StringPrototypeIncludes(ASCII_WHITESPACE, c)) continue;
    if (c === "=") equalSigns++;
    else if (equalSigns > 0 || p.StringPrototypeIndexOf(B64, c) === -1) throw invalidCharacter("Invalid character", atob);
    if (equalSigns > 2) throw invalidCharacter("Invalid character", atob);
    str += c;
  }
  let remainder = str.length % 4;
  if (remainder === 0) remainder = (str.length - equalSigns) % 4;
  else if (equalSigns > 0) throw invalidCharacter("Invalid character", atob);
  if (remainder === 1) throw invalidCharacter("The string to be decoded is not correctly encoded.", atob);
  str = p.StringPrototypeSlice(str, 0, str.length - equalSigns);
  let out = "";
  let buffer = 0;
  let bits = 0;
  for (let i = 0; i < str.length; i++) {
    buffer = ((buffer << 6) | p.StringPrototypeIndexOf(B64, str[i])) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += StringFromCharCode((buffer >> bits) & 0xff);
    }
  }
  return out;
}

return {
  __proto__: null,
  TextEncoder,
  TextDecoder,
  btoa,
  atob,
  // For the sandbox's own APIs.
  utf8Encode,
};
