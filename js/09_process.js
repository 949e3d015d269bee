// Copyright the dsh-code-runtime-v8 authors. MIT license.
// The `process` a program sees: an empty environment, stdout/stderr whose
// writes become log entries, exit() and exitCode. Nothing else of Node's
// process. An ordinary object, as Node's is: a program may add to it.
"use strict";

((globalThis) => {
  const dsh = globalThis.__dsh;
  const { primordials: p, ops, writeLog } = dsh;
  const { ObjectCreate, ObjectDefineProperty, String, NumberIsInteger } = p;

  /**
   * An error as Node's internal ones are: `code` set, and the code in the
   * stack's header and in String(error) ("RangeError [ERR_OUT_OF_RANGE]:
   * ...") though not in `name`.
   */
  function nodeError(Ctor, code, message, caller) {
    const error = new Ctor(message);
    const name = error.name;
    ObjectDefineProperty(error, "name", { __proto__: null, value: `${name} [${code}]`, writable: true, configurable: true });
    p.ErrorCaptureStackTrace(error, caller);
    void error.stack; // format it now, with the code in the header
    delete error.name;
    ObjectDefineProperty(error, "code", { __proto__: null, value: code, writable: true, configurable: true, enumerable: true });
    ObjectDefineProperty(error, "toString", {
      __proto__: null,
      value: function toString() {
        return `${name} [${code}]: ${message}`;
      },
      writable: true,
      configurable: true,
    });
    return error;
  }

  /** How Node names a wrong argument's type in ERR_INVALID_ARG_TYPE. */
  function receivedType(value) {
    if (typeof value === "function") return `Received function ${value.name}`;
    if (typeof value === "object") {
      const constructor = p.ReflectGetPrototypeOf(value)?.constructor;
      return typeof constructor === "function" && constructor.name
        ? `Received an instance of ${constructor.name}`
        : `Received ${dsh.inspect(value, { depth: -1 })}`;
    }
    const shown = typeof value === "string" ? `'${value}'` : typeof value === "bigint" ? `${value}n` : String(value);
    return `Received type ${typeof value} (${shown})`;
  }

  /** Node's check of an exit code: an integer, or a string of one. */
  function exitCodeOf(code, caller) {
    if (code === undefined || code === null) return 0;
    if (typeof code === "number" || (typeof code === "string" && code !== "" && +code === +code)) {
      const n = +code;
      if (NumberIsInteger(n)) return n;
      throw nodeError(p.RangeError, "ERR_OUT_OF_RANGE", `The value of "code" is out of range. It must be an integer. Received ${n}`, caller);
    }
    throw nodeError(p.TypeError, "ERR_INVALID_ARG_TYPE", `The "code" argument must be of type number. ${receivedType(code)}`, caller);
  }

  function makeStream(fd) {
    const stream = ObjectCreate(null);
    stream.fd = fd;
    stream.isTTY = false;
    stream.write = function write(chunk, encoding, callback) {
      writeLog(typeof chunk === "string" ? chunk : String(chunk));
      const done = typeof encoding === "function" ? encoding : callback;
      if (typeof done === "function") dsh.queueTask(() => done(null));
      return true;
    };
    return stream;
  }

  function makeProcess() {
    const process = ObjectCreate(null);
    process.env = {};
    process.argv = [];
    process.platform = "sandbox";
    process.stdout = makeStream(1);
    process.stderr = makeStream(2);
    process.exitCode = undefined;
    process.exit = function exit(code) {
      ops.op_dsh_exit(exitCodeOf(code === undefined || code === null ? process.exitCode : code, exit));
      // The op has asked for termination; nothing after exit() may run.
      for (;;) {}
    };
    return process;
  }

  globalThis.__dsh.makeProcess = makeProcess;
})(globalThis);
