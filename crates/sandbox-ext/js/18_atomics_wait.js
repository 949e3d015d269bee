// Copyright the dsh-code-runtime-v8 authors. MIT license.
// Atomics.waitAsync and Atomics.notify on the run's own waiters, in the
// run's order of events.
//
// V8 times a waiter out from a platform task on the real clock, outside
// the order of timers and replies the run's history keeps
// (17_event_order.js): executed again after its host died, a run could
// see a wait time out at another point than it had, and `notify` wake
// another number of waiters. A run is one agent (it has no workers, and
// no SharedArrayBuffer leaves its isolate), so only the run itself can
// wake its waiters, or their timeouts. So the waiters are kept here: each
// timeout is a timer of the run (04_timers.js `setTimer`, which goes
// through the order of events), and a waiter `notify` wakes is resolved
// from a task of the run (`queueTask`), as V8 resolves it from a task of
// its own. The memory of a waiter is on the heap (its promise and timer),
// under the heap cap.
//
// Each call is first made to V8's own with nothing to wait for (a timeout
// of 0, a count of 0): it checks the arguments and converts the value as
// V8 does, with V8's errors, and says whether the value differs.
//
// Takes: primordials, builtinProxies (wrapCalls), timers (setTimer,
// queueTask). Provides nothing.
"use strict";

((globalThis) => {
  const {
    primordials: p,
    builtinProxies: { wrapCalls },
    timers: { setTimer, queueTask },
  } = globalThis.__dsh;
  const { ReflectApply } = p;
  const Atomics = globalThis.Atomics;

  /**
   * The longest timeout a timer keeps; a wait longer than it outlasts any
   * run (maxWallMs is at most this), so it waits as if without one.
   */
  const LONGEST_TIMER_MS = 2 ** 31 - 1;

  /** Waiting lists by buffer, then by the waited element's byte offset. */
  const lists = new p.WeakMap();

  /**
   * The waiting list of element `index` of `typedArray` (an Int32Array or
   * BigInt64Array V8 has checked), made if `make`.
   */
  function waitingList(typedArray, index, make) {
    const buffer = p.TypedArrayPrototypeGetBuffer(typedArray);
    const size = p.TypedArrayPrototypeGetSymbolToStringTag(typedArray) === "BigInt64Array" ? 8 : 4;
    const at = p.TypedArrayPrototypeGetByteOffset(typedArray) + index * size;
    let byOffset = p.WeakMapPrototypeGet(lists, buffer);
    if (byOffset === undefined) {
      if (!make) return undefined;
      byOffset = new p.Map();
      p.WeakMapPrototypeSet(lists, buffer, byOffset);
    }
    let list = p.MapPrototypeGet(byOffset, at);
    if (list === undefined && make) {
      list = [];
      p.MapPrototypeSet(byOffset, at, list);
    }
    return list;
  }

  // Conversions are the specification's ToNumber (unary plus: a BigInt
  // throws, as there; `Number()` would convert it).

  /**
   * An index argument as a number, converted once: an object's `valueOf`
   * runs here, and V8's call is handed the number (a primitive converts
   * without side effects, so V8 is handed it as it is).
   */
  function indexOnce(index) {
    return index !== null && (typeof index === "object" || typeof index === "function") ? +index : index;
  }

  /** ToIntegerOrInfinity. */
  function integer(value) {
    const n = +value;
    return p.NumberIsNaN(n) ? 0 : p.MathTrunc(n) + 0;
  }

  wrapCalls(Atomics, "waitAsync", (target, receiver, args) => {
    const typedArray = args[0];
    const index = indexOnce(args[1]);
    const checked = ReflectApply(target, receiver, [typedArray, index, args[2], 0]);
    // The timeout, converted as the specification does after the value.
    const q = +args[3];
    const timeout = p.NumberIsNaN(q) ? Infinity : p.MathMax(q, 0);
    if (checked.value === "not-equal" || timeout === 0) return checked;
    const list = waitingList(typedArray, integer(index), true);
    const { promise, resolve } = p.SafePromiseWithResolvers();
    const waiter = { __proto__: null, resolve, timer: undefined };
    p.ArrayPrototypePush(list, waiter);
    if (timeout <= LONGEST_TIMER_MS) {
      waiter.timer = setTimer(() => {
        const at = p.ArrayPrototypeIndexOf(list, waiter);
        if (at === -1) return;
        p.ArrayRemove(list, at, 1);
        resolve("timed-out");
      }, timeout);
    }
    return { async: true, value: promise };
  });

  wrapCalls(Atomics, "notify", (target, receiver, args) => {
    const typedArray = args[0];
    const index = indexOnce(args[1]);
    ReflectApply(target, receiver, [typedArray, index, 0]);
    const count = args[2] === undefined ? Infinity : p.MathMax(integer(args[2]), 0);
    const list = waitingList(typedArray, integer(index), false);
    if (list === undefined || count === 0) return 0;
    const woken = p.ArrayPrototypeSlice(list, 0, count);
    p.ArrayRemove(list, 0, count);
    for (let i = 0; i < woken.length; i++) {
      const waiter = woken[i];
      if (waiter.timer !== undefined) waiter.timer.close();
      queueTask(() => waiter.resolve("ok"));
    }
    return woken.length;
  });
})(globalThis);
