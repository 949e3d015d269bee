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
// In every execution, the promise jobs (and ticks) an event queued have
// all run before the next event runs: what a program shows the world
// after an event depends on nothing else.
//
// First execution (nothing recorded): each event runs as it comes, and is
// reported (op_dsh_events) before it runs, so the report reaches the
// journal before any log entry or call it leads to. deno_core runs every
// job queued before a timer fires; replies come in a job of their own, in
// the turn of the event loop that fired timers or took other replies, so
// a batch of replies in a turn in which an event already ran waits for the
// next turn (op_dsh_turn), and the events after it wait behind it.
//
// Re-execution: each event is held until the recorded events before it have
// run, then runs in its recorded place, one per turn of the event loop
// (op_dsh_next_turn resolves in the next turn), so that what the one before
// it queued has run first, as it had. A timer that fired and a reply that came
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
  /** The turn of the event loop (op_dsh_turn) in which an event last ran. */
  let lastEventTurn = -1;
  let timers = 0;

  const words = new p.Uint32Array(2);

  /** Whether events are held now (the record is not exhausted, or events it did not hold wait). */
  function holding() {
    if (recorded === undefined) recorded = ops.op_dsh_recorded_order();
    return at < recorded.length || heldAt < held.length;
  }

  /**
   * A timer's callback, numbered now (when the timer is made): what the
   * runtime's timer calls when it fires. `live()` says whether the timer
   * may still run its callback: one cleared after it fired, while its
   * firing was held, never runs it (as in Node, where clearing a timer
   * that has not run stops it), so that firing is dropped, not reported.
   */
  function ordered(fire, live) {
    const number = ++timers;
    return () => {
      if (!live()) return;
      if (!holding()) {
        // deno_core runs every promise job queued before a timer fires
        // (between two timers, and before its timers' turn), so a live
        // timer runs as a replayed one would.
        lastEventTurn = ops.op_dsh_turn();
        fireLive(number, fire);
        return;
      }
      const event = { __proto__: null, timer: number, fire, live, done: false };
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
    const live = !holding();
    if (live) {
      // Replies come in a promise job, which may run before the jobs of an
      // event in the same turn (a timer that fired, other replies) have:
      // they then wait for the next turn, as they would replayed.
      const turn = ops.op_dsh_turn();
      if (turn !== lastEventTurn) {
        lastEventTurn = turn;
        report(ids);
        for (let k = 0; k < ids.length; k++) answer(k);
        return;
      }
    }
    for (let k = 0; k < ids.length; k++) {
      const event = { __proto__: null, timer: 0, id: ids[k], fire: () => answer(k), done: false };
      p.ArrayPrototypePush(held, event);
      p.MapPrototypeSet(heldReplies, ids[k], event);
    }
    if (live) askTurn();
    else advance();
  }

  /** Report timer `number`'s firing, then run its callback (`fire`). */
  function fireLive(number, fire) {
    words[0] = TIMER_FIRED;
    words[1] = number;
    ops.op_dsh_events(words);
    fire();
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
    lastEventTurn = ops.op_dsh_turn();
    next();
    // The next held event runs in a later turn; with none, nothing waits.
    if (holding()) askTurn();
  }
  function askTurn() {
    if (turnAsked) return;
    turnAsked = true;
    p.PromisePrototypeThen(ops.op_dsh_next_turn(), afterTurn);
  }
  const afterTurn = () => {
    turnAsked = false;
    if (holding()) advance();
  };

  const noop = () => {};

  /** The recorded next event, taken off what is held, if it came. */
  function recordedNext() {
    const head = recorded[at];
    if (head === TIMER_FIRED) {
      const event = takeFiring(recorded[at + 1]);
      if (event === undefined) return undefined;
      at += 2;
      // Cleared before its recorded turn, it does nothing, as in Node.
      return event.live() ? event.fire : noop;
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
   * live (consecutive replies as one batch, as they came). A held firing
   * of a timer cleared since is dropped.
   */
  function heldNext() {
    while (heldAt < held.length && (held[heldAt].done || dropped(held[heldAt]))) heldAt++;
    if (heldAt === held.length) {
      held = [];
      heldAt = 0;
      return undefined;
    }
    const first = held[heldAt++];
    if (first.timer !== 0) {
      // The first of its timer's firings still held: they came in this order.
      takeFiring(first.timer);
      return () => fireLive(first.timer, first.fire);
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

  /** Whether `event`, held, is a firing of a timer cleared since: if so it is taken off. */
  function dropped(event) {
    if (event.timer === 0 || event.live()) return false;
    takeFiring(event.timer);
    return true;
  }

  /**
   * Timer `number`'s first held firing not yet taken, taken (marked done),
   * or undefined if none is held. A timer's firings are taken in the order
   * they came, and its list is forgotten once each is taken.
   */
  function takeFiring(number) {
    const list = p.MapPrototypeGet(heldTimers, number);
    if (list === undefined) return undefined;
    const event = list.events[list.next++];
    event.done = true;
    if (list.next === list.events.length) p.MapPrototypeDelete(heldTimers, number);
    return event;
  }

  provide("eventOrder", { __proto__: null, ordered, replies });
})(globalThis);
