// Copyright the dsh-code-runtime-v8 authors. MIT license.
// DOMException (WebIDL), shaped as Node's: an Error whose name, message and
// code are accessors, with the legacy code constants; the sandbox's web
// APIs (atob, btoa, structuredClone, crypto) throw it, as Node's do; it
// clones as Node's does (its name, message and stack; nothing else of
// it). A lazy module (14_lazy_globals.js).
//
// Takes: primordials, native (ops, protocol), api (setToStringTag),
// nodeErrors. Makes DOMException; gives the other modules
// domException(message, name, caller) and adopt (a clone's making).
"use strict";

const {
  primordials: p,
  native: { ops, protocol },
  api: { setToStringTag },
  nodeErrors: { nodeError },
} = dsh;
const { ObjectDefineProperty, String } = p;

// [legacy constant name, error name] by code (WebIDL's table).
const LEGACY = [
  ["INDEX_SIZE_ERR", "IndexSizeError"],
  ["DOMSTRING_SIZE_ERR", "DOMStringSizeError"],
  ["HIERARCHY_REQUEST_ERR", "HierarchyRequestError"],
  ["WRONG_DOCUMENT_ERR", "WrongDocumentError"],
  ["INVALID_CHARACTER_ERR", "InvalidCharacterError"],
  ["NO_DATA_ALLOWED_ERR", "NoDataAllowedError"],
  ["NO_MODIFICATION_ALLOWED_ERR", "NoModificationAllowedError"],
  ["NOT_FOUND_ERR", "NotFoundError"],
  ["NOT_SUPPORTED_ERR", "NotSupportedError"],
  ["INUSE_ATTRIBUTE_ERR", "InUseAttributeError"],
  ["INVALID_STATE_ERR", "InvalidStateError"],
  ["SYNTAX_ERR", "SyntaxError"],
  ["INVALID_MODIFICATION_ERR", "InvalidModificationError"],
  ["NAMESPACE_ERR", "NamespaceError"],
  ["INVALID_ACCESS_ERR", "InvalidAccessError"],
  ["VALIDATION_ERR", "ValidationError"],
  ["TYPE_MISMATCH_ERR", "TypeMismatchError"],
  ["SECURITY_ERR", "SecurityError"],
  ["NETWORK_ERR", "NetworkError"],
  ["ABORT_ERR", "AbortError"],
  ["URL_MISMATCH_ERR", "URLMismatchError"],
  ["QUOTA_EXCEEDED_ERR", "QuotaExceededError"],
  ["TIMEOUT_ERR", "TimeoutError"],
  ["INVALID_NODE_TYPE_ERR", "InvalidNodeTypeError"],
  ["DATA_CLONE_ERR", "DataCloneError"],
];
const CODES = { __proto__: null };
// Codes 2, 6, 10 and 16 name errors that are no longer created by name.
for (let i = 0; i < LEGACY.length; i++) {
  if (i !== 1 && i !== 5 && i !== 9 && i !== 15) CODES[LEGACY[i][1]] = i + 1;
}

// Each DOMException's name and message, by instance, as Node keeps them:
// a clone (crates/sandbox-ext/src/structured_clone.rs) is made without
// running the constructor, and is given them afterwards (adopt).
const internals = new p.WeakMap();
function internalsOf(error) {
  const own = p.WeakMapPrototypeGet(internals, error);
  if (own === undefined) throw nodeError(p.TypeError, "ERR_INVALID_THIS", 'Value of "this" must be of DOMException');
  return own;
}

/**
 * A DOMException's data for its clone (`this`: the DOMException): the
 * kind structured_clone.rs knows it by, and what adopt gives the clone.
 */
function cloneDOMException() {
  const { name, message } = internalsOf(this);
  return [protocol.hostObjects.domException, { __proto__: null, name, message, stack: this.stack }];
}

class DOMException extends p.Error {
  constructor(message = "", options = "Error") {
    // The Error itself, made by the captured Error, not by super(): a
    // program can make DOMException's parent anything, and what super()
    // returned would then be given a DOMException's internals and brand
    // (a program's own object would clone as a DOMException).
    const self = p.ReflectConstruct(p.Error, [], new.target);
    const own = { __proto__: null, name: "Error", message: String(message) };
    if (options !== null && typeof options === "object") {
      if ("name" in options) own.name = String(options.name);
      if ("cause" in options) {
        ObjectDefineProperty(self, "cause", { __proto__: null, value: options.cause, writable: true, enumerable: false, configurable: true });
      }
    } else {
      own.name = String(options);
    }
    p.WeakMapPrototypeSet(internals, self, own);
    ops.op_dsh_host_object(self, cloneDOMException);
    return self;
  }
  get name() {
    return internalsOf(this).name;
  }
  get message() {
    return internalsOf(this).message;
  }
  get code() {
    return CODES[internalsOf(this).name] ?? 0;
  }
}
setToStringTag(DOMException);
for (let i = 0; i < LEGACY.length; i++) {
  const constant = { __proto__: null, value: i + 1, enumerable: true };
  ObjectDefineProperty(DOMException, LEGACY[i][0], constant);
  ObjectDefineProperty(DOMException.prototype, LEGACY[i][0], constant);
}

return {
  __proto__: null,
  // The global, and for the sandbox's own APIs (the global can be replaced
  // by a program) the class itself.
  DOMException,
  /** A DOMException, its stack captured without the sandbox's own frame. */
  domException(message, name, caller) {
    const error = new DOMException(message, name);
    p.ErrorCaptureStackTrace(error, caller);
    return error;
  },
  /**
   * Make `error` (an Error with DOMException.prototype, which
   * structured_clone.rs made as V8 rebuilt the clone, running no JS) the
   * DOMException whose data cloneDOMException gave, once the clone is
   * whole. Its stack through the accessor V8 gave it, as Node's clone keeps it.
   */
  adopt(error, data) {
    p.WeakMapPrototypeSet(internals, error, { __proto__: null, name: `${data.name}`, message: `${data.message}` });
    ops.op_dsh_host_object(error, cloneDOMException);
    error.stack = data.stack;
  },
};
