// Copyright the dsh-code-runtime-v8 authors. MIT license.
// structuredClone: V8's serializer (through deno_core), with Node's
// argument error and DataCloneError, and the clone's buffers checked
// against the program's external-memory cap. A lazy module
// (14_lazy_globals.js).
//
// Takes: primordials, native (core), memoryCaps, lazyGlobals (the
// domException module). Makes structuredClone.
"use strict";

const {
  primordials: p,
  native: { core },
  lazyGlobals: { load },
  memoryCaps: { checkedBuffers },
} = dsh;
const { domException } = load("domException");
const coreStructuredClone = core.structuredClone;

function structuredClone(value, options = undefined) {
  if (arguments.length === 0) throw new p.TypeError('The "value" argument must be specified');
  try {
    // A clone of a resizable ArrayBuffer is committed by V8 itself,
    // outside the capped allocator (11_memory_caps.js).
    return checkedBuffers(coreStructuredClone(value));
  } catch (error) {
    throw domException(error && error.message, "DataCloneError", structuredClone);
  }
}

return { __proto__: null, structuredClone };
