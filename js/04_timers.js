// Copyright the dsh-code-runtime-v8 authors. MIT license.
// Timers (setTimeout, setInterval and their clears) and performance.now.
// A timer keeps the run alive until it fires or is cleared, as in Node, and
// is handed out as Node's Timeout shape, so Node-style code runs.
"use strict";

((globalThis) => {
  const dsh = globalThis.__dsh;
  const { primordials: p, ops } = dsh;
  const core = globalThis.Deno.core;
  const { ReflectApply } = p;

  // Timer callbacks held back until the rejections that the program's
  // synchronous part left unhandled have been reported, or null. As in Node,
  // those fail the run before any timer callback runs; the event loop's
  // first turn, which reports them, could otherwise come after a short timer
  // is due (its thread descheduled for a few ms) and run it first. The run
  // turns the loop once with callbacks held, then releases them in order.
  let held = null;
  dsh.holdTimerCallbacks = () => {
    held = [];
  };
  dsh.releaseTimerCallbacks = () => {
    const callbacks = held;
    held = null;
    for (let i = 0; i < callbacks.length; i++) callbacks[i]();
  };

  // A throw inside a timer callback fails the run (CONTRACT section 8).
  function guarded(callback, args) {
    const run = () => {
      try {
        ReflectApply(callback, undefined, args);
      } catch (error) {
        dsh.reportFailure(error);
      }
    };
    return () => {
      if (held !== null) p.ArrayPrototypePush(held, run);
      else run();
    };
  }

  const timers = new p.Map();
  let nextTimerId = 1;

  /**
   * What setTimeout and setInterval return, as in Node: `ref`, `unref`,
   * `hasRef`, `refresh`, `close`, and the timer's numeric id as its
   * primitive (clearTimeout takes either). An unref'd timer does not keep
   * the run alive, like an unref'd timer in Node does not keep the process.
   */
  class Timeout {
    #id;
    #refed = true;
    constructor(id) {
      this.#id = id;
    }
    static idOf(handle) {
      return #id in handle ? handle.#id : undefined;
    }
    /** Apply `action` to the core timer while it is pending; `this`. */
    #pending(action) {
      const timer = p.MapPrototypeGet(timers, this.#id);
      if (timer !== undefined) action(timer);
      return this;
    }
    ref() {
      this.#refed = true;
      return this.#pending(core.refTimer);
    }
    unref() {
      this.#refed = false;
      return this.#pending(core.unrefTimer);
    }
    hasRef() {
      return this.#refed;
    }
    /** Restart a pending timer's delay from now (a fired or cleared one stays so). */
    refresh() {
      return this.#pending(core.refreshTimer);
    }
    close() {
      clear(this.#id);
      return this;
    }
    [p.SymbolToPrimitive]() {
      return this.#id;
    }
  }

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
    return new Timeout(id);
  }
  /** Clear by Timeout or by its id (a number, or its string), as Node does. */
  function clear(handle) {
    let id;
    if (typeof handle === "number") id = handle;
    else if (typeof handle === "string") id = +handle;
    else if (handle !== null && typeof handle === "object") id = Timeout.idOf(handle);
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
