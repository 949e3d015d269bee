// Copyright the dsh-code-runtime-v8 authors. MIT license.
// The built-ins that make V8 hold memory outside its heap without asking
// the isolate's ArrayBuffer allocator, checked against the program's
// external-memory cap right after each call (op_dsh_memory_check; the
// routes and their bounds: README, "Memory containment").
//
// - Resizable ArrayBuffers: V8 reserves their maximum and commits pages on
//   `resize` itself. V8 counts their committed length as external memory;
//   the check reads that count, so a buffer resized past the cap stops the
//   run before the program can touch its pages.
// - Growable SharedArrayBuffers: not counted by V8 at all (shared memory
//   has no one owner); each is charged its maxByteLength when made, and
//   given back when the buffer is collected.
// - Intl objects: ICU memory, charged by the addon's ICU allocator, that
//   only a GC frees; V8 does not count it towards its GC heuristics. The
//   check collects garbage when the account is over the cap, so a loop
//   making short-lived Intl objects is not mistaken for one that keeps
//   them.
//
// The addon also checks from an interrupt whenever ICU memory crosses the
// cap; checking here, synchronously, bounds the overshoot by one call's
// worth of memory, where an interrupt can come thousands of loop
// iterations late in interpreted code.
//
// Each built-in is replaced by a proxy (10_builtin_proxies.js): the
// constructors keep subclassing through `new.target` and the TypeError of
// a call without `new`.
//
// Takes: primordials, native (ops), builtinProxies.
// Provides memoryCaps: { checkedBuffers, capSharedArrayBuffer,
// sharedArrayBuffer }.
"use strict";

((globalThis) => {
  const {
    primordials: p,
    native: { ops },
    builtinProxies: { replace, wrapCalls },
    provide,
  } = globalThis.__dsh;
  const { Proxy, RangeError, ReflectApply, ReflectConstruct, ObjectGetOwnPropertyDescriptor } = p;

  /** The error a program gets when it is over its cap (it is then stopped). */
  function refused() {
    return new RangeError("Array buffer allocation failed");
  }

  /**
   * Throws once the program is over its cap (the run is then stopped).
   * `buffers`: also hold V8's own count of buffer memory to the cap
   * (after the built-ins that can change it).
   */
  function checkedAfter(buffers) {
    return (result) => {
      if (!ops.op_dsh_memory_check(buffers)) throw refused();
      return result;
    };
  }
  const checkedBuffers = checkedAfter(true);
  const checkedIcu = checkedAfter(false);

  /** `object`, charged `bytes` until it is collected; throws past the cap. */
  function chargedUntilCollected(object, bytes) {
    if (!ops.op_dsh_charge_until_collected(object, bytes)) throw refused();
    return object;
  }

  /** A constructor whose instances are checked after construction. */
  function checkedConstructor(owner, key, afterConstruct) {
    const target = owner[key];
    const proxy = new Proxy(target, {
      __proto__: null,
      construct(target, args, newTarget) {
        return afterConstruct(ReflectConstruct(target, args, newTarget === proxy ? target : newTarget));
      },
      apply(target, receiver, args) {
        return afterConstruct(ReflectApply(target, receiver, args));
      },
    });
    replace(owner, key, proxy);
    replace(target.prototype, "constructor", proxy);
  }

  /** A method whose results are checked (by `after`) after each call. */
  function checkedMethod(owner, key, after) {
    wrapCalls(owner, key, (target, receiver, args) => after(ReflectApply(target, receiver, args)));
  }

  checkedConstructor(globalThis, "ArrayBuffer", checkedBuffers);
  checkedMethod(p.ArrayBuffer.prototype, "resize", checkedBuffers);
  checkedMethod(p.ArrayBuffer.prototype, "transfer", checkedBuffers);

  // SharedArrayBuffer joins the global only when an isolate is made from
  // the snapshot, so the seal (99_bootstrap.js) caps it then, with as
  // little work as it can: the handler is built here, once. Its getters
  // are taken at that moment, before any program code can redefine them.
  let growable;
  let maxByteLength;
  const sharedHandler = {
    __proto__: null,
    construct(target, args, newTarget) {
      const buffer = ReflectConstruct(target, args, newTarget);
      return ReflectApply(growable, buffer, []) ? chargedUntilCollected(buffer, ReflectApply(maxByteLength, buffer, [])) : buffer;
    },
  };
  // The capped SharedArrayBuffer, once seal() made it.
  let cappedSharedArrayBuffer;
  const capSharedArrayBuffer = () => {
    const SharedArrayBuffer = globalThis.SharedArrayBuffer;
    if (SharedArrayBuffer === undefined) return;
    const prototype = SharedArrayBuffer.prototype;
    growable = ObjectGetOwnPropertyDescriptor(prototype, "growable").get;
    maxByteLength = ObjectGetOwnPropertyDescriptor(prototype, "maxByteLength").get;
    const proxy = new Proxy(SharedArrayBuffer, sharedHandler);
    replace(globalThis, "SharedArrayBuffer", proxy);
    replace(prototype, "constructor", proxy);
    cappedSharedArrayBuffer = proxy;
  };

  // What an Intl object holds outside the heap beside its ICU blocks:
  // V8 makes its ICU objects' owners with the C++ allocator, which ICU's
  // allocator hook does not see (measured per object, 20,000 of each:
  // NumberFormat ~340 B of which ICU saw none; Collator, DateTimeFormat
  // ~1 KB beside what ICU saw). Charged per object until it is collected,
  // so a program cannot keep millions of them on the heap cap alone.
  const INTL_OBJECT_BYTES = 1024;
  // The charge is refused (after a GC) if ICU's blocks have already taken
  // the account over the cap: no separate check is needed.
  const intlObject = (object) => chargedUntilCollected(object, INTL_OBJECT_BYTES);
  const Intl = globalThis.Intl;
  for (const key of p.ReflectOwnKeys(Intl)) {
    const value = Intl[key];
    if (typeof value === "function" && value.prototype !== undefined) {
      checkedConstructor(Intl, key, intlObject);
    }
  }
  checkedMethod(p.IntlSegmenterPrototype, "segment", checkedIcu);
  checkedMethod(p.IntlSegmentsPrototype, p.SymbolIterator, checkedIcu);

  // JSON.parse holds native memory per nesting level before it makes
  // anything on the heap (op_dsh_json_nesting_admitted). Texts shorter
  // than this cannot nest deep enough to matter (8 MiB at most); longer
  // ones are measured first, at ~1 ns a character.
  const JSON_MEASURED_FROM = 65536;
  wrapCalls(p.JSON, "parse", (target, receiver, args) => {
    let text = args[0];
    if (text !== null && (typeof text === "object" || typeof text === "function")) {
      // Converted once here, as JSON.parse would, so that a toString
      // with side effects runs once.
      text = p.String(text);
      args = [text, args[1]];
    }
    if (typeof text === "string" && text.length >= JSON_MEASURED_FROM && !ops.op_dsh_json_nesting_admitted(text)) {
      throw refused();
    }
    return ReflectApply(target, receiver, args);
  });

  provide("memoryCaps", {
    __proto__: null,
    // structuredClone (lazy/structured_clone.js) clones resizable buffers,
    // which V8 commits outside the allocator.
    checkedBuffers,
    // Called by seal(): SharedArrayBuffer is not in the snapshot.
    capSharedArrayBuffer,
    // The one the vendored package sees (14_lazy_globals.js), as a program
    // does before it tampers: not in the snapshot to be captured there.
    sharedArrayBuffer: () => cappedSharedArrayBuffer,
  });
})(globalThis);
