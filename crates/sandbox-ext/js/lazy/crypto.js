// Copyright the dsh-code-runtime-v8 authors. MIT license.
// crypto: getRandomValues / randomUUID (the run's ChaCha20 stream, seeded
// from the kernel's CSPRNG by the harness, through op_dsh_random: see
// 15_random.js) and subtle.digest (RustCrypto's SHA-1/2 through
// op_dsh_digest). A lazy module (14_lazy_globals.js).
//
// Takes: primordials, native, api, lazyGlobals (the domException module),
// nodeErrors, and `host` (its Node line). Makes crypto, Crypto,
// SubtleCrypto.
"use strict";

const {
  primordials: p,
  native: { ops, core, protocol },
  api: { internalKey: INTERNAL, setToStringTag },
  lazyGlobals: { load },
  nodeErrors: { checkConstructorKey, nodeCppError, invalidThis },
} = dsh;
const { domException } = load("domException");
const { TypeError, Uint8Array, NumberPrototypeToString, StringPrototypePadStart } = p;

const INTEGER_ARRAYS = ["Int8Array", "Uint8Array", "Uint8ClampedArray", "Int16Array", "Uint16Array", "Int32Array", "Uint32Array", "BigInt64Array", "BigUint64Array"];

function getRandomValues(array) {
  if (!core.isTypedArray(array) || !p.ArrayPrototypeIncludes(INTEGER_ARRAYS, p.TypedArrayPrototypeGetSymbolToStringTag(array))) {
    throw domException("The data argument must be an integer-type TypedArray", "TypeMismatchError", getRandomValues);
  }
  const byteLength = p.TypedArrayPrototypeGetByteLength(array);
  if (byteLength > 65536) {
    throw domException("The requested length exceeds 65,536 bytes", "QuotaExceededError", getRandomValues);
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

// crypto.subtle.digest's algorithms by name: the number op_dsh_digest
// takes, and the digest's size (crates/isolate-host/src/sandbox_ext.rs defines both).
// (Copied out of the protocol's checked tables: a program's algorithm
// name is looked up in them at run time.)
const DIGESTS = { __proto__: null, ...protocol.digests };
const DIGEST_BYTES = { __proto__: null, ...protocol.digestBytes };


/** Node's SubtleCrypto, with digest only: no keys (hence no CryptoKey). */
class SubtleCrypto {
  constructor(key = undefined) {
    checkConstructorKey(key);
  }
  async digest(algorithm, data) {
    // Node's WebIDL errors (made as its C++ ones are: the code not in the stack's header).
    if (arguments.length < 2) {
      throw nodeCppError(TypeError, "ERR_MISSING_ARGS", `Failed to execute 'digest' on 'SubtleCrypto': 2 arguments required, but only ${arguments.length} present.`);
    }
    const name = typeof algorithm === "string" ? algorithm : algorithm?.name;
    const known = typeof name === "string" ? p.StringPrototypeToUpperCase(name) : undefined;
    let bytes;
    if (p.ArrayBufferIsView(data)) bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    else if (core.isAnyArrayBuffer(data)) bytes = new Uint8Array(data);
    else throw nodeCppError(TypeError, "ERR_INVALID_ARG_TYPE", "Failed to execute 'digest' on 'SubtleCrypto': 2nd argument is not instance of ArrayBuffer, Buffer, TypedArray, or DataView.");
    if (algorithm !== null && typeof algorithm === "object" && name === undefined) {
      // Node 24 writes WebIDL's "cannot".
      const cannot = host.nodeMajor >= 24 ? "cannot" : "can not";
      throw nodeCppError(TypeError, "ERR_MISSING_OPTION", `Failed to normalize algorithm: passed algorithm ${cannot} be converted to 'Algorithm' because 'name' is required in 'Algorithm'.`);
    }
    if (known === undefined || !p.ObjectHasOwn(DIGEST_BYTES, known)) {
      throw domException("Unrecognized algorithm name", "NotSupportedError", this.digest);
    }
    // The input is copied first, as WebCrypto requires (a later change to
    // it must not change the digest).
    const out = new p.ArrayBuffer(DIGEST_BYTES[known]);
    ops.op_dsh_digest(DIGESTS[known], new Uint8Array(bytes), new Uint8Array(out));
    return out;
  }
}

// As Node's: its methods taken off crypto and called alone refuse (a
// static block's).
let isCrypto;

class Crypto {
  #subtle = new SubtleCrypto(INTERNAL);
  constructor(key = undefined) {
    checkConstructorKey(key);
  }
  get subtle() {
    return this.#subtle;
  }
  getRandomValues(array) {
    if (!isCrypto(this)) throw invalidThis("Crypto");
    if (arguments.length === 0) throw nodeCppError(TypeError, "ERR_MISSING_ARGS", "Failed to execute 'getRandomValues' on 'Crypto': 1 argument required, but only 0 present.");
    return getRandomValues(array);
  }
  randomUUID() {
    if (!isCrypto(this)) throw invalidThis("Crypto");
    return randomUUID();
  }
  static {
    isCrypto = (value) => value !== null && typeof value === "object" && #subtle in value;
  }
}
setToStringTag(SubtleCrypto);
setToStringTag(Crypto);
const crypto = new Crypto(INTERNAL);

return { __proto__: null, crypto, Crypto, SubtleCrypto };
