// Copyright the dsh-code-runtime-v8 authors. MIT license.
// Captures every intrinsic the sandbox's own JS uses, before any program
// code runs. Program code may replace `Array.isArray`, `JSON`,
// `Object.prototype.*` or anything else on the global; the bootstrap only
// ever calls through these captured references, so the lossless-JSON
// verdict, the log rendering and the bridge cannot be steered. (What is
// left: index accessors a program defines on Array.prototype can observe
// the strings rendered from its own values, as console rendering pushes
// them into arrays, and deno_core's tick queue, a holey array of its own,
// reads the program's getters as ticks and hands its setters the ticks of
// the program's own process.nextTick: the program can break its own run,
// never reach past it. The lossless-JSON encoder's lists have no
// prototype, so its verdict and bytes stay the program's values.)
//
// The files after this one share nothing but one registry, the temporary
// global `__dsh` (deleted by 99_bootstrap.js before a program can see it):
// each file takes, by destructuring at its top, the entries of the files
// before it that it needs, and adds its own entry with `__dsh.provide`,
// frozen and defined once, so no file changes what another provides. A
// file that needs an entry of a later file (nodeErrors, run) keeps the
// registry and reads that entry when called, after every file has loaded.
//
// Provides:
// - primordials: the captured intrinsics (frozen, as deno_core's are);
// - native: deno_core's `core`, the sandbox's ops and the protocol table;
// - api: what shapes the sandbox's API classes and globals as Node's
//   (internalKey, setToStringTag, defineGlobal).
"use strict";

