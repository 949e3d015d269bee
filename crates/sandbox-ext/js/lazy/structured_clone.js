// Copyright the dsh-code-runtime-v8 authors. MIT license.
// structuredClone as Node's: V8's serializer with the sandbox's host
// objects (crates/sandbox-ext/src/structured_clone.rs: a DOMException
// clones as one, process.env as a plain object, a URL or URLSearchParams
// is refused), `transfer`'s
// ArrayBuffers moved into the clone, Node's option and argument errors and
// its DataCloneError, and the clone's buffers checked against the
// program's external-memory cap. A lazy module (14_lazy_globals.js).
//
// Takes: primordials, native (core, ops, protocol), memoryCaps, nodeErrors, lazyGlobals
// (the domException module), and `host` (its Node line). Makes
// structuredClone.
"use strict";

const {
  primordials: p,
  native: { core, ops, protocol },
  lazyGlobals: { load },
  memoryCaps: { checkedBuffers },
  nodeErrors: { nodeError, missingArgs },
} = dsh;
const { DOMException, domException, adopt: adoptDOMException } = load("domException");
const { plainObject: PLAIN_OBJECT, domException: DOM_EXCEPTION } = protocol.hostObjects;
const { ArrayPrototypePush, ArrayPrototypeIncludes, TypeError } = p;
const isArrayBuffer = core.isArrayBuffer;
// Node 24 converts the options as WebIDL says, in WebIDL's words.
const webidl = host.nodeMajor >= 24;
const NOT_A_SEQUENCE = `Failed to execute 'structuredClone': transfer in Options ${webidl ? "cannot" : "can not"} be converted to sequence.`;

/**
 * Give a host object of the clone (made empty by structured_clone.rs as
 * V8 rebuilt the clone, where no JS may run) its data, once the clone is
 * whole.
 */
function adopt(kind, object, data) {
  if (kind === DOM_EXCEPTION) return adoptDOMException(object, data);
  if (kind !== PLAIN_OBJECT) throw new TypeError(`structuredClone made a host object of unknown kind ${kind}`);
  const keys = p.ObjectKeys(data);
  for (let i = 0; i < keys.length; i++) {
    p.ObjectDefineProperty(object, keys[i], { __proto__: null, value: data[keys[i]], writable: true, enumerable: true, configurable: true });
  }
}

/** V8's refusals, as Node throws them. */
function dataCloneError(message) {
  return domException(message, "DataCloneError", structuredClone);
}

/** `options.transfer` as a list of distinct, attached ArrayBuffers (Node's checks and messages). */
function transferList(options) {
  if (options === undefined || options === null) return [];
  if (typeof options !== "object" && typeof options !== "function") {
    throw nodeError(TypeError, "ERR_INVALID_ARG_TYPE", "Failed to execute 'structuredClone': Options cannot be converted to a dictionary");
  }
  const transfer = options.transfer;
  if (transfer === undefined) return [];
  if ((typeof transfer !== "object" && typeof transfer !== "function") || transfer === null || typeof transfer[p.SymbolIterator] !== "function") {
    throw nodeError(TypeError, "ERR_INVALID_ARG_TYPE", NOT_A_SEQUENCE);
  }
  const items = [];
  // The program's own iterable: iterated as Node iterates it.
  for (const item of transfer) {
    if ((typeof item !== "object" && typeof item !== "function") || item === null) {
      const message = webidl ? `Failed to execute 'structuredClone': transfer in Options[${items.length}] is not an object.` : "Value is not an object";
      throw nodeError(TypeError, "ERR_INVALID_ARG_TYPE", message);
    }
    ArrayPrototypePush(items, item);
  }
  const buffers = [];
  for (let i = 0; i < items.length; i++) {
    const item = items[i];
    if (!isArrayBuffer(item)) throw dataCloneError("Found invalid value in transferList.");
    if (ArrayPrototypeIncludes(buffers, item)) throw dataCloneError("Transfer list contains duplicate ArrayBuffer");
    if (p.ArrayBufferPrototypeGetDetached(item)) throw dataCloneError(protocol.cloneMessages.detachedTransfer);
    ArrayPrototypePush(buffers, item);
  }
  return buffers;
}

function structuredClone(value, options = undefined) {
  // Node's message: its argument's name written as a sentence.
  if (arguments.length === 0) throw missingArgs(["The value argument must be specified"]);
  const transfer = transferList(options);
  // A clone of a resizable ArrayBuffer is committed by V8 itself,
  // outside the capped allocator (11_memory_caps.js).
  return checkedBuffers(ops.op_dsh_structured_clone(value, transfer, dataCloneError, DOMException.prototype, adopt));
}

return { __proto__: null, structuredClone };
