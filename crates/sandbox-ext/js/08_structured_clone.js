// Copyright the dsh-code-runtime-v8 authors. MIT license.
// structuredClone: V8's serializer (through deno_core), with Node's
// argument error and DataCloneError, and the clone's buffers checked
// against the program's external-memory cap.
//
// Takes: primordials, native (core), domException; when called,
// memoryCaps (11_memory_caps.js), which loads later. Provides
// structuredClone: { structuredClone, globals }.
"use strict";

((globalThis) => {
  const registry = globalThis.__dsh;
  const {
    primordials: p,
    native: { core },
    domException: { domException },
    provide,
  } = registry;
  const coreStructuredClone = core.structuredClone;

  function structuredClone(value, options = undefined) {
    if (arguments.length === 0) throw new p.TypeError('The "value" argument must be specified');
    try {
      // A clone of a resizable ArrayBuffer is committed by V8 itself,
      // outside the capped allocator (11_memory_caps.js).
      return registry.memoryCaps.checkedBuffers(coreStructuredClone(value));
    } catch (error) {
      throw domException(error && error.message, "DataCloneError", structuredClone);
    }
  }

  provide("structuredClone", {
    __proto__: null,
    // performance.mark / measure clone their detail, as Node does.
    structuredClone,
    // Enumerable, as Node's is.
    globals: p.ObjectFreeze([["structuredClone", structuredClone, true]]),
  });
})(globalThis);
