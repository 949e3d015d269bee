// Copyright the dsh-code-runtime-v8 authors. MIT license.
// The run driver and the seal. This file runs last at snapshot time and
// leaves a single entry point, `__dsh.seal`, that the run thread calls
// when it prepares an isolate: seal() strips every internal handle from the
// global (Deno, __bootstrap, __dsh, ...) and returns the driver, which the
// Rust side holds on to. After seal() no program-reachable path leads to an
// op other than through the closures built here.
//
// Takes: primordials, native, api (defineGlobal), losslessJson, inspect,
// console (makeConsole), timers, memoryCaps (capSharedArrayBuffer),
// lazyGlobals, eventOrder (replies), and the globals and followNodeLine of
// the files that have them. Provides run: { reportFailure(error) } (fails
// the current run, for the files that load before this one), and seal.
"use strict";

((globalThis) => {
  const registry = globalThis.__dsh;
  const {
    primordials: p,
    native: { core, ops, protocol },
    api: { defineGlobal },
    losslessJson,
    inspect,
    console: { makeConsole },
    timers,
    memoryCaps: { capSharedArrayBuffer },
    lazyGlobals,
    eventOrder,
    provide,
  } = registry;
  const {
    ObjectCreate,
    ObjectDefineProperty,
    ObjectPrototypeIsPrototypeOf,
    ErrorPrototype,
    Error: SafeError,
    String,
    PromisePrototypeThen,
    SafePromiseWithResolvers,
    Promise: SafePromise,
    JSONParse,
  } = p;
  const { encode, TOO_LARGE } = losslessJson;
  const { programStack } = inspect;

  const {
    value: SETTLE_VALUE,
    noValue: SETTLE_NO_VALUE,
    exception: SETTLE_EXCEPTION,
    invalidOutput: SETTLE_INVALID_OUTPUT,
    outputLimit: SETTLE_OUTPUT_LIMIT,
  } = protocol.settle;
  const { argumentsNotLossless, resolutionNotLossless, completionNotLossless } = protocol.messages;

  /** The exception message of a thrown value, bounded by `remaining`. */
  function renderThrown(thrown, remaining) {
    try {
      if (thrown !== null && typeof thrown === "object" && ObjectPrototypeIsPrototypeOf(ErrorPrototype, thrown)) {
        const message = thrown.message;
        // Never materialize a giant stack: a message that alone cannot fit
        // makes the run an output-limit without touching `stack`.
        if (typeof message === "string" && message.length > remaining) return TOO_LARGE;
        const stack = thrown.stack;
        if (typeof stack === "string") return programStack(stack);
        return String(message);
      }
      return String(thrown);
    } catch {
      return "program threw an unrenderable value";
    }
  }

  function settleException(thrown) {
    const remaining = ops.op_dsh_output_remaining();
    const text = renderThrown(thrown, remaining);
    if (text === TOO_LARGE || text.length > remaining) ops.op_dsh_settle(SETTLE_OUTPUT_LIMIT, "");
    else ops.op_dsh_settle(SETTLE_EXCEPTION, text);
  }

  function settleValue(value) {
    if (value === undefined) {
      ops.op_dsh_settle(SETTLE_NO_VALUE, "");
      return;
    }
    let json;
    try {
      json = encode(value, ops.op_dsh_output_remaining());
    } catch {
      json = undefined;
    }
    if (json === undefined) ops.op_dsh_settle(SETTLE_INVALID_OUTPUT, completionNotLossless);
    else if (json === TOO_LARGE) ops.op_dsh_settle(SETTLE_OUTPUT_LIMIT, "");
    else ops.op_dsh_settle(SETTLE_VALUE, json);
  }

  /**
   * A run's calls waiting for their replies, by call id: each call's
   * [resolve, reject]. A run's call ids count up from 0 (its mailbox's),
   * so the table is an array from the first id it holds, a new call
   * appended, an answered one `null` (a Map of 10000 waiting calls rehashed
   * its way up, ~8% of a Promise.all's run thread). It empties whenever no
   * call waits, and drops its answered front once that is most of it: it
   * holds a slot for each call made since the oldest one still waiting (in
   * the run's own heap, which its cap bounds). Its prototype is null: the
   * program can write Array.prototype, which an append or a read past the
   * end would consult.
   */
  function waitingCalls() {
    const entries = p.ObjectSetPrototypeOf([], null);
    /** The call id of `entries[0]`. */
    let firstId = 0;
    /** How many of `entries` are answered, from its start. */
    let answeredFront = 0;
    let waiting = 0;
    return {
      __proto__: null,
      count: () => waiting,
      /** Hold call `id`'s [resolve, reject] (ids only grow). */
      add(id, entry) {
        if (waiting === 0) {
          entries.length = 0;
          firstId = id;
          answeredFront = 0;
        }
        const index = id - firstId;
        for (let i = entries.length; i < index; i++) entries[i] = null;
        entries[index] = entry;
        waiting++;
      },
      /** Call `id`'s [resolve, reject], taken out; null if it waits no more. */
      take(id) {
        const index = id - firstId;
        if (!(index >= 0 && index < entries.length)) return null;
        const entry = entries[index];
        if (entry === null) return null;
        entries[index] = null;
        waiting--;
        return entry;
      },
      /** After answers: let go of the answered front, if it is most of the table. */
      trim() {
        if (waiting === 0) {
          entries.length = 0;
          return;
        }
        while (entries[answeredFront] === null) answeredFront++;
        if (answeredFront < 1024 || answeredFront * 2 < entries.length) return;
        const kept = entries.length - answeredFront;
        for (let i = 0; i < kept; i++) entries[i] = entries[answeredFront + i];
        entries.length = kept;
        firstId += answeredFront;
        answeredFront = 0;
      },
    };
  }

  /**
   * Build what the program is handed: one null-prototype object of async
   * functions per binding namespace, and one error class per namespace
   * that declares one. Returned in the order of the program function's
   * parameters (`run.rs`, `program_parameters`): the namespaces, then the
   * error classes. Parameters, not globals, as the reference hands them:
   * `globalThis.tools` is undefined, `const tools = 1` is a SyntaxError.
   */
  function installBindings(descriptor) {
    // Calls waiting for the host. One run per isolate, so this table is
    // the run's. The reply pump (one async op taking every reply that
    // arrived) is armed only while calls wait: with none waiting, the
    // event loop can still tell that a program is stuck.
    const pending = waitingCalls();
    let pumping = false;
    const settle = (batch) => {
      pumping = false;
      const { ids } = batch;
      // The calls this batch answers, taken off the pending ones; they are
      // answered in the order the run's history holds (17_event_order.js).
      const answered = [];
      const entries = [];
      const indexes = [];
      for (let i = 0; i < ids.length; i++) {
        const entry = pending.take(ids[i]);
        if (entry === null) continue;
        p.ArrayPrototypePush(answered, ids[i]);
        p.ArrayPrototypePush(entries, entry);
        p.ArrayPrototypePush(indexes, i);
      }
      pending.trim();
      if (answered.length > 0) eventOrder.replies(answered, (k) => answer(entries[k], batch, indexes[k]));
      pump();
    };
    /**
     * Resolve or reject a call (its `entry`, [resolve, reject]) with the
     * `i`-th reply of `batch`. A failure rejects with its message only: the
     * error is built by the call's own handler, on the chain the program
     * awaits, so V8's async stack trace reaches the program's call site.
     */
    const answer = (entry, batch, i) => {
      const { oks, raws, texts, beside } = batch;
      if (oks[i] && raws[i]) {
        // A tool's string, crossed as it is.
        entry[0](texts[i]);
      } else if (oks[i]) {
        // A result's long strings may have crossed beside its JSON.
        const strings = beside[i];
        const value =
          strings === null ? losslessJson.decode(texts[i]) : losslessJson.decodeWithStrings(texts[i], strings.paths, strings.strings);
        if (value === undefined) entry[1](resolutionNotLossless);
        else entry[0](value);
      } else {
        // The message crossed as a JSON string literal (lone surrogates
        // survive JSON, not the UTF-8 crossing).
        let message;
        try {
          message = JSONParse(texts[i]);
        } catch {
          message = texts[i];
        }
        entry[1](typeof message === "string" ? message : texts[i]);
      }
    };
    function pump() {
      if (pumping || pending.count() === 0) return;
      pumping = true;
      PromisePrototypeThen(ops.op_dsh_replies(), settle);
    }

    const namespaces = descriptor.namespaces;
    const parameters = [];
    const errorClasses = [];
    for (let n = 0; n < namespaces.length; n++) {
      const ns = namespaces[n];
      let ErrorClass;
      if (ns.errorClass) {
        const { name, memberNameProperty } = ns.errorClass;
        ErrorClass = class extends SafeError {
          constructor(memberName, message) {
            super(message);
            ObjectDefineProperty(this, "name", { __proto__: null, value: name, enumerable: true, writable: true, configurable: true });
            ObjectDefineProperty(this, memberNameProperty, { __proto__: null, value: memberName, enumerable: true, writable: true, configurable: true });
          }
        };
        ObjectDefineProperty(ErrorClass, "name", { __proto__: null, value: name });
        p.ArrayPrototypePush(errorClasses, ErrorClass);
      }
      // A rejection's stack is the program's: V8's async stack traces give
      // the awaiting call sites (`at async program.ts:L:C`) at no cost per
      // call; the bridge's own frames are removed.
      const fail = (memberName, message) => {
        const error = ErrorClass === undefined ? new SafeError(message) : new ErrorClass(memberName, message);
        const stack = error.stack;
        if (typeof stack === "string") {
          ObjectDefineProperty(error, "stack", { __proto__: null, value: programStack(stack), writable: true, configurable: true, enumerable: false });
        }
        return error;
      };
      const target = ObjectCreate(null);
      const names = ns.functions;
      for (let f = 0; f < names.length; f++) {
        const memberName = names[f];
        const onFailure = (message) => {
          throw fail(memberName, message);
        };
        const call = (args) => {
          let json;
          // Long strings leave the JSON (see js/01_lossless_json.js). A
          // fresh collector per call: a getter in `args` may call a tool.
          const longStrings = { paths: "", strings: null };
          try {
            json = encode(args, undefined, longStrings);
          } catch {
            // A throwing getter (or a revoked Proxy): not lossless JSON.
            json = undefined;
          }
          let id;
          if (json !== undefined && json !== TOO_LARGE) {
            if (longStrings.strings === null) {
              id = ops.op_dsh_call(n, f, json);
            } else {
              // The host checks the long strings against the JSON (a
              // program that tampered with built-ins may have skewed them).
              try {
                id = ops.op_dsh_call_with_strings(n, f, json, longStrings.paths, longStrings.strings);
              } catch {
                id = undefined;
              }
            }
          }
          if (id === undefined) {
            const error = fail(memberName, argumentsNotLossless);
            p.ErrorCaptureStackTrace(error, call);
            ObjectDefineProperty(error, "stack", { __proto__: null, value: programStack(error.stack), writable: true, configurable: true, enumerable: false });
            return p.PromiseReject(error);
          }
          // [resolve, reject] as an array: a null-prototype literal per
          // call is measurably slower on this path.
          let settleWith;
          const promise = new SafePromise((resolve, reject) => {
            settleWith = [resolve, reject];
          });
          pending.add(id, settleWith);
          pump();
          return PromisePrototypeThen(promise, undefined, onFailure);
        };
        // As the reference's: an arrow function (no prototype, not a
        // constructor) whose name is the `value` of the descriptor it is
        // defined with, whatever the member's name.
        ObjectDefineProperty(call, "name", { __proto__: null, value: "value" });
        // Read-only and permanent, as the reference backend defines them: a
        // program's `tools.search = ...` throws instead of rewiring a tool.
        ObjectDefineProperty(target, memberName, { __proto__: null, value: call, enumerable: true, writable: false, configurable: false });
      }
      p.ArrayPrototypePush(parameters, target);
    }
    for (let i = 0; i < errorClasses.length; i++) p.ArrayPrototypePush(parameters, errorClasses[i]);
    return parameters;
  }

  /**
   * Before the program: install its bindings and the failure channel
   * (unhandled rejections and throws in timer callbacks fail the run).
   * Returns the program function's arguments: the bindings
   * (`installBindings`), then the console.
   */
  let failure;
  /** Matches "" at 0: see install. */
  const EMPTY_PATTERN = new p.RegExp("(?:)");
  function install(descriptor) {
    const parameters = installBindings(descriptor);
    timers.holdCallbacks();
    failure = SafePromiseWithResolvers();
    core.setUnhandledPromiseRejectionHandler((_promise, reason) => {
      failure.reject(reason);
      return true;
    });
    core.setHandledPromiseRejectionHandler(() => {});
    // The realm's last match (RegExp.input, lastMatch, $1, ...) as a run
    // starts: whatever the sandbox's own code matched before it (the
    // bootstrap, `warm` on a quiet host) must not show through, so every
    // run starts from an empty match, as the reference's do. (During the
    // run the sandbox's own matches do show: the console's rendering, as
    // Node's does, and the bridge's checks of a reply or a long argument
    // that looks as if it may hold -0, an overflowed number or an escape.)
    p.RegExpPrototypeExec(EMPTY_PATTERN, "");
    // The last parameter: the console, as the reference hands its own.
    p.ArrayPrototypePush(parameters, programConsole);
    return parameters;
  }

  /**
   * After the program was called (by the host, so no sandbox frame sits
   * under its stack): settle exactly once through op_dsh_settle, with the
   * completion, with the first thrown value, or with the first failure.
   * Returns a promise that resolves once settled.
   */
  function watch(completion) {
    const settled = SafePromiseWithResolvers();
    let done = false;
    const onValue = (value) => {
      if (done) return;
      done = true;
      try {
        settleValue(value);
      } finally {
        settled.resolve();
      }
    };
    const onError = (error) => {
      if (done) return;
      done = true;
      try {
        settleException(error);
      } finally {
        settled.resolve();
      }
    };
    PromisePrototypeThen(p.PromiseResolve(completion), onValue, onError);
    PromisePrototypeThen(failure.promise, undefined, onError);
    return settled.promise;
  }

  /** How many times `warm` runs each piece: V8 gives a function its
   * feedback (what its inline caches fill) after a few calls, not the first. */
  const WARM_ROUNDS = 12;

  /**
   * Run the bridge's encoder and decoder and the console's rendering over
   * values shaped as a run's, in a prepared isolate, before any program
   * (the host calls this once its runs have left it quiet:
   * crates/isolate-host/src/scheduler.rs). A fresh isolate otherwise runs
   * this code for the first time inside the run, and pays there for what a
   * first run costs: each function's bytecode installed, the decoder's
   * regular expressions compiled, the maps of the values it makes, the
   * feedback vectors. None of it survives into the snapshot (V8 drops
   * feedback and resets functions when it writes one), so it is done per
   * isolate, off the run's path. What a program could read of it is undone
   * before each run: the realm's last match (see install); the values are
   * made here and dropped, and these functions keep no state between calls
   * (the heap holds ~160 KiB more, which only a reading of its size shows).
   */
  function warm() {
    const args = { query: "warm", limit: 8, filters: { lang: "en", tags: ["a", "b"], since: "2026-01-01" } };
    const reply = '{"query":"warm","results":[{"id":"warm-0","title":"Result 0","score":1},{"id":"warm-1","title":"Result 1","score":0.99}]}';
    const logged = { seen: 40, best: "Result 0" };
    for (let i = 0; i < WARM_ROUNDS; i++) {
      // As a call encodes its argument (see installBindings).
      encode(args, undefined, { paths: "", strings: null });
      losslessJson.decode(reply);
      inspect.inspect(i);
      inspect.inspect(logged);
    }
  }

  /**
   * Strip every internal handle from the global and hand back the driver.
   * `host`: what the Node APIs here report of the host, as its Node would
   * (`{ nodeMajor, nodeVersion, hardwareConcurrency, platform }`), and
   * `engine`, the isolate host's (`{ v8, arch }`: process.versions.v8,
   * process.arch); the APIs follow where
   * Node's lines differ (each provider's followNodeLine: console rendering,
   * timers; the lazy modules, process among them, are given both when
   * they load).
   */
  function seal(host, engine) {
    const g = globalThis;
    inspect.followNodeLine(host);
    timers.followNodeLine(host);
    lazyGlobals.followNodeLine(host, engine);
    capSharedArrayBuffer();
    delete g.Deno;
    delete g.__bootstrap;
    delete g.__dsh;
    delete g.WebAssembly;
    return [install, watch, timers.releaseCallbacks, warm];
  }

  /**
   * The sandbox's globals, defined while the snapshot is made: every
   * isolate then starts with them, deserialized, instead of each seal()
   * making them again.
   */
  function defineGlobals() {
    globalThis.console = programConsole;
    // Enumerable, as Node's is.
    defineGlobal("global", globalThis, true);
    // In load order: Object.keys(globalThis) lists them as Node's does.
    const providers = [timers];
    for (let i = 0; i < providers.length; i++) {
      const globals = providers[i].globals;
      for (let j = 0; j < globals.length; j++) defineGlobal(globals[j][0], globals[j][1], globals[j][2] === true);
    }
  }

  /** The console the program finds as its global and as its last parameter. */
  const programConsole = makeConsole();
  defineGlobals();
  provide("run", {
    __proto__: null,
    /** Fail the current run with `error` (a throw in a timer callback, a tick, a listener). */
    reportFailure: (error) => failure.reject(error),
  });
  // The entry point the run thread calls (crates/isolate-host/src/isolate.rs).
  provide("seal", seal);
})(globalThis);
