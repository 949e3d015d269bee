// Copyright the dsh-code-runtime-v8 authors. MIT license.
// Node's argument errors (lib/internal/errors.js, MIT license, Copyright
// Node.js contributors), for the Node APIs the sandbox provides (Buffer,
// events, timers, process): the same class, `code` and message as Node's,
// and the stack headed `RangeError [ERR_OUT_OF_RANGE]: ...` as Node prints
// it, so a program that inspects, compares or logs them sees what it would
// in Node. The one place these errors are made: files that load before
// this one (04_timers.js) read it when they throw.
//
// Takes: primordials, inspect, api (internalKey). Provides nodeErrors:
// { nodeError, nodeCppError, missingArgs, invalidThis, invalidArgType, outOfRange, validateNumber, bounds,
// unknownEncoding, illegalConstructor, checkConstructorKey }.
"use strict";

((globalThis) => {
  const {
    primordials: p,
    inspect: { inspect },
    api: { internalKey },
    provide,
  } = globalThis.__dsh;
  const { ObjectDefineProperty, StringPrototypeSlice, StringPrototypeIndexOf, NumberIsInteger, MathAbs, MathFloor, String } = p;

  /**
   * An instance of `Base` shaped as Node's errors with `code`: the code in
   * the stack's header and in String(error), though not in `name`. With
   * `caller`, its stack starts at `caller`'s caller.
   */
  function nodeError(Base, code, message, caller) {
    const error = new Base(message);
    ObjectDefineProperty(error, "toString", {
      __proto__: null,
      value() {
        return `${this.name} [${code}]: ${this.message}`;
      },
      enumerable: false,
      writable: true,
      configurable: true,
    });
    // V8 formats the stack on its first read, with the name at that time.
    ObjectDefineProperty(error, "name", { __proto__: null, value: `${error.name} [${code}]`, enumerable: false, writable: true, configurable: true });
    if (caller !== undefined) p.ErrorCaptureStackTrace(error, caller);
    void error.stack;
    delete error.name;
    // Defined, not assigned: a setter a program put on Object.prototype
    // must not see it.
    ObjectDefineProperty(error, "code", { __proto__: null, value: code, enumerable: true, writable: true, configurable: true });
    return error;
  }

  /**
   * An instance of `Base` shaped as the errors Node's C++ throws
   * (node_errors.h's THROW_ERR_*): `code` an enumerable property, and
   * neither the stack's header nor String(error) naming it.
   */
  function nodeCppError(Base, code, message) {
    const error = new Base(message);
    ObjectDefineProperty(error, "code", { __proto__: null, value: code, enumerable: true, writable: true, configurable: true });
    return error;
  }

  /**
   * Node's ERR_MISSING_ARGS for the arguments `names` (its words for one,
   * two or more); with `caller`, its stack starts at `caller`'s caller.
   */
  function missingArgs(names, caller) {
    const quoted = p.ArrayPrototypeMap(names, (name) => `"${name}"`);
    const last = quoted.length - 1;
    const listed =
      last === 0 ? `${quoted[0]} argument` : last === 1 ? `${quoted[0]} and ${quoted[1]} arguments` : `${p.ArrayPrototypeJoin(p.ArrayPrototypeSlice(quoted, 0, last), ", ")}, and ${quoted[last]} arguments`;
    return nodeError(p.TypeError, "ERR_MISSING_ARGS", `The ${listed} must be specified`, caller);
  }

  /** Node's ERR_INVALID_THIS for a method called on what is not a `type`. */
  function invalidThis(type) {
    return nodeError(p.TypeError, "ERR_INVALID_THIS", `Value of "this" must be of type ${type}`);
  }

  function addNumericalSeparator(value) {
    let result = "";
    let i = value.length;
    const start = value[0] === "-" ? 1 : 0;
    for (; i >= start + 4; i -= 3) result = `_${StringPrototypeSlice(value, i - 3, i)}${result}`;
    return `${StringPrototypeSlice(value, 0, i)}${result}`;
  }

  /** How Node's messages describe a value they received. */
  function determineSpecificType(value) {
    if (value === null) return "null";
    if (value === undefined) return "undefined";
    const type = typeof value;
    switch (type) {
      case "bigint":
        return `type bigint (${value}n)`;
      case "number":
        if (value === 0) return 1 / value === -Infinity ? "type number (-0)" : "type number (0)";
        return `type number (${value})`;
      case "boolean":
        return `type boolean (${value})`;
      case "symbol":
        return `type symbol (${p.SymbolPrototypeToString(value)})`;
      case "function":
        return `function ${value.name}`;
      case "object":
        if (value.constructor && "name" in value.constructor) return `an instance of ${value.constructor.name}`;
        return inspect(value, { __proto__: null, depth: -1 });
      case "string": {
        let shown = value;
        if (shown.length > 28) shown = `${StringPrototypeSlice(shown, 0, 25)}...`;
        if (StringPrototypeIndexOf(shown, "'") === -1) return `type string ('${shown}')`;
        return `type string (${p.JSONStringify(shown)})`;
      }
      default:
        return `type ${type} (${inspect(value)})`;
    }
  }

  const TYPES = ["string", "function", "number", "object", "Function", "Object", "boolean", "bigint", "symbol"];

  function formatList(list, word) {
    if (list.length <= 2) return p.ArrayPrototypeJoin(list, ` ${word} `);
    return `${p.ArrayPrototypeJoin(p.ArrayPrototypeSlice(list, 0, -1), ", ")}, ${word} ${list[list.length - 1]}`;
  }

  /**
   * ERR_INVALID_ARG_TYPE: `name` must be one of `expected` (types, classes
   * or other). `caller` as for nodeError.
   */
  function invalidArgType(name, expected, actual, caller) {
    if (!p.ArrayIsArray(expected)) expected = [expected];
    let message = "The ";
    if (p.StringPrototypeEndsWith(name, " argument")) message += `${name} `;
    else message += `"${name}" ${p.StringPrototypeIncludes(name, ".") ? "property" : "argument"} `;
    message += "must be ";
    const types = [];
    const instances = [];
    const other = [];
    for (let i = 0; i < expected.length; i++) {
      const value = expected[i];
      if (p.ArrayPrototypeIncludes(TYPES, value)) p.ArrayPrototypePush(types, p.StringPrototypeToLowerCase(value));
      else if (p.RegExpPrototypeExec(/^([A-Z][a-z0-9]*)+$/, value) !== null) p.ArrayPrototypePush(instances, value);
      else p.ArrayPrototypePush(other, value);
    }
    if (instances.length > 0) {
      const at = p.ArrayPrototypeIndexOf(types, "object");
      if (at !== -1) {
        p.ArrayRemove(types, at, 1);
        p.ArrayPrototypePush(instances, "Object");
      }
    }
    if (types.length > 0) {
      message += `${types.length > 1 ? "one of type" : "of type"} ${formatList(types, "or")}`;
      if (instances.length > 0 || other.length > 0) message += " or ";
    }
    if (instances.length > 0) {
      message += `an instance of ${formatList(instances, "or")}`;
      if (other.length > 0) message += " or ";
    }
    if (other.length > 0) {
      if (other.length > 1) message += `one of ${formatList(other, "or")}`;
      else {
        if (p.StringPrototypeToLowerCase(other[0]) !== other[0]) message += "an ";
        message += other[0];
      }
    }
    return nodeError(p.TypeError, "ERR_INVALID_ARG_TYPE", `${message}. Received ${determineSpecificType(actual)}`, caller);
  }

  /** ERR_OUT_OF_RANGE: the value of `name` must be `range`. `caller` as for nodeError. */
  function outOfRange(name, range, input, caller) {
    let received;
    if (NumberIsInteger(input) && MathAbs(input) > 2 ** 32) {
      received = addNumericalSeparator(String(input));
    } else if (typeof input === "bigint") {
      received = String(input);
      if (input > 2n ** 32n || input < -(2n ** 32n)) received = addNumericalSeparator(received);
      received += "n";
    } else {
      received = inspect(input);
    }
    return nodeError(p.RangeError, "ERR_OUT_OF_RANGE", `The value of "${name}" is out of range. It must be ${range}. Received ${received}`, caller);
  }

  function validateNumber(value, name) {
    if (typeof value !== "number") throw invalidArgType(name, "number", value);
  }

  /** Node's boundsError: an offset (or `type`) outside [0 or 1, length]. */
  function bounds(value, length, type) {
    if (MathFloor(value) !== value) {
      validateNumber(value, type || "offset");
      return outOfRange(type || "offset", "an integer", value);
    }
    if (length < 0) return nodeError(p.RangeError, "ERR_BUFFER_OUT_OF_BOUNDS", "Attempt to access memory outside buffer bounds");
    return outOfRange(type || "offset", `>= ${type ? 1 : 0} and <= ${length}`, value);
  }

  const illegalConstructor = () => nodeError(p.TypeError, "ERR_ILLEGAL_CONSTRUCTOR", "Illegal constructor");

  provide("nodeErrors", {
    __proto__: null,
    illegalConstructor,
    /** The sandbox's API classes take api.internalKey; a program's `new` throws as Node's. */
    checkConstructorKey(key) {
      if (key !== internalKey) throw illegalConstructor();
    },
    nodeError,
    nodeCppError,
    missingArgs,
    invalidThis,
    invalidArgType,
    outOfRange,
    validateNumber,
    bounds,
    unknownEncoding: (encoding) => nodeError(p.TypeError, "ERR_UNKNOWN_ENCODING", `Unknown encoding: ${encoding}`),
  });
})(globalThis);
