// Copyright the dsh-code-runtime-v8 authors. MIT license.
// Timers (setTimeout, setInterval and their clears) and performance.now.
// A timer keeps the run alive until it fires or is cleared, as in Node.
"use strict";

((globalThis) => {
  const dsh = globalThis.__dsh;
  const { primordials: p, ops } = dsh;
  const core = globalThis.Deno.core;
  const { ReflectApply } = p;

  // A throw inside a timer callback fails the run (CONTRACT section 8).
  function guarded(callback, args) {
    return () => {
      try {
        ReflectApply(callback, undefined, args);
      } catch (error) {
        dsh.reportFailure(error);
      }
    };
  }

  const timers = new p.Map();
  let nextTimerId = 1;
  function schedule(callback, delay, args, repeat) {
    if (typeof callback !== "function") {
      throw new p.TypeError('The "callback" argument must be of type function');
    }
    const id = nextTimerId++;
    const ms = +delay;
    const timer = core.createTimer(guarded(callback, args), ms >= 1 ? ms : 1, undefined, repeat, true, false);
    if (!repeat) {
      // One-shot timers forget themselves when they fire.
      const fire = timer._onTimeout;
      timer._onTimeout = () => {
        p.MapPrototypeDelete(timers, id);
        fire();
      };
    }
    p.MapPrototypeSet(timers, id, timer);
    return id;
  }
  function clear(id) {
    const timer = p.MapPrototypeGet(timers, id);
    if (timer === undefined) return;
    p.MapPrototypeDelete(timers, id);
    core.cancelTimer(timer);
  }
  function queueTask(callback) {
    core.createTimer(guarded(callback, []), 1, undefined, false, true, true);
  }
  dsh.queueTask = queueTask;

  const globals = dsh.webGlobals;
  const define = (name, value) => p.ArrayPrototypePush(globals, [name, value]);
  {
    define("setTimeout", function setTimeout(callback, delay, ...args) {
      return schedule(callback, delay, args, false);
    });
    define("setInterval", function setInterval(callback, delay, ...args) {
      return schedule(callback, delay, args, true);
    });
    define("clearTimeout", function clearTimeout(id) {
      clear(id);
    });
    define("clearInterval", function clearInterval(id) {
      clear(id);
    });
    const performance = p.ObjectCreate(null);
    performance.now = function now() {
      return ops.op_dsh_now();
    };
    define("performance", performance);
  }
})(globalThis);
