// Copyright the dsh-code-runtime-v8 authors. MIT license.
// Timers: setTimeout, setInterval, setImmediate and their clears.
// A timer keeps the run alive until it fires or is cleared, as in Node, and
// is handed out as Node's Timeout shape, so Node-style code runs.
//
// Takes: primordials, native (core); when called, nodeErrors
// (13_node_errors.js), lazyGlobals (14_lazy_globals.js: the process, to
// warn of a delay Node corrects), eventOrder (17_event_order.js) and run
// (99_bootstrap.js), which load later.
// Provides timers: { holdCallbacks, releaseCallbacks, queueTask, setTimer,
// followNodeLine(host), globals }.
"use strict";

((globalThis) => {
  const registry = globalThis.__dsh;
  const {
    primordials: p,
    native: { core },
    provide,
  } = registry;
  const { ReflectApply } = p;
  // deno_core's, as 01_core.js left it on the global before any file of ours.
  const coreQueueMicrotask = globalThis.queueMicrotask;

  // Timer and immediate firings held back until the rejections that the
  // program's synchronous part left unhandled have been reported, or null.
  // As in Node, those fail the run before any timer callback runs; the
  // event loop's first turn, which reports them, could otherwise come after
  // a short timer is due (its thread descheduled for a few ms) and run it
  // first. The run turns the loop once with firings held, then releases
  // them: the immediates' first, as in the reference, which runs the
  // synchronous part in an I/O callback, after which Node's loop runs the
  // immediates (its check phase) before any timer, however long that part
  // took (here the first turn reaches its timers first).
  //
  // A firing is held before it is ordered (17_event_order.js), so the
  // order the run's history records is the order they run in: held after,
  // they were recorded as the loop fired them and run as released, and a
  // run executed again from its history diverged.
  //
  // Each held firing is [fire, current, immediate]: it fires only if
  // current() still says so when released, since an earlier one may have
  // cleared or refreshed its timer (in Node, which runs them one by one, it
  // then never runs).
  let held = null;
  const holdCallbacks = () => {
    held = [];
  };
  const releaseCallbacks = () => {
    const firings = held;
    held = null;
    release(firings, true);
    release(firings, false);
  };
  /** The held firings that are immediates' (or not), in the order they came. */
  function release(firings, immediates) {
    for (let i = 0; i < firings.length; i++) {
      const entry = firings[i];
      if (entry[2] !== immediates || !entry[1]()) continue;
      entry[0]();
      // As Node between timer callbacks: the ticks they queued, then
      // promise jobs.
      core.runNextTicks();
    }
  }
  const always = () => true;
  /**
   * A timer's callback, run in the order the run's history holds when the
   * run is executed again (17_event_order.js, which loads later).
   */
  const ordered = (fire, live) => registry.eventOrder.ordered(fire, live);
  /**
   * Fire `fire` (an ordered firing) now, or when held firings are released
   * if `current()` then (an immediate's, `immediate`, before the others).
   */
  function deliver(fire, current, immediate = false) {
    if (held !== null) p.ArrayPrototypePush(held, [fire, current, immediate]);
    else fire();
  }

  // A throw inside a timer callback fails the run (docs/CONTRACT.md §8).
  // The callback's `this` is the caller's `self`: as in Node, its Timeout
  // or Immediate.
  function guarded(callback, args) {
    return (self) => {
      try {
        ReflectApply(callback, self, args);
      } catch (error) {
        registry.run.reportFailure(error);
      }
    };
  }

  // The pending timers by id, for clearTimeout(number) and its string.
  const timers = new p.Map();
  let nextTimerId = 1;

  /**
   * What setTimeout and setInterval return, as in Node: `ref`, `unref`,
   * `hasRef`, `refresh`, `close`, and the timer's numeric id as its
   * primitive (clearTimeout takes either). `unref` changes what `hasRef`
   * says, and nothing else: as in the reference, whose worker keeps its
   * event loop alive while the program runs, an unref'd timer still fires
   * for a program that awaits it (the run ends when the program settles,
   * whatever timers are left).
   */
  class Timeout {
    #id;
    #refed = true;
    #run;
    #delay;
    #repeat;
    // deno_core's timer while armed (it marks a fired one-shot _destroyed).
    #timer = undefined;
    // Its firing, numbered once (17_event_order.js): a one-shot armed again
    // by refresh fires under the same number, so whether it had fired when
    // it was refreshed (which depends on how soon the loop got to it)
    // numbers no timer made after it otherwise.
    #firing;
    #cleared = false;
    // Bumped by refresh and clear: a callback that fell due before either,
    // but was held (see `held`), no longer runs.
    #changes = 0;
    constructor(run, delay, repeat) {
      this.#id = nextTimerId++;
      this.#run = run;
      this.#delay = delay;
      this.#repeat = repeat;
      this.#firing = ordered(() => this.#fire(), () => !this.#cleared);
      this.#arm();
    }
    #arm() {
      const due = () => {
        const changes = this.#changes;
        deliver(this.#firing, () => this.#changes === changes);
      };
      this.#timer = core.createTimer(due, this.#delay, undefined, this.#repeat, true, false);
      p.MapPrototypeSet(timers, this.#id, this);
    }
    #fire() {
      // A one-shot leaves the pending ones when it runs.
      if (!this.#repeat) p.MapPrototypeDelete(timers, this.#id);
      this.#run(this);
    }
    #armed() {
      return this.#timer !== undefined && !this.#timer._destroyed;
    }
    // Taken off the class below: Node's Timeout has no static members.
    static clear(handle) {
      if (!(#id in handle) || handle.#cleared) return;
      handle.#cleared = true;
      handle.#changes++;
      p.MapPrototypeDelete(timers, handle.#id);
      if (handle.#armed()) core.cancelTimer(handle.#timer);
    }
    ref() {
      this.#refed = true;
      return this;
    }
    unref() {
      this.#refed = false;
      return this;
    }
    hasRef() {
      return this.#refed;
    }
    /**
     * Restart the delay from now. As in Node, a one-shot that already fired
     * is armed again; a cleared timer stays cleared.
     */
    refresh() {
      if (this.#cleared) return this;
      this.#changes++;
      if (this.#armed()) {
        core.refreshTimer(this.#timer);
        // Pending again, so clearTimeout finds it by id: a one-shot's own
        // callback, which may be the caller, runs after it left the
        // pending ones.
        p.MapPrototypeSet(timers, this.#id, this);
      } else {
        this.#arm();
      }
      return this;
    }
    close() {
      clearTimer(this);
      return this;
    }
    [p.SymbolToPrimitive]() {
      return this.#id;
    }
  }

  const clearTimer = Timeout.clear;
  delete Timeout.clear;

  function schedule(callback, delay, args, repeat) {
    if (typeof callback !== "function") throw registry.nodeErrors.invalidArgType("callback", "Function", callback);
    // As Node coerces it (a BigInt throws as there).
    const ms = delay * 1;
    const kept = ms >= 1 && ms <= TIMEOUT_MAX;
    if (!kept) warnOfDelay(ms, delay);
    return new Timeout(guarded(callback, args), kept ? ms : 1, repeat);
  }

  // A delay Node sets to 1 ms, it warns of (lib/internal/timers.js): one
  // past a 32-bit signed integer each time; from Node 24, a negative one
  // and one that is not a number (given, not left out), the first time of
  // each. The warning is the program's process's (process.emitWarning, as
  // Node calls it), whose line lands in the logs as the reference's
  // worker writes it to its stderr.
  const TIMEOUT_MAX = 2 ** 31 - 1;
  let warnsOfNegativeAndNaN = false;
  let warnedOfNegative = false;
  let warnedOfNaN = false;
  function warnOfDelay(ms, given) {
    let warning;
    if (ms > TIMEOUT_MAX) {
      warning = ["does not fit into a 32-bit signed integer.", "TimeoutOverflowWarning"];
    } else if (warnsOfNegativeAndNaN && ms < 0 && !warnedOfNegative) {
      warnedOfNegative = true;
      warning = ["is a negative number.", "TimeoutNegativeWarning"];
    } else if (warnsOfNegativeAndNaN && ms !== ms && given !== undefined && !warnedOfNaN) {
      warnedOfNaN = true;
      warning = ["is not a number.", "TimeoutNaNWarning"];
    } else {
      return;
    }
    const { process } = registry.lazyGlobals.load("process");
    process.emitWarning(`${ms} ${warning[0]}\nTimeout duration was set to 1.`, warning[1]);
  }
  /** Clear by Timeout or by its id (a number, or its string), as Node does. */
  function clear(handle) {
    if (typeof handle === "number" || typeof handle === "string") handle = p.MapPrototypeGet(timers, +handle);
    if (handle !== null && typeof handle === "object") clearTimer(handle);
  }
  function queueTask(callback) {
    const firing = ordered(guarded(callback, []), always);
    core.createTimer(() => deliver(firing, always), 1, undefined, false, true, true);
  }


  // Node's Immediate: its own properties are what Node's has (console shows
  // them), pending ones linked in order through _idleNext / _idlePrev as in
  // Node's queue, with the async ids counted from this run's start.
  //
  // They run in deno_core's check phase, after the phase that took the
  // tools' replies, as Node runs them after I/O: an immediate set in an
  // event runs before a timer set beside it, whatever the timer's delay
  // (as in the reference, whose programs run in I/O callbacks). The
  // program's own queue runs from one internal entry of deno_core's queue
  // per phase (`checkPhase`), so that deno_core never touches the program's
  // objects; keeping the loop alive is counted per pending immediate,
  // refed or not (`core.immediateRefCount`; see Timeout's unref).
  const kRefed = p.Symbol("refed");
  const kAsyncId = p.Symbol("asyncId");
  const kTriggerId = p.Symbol("triggerId");
  const kAsyncContextFrame = p.Symbol("kAsyncContextFrame");
  /** Each pending immediate's firing (made when it is set: 17_event_order.js numbers it then). */
  const immediateFirings = new p.WeakMap();
  let nextAsyncId = 2;
  // The queue of immediates not yet run; the ones that run together leave
  // it together (Node detaches the whole queue when it starts running it).
  let head = null;
  let tail = null;
  /** deno_core's check phase will run the queue: an entry is in its queue. */
  let checkPhaseQueued = false;
  // Node 22 leaves a spent immediate's _argv and sets _onImmediate to null;
  // 24 and later set both to undefined.
  let spentIsUndefined = false;

  /** An immediate runs or is cleared: once, as it leaves the pending ones. */
  function spend(immediate) {
    core.immediateRefCount(false);
    immediate._destroyed = true;
    immediate[kRefed] = null;
    if (spentIsUndefined) {
      immediate._onImmediate = undefined;
      immediate._argv = undefined;
    } else {
      immediate._onImmediate = null;
    }
  }

  function unlink(immediate) {
    if (immediate._idleNext !== null) immediate._idleNext._idlePrev = immediate._idlePrev;
    if (immediate._idlePrev !== null) immediate._idlePrev._idleNext = immediate._idleNext;
    if (immediate === head) head = immediate._idleNext;
    if (immediate === tail) tail = immediate._idlePrev;
    immediate._idleNext = null;
    immediate._idlePrev = null;
  }

  /**
   * deno_core's check phase: run (in the first turn, hold: `deliver`) the
   * queue as it stands (immediates set
   * meanwhile wait for the next phase, as in Node), skipping those cleared
   * on the way, with the ticks and promise jobs of each run before the next.
   */
  function checkPhase() {
    checkPhaseQueued = false;
    const queue = [];
    for (let immediate = head; immediate !== null; immediate = immediate._idleNext) p.ArrayPrototypePush(queue, immediate);
    head = tail = null;
    for (let i = 0; i < queue.length; i++) {
      const immediate = queue[i];
      if (immediate._destroyed) continue;
      if (i > 0) core.runNextTicks();
      deliver(p.WeakMapPrototypeGet(immediateFirings, immediate), always, true);
    }
  }

  /** Have deno_core's next check phase run the queue. */
  function queueCheckPhase() {
    if (checkPhaseQueued) return;
    checkPhaseQueued = true;
    // A fresh entry each time: deno_core spends the one it runs.
    core.queueImmediate({
      _idleNext: null,
      _idlePrev: null,
      _onImmediate: checkPhase,
      _argv: undefined,
      _destroyed: false,
      [core.kRefed]: false,
    });
  }

  class Immediate {
    constructor(callback, args) {
      this._idleNext = null;
      this._idlePrev = null;
      this._onImmediate = callback;
      this._argv = args.length === 0 ? undefined : args;
      this._destroyed = false;
      this[kRefed] = true;
      this[kAsyncId] = nextAsyncId++;
      this[kTriggerId] = 1;
      this[kAsyncContextFrame] = undefined;
    }
    // As a Timeout's: what hasRef says, and nothing else.
    ref() {
      if (!this._destroyed) this[kRefed] = true;
      return this;
    }
    unref() {
      if (!this._destroyed) this[kRefed] = false;
      return this;
    }
    hasRef() {
      return !!this[kRefed];
    }
    [p.SymbolDispose]() {
      clearImmediate(this);
    }
  }

  function setImmediate(callback, ...args) {
    if (typeof callback !== "function") throw registry.nodeErrors.invalidArgType("callback", "Function", callback);
    const immediate = new Immediate(callback, args);
    core.immediateRefCount(true);
    if (tail !== null) {
      tail._idleNext = immediate;
      immediate._idlePrev = tail;
    } else {
      head = immediate;
    }
    tail = immediate;
    const run = guarded(callback, args);
    const firing = ordered(() => {
      spend(immediate);
      run(immediate);
    }, () => !immediate._destroyed);
    p.WeakMapPrototypeSet(immediateFirings, immediate, firing);
    queueCheckPhase();
    return immediate;
  }

  function clearImmediate(immediate) {
    if (immediate === null || typeof immediate !== "object" || immediate._destroyed) return;
    if (p.WeakMapPrototypeGet(immediateFirings, immediate) === undefined) return;
    spend(immediate);
    unlink(immediate);
  }

  // [name, value, enumerable]: the globals 99_bootstrap.js defines.
  // Enumerable, as Node's timer globals are.
  const globals = [
    ["setImmediate", setImmediate, true],
    // deno_core's queue (which reports a throw as the program's), after
    // Node's check of its callback. Defined again where deno_core put it:
    // its place among the globals stays.
    [
      "queueMicrotask",
      function queueMicrotask(callback) {
        if (typeof callback !== "function") throw registry.nodeErrors.invalidArgType("callback", "Function", callback);
        return ReflectApply(coreQueueMicrotask, undefined, [callback]);
      },
      true,
    ],
    ["clearImmediate", clearImmediate, true],
    [
      "setTimeout",
      function setTimeout(callback, delay, ...args) {
        return schedule(callback, delay, args, false);
      },
      true,
    ],
    [
      "setInterval",
      function setInterval(callback, delay, ...args) {
        return schedule(callback, delay, args, true);
      },
      true,
    ],
    [
      "clearTimeout",
      function clearTimeout(id) {
        clear(id);
      },
      true,
    ],
    [
      "clearInterval",
      function clearInterval(id) {
        clear(id);
      },
      true,
    ],
  ];

  provide("timers", {
    __proto__: null,
    holdCallbacks,
    releaseCallbacks,
    queueTask,
    /**
     * A timer for the sandbox's own APIs (AbortSignal.timeout,
     * Atomics.waitAsync's timeouts).
     */
    setTimer: (callback, delay) => schedule(callback, delay, [], false),
    followNodeLine(host) {
      spentIsUndefined = host.nodeMajor >= 24;
      warnsOfNegativeAndNaN = host.nodeMajor >= 24;
    },
    globals: p.ObjectFreeze(globals),
  });
})(globalThis);
