// Copyright the dsh-code-runtime-v8 authors. MIT license.
// The run's wall clock, for every built-in that reads it: V8 reads the
// time itself for `Date.now()`, `new Date()`, `Date()` and for
// `Intl.DateTimeFormat`'s `format()`/`formatToParts()` without a date,
// with no hook a host can give it. Each is replaced here by one that reads
// op_dsh_wall_now, whose readings the run's history keeps
// (crates/protocol/src/readings.rs): a run executed again on another host
// after its host died reads the same times in the same order, and its calls
// and logs that depend on them are the recorded ones. Replacing the `Date`
// global alone would not do: `Date.prototype.constructor` and a
// formatter's `format` reach the clock too.
//
// Date's replacement is a proxy of the original (builtinProxies): its
// name, length, prototype, statics, `instanceof`, subclassing and
// `toString` are the original's; only a construction without arguments
// and a call (which ignores its arguments) take the run's time.
//
// Takes: primordials, native (ops), builtinProxies (replace, wrapCalls,
// wrapGetter). Provides nothing.
"use strict";

((globalThis) => {
  const {
    primordials: p,
    native: { ops },
    builtinProxies: { replace, wrapCalls, wrapGetter },
  } = globalThis.__dsh;
  const { Proxy, ReflectApply, ReflectConstruct } = p;

  const now = () => ops.op_dsh_wall_now();

  const DateProxy = new Proxy(p.Date, {
    __proto__: null,
    construct(target, args, newTarget) {
      return ReflectConstruct(target, args.length === 0 ? [now()] : args, newTarget === DateProxy ? target : newTarget);
    },
    // `Date()` is the current time as a string, whatever it is passed.
    apply(target) {
      return p.DatePrototypeToString(new target(now()));
    },
  });
  replace(globalThis, "Date", DateProxy);
  replace(p.Date.prototype, "constructor", DateProxy);
  wrapCalls(p.Date, "now", () => now());

  // A date left out (undefined) is now, as the spec reads the clock.
  const atNow = (args) => (args[0] === undefined ? [now()] : args);
  const { prototype } = p.IntlDateTimeFormat;
  wrapCalls(prototype, "formatToParts", (target, receiver, args) => ReflectApply(target, receiver, atNow(args)));
  // `format` is a getter of a function bound to its formatter, the same
  // one each time: its stand-in is made once per bound function.
  const formats = new p.WeakMap();
  const formatHandler = {
    __proto__: null,
    apply: (target, receiver, args) => ReflectApply(target, receiver, atNow(args)),
  };
  wrapGetter(prototype, "format", (target, receiver, args) => {
    const bound = ReflectApply(target, receiver, args);
    let format = p.WeakMapPrototypeGet(formats, bound);
    if (format === undefined) {
      format = new Proxy(bound, formatHandler);
      p.WeakMapPrototypeSet(formats, bound, format);
    }
    return format;
  });
})(globalThis);
