// Copyright the dsh-code-runtime-v8 authors. MIT license.
// The `process` a program sees: an empty environment, stdout/stderr whose
// writes become log entries, and exit(). Nothing else of Node's process.
"use strict";

((globalThis) => {
  const dsh = globalThis.__dsh;
  const { primordials: p, ops, writeLog } = dsh;
  const { ObjectCreate, ObjectFreeze, String, NumberIsInteger } = p;

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
    process.exit = function exit(code) {
      const n = code === undefined ? 0 : +code;
      ops.op_dsh_exit(NumberIsInteger(n) ? n : 1);
      // The op has asked for termination; nothing after exit() may run.
      for (;;) {}
    };
    return ObjectFreeze(process);
  }

  globalThis.__dsh.makeProcess = makeProcess;
})(globalThis);