((globalThis) => {
  const ReflectApply = Reflect.apply;
  const FunctionPrototypeCall = Function.prototype.call;
  // uncurryThis(String.prototype.slice)(s, 0, 1) === s.slice(0, 1), without
  // consulting the (mutable) prototype at call time: `call` bound to `fn`.
  // A bound function keeps its captured target, so a program that later
  // replaces Function.prototype.call or .bind changes nothing here.
  const uncurryThis = Function.prototype.bind.bind(FunctionPrototypeCall);

  const p = Object.create(null);
  p.uncurryThis = uncurryThis;
  p.ReflectApply = ReflectApply;
  p.ReflectOwnKeys = Reflect.ownKeys;
  p.ReflectGetPrototypeOf = Reflect.getPrototypeOf;
  p.ReflectConstruct = Reflect.construct;
  p.FunctionPrototypeCall = FunctionPrototypeCall;
  p.FunctionPrototypeToString = uncurryThis(Function.prototype.toString);
  // 10_builtin_proxies.js replaces Function.prototype.toString (so that
  // its proxies print as the built-ins they stand for); it needs the object.
  p.FunctionPrototype = Function.prototype;
  // 14_lazy_globals.js compiles the lazy modules (js/lazy/) on first use.
  p.Function = Function;

  p.Object = Object;
  p.ObjectPrototype = Object.prototype;
  p.ObjectCreate = Object.create;
  p.ObjectDefineProperty = Object.defineProperty;
  p.ObjectFreeze = Object.freeze;
  p.ObjectGetOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
  p.ObjectGetOwnPropertyNames = Object.getOwnPropertyNames;
  p.ObjectGetOwnPropertySymbols = Object.getOwnPropertySymbols;
  p.ObjectGetPrototypeOf = Object.getPrototypeOf;
  // 99_bootstrap.js's table of waiting calls and 01_lossless_json.js's
  // lists are arrays whose holes and appends must not reach
  // Array.prototype, which the program can write.
  p.ObjectSetPrototypeOf = Object.setPrototypeOf;
  p.ObjectKeys = Object.keys;
  p.ObjectIs = Object.is;
  p.ObjectHasOwn = Object.hasOwn;
  p.ObjectPrototypeToString = uncurryThis(Object.prototype.toString);
  p.ObjectPrototypePropertyIsEnumerable = uncurryThis(Object.prototype.propertyIsEnumerable);
  p.ObjectPrototypeIsPrototypeOf = uncurryThis(Object.prototype.isPrototypeOf);

  p.Array = Array;
  p.ArrayPrototype = Array.prototype;
  p.ArrayIsArray = Array.isArray;
  p.ArrayPrototypeJoin = uncurryThis(Array.prototype.join);
  p.ArrayPrototypePush = uncurryThis(Array.prototype.push);
  p.ArrayPrototypePop = uncurryThis(Array.prototype.pop);
  p.ArrayPrototypeIncludes = uncurryThis(Array.prototype.includes);
  p.ArrayPrototypeIndexOf = uncurryThis(Array.prototype.indexOf);
  p.ArrayPrototypeSort = uncurryThis(Array.prototype.sort);
  p.ArrayPrototypeUnshift = uncurryThis(Array.prototype.unshift);
  // No Array.prototype.map/filter/slice/splice: they create their result
  // through the array's program-mutable `constructor[Symbol.species]`.
  // These build plain arrays with Array.from over a null-prototype
  // array-like (no iterator to look up, elements defined, not set), and
  // remove in place.
  const ArrayFrom = Array.from;
  const arrayOf = (length, at) => ReflectApply(ArrayFrom, Array, [{ __proto__: null, length }, (_, i) => at(i)]);
  /** `array.map(fn)` (fn gets the element and index). */
  p.ArrayPrototypeMap = (array, fn) => arrayOf(array.length, (i) => fn(array[i], i));
  /** `array.slice(start, end)`. */
  p.ArrayPrototypeSlice = (array, start = 0, end = array.length) => {
    const length = array.length;
    const from = start < 0 ? (length + start > 0 ? length + start : 0) : start < length ? start : length;
    const to = end < 0 ? (length + end > 0 ? length + end : 0) : end < length ? end : length;
    return arrayOf(to > from ? to - from : 0, (i) => array[from + i]);
  };
  /** `array.filter(keep)` (keep gets the element and index). */
  p.ArrayPrototypeFilter = (array, keep) => {
    const kept = { __proto__: null };
    let count = 0;
    for (let i = 0; i < array.length; i++) if (keep(array[i], i)) kept[count++] = array[i];
    return arrayOf(count, (i) => kept[i]);
  };
  /** `array.splice(start, count)` without the array of removed elements. */
  p.ArrayRemove = (array, start, count) => {
    const length = array.length;
    const removed = count < length - start ? count : length - start;
    if (removed <= 0) return;
    for (let i = start; i + removed < length; i++) array[i] = array[i + removed];
    array.length = length - removed;
  };

  p.String = String;
  // 12_interruptible.js replaces some of its methods.
  p.StringPrototype = String.prototype;
  // 11_memory_caps.js measures long texts before JSON.parse; it needs the
  // object whose method it replaces.
  p.JSON = JSON;
  // 15_random.js replaces its random with the run's seeded stream.
  p.Math = Math;
  p.StringFromCharCode = String.fromCharCode;
  p.StringFromCodePoint = String.fromCodePoint;
  p.StringPrototypeSlice = uncurryThis(String.prototype.slice);
  p.StringPrototypeCharCodeAt = uncurryThis(String.prototype.charCodeAt);
  p.StringPrototypeCodePointAt = uncurryThis(String.prototype.codePointAt);
  p.StringPrototypeIndexOf = uncurryThis(String.prototype.indexOf);
  p.StringPrototypeLastIndexOf = uncurryThis(String.prototype.lastIndexOf);
  p.StringPrototypeIncludes = uncurryThis(String.prototype.includes);
  p.StringPrototypeRepeat = uncurryThis(String.prototype.repeat);
  p.StringPrototypeToLowerCase = uncurryThis(String.prototype.toLowerCase);
  p.StringPrototypeToUpperCase = uncurryThis(String.prototype.toUpperCase);
  p.StringPrototypeTrim = uncurryThis(String.prototype.trim);
  p.StringPrototypeStartsWith = uncurryThis(String.prototype.startsWith);
  p.StringPrototypeEndsWith = uncurryThis(String.prototype.endsWith);
  p.StringPrototypePadStart = uncurryThis(String.prototype.padStart);
  p.StringPrototypePadEnd = uncurryThis(String.prototype.padEnd);
  p.StringPrototypeNormalize = uncurryThis(String.prototype.normalize);
  p.StringPrototypeValueOf = uncurryThis(String.prototype.valueOf);
  p.StringPrototypeToWellFormed = uncurryThis(String.prototype.toWellFormed);
  // 01_lossless_json.js: a tool's long string crosses beside its result's
  // JSON only if UTF-8 carries it exactly.
  p.StringPrototypeIsWellFormed = uncurryThis(String.prototype.isWellFormed);

  p.Number = Number;
  p.NumberIsFinite = Number.isFinite;
  p.NumberIsInteger = Number.isInteger;
  p.NumberIsNaN = Number.isNaN;
  p.NumberPrototypeValueOf = uncurryThis(Number.prototype.valueOf);
  p.NumberPrototypeToString = uncurryThis(Number.prototype.toString);
  p.NumberPrototypeToFixed = uncurryThis(Number.prototype.toFixed);
  p.BigIntPrototypeValueOf = uncurryThis(BigInt.prototype.valueOf);
  // process.hrtime.bigint().
  p.BigInt = BigInt;
  p.BooleanPrototypeValueOf = uncurryThis(Boolean.prototype.valueOf);
  p.SymbolPrototypeValueOf = uncurryThis(Symbol.prototype.valueOf);
  p.SymbolPrototypeToString = uncurryThis(Symbol.prototype.toString);
  p.Symbol = Symbol;
  // Immediate's disposer (04_timers.js), as Node's.
  p.SymbolDispose = Symbol.dispose;
  p.SymbolIterator = Symbol.iterator;
  p.SymbolToPrimitive = Symbol.toPrimitive;
  p.SymbolToStringTag = Symbol.toStringTag;
  p.SymbolFor = Symbol.for;
  p.MathMin = Math.min;
  p.MathMax = Math.max;
  p.MathFloor = Math.floor;
  p.MathCeil = Math.ceil;
  p.MathTrunc = Math.trunc;
  p.MathSqrt = Math.sqrt;
  p.MathRound = Math.round;
  p.MathAbs = Math.abs;

  p.JSONStringify = JSON.stringify;
  p.JSONParse = JSON.parse;

  p.Error = Error;
  p.ErrorPrototype = Error.prototype;
  p.ErrorCaptureStackTrace = Error.captureStackTrace;
  p.TypeError = TypeError;
  p.RangeError = RangeError;
  p.SyntaxError = SyntaxError;
  p.AggregateError = AggregateError;
  p.ErrorPrototypeToString = uncurryThis(Error.prototype.toString);

  p.Promise = Promise;
  p.PromiseResolve = Promise.resolve.bind(Promise);
  p.PromiseReject = Promise.reject.bind(Promise);
  p.PromisePrototypeThen = uncurryThis(Promise.prototype.then);
  p.SafePromiseWithResolvers = () => {
    let resolve, reject;
    const promise = new Promise((res, rej) => {
      resolve = res;
      reject = rej;
    });
    return { __proto__: null, promise, resolve, reject };
  };

  p.Map = Map;
  p.MapPrototypeGet = uncurryThis(Map.prototype.get);
  p.MapPrototypeSet = uncurryThis(Map.prototype.set);
  p.MapPrototypeHas = uncurryThis(Map.prototype.has);
  p.MapPrototypeDelete = uncurryThis(Map.prototype.delete);
  p.MapPrototypeEntries = uncurryThis(Map.prototype.entries);
  p.MapPrototypeGetSize = uncurryThis(Object.getOwnPropertyDescriptor(Map.prototype, "size").get);
  p.Set = Set;
  p.SetPrototypeAdd = uncurryThis(Set.prototype.add);
  p.SetPrototypeHas = uncurryThis(Set.prototype.has);
  p.SetPrototypeDelete = uncurryThis(Set.prototype.delete);
  p.SetPrototypeValues = uncurryThis(Set.prototype.values);
  p.SetPrototypeGetSize = uncurryThis(Object.getOwnPropertyDescriptor(Set.prototype, "size").get);
  p.WeakMap = WeakMap;
  p.WeakMapPrototypeGet = uncurryThis(WeakMap.prototype.get);
  p.WeakMapPrototypeSet = uncurryThis(WeakMap.prototype.set);
  p.WeakSet = WeakSet;
  p.MapIteratorPrototypeNext = uncurryThis(Object.getPrototypeOf(new Map().entries()).next);
  p.SetIteratorPrototypeNext = uncurryThis(Object.getPrototypeOf(new Set().values()).next);

  p.Date = Date;
  p.DatePrototypeGetTime = uncurryThis(Date.prototype.getTime);
  p.DatePrototypeToISOString = uncurryThis(Date.prototype.toISOString);
  p.DatePrototypeToString = uncurryThis(Date.prototype.toString);
  p.RegExp = RegExp;
  p.RegExpPrototypeToString = uncurryThis(RegExp.prototype.toString);
  p.RegExpPrototypeExec = uncurryThis(RegExp.prototype.exec);
  // No RegExp.prototype.test / String.prototype.replace(regex) here: both
  // look up `exec` / Symbol.replace on the (program-mutable) prototype. The
  // builtin exec reads only the regex's own lastIndex.
  p.RegExpTest = (regex, string) => p.RegExpPrototypeExec(regex, string) !== null;

  // No String.prototype.split/replace/replaceAll either: even with a string
  // pattern they look up Symbol.split / Symbol.replace on the (program-
  // mutable) String.prototype. These walk with indexOf and slice, which
  // consult nothing.
  /** `string.split(separator)` for a non-empty string separator. */
  p.StringSplitLiteral = (string, separator) => {
    const parts = [];
    let from = 0;
    for (;;) {
      const at = p.StringPrototypeIndexOf(string, separator, from);
      if (at === -1) break;
      parts[parts.length] = p.StringPrototypeSlice(string, from, at);
      from = at + separator.length;
    }
    parts[parts.length] = p.StringPrototypeSlice(string, from);
    return parts;
  };
  /** `string.replaceAll(find, replacement)` for a non-empty string `find`,
   *  the replacement taken literally (no `$` patterns). */
  p.StringReplaceAllLiteral = (string, find, replacement) => {
    let out = "";
    let from = 0;
    for (;;) {
      const at = p.StringPrototypeIndexOf(string, find, from);
      if (at === -1) break;
      out += p.StringPrototypeSlice(string, from, at) + replacement;
      from = at + find.length;
    }
    return from === 0 ? string : out + p.StringPrototypeSlice(string, from);
  };

  p.ArrayBuffer = ArrayBuffer;
  p.ArrayBufferIsView = ArrayBuffer.isView;
  // %IteratorPrototype%, which the sandbox's Web IDL iterators (lazy/url.js)
  // inherit from, as Node's do; a program can replace the chain to it later.
  p.IteratorPrototype = Object.getPrototypeOf(Object.getPrototypeOf([][Symbol.iterator]()));
  // structuredClone's transfer list (lazy/structured_clone.js) refuses a
  // detached buffer as Node does, before V8 sees it.
  p.ArrayBufferPrototypeGetDetached = uncurryThis(Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, "detached").get);
  p.SharedArrayBuffer = globalThis.SharedArrayBuffer;
  // The two prototypes whose methods copy a whole string into ICU memory
  // (11_memory_caps.js checks them); %Segments% has no global name.
  p.IntlSegmenterPrototype = Intl.Segmenter.prototype;
  // navigator.language: ICU's default locale, as Node reads it.
  p.IntlDateTimeFormat = Intl.DateTimeFormat;
  p.IntlSegmentsPrototype = Object.getPrototypeOf(new Intl.Segmenter().segment(""));
  p.Uint8Array = Uint8Array;
  p.Uint16Array = Uint16Array;
  p.Uint32Array = Uint32Array;
  // process.memoryUsage's figures cross from the op in one.
  p.Float64Array = Float64Array;
  p.DataView = DataView;
  const TypedArrayPrototype = Object.getPrototypeOf(Uint8Array.prototype);
  p.TypedArrayPrototypeGetLength = uncurryThis(
    Object.getOwnPropertyDescriptor(TypedArrayPrototype, "length").get,
  );
  p.TypedArrayPrototypeGetSymbolToStringTag = uncurryThis(
    Object.getOwnPropertyDescriptor(TypedArrayPrototype, Symbol.toStringTag).get,
  );
  p.TypedArrayPrototypeGetByteLength = uncurryThis(
    Object.getOwnPropertyDescriptor(TypedArrayPrototype, "byteLength").get,
  );
  p.TypedArrayPrototypeGetBuffer = uncurryThis(
    Object.getOwnPropertyDescriptor(TypedArrayPrototype, "buffer").get,
  );
  p.TypedArrayPrototypeGetByteOffset = uncurryThis(
    Object.getOwnPropertyDescriptor(TypedArrayPrototype, "byteOffset").get,
  );
  // Buffer's copy takes any view, a DataView too: its bytes are found
  // through these, not through members the program may redefine.
  p.DataViewPrototypeGetBuffer = uncurryThis(Object.getOwnPropertyDescriptor(DataView.prototype, "buffer").get);
  p.DataViewPrototypeGetByteOffset = uncurryThis(Object.getOwnPropertyDescriptor(DataView.prototype, "byteOffset").get);
  p.DataViewPrototypeGetByteLength = uncurryThis(Object.getOwnPropertyDescriptor(DataView.prototype, "byteLength").get);
  p.TypedArrayPrototypeSubarray = uncurryThis(TypedArrayPrototype.subarray);
  p.TypedArrayPrototypeSet = uncurryThis(TypedArrayPrototype.set);
  p.Proxy = Proxy;
  p.globalThis = globalThis;

  // Standard globals, and the members of each and of its prototype that the
  // vendored `buffer` package reads, as they are before any program runs:
  // what it reads instead of the program-mutable originals
  // (scripts/vendor-buffer.mjs rewrites its reads, js/14_lazy_globals.js
  // serves them). Only these: every isolate deserializes the records. The
  // vendor script evaluates this file and refuses a bundle that reads a
  // member of these globals missing here; a global the bundle names that is
  // missing here fails its first load, named. Data properties only: the
  // package reads no accessor of a built-in.
  // By identifier: the host realm evaluates this file with a stand-in for
  // globalThis (ts/lossless-json.ts). SharedArrayBuffer may be absent.
  const INTRINSIC_GLOBALS = {
    __proto__: null, Array, ArrayBuffer, BigInt, Boolean, Error, Float32Array, Float64Array, Function,
    Math, Number, Object, RangeError, SharedArrayBuffer: globalThis.SharedArrayBuffer, String, Symbol, TypeError, Uint8Array,
  };
  const INTRINSIC_MEMBERS = [
    "abs", "apply", "bind", "call", "charCodeAt", "copyWithin", "defineProperty", "fill", "floor", "for", "from",
    "fromCharCode", "getOwnPropertyNames", "indexOf", "isArray", "isInteger", "isView", "join", "lastIndexOf", "log",
    "min", "pow", "push", "replace", "set", "setPrototypeOf", "slice", "split", "subarray", "substr", "toLowerCase", "toPrimitive",
    "toString", "trim", "valueOf",
  ];
  const intrinsicGlobals = { __proto__: null };
  const intrinsicMembers = new Map();
  const recordMembers = (object) => {
    const members = { __proto__: null };
    for (const key of INTRINSIC_MEMBERS) {
      const descriptor = Object.getOwnPropertyDescriptor(object, key);
      if (descriptor !== undefined && "value" in descriptor) members[key] = descriptor.value;
    }
    intrinsicMembers.set(object, members);
  };
  const recordWithPrototype = (value) => {
    recordMembers(value);
    // Function.prototype is a function without a prototype of its own.
    const prototype = typeof value === "function" ? value.prototype : undefined;
    if (prototype !== undefined) recordMembers(prototype);
  };
  for (const name in INTRINSIC_GLOBALS) {
    const value = INTRINSIC_GLOBALS[name];
    if (value === undefined) continue;
    intrinsicGlobals[name] = value;
    recordWithPrototype(value);
  }
  // %TypedArray%, which Uint8Array's methods come from.
  recordWithPrototype(Object.getPrototypeOf(Uint8Array));
  p.intrinsicGlobals = Object.freeze(intrinsicGlobals);
  p.intrinsicMembers = intrinsicMembers;
  // deno_core exposes the engine's proxy check; the host passes util.types.isProxy.
  p.isProxy = globalThis.Deno.core.isProxy;

  // The sandbox's own ops, as crates/sandbox-ext/src/lib.rs lists them (the one list):
  // every op named op_dsh_*, captured before the seal removes Deno.
  const coreOps = globalThis.Deno.core.ops;
  const ops = Object.create(null);
  for (const name of Object.keys(coreOps)) {
    if (name.startsWith("op_dsh_")) ops[name] = coreOps[name];
  }

  // The numbers the ops and this JS exchange, by name, as crates/sandbox-ext/src/lib.rs
  // defines them (the one definition). A name the JS uses that the table
  // lacks fails the snapshot build, not a run. (The host realm evaluates
  // this file without ops, for lossless JSON only: it gets an empty table.)
  const table = ops.op_dsh_protocol === undefined ? {} : ops.op_dsh_protocol();
  const protocol = Object.create(null);
  for (const group of Object.keys(table)) {
    const names = table[group];
    protocol[group] = new Proxy(Object.freeze({ __proto__: null, ...names }), {
      // Read by lazy modules too, after the program may have replaced
      // Object, Error or String: primordials.
      get(target, name) {
        if (!p.ObjectHasOwn(target, name)) throw new p.Error(`protocol.${group}.${p.String(name)} is not defined by crates/sandbox-ext/src/lib.rs`);
        return target[name];
      },
    });
  }

  // The key the sandbox's own API classes (Crypto, Navigator, Performance,
  // AbortSignal, ...) are constructed with: programs never see it, so their
  // `new` throws as Node's illegal constructors do
  // (13_node_errors.js: checkConstructorKey).
  const internalKey = Symbol("internal constructor key");
  const api = {
    __proto__: null,
    internalKey,
    // Web IDL classes carry their name as Symbol.toStringTag on the
    // prototype (what Object.prototype.toString and console show).
    // Called by lazy modules after a program may have replaced the
    // globals, hence the primordials.
    setToStringTag(Class, tag = Class.name) {
      p.ObjectDefineProperty(Class.prototype, p.SymbolToStringTag, { __proto__: null, value: tag, configurable: true });
    },
    // A global of the program's, shaped as Node's own are: writable,
    // configurable, enumerable only where Node's is (world.test.ts compares
    // Object.keys(globalThis) with Node's). Primordials for the same reason:
    // a lazy global settles after the program may have replaced Object.
    defineGlobal(name, value, enumerable) {
      p.ObjectDefineProperty(globalThis, name, { __proto__: null, value, writable: true, configurable: true, enumerable });
    },
  };

  // Nothing adds to the primordials after this point: every file reads the
  // same intrinsics, and none can replace one under another.
  Object.freeze(p);

  const registry = p.ObjectCreate(null);
  /**
   * Add entry `name` to the registry: frozen (a function's own properties
   * too), read-only, and only once, so an entry is what its file made it.
   */
  function provide(name, entry) {
    if (p.ObjectHasOwn(registry, name)) throw new p.Error(`__dsh.${name} is provided twice`);
    p.ObjectDefineProperty(registry, name, { __proto__: null, value: p.ObjectFreeze(entry), enumerable: true });
  }
  p.ObjectDefineProperty(registry, "provide", { __proto__: null, value: provide });
  provide("primordials", p);
  provide("native", { __proto__: null, core: globalThis.Deno.core, ops: Object.freeze(ops), protocol: Object.freeze(protocol) });
  provide("api", api);
  globalThis.__dsh = registry;
})(globalThis);
