// Copyright the dsh-code-runtime-v8 authors. MIT license.
// Node-compatible value rendering for console output.
//
// This follows the algorithm of Node.js's util.inspect
// (lib/internal/util/inspect.js, MIT license, Copyright Node.js contributors)
// for the options the seam fixes: no colors, depth 4, maxArrayLength 100,
// maxStringLength 10000, breakLength 80, compact 3, getters not invoked.
// Engine facts Node gets from its bindings (promise state, proxy target,
// type checks) come from deno_core's equivalents, captured before the seal.
// Rendering never throws: a failure anywhere falls back to a plain tag.
//
// Takes: primordials, native (core, ops). Provides inspect: { inspect,
// ownNonIndexKeys, getStringWidth, programStack, followNodeLine(host) }.
"use strict";

((globalThis) => {
  const {
    primordials: p,
    native: { core, ops },
    provide,
  } = globalThis.__dsh;
  const {
    ArrayIsArray,
    ArrayPrototypeJoin,
    ArrayPrototypePush,
    ArrayPrototypePop,
    ArrayPrototypeIncludes,
    ArrayPrototypeIndexOf,
    ArrayRemove,
    ArrayPrototypeFilter,
    ArrayPrototypeMap,
    MathMin,
    MathMax,
    MathFloor,
    MathRound,
    MathSqrt,
    NumberIsNaN,
    ObjectGetOwnPropertyDescriptor,
    ObjectGetOwnPropertySymbols,
    ObjectGetPrototypeOf,
    ObjectKeys,
    ObjectIs,
    ObjectHasOwn,
    ObjectPrototypePropertyIsEnumerable,
    ObjectPrototypeToString,
    ReflectApply,
    RegExpPrototypeExec,
    RegExpPrototypeToString,
    String,
    StringPrototypeCharCodeAt,
    StringPrototypeCodePointAt,
    StringPrototypeEndsWith,
    StringPrototypeIncludes,
    StringPrototypeIndexOf,
    StringPrototypeLastIndexOf,
    StringPrototypeNormalize,
    StringPrototypePadEnd,
    StringPrototypePadStart,
    StringPrototypeRepeat,
    StringReplaceAllLiteral,
    StringPrototypeSlice,
    StringPrototypeStartsWith,
    StringPrototypeToLowerCase,
    SymbolPrototypeToString,
    SymbolIterator,
    SymbolToStringTag,
    DatePrototypeGetTime,
    DatePrototypeToISOString,
    DatePrototypeToString,
    ErrorPrototypeToString,
    FunctionPrototypeToString,
    NumberPrototypeValueOf,
    NumberPrototypeToString,
    StringPrototypeValueOf,
    BooleanPrototypeValueOf,
    BigIntPrototypeValueOf,
    SymbolPrototypeValueOf,
    TypedArrayPrototypeGetLength,
    TypedArrayPrototypeGetSymbolToStringTag,
    MapPrototypeGetSize,
    SetPrototypeGetSize,
    MapPrototypeEntries,
    SetPrototypeValues,
    MapIteratorPrototypeNext,
    SetIteratorPrototypeNext,
    Uint8Array,
    RegExp,
    Map: SafeMap,
  } = p;

  // Frames of the sandbox's and deno_core's own files (`ext:...`) say
  // nothing to the model: drop those frame lines, keep everything else.
  const internalFrame = new RegExp("^\\s+at (?:.*\\()?ext:");
  // A plain loop, not filter/join: Array.prototype.filter consults the
  // program-mutable `constructor[Symbol.species]` of its array.
  /** `stack` without the sandbox's own frames. */
  function programStack(stack) {
    const lines = p.StringSplitLiteral(stack, "\n");
    let kept;
    for (let i = 0; i < lines.length; i++) {
      if (p.RegExpTest(internalFrame, lines[i])) continue;
      kept = kept === undefined ? lines[i] : `${kept}\n${lines[i]}`;
    }
    return kept ?? "";
  }
  const isAsyncFunction = core.isAsyncFunction;
  const isGeneratorFunction = core.isGeneratorFunction;
  const isArgumentsObject = core.isArgumentsObject;
  const isBoxedPrimitive = core.isBoxedPrimitive;
  const isNumberObject = core.isNumberObject;
  const isStringObject = core.isStringObject;
  const isBooleanObject = core.isBooleanObject;
  const isBigIntObject = core.isBigIntObject;
  const isDate = core.isDate;
  const isRegExp = core.isRegExp;
  const isNativeError = core.isNativeError;
  const isMap = core.isMap;
  const isSet = core.isSet;
  const isMapIterator = core.isMapIterator;
  const isSetIterator = core.isSetIterator;
  const isTypedArray = core.isTypedArray;
  const isAnyArrayBuffer = core.isAnyArrayBuffer;
  const isArrayBuffer = core.isArrayBuffer;
  const isDataView = core.isDataView;
  const isPromise = core.isPromise;
  const isWeakMap = core.isWeakMap;
  const isWeakSet = core.isWeakSet;
  const getPromiseDetails = core.getPromiseDetails;
  const getProxyDetails = core.getProxyDetails;
  const customInspectSymbol = p.SymbolFor("nodejs.util.inspect.custom");
  /** The `stylize` a custom inspect function gets: logs have no colors. */
  const stylizeNoColor = (text) => text;

  // Console output follows the util.inspect of the Node that hosts the
  // runtime, as the reference backend's does (it renders with the host's
  // own util.inspect). Where the Node lines this backend supports render
  // differently, the difference is a flag here, set once per isolate by
  // seal() from the host's major version (`followNodeLine`). Each flag was
  // read off that line's lib/internal/util/inspect.js and is checked by the
  // parity suite running on that line (docs/CONTRACT.md §7).
  const dialect = {
    __proto__: null,
    // Node 22: `{ [Symbol(a)]: 1 }`; 24 and later: `{ Symbol(a): 1 }`.
    bracketedSymbolKeys: true,
    // Node 22 adds `[tag]` unless the constructor name contains the tag at
    // a word boundary; 24 and later unless the constructor is the tag's last
    // dot-separated segment, printing the whole tag in that case.
    tagByLastSegment: false,
    // Node 26 and later wrap each proxy layer: `Proxy({ a: 1 })`.
    proxiesShown: false,
    // Node 26 and later list a SuppressedError's `error` and `suppressed`.
    suppressedErrorKeys: false,
  };
  function followNodeLine(major) {
    dialect.bracketedSymbolKeys = major < 24;
    dialect.tagByLastSegment = major >= 24;
    dialect.proxiesShown = major >= 26;
    dialect.suppressedErrorKeys = major >= 26;
  }
  const MAX_SAFE_DEPTH = 4;

  const kObjectType = 0;
  const kArrayType = 1;
  const kArrayExtrasType = 2;
  const kMinLineLength = 16;

  // deno_core reports promise state as 0 pending, 1 fulfilled, 2 rejected.
  const kPending = 0;
  const kRejected = 2;

  const strEscapeSequencesRegExp = new RegExp(
    "[\\x00-\\x1f\\x27\\x5c\\x7f-\\x9f]|[\\ud800-\\udbff](?![\\udc00-\\udfff])|(?<![\\ud800-\\udbff])[\\udc00-\\udfff]",
  );
  const strEscapeSequencesRegExpSingle = new RegExp(
    "[\\x00-\\x1f\\x5c\\x7f-\\x9f]|[\\ud800-\\udbff](?![\\udc00-\\udfff])|(?<![\\ud800-\\udbff])[\\udc00-\\udfff]",
  );
  const keyStrRegExp = new RegExp("^[a-zA-Z_][a-zA-Z_0-9]*$");
  const numberRegExp = new RegExp("^(0|[1-9][0-9]*)$");
  const classRegExp = new RegExp("^(\\s+[^(]*?)\\s*{");
  const stripCommentsRegExp = new RegExp("(\\/\\/.*?\\n)|(\\/\\*(.|\\n)*?\\*\\/)", "g");

  const meta = [
    "\\x00", "\\x01", "\\x02", "\\x03", "\\x04", "\\x05", "\\x06", "\\x07",
    "\\b", "\\t", "\\n", "\\x0B", "\\f", "\\r", "\\x0E", "\\x0F",
    "\\x10", "\\x11", "\\x12", "\\x13", "\\x14", "\\x15", "\\x16", "\\x17",
    "\\x18", "\\x19", "\\x1A", "\\x1B", "\\x1C", "\\x1D", "\\x1E", "\\x1F",
    "", "", "", "", "", "", "", "\\'", "", "", "", "", "", "", "", "",
    "", "", "", "", "", "", "", "", "", "", "", "", "", "", "", "",
    "", "", "", "", "", "", "", "", "", "", "", "", "", "", "", "",
    "", "", "", "", "", "", "", "", "", "", "", "", "\\\\", "", "", "",
    "", "", "", "", "", "", "", "", "", "", "", "", "", "", "", "",
    "", "", "", "", "", "", "", "", "", "", "", "", "", "", "", "\\x7F",
    "\\x80", "\\x81", "\\x82", "\\x83", "\\x84", "\\x85", "\\x86", "\\x87",
    "\\x88", "\\x89", "\\x8A", "\\x8B", "\\x8C", "\\x8D", "\\x8E", "\\x8F",
    "\\x90", "\\x91", "\\x92", "\\x93", "\\x94", "\\x95", "\\x96", "\\x97",
    "\\x98", "\\x99", "\\x9A", "\\x9B", "\\x9C", "\\x9D", "\\x9E", "\\x9F",
  ];

  // Well-known prototypes whose `constructor` a program may have tampered.
  const wellKnownPrototypes = new SafeMap();
  for (const C of [
    p.Array, p.ArrayBuffer, Function, p.Map, p.Set, p.Object, RegExp, p.Date, p.DataView,
    p.Error, p.AggregateError, p.RangeError, p.TypeError, Boolean, p.Number, p.String,
    p.Promise, p.WeakMap, p.WeakSet,
  ]) {
    p.MapPrototypeSet(wellKnownPrototypes, C.prototype, { __proto__: null, name: C.name, constructor: C });
  }
  const TypedArray = ObjectGetPrototypeOf(Uint8Array);
  p.MapPrototypeSet(wellKnownPrototypes, TypedArray.prototype, { __proto__: null, name: "TypedArray", constructor: TypedArray });

  const builtInObjects = new p.Set(
    ArrayPrototypeFilter(p.ObjectGetOwnPropertyNames(globalThis), (e) => RegExpPrototypeExec(new RegExp("^[A-Z][a-zA-Z0-9]+$"), e) !== null),
  );

  function isInstanceof(object, proto) {
    try {
      return object instanceof proto;
    } catch {
      return false;
    }
  }

  function hasInstance(constructor, value) {
    try {
      return p.ObjectPrototypeIsPrototypeOf(constructor.prototype, value);
    } catch {
      return false;
    }
  }

  function addQuotes(str, quotes) {
    if (quotes === -1) return `"${str}"`;
    if (quotes === -2) return `\`${str}\``;
    return `'${str}'`;
  }

  function escapeChar(point) {
    return meta.length > point ? meta[point] : `\\u${NumberPrototypeToString(point, 16)}`;
  }

  // Escape control characters, single quotes and the backslash.
  function strEscape(str) {
    let escapeTest = strEscapeSequencesRegExp;
    let singleQuote = 39;
    if (StringPrototypeIncludes(str, "'")) {
      if (!StringPrototypeIncludes(str, '"')) {
        singleQuote = -1;
      } else if (!StringPrototypeIncludes(str, "`") && !StringPrototypeIncludes(str, "${")) {
        singleQuote = -2;
      }
      if (singleQuote !== 39) escapeTest = strEscapeSequencesRegExpSingle;
    }
    if (str.length < 5000 && RegExpPrototypeExec(escapeTest, str) === null) return addQuotes(str, singleQuote);
    let result = "";
    let last = 0;
    for (let i = 0; i < str.length; i++) {
      const point = StringPrototypeCharCodeAt(str, i);
      if (point === singleQuote || point === 92 || point < 32 || (point > 126 && point < 160)) {
        result += (last === i ? "" : StringPrototypeSlice(str, last, i)) + meta[point];
        last = i + 1;
      } else if (point >= 0xd800 && point <= 0xdfff) {
        if (point <= 0xdbff && i + 1 < str.length) {
          const next = StringPrototypeCharCodeAt(str, i + 1);
          if (next >= 0xdc00 && next <= 0xdfff) {
            i++;
            continue;
          }
        }
        result += `${StringPrototypeSlice(str, last, i)}\\u${NumberPrototypeToString(point, 16)}`;
        last = i + 1;
      }
    }
    if (last !== str.length) result += StringPrototypeSlice(str, last);
    return addQuotes(result, singleQuote);
  }

  function escapeKey(str) {
    let result = "";
    for (let i = 0; i < str.length; i++) {
      const point = StringPrototypeCharCodeAt(str, i);
      if (point === 39 || point === 92 || point < 32 || (point > 126 && point < 160)) {
        result += escapeChar(point);
      } else {
        result += str[i];
      }
    }
    return result;
  }

  function isFullWidthCodePoint(code) {
    return code >= 0x1100 && (
      code <= 0x115f || code === 0x2329 || code === 0x232a ||
      (code >= 0x2e80 && code <= 0x3247 && code !== 0x303f) ||
      (code >= 0x3250 && code <= 0x4dbf) || (code >= 0x4e00 && code <= 0xa4c6) ||
      (code >= 0xa960 && code <= 0xa97c) || (code >= 0xac00 && code <= 0xd7a3) ||
      (code >= 0xf900 && code <= 0xfaff) || (code >= 0xfe10 && code <= 0xfe19) ||
      (code >= 0xfe30 && code <= 0xfe6b) || (code >= 0xff01 && code <= 0xff60) ||
      (code >= 0xffe0 && code <= 0xffe6) || (code >= 0x1b000 && code <= 0x1b001) ||
      (code >= 0x1f200 && code <= 0x1f251) || (code >= 0x1f300 && code <= 0x1f64f) ||
      (code >= 0x20000 && code <= 0x3fffd)
    );
  }

  function isZeroWidthCodePoint(code) {
    return code <= 0x1f || (code >= 0x7f && code <= 0x9f) || (code >= 0x300 && code <= 0x36f) ||
      (code >= 0x200b && code <= 0x200f) || (code >= 0x20d0 && code <= 0x20ff) ||
      (code >= 0xfe00 && code <= 0xfe0f) || (code >= 0xfe20 && code <= 0xfe2f) ||
      (code >= 0xe0100 && code <= 0xe01ef);
  }

  // Columns a string takes on a terminal (used to group array elements).
  function getStringWidth(str) {
    let width = 0;
    let i = 0;
    for (; i < str.length; i++) {
      const code = StringPrototypeCharCodeAt(str, i);
      if (code >= 127) break;
      width += code >= 32 ? 1 : 0;
    }
    if (i === str.length) return width;
    const rest = StringPrototypeNormalize(StringPrototypeSlice(str, i), "NFC");
    for (let j = 0; j < rest.length; j++) {
      const code = StringPrototypeCodePointAt(rest, j);
      if (code > 0xffff) j++;
      if (isFullWidthCodePoint(code)) width += 2;
      else if (!isZeroWidthCodePoint(code)) width++;
    }
    return width;
  }

  function getConstructorName(obj, ctx, recurseTimes) {
    let firstProto;
    const tmp = obj;
    while (obj) {
      const known = p.MapPrototypeGet(wellKnownPrototypes, obj);
      if (known !== undefined && hasInstance(known.constructor, tmp)) return known.name;
      const descriptor = ObjectGetOwnPropertyDescriptor(obj, "constructor");
      if (descriptor !== undefined && typeof descriptor.value === "function" &&
          descriptor.value.name !== "" && isInstanceof(tmp, descriptor.value)) {
        return String(descriptor.value.name);
      }
      obj = ObjectGetPrototypeOf(obj);
      if (firstProto === undefined) firstProto = obj;
    }
    if (firstProto === null) return null;
    const res = internalGetConstructorName(tmp);
    if (recurseTimes > ctx.depth) return `${res} <Complex prototype>`;
    const protoConstr = getConstructorName(firstProto, ctx, recurseTimes + 1);
    if (protoConstr === null) {
      return `${res} <${inspectWith(firstProto, { __proto__: null, depth: -1 })}>`;
    }
    return `${res} <${protoConstr}>`;
  }

  // The engine's class name of an object (Node's internalGetConstructorName).
  function internalGetConstructorName(value) {
    const tag = ObjectPrototypeToString(value);
    return StringPrototypeSlice(tag, 8, -1);
  }

  function getPrefix(constructor, tag, fallback, size = "") {
    if (constructor === null) {
      if (tag !== "" && fallback !== tag) return `[${fallback}${size}: null prototype] [${tag}] `;
      return `[${fallback}${size}: null prototype] `;
    }
    if (dialect.tagByLastSegment) {
      if (tag === "") return `${constructor}${size} `;
      const dot = StringPrototypeLastIndexOf(tag, ".");
      if (constructor === (dot >= 1 ? StringPrototypeSlice(tag, dot + 1) : tag)) return `${tag}${size} `;
      return `${constructor}${size} [${tag}] `;
    }
    let result = `${constructor}${size} `;
    if (tag !== "") {
      const position = StringPrototypeIndexOf(constructor, tag);
      if (position === -1) {
        result += `[${tag}] `;
      } else {
        const endPos = position + tag.length;
        if (endPos !== constructor.length &&
            constructor[endPos] === StringPrototypeToLowerCase(constructor[endPos])) {
          result += `[${tag}] `;
        }
      }
    }
    return result;
  }

  function getKeys(value) {
    const keys = ObjectKeys(value);
    const symbols = ObjectGetOwnPropertySymbols(value);
    for (let i = 0; i < symbols.length; i++) {
      if (ObjectPrototypePropertyIsEnumerable(value, symbols[i])) ArrayPrototypePush(keys, symbols[i]);
    }
    return keys;
  }

  // Own enumerable keys that are not array indices (arrays, typed arrays).
  function getOwnNonIndexProperties(value) {
    const keys = getKeys(value);
    return ArrayPrototypeFilter(keys, (key) => typeof key !== "string" || RegExpPrototypeExec(numberRegExp, key) === null || +key > 2 ** 32 - 2);
  }

  function getCtxStyle(value, constructor, tag) {
    let fallback = "";
    if (constructor === null) {
      fallback = internalGetConstructorName(value);
      if (fallback === tag) fallback = "Object";
    }
    return getPrefix(constructor, tag, fallback);
  }

  function formatValue(ctx, value, recurseTimes, typedArray) {
    if (typeof value !== "object" && typeof value !== "function") {
      return formatPrimitive(value, ctx);
    }
    if (value === null) return "null";
    const context = value;
    let proxy = getProxyDetails(value);
    let proxies = 0;
    if (proxy !== undefined && proxy !== null) {
      if (!dialect.proxiesShown) {
        if (proxy[0] === null) return "<Revoked Proxy>";
        value = proxy[0];
      } else {
        // Every layer unwrapped (its traps never run) and shown.
        do {
          if (proxy[0] === null) return wrapProxies("<Revoked Proxy>", proxies);
          value = proxy[0];
          proxy = getProxyDetails(value);
          proxies += 1;
        } while (proxy !== undefined && proxy !== null);
      }
    }
    if (ctx.customInspect) {
      let maybeCustom;
      try {
        maybeCustom = value[customInspectSymbol];
      } catch {
        maybeCustom = undefined;
      }
      if (typeof maybeCustom === "function" && maybeCustom !== inspect &&
          ObjectGetOwnPropertyDescriptor(value, "constructor")?.value?.prototype !== value) {
        const depth = ctx.depth - recurseTimes;
        // As Node's getUserOptions: the options the inspection started with
        // (`depth` included, whatever the nesting), beside the remaining depth.
        const options = {
          __proto__: null,
          // Without colors Node's stylize gives the text back as it is.
          stylize: stylizeNoColor,
          showHidden: false,
          depth: ctx.depth,
          colors: false,
          customInspect: true,
          showProxy: false,
          maxArrayLength: ctx.maxArrayLength,
          maxStringLength: ctx.maxStringLength,
          breakLength: ctx.breakLength,
          compact: ctx.compact,
          sorted: false,
          getters: false,
          numericSeparator: false,
        };
        const ret = ReflectApply(maybeCustom, context, [depth, options, inspect]);
        if (ret !== context) {
          if (typeof ret !== "string") return formatValue(ctx, ret, recurseTimes);
          return StringReplaceAllLiteral(ret, "\n", `\n${StringPrototypeRepeat(" ", ctx.indentationLvl)}`);
        }
      }
    }
    if (ArrayPrototypeIncludes(ctx.seen, value)) {
      let index = 1;
      if (ctx.circular === undefined) {
        ctx.circular = new SafeMap();
        p.MapPrototypeSet(ctx.circular, value, index);
      } else {
        index = p.MapPrototypeGet(ctx.circular, value);
        if (index === undefined) {
          index = MapPrototypeGetSize(ctx.circular) + 1;
          p.MapPrototypeSet(ctx.circular, value, index);
        }
      }
      return `[Circular *${index}]`;
    }
    return wrapProxies(formatRaw(ctx, value, recurseTimes, typedArray), proxies);
  }

  function wrapProxies(formatted, proxies) {
    for (let i = 0; i < proxies; i++) formatted = `Proxy(${formatted})`;
    return formatted;
  }

  function formatRaw(ctx, value, recurseTimes, typedArray) {
    let keys;
    const constructor = getConstructorName(value, ctx, recurseTimes);
    // A throwing Symbol.toStringTag getter means no tag (as Node 24 and
    // later have it; Node 22's inspect throws, and rendering never does).
    let tag = "";
    try {
      tag = value[SymbolToStringTag];
    } catch {
      tag = "";
    }
    if (typeof tag !== "string" || (tag !== "" && ObjectPrototypePropertyIsEnumerable(value, SymbolToStringTag))) {
      tag = "";
    }
    let base = "";
    let formatter = () => [];
    let braces;
    let noIterator = true;
    let extrasType = kObjectType;
    let extraKeys;

    if (SymbolIterator in value || constructor === null) {
      noIterator = false;
      if (ArrayIsArray(value)) {
        const prefix = (constructor !== "Array" || tag !== "") ? getPrefix(constructor, tag, "Array", `(${value.length})`) : "";
        keys = getOwnNonIndexProperties(value);
        braces = [`${prefix}[`, "]"];
        if (value.length === 0 && keys.length === 0) return `${braces[0]}]`;
        extrasType = kArrayExtrasType;
        formatter = formatArray;
      } else if (isSet(value)) {
        const size = SetPrototypeGetSize(value);
        const prefix = getPrefix(constructor, tag, "Set", `(${size})`);
        keys = getKeys(value);
        formatter = (c, v, r) => formatSet(value, c, r);
        if (size === 0 && keys.length === 0) return `${prefix}{}`;
        braces = [`${prefix}{`, "}"];
      } else if (isMap(value)) {
        const size = MapPrototypeGetSize(value);
        const prefix = getPrefix(constructor, tag, "Map", `(${size})`);
        keys = getKeys(value);
        formatter = (c, v, r) => formatMap(value, c, r);
        if (size === 0 && keys.length === 0) return `${prefix}{}`;
        braces = [`${prefix}{`, "}"];
      } else if (isTypedArray(value)) {
        keys = getOwnNonIndexProperties(value);
        let fallback = "";
        if (constructor === null) fallback = TypedArrayPrototypeGetSymbolToStringTag(value);
        const size = TypedArrayPrototypeGetLength(value);
        const prefix = getPrefix(constructor, tag, fallback, `(${size})`);
        braces = [`${prefix}[`, "]"];
        if (size === 0 && keys.length === 0) return `${braces[0]}]`;
        formatter = (c) => formatTypedArray(value, size, c);
        extrasType = kArrayExtrasType;
      } else if (isMapIterator(value)) {
        keys = getKeys(value);
        braces = getIteratorBraces("Map", tag);
        const iteratorBraces = braces;
        formatter = (c, v, r) => formatIterator(iteratorBraces, c, v, r);
      } else if (isSetIterator(value)) {
        keys = getKeys(value);
        braces = getIteratorBraces("Set", tag);
        const iteratorBraces = braces;
        formatter = (c, v, r) => formatIterator(iteratorBraces, c, v, r);
      } else {
        noIterator = true;
      }
    }
    if (noIterator) {
      keys = getKeys(value);
      braces = ["{", "}"];
      if (typeof value === "function") {
        base = getFunctionBase(ctx, value, constructor, tag);
        if (keys.length === 0) return base;
      } else if (constructor === "Object") {
        if (isArgumentsObject(value)) {
          braces[0] = "[Arguments] {";
        } else if (tag !== "") {
          braces[0] = `${getPrefix(constructor, tag, "Object")}{`;
        }
        if (keys.length === 0) return `${braces[0]}}`;
      } else if (isRegExp(value)) {
        base = RegExpPrototypeToString(constructor !== null ? value : new RegExp(value));
        const prefix = getPrefix(constructor, tag, "RegExp");
        if (prefix !== "RegExp ") base = `${prefix}${base}`;
        if (keys.length === 0 || recurseTimes > ctx.depth) return base;
      } else if (isDate(value)) {
        base = NumberIsNaN(DatePrototypeGetTime(value)) ? DatePrototypeToString(value) : DatePrototypeToISOString(value);
        const prefix = getPrefix(constructor, tag, "Date");
        if (prefix !== "Date ") base = `${prefix}${base}`;
        if (keys.length === 0) return base;
      } else if (isNativeError(value) || hasInstance(p.Error, value)) {
        base = formatError(value, constructor, tag, ctx, keys);
        if (keys.length === 0) return base;
      } else if (isAnyArrayBuffer(value)) {
        const arrayType = isArrayBuffer(value) ? "ArrayBuffer" : "SharedArrayBuffer";
        const prefix = getPrefix(constructor, tag, arrayType);
        if (typedArray === undefined) {
          formatter = formatArrayBuffer;
        } else if (keys.length === 0) {
          return prefix + `{ byteLength: ${formatNumber(value.byteLength)} }`;
        }
        braces[0] = `${prefix}{`;
        extraKeys = ["byteLength"];
      } else if (isDataView(value)) {
        braces[0] = `${getPrefix(constructor, tag, "DataView")}{`;
        extraKeys = ["byteLength", "byteOffset", "buffer"];
      } else if (isPromise(value)) {
        braces[0] = `${getPrefix(constructor, tag, "Promise")}{`;
        formatter = formatPromise;
      } else if (isWeakSet(value)) {
        braces[0] = `${getPrefix(constructor, tag, "WeakSet")}{`;
        formatter = () => ["<items unknown>"];
      } else if (isWeakMap(value)) {
        braces[0] = `${getPrefix(constructor, tag, "WeakMap")}{`;
        formatter = () => ["<items unknown>"];
      } else if (isBoxedPrimitive(value)) {
        base = getBoxedBase(value, ctx, keys, constructor, tag);
        if (keys.length === 0) return base;
      } else {
        if (keys.length === 0) return `${getCtxStyle(value, constructor, tag)}{}`;
        braces[0] = `${getCtxStyle(value, constructor, tag)}{`;
      }
    }

    if (recurseTimes > ctx.depth) {
      let constructorName = StringPrototypeSlice(getCtxStyle(value, constructor, tag), 0, -1);
      if (constructor !== null) constructorName = `[${constructorName}]`;
      return constructorName;
    }
    recurseTimes += 1;
    ArrayPrototypePush(ctx.seen, value);
    ctx.currentDepth = recurseTimes;
    let output;
    const indentationLvl = ctx.indentationLvl;
    try {
      output = formatter(ctx, value, recurseTimes);
      if (extraKeys !== undefined) {
        for (let i = 0; i < extraKeys.length; i++) {
          ArrayPrototypePush(output, formatExtraProperty(ctx, value, recurseTimes, extraKeys[i], typedArray));
        }
      }
      for (let i = 0; i < keys.length; i++) {
        ArrayPrototypePush(output, formatProperty(ctx, value, recurseTimes, keys[i], extrasType));
      }
    } catch (error) {
      if (!(hasInstance(p.RangeError, error) && StringPrototypeIncludes(String(error.message), "call stack"))) throw error;
      ArrayPrototypePop(ctx.seen);
      ctx.indentationLvl = indentationLvl;
      const constructorName = StringPrototypeSlice(getCtxStyle(value, constructor, tag), 0, -1);
      return `[${constructorName}: Inspection interrupted prematurely. Maximum call stack size exceeded.]`;
    }
    if (ctx.circular !== undefined) {
      const index = p.MapPrototypeGet(ctx.circular, value);
      if (index !== undefined) {
        const reference = `<ref *${index}>`;
        base = base === "" ? reference : `${reference} ${base}`;
      }
    }
    ArrayPrototypePop(ctx.seen);
    return reduceToSingleString(ctx, output, base, braces, extrasType, recurseTimes, value);
  }

  function getIteratorBraces(type, tag) {
    if (tag !== `${type} Iterator`) {
      if (tag !== "") tag += "] [";
      tag += `${type} Iterator`;
    }
    return [`[${tag}] {`, "}"];
  }

  function getBoxedBase(value, ctx, keys, constructor, tag) {
    let fn;
    let type;
    if (isNumberObject(value)) {
      fn = NumberPrototypeValueOf;
      type = "Number";
    } else if (isStringObject(value)) {
      fn = StringPrototypeValueOf;
      type = "String";
      ArrayRemove(keys, 0, value.length);
    } else if (isBooleanObject(value)) {
      fn = BooleanPrototypeValueOf;
      type = "Boolean";
    } else if (isBigIntObject(value)) {
      fn = BigIntPrototypeValueOf;
      type = "BigInt";
    } else {
      fn = SymbolPrototypeValueOf;
      type = "Symbol";
    }
    let base = `[${type}`;
    if (type !== constructor) {
      base += constructor === null ? " (null prototype)" : ` (${constructor})`;
    }
    base += `: ${formatPrimitive(fn(value), { __proto__: null, compact: 3, maxStringLength: Infinity, breakLength: Infinity, indentationLvl: 0 })}]`;
    if (tag !== "" && tag !== constructor) base += ` [${tag}]`;
    return base;
  }

  function getClassBase(value, constructor, tag) {
    const hasName = ObjectHasOwn(value, "name");
    const name = (hasName && value.name) || "(anonymous)";
    let base = `class ${name}`;
    if (constructor !== "Function" && constructor !== null) base += ` [${constructor}]`;
    if (tag !== "" && constructor !== tag) base += ` [${tag}]`;
    if (constructor !== null) {
      const superName = ObjectGetPrototypeOf(value).name;
      if (superName) base += ` extends ${superName}`;
    } else {
      base += " extends [null prototype]";
    }
    return `[${base}]`;
  }

  // `slice` without // and /* */ comments (exec on a global regex, never
  // String.prototype.replace, which consults the mutable Symbol.replace).
  function stripComments(slice) {
    let out = "";
    let last = 0;
    stripCommentsRegExp.lastIndex = 0;
    for (let m = RegExpPrototypeExec(stripCommentsRegExp, slice); m !== null; m = RegExpPrototypeExec(stripCommentsRegExp, slice)) {
      out += StringPrototypeSlice(slice, last, m.index);
      last = m.index + m[0].length;
      if (m[0].length === 0) stripCommentsRegExp.lastIndex++;
    }
    return out + StringPrototypeSlice(slice, last);
  }

  function getFunctionBase(ctx, value, constructor, tag) {
    const stringified = FunctionPrototypeToString(value);
    if (StringPrototypeStartsWith(stringified, "class") && StringPrototypeEndsWith(stringified, "}")) {
      const slice = StringPrototypeSlice(stringified, 5, -1);
      const bracketIndex = StringPrototypeIndexOf(slice, "{");
      if (bracketIndex !== -1 &&
          (!StringPrototypeIncludes(StringPrototypeSlice(slice, 0, bracketIndex), "(") ||
           RegExpPrototypeExec(classRegExp, stripComments(slice)) !== null)) {
        return getClassBase(value, constructor, tag);
      }
    }
    let type = "Function";
    if (isGeneratorFunction(value)) type = `Generator${type}`;
    if (isAsyncFunction(value)) type = `Async${type}`;
    let base = `[${type}`;
    if (constructor === null) base += " (null prototype)";
    if (value.name === "") {
      base += " (anonymous)";
    } else {
      base += `: ${typeof value.name === "string" ? value.name : formatValue(ctx, value.name)}`;
    }
    base += "]";
    if (constructor !== type && constructor !== null) base += ` ${constructor}`;
    if (tag !== "" && constructor !== tag) base += ` [${tag}]`;
    return base;
  }

  function getStackString(error) {
    let stack;
    try {
      stack = error.stack;
    } catch {
      // A throwing `stack` getter is ignored.
    }
    if (stack) {
      if (typeof stack === "string") return programStack(stack);
      return `${ErrorPrototypeToString(error)}\n    ${inspectWith(stack, { __proto__: null })}`;
    }
    return ErrorPrototypeToString(error);
  }

  function improveStack(stack, constructor, name, tag) {
    let len = name.length;
    if (constructor === null ||
        (StringPrototypeEndsWith(name, "Error") && StringPrototypeStartsWith(stack, name) &&
         (stack.length === len || stack[len] === ":" || stack[len] === "\n"))) {
      let fallback = "Error";
      if (constructor === null) {
        const start = RegExpPrototypeExec(new RegExp("^([A-Z][a-z_ A-Z0-9[\\]()-]+)(?::|\\n {4}at)"), stack) ||
          RegExpPrototypeExec(new RegExp("^([a-z_A-Z0-9-]*Error)$"), stack);
        fallback = (start && start[1]) || "";
        len = fallback.length;
        fallback = fallback || "Error";
      }
      const prefix = StringPrototypeSlice(getPrefix(constructor, tag, fallback), 0, -1);
      if (name !== prefix) {
        if (StringPrototypeIncludes(prefix, name)) {
          stack = len === 0 ? `${prefix}: ${stack}` : `${prefix}${StringPrototypeSlice(stack, len)}`;
        } else {
          stack = `${prefix} [${name}]${StringPrototypeSlice(stack, len)}`;
        }
      }
    }
    return stack;
  }

  function formatError(err, constructor, tag, ctx, keys) {
    let message;
    let name;
    let stack;
    try {
      stack = getStackString(err);
    } catch {
      return ObjectPrototypeToString(err);
    }
    let messageThrows = false;
    try {
      message = err.message;
    } catch {
      messageThrows = true;
    }
    let nameThrows = false;
    try {
      name = err.name;
    } catch {
      nameThrows = true;
    }
    if (keys.length !== 0) {
      const stackIndex = ArrayPrototypeIndexOf(keys, "stack");
      if (stackIndex !== -1) ArrayRemove(keys, stackIndex, 1);
      if (!messageThrows) {
        const index = ArrayPrototypeIndexOf(keys, "message");
        if (index !== -1 && (typeof message !== "string" || StringPrototypeIncludes(stack, message))) ArrayRemove(keys, index, 1);
      }
      if (!nameThrows) {
        const index = ArrayPrototypeIndexOf(keys, "name");
        if (index !== -1 && (typeof name !== "string" || StringPrototypeIncludes(stack, name))) ArrayRemove(keys, index, 1);
      }
    }
    if (name === undefined || name === null) name = "Error";
    if (ObjectHasOwn(err, "cause") && (keys.length === 0 || !ArrayPrototypeIncludes(keys, "cause"))) {
      ArrayPrototypePush(keys, "cause");
    }
    try {
      const errors = err.errors;
      if (ArrayIsArray(errors) && ObjectHasOwn(err, "errors") && (keys.length === 0 || !ArrayPrototypeIncludes(keys, "errors"))) {
        ArrayPrototypePush(keys, "errors");
      }
    } catch {
      // A throwing `errors` getter is ignored.
    }
    if (dialect.suppressedErrorKeys) {
      if (ObjectHasOwn(err, "error") && (keys.length === 0 || !ArrayPrototypeIncludes(keys, "error"))) {
        ArrayPrototypePush(keys, "error");
      }
      if (ObjectHasOwn(err, "suppressed") && (keys.length === 0 || !ArrayPrototypeIncludes(keys, "suppressed"))) {
        ArrayPrototypePush(keys, "suppressed");
      }
    }
    stack = improveStack(stack, constructor, String(name), tag);
    let pos = (message && StringPrototypeIndexOf(stack, message)) || -1;
    if (pos !== -1) pos += message.length;
    const stackStart = StringPrototypeIndexOf(stack, "\n    at", pos);
    if (stackStart === -1) {
      stack = `[${stack}]`;
    }
    if (ctx.indentationLvl !== 0) {
      stack = StringReplaceAllLiteral(stack, "\n", `\n${StringPrototypeRepeat(" ", ctx.indentationLvl)}`);
    }
    return stack;
  }

  function groupArrayElements(ctx, output, value) {
    let totalLength = 0;
    let maxLength = 0;
    let i = 0;
    let outputLength = output.length;
    if (ctx.maxArrayLength < output.length) outputLength--;
    const separatorSpace = 2;
    const dataLen = [];
    for (; i < outputLength; i++) {
      const len = getStringWidth(output[i]);
      dataLen[i] = len;
      totalLength += len + separatorSpace;
      if (maxLength < len) maxLength = len;
    }
    const actualMax = maxLength + separatorSpace;
    if (actualMax * 3 + ctx.indentationLvl < ctx.breakLength &&
        (totalLength / actualMax > 5 || maxLength <= 6)) {
      const approxCharHeights = 2.5;
      const averageBias = MathSqrt(actualMax - totalLength / output.length);
      const biasedMax = MathMax(actualMax - 3 - averageBias, 1);
      const columns = MathMin(
        MathRound(MathSqrt(approxCharHeights * biasedMax * outputLength) / biasedMax),
        MathFloor((ctx.breakLength - ctx.indentationLvl) / actualMax),
        ctx.compact * 4,
        15,
      );
      if (columns <= 1) return output;
      const tmp = [];
      const maxLineLength = [];
      for (let c = 0; c < columns; c++) {
        let lineMaxLength = 0;
        for (let j = c; j < output.length; j += columns) {
          if (dataLen[j] > lineMaxLength) lineMaxLength = dataLen[j];
        }
        maxLineLength[c] = lineMaxLength + separatorSpace;
      }
      let order = StringPrototypePadStart;
      if (value !== undefined) {
        for (let k = 0; k < output.length; k++) {
          if (typeof value[k] !== "number" && typeof value[k] !== "bigint") {
            order = StringPrototypePadEnd;
            break;
          }
        }
      }
      for (let k = 0; k < outputLength; k += columns) {
        const max = MathMin(k + columns, outputLength);
        let str = "";
        let j = k;
        for (; j < max - 1; j++) {
          const padding = maxLineLength[j - k] + output[j].length - dataLen[j];
          str += order(`${output[j]}, `, padding, " ");
        }
        if (order === StringPrototypePadStart) {
          const padding = maxLineLength[j - k] + output[j].length - dataLen[j] - separatorSpace;
          str += StringPrototypePadStart(output[j], padding, " ");
        } else {
          str += output[j];
        }
        ArrayPrototypePush(tmp, str);
      }
      if (ctx.maxArrayLength < output.length) ArrayPrototypePush(tmp, output[outputLength]);
      output = tmp;
    }
    return output;
  }

  const remainingText = (remaining) => `... ${remaining} more item${remaining > 1 ? "s" : ""}`;

  function formatNumber(number) {
    if (ObjectIs(number, -0)) return "-0";
    return `${number}`;
  }

  function formatPrimitive(value, ctx) {
    if (typeof value === "string") {
      let trailer = "";
      if (value.length > ctx.maxStringLength) {
        const remaining = value.length - ctx.maxStringLength;
        value = StringPrototypeSlice(value, 0, ctx.maxStringLength);
        trailer = `... ${remaining} more character${remaining > 1 ? "s" : ""}`;
      }
      if (value.length > kMinLineLength && value.length > ctx.breakLength - ctx.indentationLvl - 4) {
        const lines = [];
        let start = 0;
        for (let i = 0; i < value.length; i++) {
          if (StringPrototypeCharCodeAt(value, i) === 10) {
            ArrayPrototypePush(lines, StringPrototypeSlice(value, start, i + 1));
            start = i + 1;
          }
        }
        if (start < value.length || lines.length === 0) ArrayPrototypePush(lines, StringPrototypeSlice(value, start));
        return ArrayPrototypeJoin(
          ArrayPrototypeMap(lines, (line) => strEscape(line)),
          ` +\n${StringPrototypeRepeat(" ", ctx.indentationLvl + 2)}`,
        ) + trailer;
      }
      return strEscape(value) + trailer;
    }
    if (typeof value === "number") return formatNumber(value);
    if (typeof value === "bigint") return `${value}n`;
    if (typeof value === "boolean") return `${value}`;
    if (typeof value === "undefined") return "undefined";
    return SymbolPrototypeToString(value);
  }

  function formatSpecialArray(ctx, value, recurseTimes, maxLength, output, i) {
    const keys = ObjectKeys(value);
    let index = i;
    for (; i < keys.length && output.length < maxLength; i++) {
      const key = keys[i];
      const tmp = +key;
      if (tmp > 2 ** 32 - 2) break;
      if (`${index}` !== key) {
        if (RegExpPrototypeExec(numberRegExp, key) === null) break;
        const emptyItems = tmp - index;
        ArrayPrototypePush(output, `<${emptyItems} empty item${emptyItems > 1 ? "s" : ""}>`);
        index = tmp;
        if (output.length === maxLength) break;
      }
      ArrayPrototypePush(output, formatProperty(ctx, value, recurseTimes, key, kArrayType));
      index++;
    }
    const remaining = value.length - index;
    if (output.length !== maxLength) {
      if (remaining > 0) ArrayPrototypePush(output, `<${remaining} empty item${remaining > 1 ? "s" : ""}>`);
    } else if (remaining > 0) {
      ArrayPrototypePush(output, remainingText(remaining));
    }
    return output;
  }

  function formatArrayBuffer(ctx, value) {
    let bytes;
    try {
      bytes = new Uint8Array(value);
    } catch {
      return ["(detached)"];
    }
    const length = MathMin(ctx.maxArrayLength, bytes.length);
    let str = "";
    for (let i = 0; i < length; i++) {
      const hex = NumberPrototypeToString(bytes[i], 16);
      str += (i === 0 ? "" : " ") + (hex.length === 1 ? "0" + hex : hex);
    }
    const remaining = bytes.length - ctx.maxArrayLength;
    if (remaining > 0) str += ` ... ${remaining} more byte${remaining > 1 ? "s" : ""}`;
    return [`[Uint8Contents]: <${str}>`];
  }

  function formatArray(ctx, value, recurseTimes) {
    const valLen = value.length;
    const len = MathMin(MathMax(0, ctx.maxArrayLength), valLen);
    const remaining = valLen - len;
    const output = [];
    for (let i = 0; i < len; i++) {
      const desc = ObjectGetOwnPropertyDescriptor(value, i);
      if (desc === undefined) return formatSpecialArray(ctx, value, recurseTimes, len, output, i);
      ArrayPrototypePush(output, formatProperty(ctx, value, recurseTimes, i, kArrayType, desc));
    }
    if (remaining > 0) ArrayPrototypePush(output, remainingText(remaining));
    return output;
  }

  function formatTypedArray(value, length, ctx) {
    const maxLength = MathMin(MathMax(0, ctx.maxArrayLength), length);
    const remaining = length - maxLength;
    const output = [];
    for (let i = 0; i < maxLength; ++i) {
      const element = value[i];
      output[i] = typeof element === "bigint" ? `${element}n` : formatNumber(element);
    }
    if (remaining > 0) output[maxLength] = remainingText(remaining);
    return output;
  }

  function formatSet(value, ctx, recurseTimes) {
    const length = SetPrototypeGetSize(value);
    const maxLength = MathMin(MathMax(0, ctx.maxArrayLength), length);
    const remaining = length - maxLength;
    const output = [];
    ctx.indentationLvl += 2;
    const iterator = SetPrototypeValues(value);
    for (let i = 0; i < maxLength; i++) {
      const step = SetIteratorPrototypeNext(iterator);
      if (step.done) break;
      ArrayPrototypePush(output, formatValue(ctx, step.value, recurseTimes));
    }
    if (remaining > 0) ArrayPrototypePush(output, remainingText(remaining));
    ctx.indentationLvl -= 2;
    return output;
  }

  function formatMap(value, ctx, recurseTimes) {
    const length = MapPrototypeGetSize(value);
    const maxLength = MathMin(MathMax(0, ctx.maxArrayLength), length);
    const remaining = length - maxLength;
    const output = [];
    ctx.indentationLvl += 2;
    const iterator = MapPrototypeEntries(value);
    for (let i = 0; i < maxLength; i++) {
      const step = MapIteratorPrototypeNext(iterator);
      if (step.done) break;
      const entry = step.value;
      ArrayPrototypePush(output, `${formatValue(ctx, entry[0], recurseTimes)} => ${formatValue(ctx, entry[1], recurseTimes)}`);
    }
    if (remaining > 0) ArrayPrototypePush(output, remainingText(remaining));
    ctx.indentationLvl -= 2;
    return output;
  }

  // Entries of a Map/Set iterator from its position, read by the engine
  // without advancing it (Node's previewEntries).
  function formatIterator(braces, ctx, value, recurseTimes) {
    const preview = ops.op_dsh_preview_entries(value);
    if (preview === undefined) return ["<items unknown>"];
    const entries = preview[0];
    if (preview[1]) {
      // Not String.prototype.replace: even a string pattern consults the
      // (program-mutable) Symbol.replace of String.prototype.
      if (StringPrototypeEndsWith(braces[0], " Iterator] {")) {
        braces[0] = StringPrototypeSlice(braces[0], 0, -" Iterator] {".length) + " Entries] {";
      }
      const len = entries.length / 2;
      const maxLength = MathMin(MathMax(ctx.maxArrayLength, 0), len);
      const output = [];
      ctx.indentationLvl += 2;
      for (let i = 0; i < maxLength; i++) {
        const pair = [formatValue(ctx, entries[i * 2], recurseTimes), formatValue(ctx, entries[i * 2 + 1], recurseTimes)];
        ArrayPrototypePush(output, reduceToSingleString(ctx, pair, "", ["[", "]"], kArrayExtrasType, recurseTimes));
      }
      ctx.indentationLvl -= 2;
      if (len > maxLength) ArrayPrototypePush(output, remainingText(len - maxLength));
      return output;
    }
    const maxLength = MathMin(MathMax(ctx.maxArrayLength, 0), entries.length);
    const output = [];
    ctx.indentationLvl += 2;
    for (let i = 0; i < maxLength; i++) ArrayPrototypePush(output, formatValue(ctx, entries[i], recurseTimes));
    ctx.indentationLvl -= 2;
    if (entries.length > maxLength) ArrayPrototypePush(output, remainingText(entries.length - maxLength));
    return output;
  }

  function formatPromise(ctx, value, recurseTimes) {
    const details = getPromiseDetails(value);
    const state = details[0];
    if (state === kPending) return ["<pending>"];
    ctx.indentationLvl += 2;
    const str = formatValue(ctx, details[1], recurseTimes);
    ctx.indentationLvl -= 2;
    return [state === kRejected ? `<rejected> ${str}` : str];
  }

  function formatExtraProperty(ctx, value, recurseTimes, key, typedArray) {
    ctx.indentationLvl += 2;
    const str = formatValue(ctx, value[key], recurseTimes, typedArray);
    ctx.indentationLvl -= 2;
    return `[${key}]: ${str}`;
  }

  function formatProperty(ctx, value, recurseTimes, key, type, desc) {
    let name;
    let str;
    if (desc === undefined) desc = ObjectGetOwnPropertyDescriptor(value, key);
    if (desc === undefined) desc = { __proto__: null, value: undefined, enumerable: true };
    if (desc.value !== undefined) {
      ctx.indentationLvl += 2;
      str = formatValue(ctx, desc.value, recurseTimes);
      ctx.indentationLvl -= 2;
    } else if (desc.get !== undefined) {
      str = desc.set !== undefined ? "[Getter/Setter]" : "[Getter]";
    } else if (desc.set !== undefined) {
      str = "[Setter]";
    } else {
      str = "undefined";
    }
    if (type === kArrayType) return str;
    if (!dialect.bracketedSymbolKeys) {
      if (typeof key === "symbol") name = escapeKey(SymbolPrototypeToString(key));
      else if (RegExpPrototypeExec(keyStrRegExp, key) !== null) name = key === "__proto__" ? "['__proto__']" : key;
      else name = strEscape(key);
      if (desc.enumerable === false) name = `[${name}]`;
    } else if (typeof key === "symbol") {
      name = `[${escapeKey(SymbolPrototypeToString(key))}]`;
    } else if (key === "__proto__") {
      name = "['__proto__']";
    } else if (desc.enumerable === false) {
      name = `[${escapeKey(key)}]`;
    } else if (RegExpPrototypeExec(keyStrRegExp, key) !== null) {
      name = key;
    } else {
      name = strEscape(key);
    }
    return `${name}: ${str}`;
  }

  function isBelowBreakLength(ctx, output, start, base) {
    let totalLength = output.length + start;
    if (totalLength + output.length > ctx.breakLength) return false;
    for (let i = 0; i < output.length; i++) {
      totalLength += output[i].length;
      if (totalLength > ctx.breakLength) return false;
    }
    return base === "" || !StringPrototypeIncludes(base, "\n");
  }

  function reduceToSingleString(ctx, output, base, braces, extrasType, recurseTimes, value) {
    const entries = output.length;
    if (extrasType === kArrayExtrasType && entries > 6) output = groupArrayElements(ctx, output, value);
    if (ctx.currentDepth - recurseTimes < ctx.compact && entries === output.length) {
      const start = output.length + ctx.indentationLvl + braces[0].length + base.length + 10;
      if (isBelowBreakLength(ctx, output, start, base)) {
        const joined = ArrayPrototypeJoin(output, ", ");
        if (!StringPrototypeIncludes(joined, "\n")) {
          return `${base ? `${base} ` : ""}${braces[0]} ${joined} ${braces[1]}`;
        }
      }
    }
    const indentation = `\n${StringPrototypeRepeat(" ", ctx.indentationLvl)}`;
    return `${base ? `${base} ` : ""}${braces[0]}${indentation}  ${ArrayPrototypeJoin(output, `,${indentation}  `)}${indentation}${braces[1]}`;
  }

  function makeContext(options) {
    return {
      __proto__: null,
      seen: [],
      circular: undefined,
      indentationLvl: 0,
      currentDepth: 0,
      depth: options.depth ?? MAX_SAFE_DEPTH,
      maxArrayLength: options.maxArrayLength ?? 100,
      maxStringLength: options.maxStringLength ?? 10000,
      breakLength: options.breakLength ?? 80,
      compact: 3,
      customInspect: options.customInspect ?? true,
    };
  }

  function inspectWith(value, options) {
    return formatValue(makeContext(options), value, 0);
  }

  /** Render like Node's util.inspect(value, {depth: 4, maxArrayLength: 100, maxStringLength: 10000}). */
  function inspect(value, options) {
    try {
      return inspectWith(value, options !== null && typeof options === "object" ? options : { __proto__: null });
    } catch {
      try {
        return `[${internalGetConstructorName(value)}]`;
      } catch {
        return "[object]";
      }
    }
  }
  provide("inspect", {
    __proto__: null,
    inspect,
    // Buffer's rendering lists the properties a Buffer carries beyond its bytes.
    ownNonIndexKeys: getOwnNonIndexProperties,
    getStringWidth,
    programStack,
    followNodeLine: (host) => followNodeLine(host.nodeMajor),
  });
})(globalThis);
