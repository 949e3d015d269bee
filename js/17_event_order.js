// Copyright the dsh-code-runtime-v8 authors. MIT license.
// The order in which the run's events reach its program: each timer that
// fires (setTimeout, setInterval, setImmediate and the sandbox's own tasks,
// all made by 04_timers.js) and each batch of its tools' replies taken
// together (99_bootstrap.js). Which of them comes first depends on real
// time (a timer falls due while a tool thinks), so it is part of what the
// run read of the world outside it, and its history keeps it
// (crates/protocol/src/readings.rs, `order`): a run executed again on
// another host after its host died sees its events in the recorded order,
// and its calls and logs that depend on it are the recorded ones.
//
// First execution (nothing recorded): each event runs as it comes, and is
// reported (op_dsh_events) before it runs, so the report reaches the
// journal before any log entry or call it leads to.
//
// Re-execution: each event is held until the recorded events before it have
// run, then runs in its recorded place, one per turn of the event loop
// (op_dsh_next_turn resolves in the next turn), so that what the one before
// it queued (ticks, promise jobs) has run first, as it had. A timer that fired and a reply that came
// wait here: their timer may fire later, their reply come sooner, than they
// did. Once the record is exhausted, what is still held runs in the order
// it came, reported as the run's live events from then on.
//
// Timers are numbered in the order the run made them, from 1, which is the
// same in every execution up to the record's end.
//
// Takes: primordials, native (ops, protocol). Provides eventOrder:
// { ordered, replies }.
"use strict";

((globalThis) => {
  const {
    primordials: p,
    native: { ops, protocol },
    provide,
  } = globalThis.__dsh;
  const { timerFired: TIMER_FIRED } = protocol.eventOrder;

  /** The recorded order (an array of words), read at the run's first event. */
  let recorded;
  /** The next word of `recorded` to replay. */
  let at = 0;
  /** Events that came while replaying, in the order they came, from `heldAt` on. */
  let held = [];
  let heldAt = 0;
  /**
   * Of those, the fired timers' by number, each `{ events, next }`: an
   * interval fires again, and its firings run in turn from `next` on.
   */
  const heldTimers = new p.Map();
  /** Of those, the replies' by call id. */
  const heldReplies = new p.Map();
  /** A turn of the event loop is asked for to run the next held event. */
  let turnAsked = false;
  let timers = 0;

  const words = new p.Uint32Array(2);

  /** Whether events are held now (the record is not exhausted, or events it did not hold wait). */
  function holding() {
    if (recorded === undefined) recorded = ops.op_dsh_recorded_order();
    return at < recorded.length || heldAt < held.length;
  }

  /**
   * A timer's callback, numbered now (when the timer is made): what the
   * runtime's timer calls when it fires.
   */
  function ordered(fire) {
    const number = ++timers;
    return () => {
      if (!holding()) {
        words[0] = TIMER_FIRED;
        words[1] = number;
        ops.op_dsh_events(words);
        fire();
        return;
      }
      const event = { __proto__: null, timer: number, fire, done: false };
      p.ArrayPrototypePush(held, event);
      const list = p.MapPrototypeGet(heldTimers, number);
      if (list === undefined) p.MapPrototypeSet(heldTimers, number, { __proto__: null, events: [event], next: 0 });
      else p.ArrayPrototypePush(list.events, event);
      advance();
    };
  }

  /**
   * Replies taken together: `ids` their call ids, `answer(k)` gives the
   * k-th its answer.
   */
  function replies(ids, answer) {
    if (!holding()) {
      report(ids);
      for (let k = 0; k < ids.length; k++) answer(k);
      return;
    }
    for (let k = 0; k < ids.length; k++) {
      const event = { __proto__: null, timer: 0, id: ids[k], fire: () => answer(k), done: false };
      p.ArrayPrototypePush(held, event);
      p.MapPrototypeSet(heldReplies, ids[k], event);
    }
    advance();
  }

  /** Report a batch of replies: its count, then its call ids. */
  function report(ids) {
    const batch = new p.Uint32Array(ids.length + 1);
    batch[0] = ids.length;
    for (let k = 0; k < ids.length; k++) batch[k + 1] = ids[k];
    ops.op_dsh_events(batch);
  }

  /**
   * Run the next event if it is here (the recorded one, or once the record
   * is exhausted, the first held), and ask for a turn for the one after.
   */
  function advance() {
    if (turnAsked) return;
    const next = at < recorded.length ? recordedNext() : heldNext();
    if (next === undefined) return;
    next();
    turnAsked = true;
    p.PromisePrototypeThen(ops.op_dsh_next_turn(), afterTurn);
  }
  const afterTurn = () => {
    turnAsked = false;
    if (holding()) advance();
  };

  /** The recorded next event, taken off what is held, if it came. */
  function recordedNext() {
    const head = recorded[at];
    if (head === TIMER_FIRED) {
      const list = p.MapPrototypeGet(heldTimers, recorded[at + 1]);
      if (list === undefined || list.next === list.events.length) return undefined;
      const event = list.events[list.next++];
      event.done = true;
      at += 2;
      return event.fire;
    }
    const batch = [];
    for (let k = 1; k <= head; k++) {
      const event = p.MapPrototypeGet(heldReplies, recorded[at + k]);
      if (event === undefined) return undefined;
      p.ArrayPrototypePush(batch, event);
    }
    at += 1 + head;
    for (let k = 0; k < batch.length; k++) {
      batch[k].done = true;
      p.MapPrototypeDelete(heldReplies, batch[k].id);
    }
    return () => {
      for (let k = 0; k < batch.length; k++) batch[k].fire();
    };
  }

  /**
   * Past the record: the first held event that has not run, reported as
   * live (consecutive replies as one batch, as they came).
   */
  function heldNext() {
    while (heldAt < held.length && held[heldAt].done) heldAt++;
    if (heldAt === held.length) {
      held = [];
      heldAt = 0;
      return undefined;
    }
    const first = held[heldAt++];
    first.done = true;
    if (first.timer !== 0) {
      // The first of its timer's firings still held: they came in this order.
      p.MapPrototypeGet(heldTimers, first.timer).next++;
      return () => {
        words[0] = TIMER_FIRED;
        words[1] = first.timer;
        ops.op_dsh_events(words);
        first.fire();
      };
    }
    const batch = [first];
    while (heldAt < held.length && held[heldAt].timer === 0 && !held[heldAt].done) p.ArrayPrototypePush(batch, held[heldAt++]);
    const ids = [];
    for (let k = 0; k < batch.length; k++) {
      batch[k].done = true;
      p.MapPrototypeDelete(heldReplies, batch[k].id);
      p.ArrayPrototypePush(ids, batch[k].id);
    }
    return () => {
      report(ids);
      for (let k = 0; k < batch.length; k++) batch[k].fire();
    };
  }

  provide("eventOrder", { __proto__: null, ordered, replies });
})(globalThis);
