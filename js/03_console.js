// Copyright the dsh-code-runtime-v8 authors. MIT license.
// The program's console: every method renders its arguments the way Node's
// console does (strings raw, everything else through inspect, joined by a
// space, no %-format processing) and appends ONE log entry through the
// output ledger, eagerly, so logs survive any later failure.
"use strict";

((globalThis) => {
  const dsh = globalThis.__dsh;
  const { primordials: p, ops } = dsh;
  const { ObjectCreate, ArrayPrototypeJoin, ArrayPrototypeMap } = p;

  /** Append one entry to the run's logs (the ledger may stop the run). */
  function writeLog(text) {
    if (!ops.op_dsh_log(text)) {
      // Output cap crossed: the run is being terminated; stop here.
      for (;;) {}
    }
  }
  dsh.writeLog = writeLog;

  function render(args) {
    return ArrayPrototypeJoin(
      ArrayPrototypeMap(args, (arg) => (typeof arg === "string" ? arg : dsh.inspect(arg))),
      " ",
    );
  }
  dsh.render = render;

  function makeConsole() {
    const console = ObjectCreate(null);
    const levels = ["log", "info", "warn", "error", "debug"];
    for (let i = 0; i < levels.length; i++) {
      console[levels[i]] = function (...args) {
        writeLog(render(args));
      };
    }
    return console;
  }
  dsh.makeConsole = makeConsole;
})(globalThis);
