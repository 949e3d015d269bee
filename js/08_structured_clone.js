// Copyright the dsh-code-runtime-v8 authors. MIT license.
// structuredClone: V8's serializer (through deno_core), with Node's
// argument error and DataCloneError, and the clone's buffers checked
// against the program's external-memory cap.
"use strict";

((globalThis) => {
  const dsh = globalThis.__dsh;
  const { primordials: p } = dsh;
  const coreStructuredClone = globalThis.Deno.core.structuredClone;

  function structuredClone(value, options = undefined) {
    if (arguments.length === 0) throw new p.TypeError('The "value" argument must be specified');
    try {
      // A clone of a resizable ArrayBuffer is committed by V8 itself,
      // outside the capped allocator (11_memory_caps.js).
      return dsh.checkedBuffers(coreStructuredClone(value));
    } catch (error) {
      throw dsh.domException(error && error.message, "DataCloneError", structuredClone);
    }
  }

  // Enumerable, as Node's is.
  p.ArrayPrototypePush(dsh.webGlobals, ["structuredClone", structuredClone, true]);
  // performance.mark / measure clone their detail, as Node does.
  dsh.structuredClone = structuredClone;
})(globalThis);
