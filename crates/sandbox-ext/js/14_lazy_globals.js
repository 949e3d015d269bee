// Copyright the dsh-code-runtime-v8 authors. MIT license.
// The globals whose code is kept out of the snapshot: Buffer, crypto,
// the events and AbortSignal family, navigator, performance, DOMException,
// TextEncoder and TextDecoder, atob and btoa, URL and URLSearchParams,
// structuredClone, and process. Their modules (js/lazy/*.js, embedded in
// the isolate host: crates/sandbox-ext/src/lazy_sources.rs, LAZY_SOURCES)
// are compiled in an isolate the first time its program touches one of
// their globals (by op_dsh_lazy_module, from the host's code cache after
// its first isolate compiled them): each global is an accessor (made here,
// so it is in the snapshot) that replaces itself by the value. In the
// snapshot, their classes would be deserialized into every isolate, used
// or not: memory every waiting run holds, and time to prepare every
// isolate.
//
// A lazy module is the body of a function of `dsh` (the registry of
// __dsh's entries, which seal() removes from the global but not from here),
// `host` and `engine` (the host's facts seal() was given) that returns its
// globals, `{ __proto__: null, Name: value, ... }`, and what other modules
// take from it (`load(module)` gives a module's object, evaluating it
// once). Like a numbered file, it destructures the entries it takes at its
// top. It runs after the program has started, so the program may have
// tampered with any global and any built-in prototype: a module's top
// level, like every method of the sandbox's, reaches built-ins only
// through `dsh.primordials`, and iterates with indices, not iterators.
//
// Takes: primordials, native (ops, protocol), api (defineGlobal),
// memoryCaps (sharedArrayBuffer). Provides lazyGlobals: { lazyModule,
// packageIntrinsics, keepMembers(object), load(module),
// followNodeLine(host, engine) }.
"use strict";

