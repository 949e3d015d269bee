// Copyright the dsh-code-runtime-v8 authors. MIT license.
// crypto.getRandomValues / crypto.randomUUID (the kernel's CSPRNG through
// op_dsh_random) and structuredClone (V8's serializer, via deno_core).
"use strict";

((globalThis) => {
  const dsh = globalThis.__dsh;
  const { primordials: p, ops } = dsh;
  const core = globalThis.Deno.core;
  const { TypeError, Uint8Array, NumberPrototypeToString, StringPrototypePadStart } = p;

  const INTEGER_ARRAYS = ["Int8Array", "Uint8Array", "Uint8ClampedArray", "Int16Array", "Uint16Array", "Int32Array", "Uint32Array", "BigInt64Array", "BigUint64Array"];

  function getRandomValues(array) {
    if (!core.isTypedArray(array) || !p.ArrayPrototypeIncludes(INTEGER_ARRAYS, p.TypedArrayPrototypeGetSymbolToStringTag(array))) {
      throw dsh.domException("The data argument must be an integer-type TypedArray", "TypeMismatchError", getRandomValues);
    }
    const byteLength = p.TypedArrayPrototypeGetByteLength(array);
    if (byteLength > 65536) {
      throw dsh.domException("The requested length exceeds 65,536 bytes", "QuotaExceededError", getRandomValues);
    }
    ops.op_dsh_random(new Uint8Array(p.TypedArrayPrototypeGetBuffer(array), array.byteOffset, byteLength));
    return array;
  }

  function randomUUID() {
    const bytes = new Uint8Array(16);
    ops.op_dsh_random(bytes);
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex = "";
    for (let i = 0; i < 16; i++) {
      hex += StringPrototypePadStart(NumberPrototypeToString(bytes[i], 16), 2, "0");
      if (i === 3 || i === 5 || i === 7 || i === 9) hex += "-";
    }
    return hex;
  }

  const crypto = p.ObjectCreate(null);
  crypto.getRandomValues = getRandomValues;
  crypto.randomUUID = randomUUID;

  const coreStructuredClone = core.structuredClone;
  function structuredClone(value, options = undefined) {
    if (arguments.length === 0) throw new TypeError('The "value" argument must be specified');
    try {
      // A clone of a resizable ArrayBuffer is committed by V8 itself,
      // outside the capped allocator (10_memory_caps.js).
      return dsh.checkedBuffers(coreStructuredClone(value));
    } catch (error) {
      throw dsh.domException(error && error.message, "DataCloneError", structuredClone);
    }
  }

  const define = (name, value) => p.ArrayPrototypePush(dsh.webGlobals, [name, value]);
  define("crypto", crypto);
  define("structuredClone", structuredClone);
})(globalThis);