((globalThis) => {
  const registry = globalThis.__dsh;
  const {
    primordials: p,
    native: { ops, protocol },
    api: { defineGlobal },
    memoryCaps: { sharedArrayBuffer },
    provide,
  } = registry;
  const { ObjectDefineProperty, ObjectHasOwn, ObjectKeys, String } = p;

  // Module -> [global name, enumerable (as Node's own global is)].
  const GLOBALS = {
    __proto__: null,
    buffer: [["Buffer", false]],
    crypto: [["crypto", true], ["Crypto", false], ["SubtleCrypto", false]],
    events: [["Event", false], ["CustomEvent", false], ["EventTarget", false], ["AbortSignal", false], ["AbortController", false]],
    navigator: [["navigator", true], ["Navigator", false]],
    performance: [["performance", true], ["Performance", false], ["PerformanceEntry", false], ["PerformanceMark", false], ["PerformanceMeasure", false]],
    domException: [["DOMException", false]],
    encoding: [["TextEncoder", false], ["TextDecoder", false], ["btoa", true], ["atob", true]],
    url: [["URL", false], ["URLSearchParams", false]],
    structuredClone: [["structuredClone", true]],
    process: [["process", false]],
  };

  // Each source's number for op_dsh_lazy_module, copied out of the
  // protocol's checked table (a name Rust does not embed fails the build).
  const SOURCES = { __proto__: null };
  for (const name of ["bufferPackage", ...ObjectKeys(GLOBALS)]) SOURCES[name] = protocol.lazySources[name];
  // And the other way: a source Rust embeds that no global here makes
  // would ship in every addon and never run.
  for (const name of ObjectKeys(protocol.lazySources)) {
    if (SOURCES[name] === undefined) throw new p.Error(`crates/sandbox-ext/src/lazy_sources.rs embeds lazy source ${name}, which js/14_lazy_globals.js never loads`);
  }
  /**
   * Lazy source `name` compiled as a function (js/lazy/<name>.js, of `dsh`
   * `host` and `engine`; the vendored buffer package, of `intrinsics`).
   */
  const lazyModule = (name) => ops.op_dsh_lazy_module(SOURCES[name]);

  // What the vendored package reads built-ins through (scripts/vendor-buffer.mjs):
  // `$get(o, name)` is `o[name]`, and `$call(o, name, args)` `o[name](...args)`,
  // except that where the lookup reaches a built-in (a standard global, or
  // a prototype of one), it reads the member as it was before any program
  // ran (primordials.intrinsicMembers). A member of the package's own
  // objects (Buffer.prototype.slice) is read as it was made, once the
  // module that made them keeps them (`keepMembers`), as Node's own
  // functions never read what a program put in Buffer's place.
  const { intrinsicMembers, MapPrototypeGet, ReflectGetPrototypeOf, ReflectApply } = p;
  const PRIMITIVE_PROTOTYPES = {
    __proto__: null,
    string: p.StringPrototype,
    number: p.Number.prototype,
    boolean: p.intrinsicGlobals.Boolean.prototype,
    bigint: p.intrinsicGlobals.BigInt.prototype,
    symbol: p.Symbol.prototype,
  };
  function $get(object, name) {
    const type = typeof object;
    let level = type === "object" || type === "function" ? object : PRIMITIVE_PROTOTYPES[type];
    // null and undefined: the TypeError a plain read throws.
    if (level === undefined || level === null) return object[name];
    while (level !== null) {
      const members = MapPrototypeGet(intrinsicMembers, level);
      if (members !== undefined) {
        if (ObjectHasOwn(members, name)) return members[name];
      } else if (ObjectHasOwn(level, name)) {
        break;
      }
      level = ReflectGetPrototypeOf(level);
    }
    return object[name];
  }
  function $call(object, name, args) {
    const method = $get(object, name);
    if (typeof method !== "function") throw new p.TypeError(`${String(name)} is not a function`);
    return ReflectApply(method, object, args);
  }
  /** The captured globals `names` (a name not captured is an error that says so). */
  function globals(names) {
    const named = { __proto__: null };
    for (let i = 0; i < names.length; i++) {
      const name = names[i];
      // SharedArrayBuffer is not in the snapshot: the package sees the
      // capped one seal() made, as a program does before it tampers.
      const value = name === "SharedArrayBuffer" ? sharedArrayBuffer() : ObjectHasOwn(p.intrinsicGlobals, name) ? p.intrinsicGlobals[name] : undefined;
      if (value === undefined) throw new p.Error(`js/00_primordials.js does not capture ${name}`);
      named[name] = value;
    }
    return named;
  }
  const packageIntrinsics = p.ObjectFreeze({ __proto__: null, globals, $get, $call });

  /**
   * Keep `object`'s own methods as they are now, for `$get`: what a lazy
   * module made (Buffer, with its prototype) is read by the package as
   * made, whatever the program does to it later.
   */
  function keepMembers(object) {
    const members = { __proto__: null };
    const keys = p.ReflectOwnKeys(object);
    for (let i = 0; i < keys.length; i++) {
      const descriptor = p.ObjectGetOwnPropertyDescriptor(object, keys[i]);
      if (typeof descriptor.value === "function") members[keys[i]] = descriptor.value;
    }
    p.MapPrototypeSet(intrinsicMembers, object, members);
  }

  // The host's facts, for the modules: they load after seal().
  let host;
  let engine;

  const loaded = { __proto__: null };
  /** Module `name`'s object (its globals and what it gives other modules), evaluating it on first use. */
  function load(name) {
    let globals = loaded[name];
    if (globals === undefined) {
      const body = lazyModule(name);
      globals = body(registry, host, engine);
      loaded[name] = globals;
    }
    return globals;
  }

  // Defined now, not by seal(): it would cost every isolate a loop that
  // makes two closures per global (enough to make V8 compile the loop with
  // Sparkplug in every isolate).
  for (const module in GLOBALS) {
    const names = GLOBALS[module];
    for (let i = 0; i < names.length; i++) {
      const [name, enumerable] = names[i];
      const settle = (value) => {
        defineGlobal(name, value, enumerable);
        return value;
      };
      const make = () => {
        const globals = load(module);
        if (!ObjectHasOwn(globals, name)) throw new p.Error(`lazy module ${module} does not make ${name}`);
        return globals[name];
      };
      ObjectDefineProperty(globalThis, name, { __proto__: null, get: () => settle(make()), set: settle, configurable: true, enumerable });
    }
  }

  provide("lazyGlobals", {
    __proto__: null,
    lazyModule,
    packageIntrinsics,
    keepMembers,
    load,
    followNodeLine(facts, engineFacts) {
      host = facts;
      engine = engineFacts;
    },
  });
})(globalThis);
