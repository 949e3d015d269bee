// Copyright the dsh-code-runtime-v8 authors. MIT license.
// Built-ins whose single call can run for milliseconds in C++ without V8
// ever checking for a termination request, called through a proxy so that
// every call passes a check.
//
// V8 acts on TerminateExecution (how the compute budget, the wall ceiling
// and abort stop a run) at stack checks: function entries and loop back
// edges. A loop whose body is one such call and little else reaches a
// check only every few thousand iterations in interpreted and baseline
// code, and never in optimised code (a loop with a call keeps no stack
// check of its own). Measured with computeMs 300, a loop of
// `s.localeCompare(...)` over 2 MB strings ran 7.3 s, `JSON.stringify` of
// 30,000 objects 8.0 s, `toLocaleUpperCase` 6.3 s; the same loops through
// a proxy stop at 0.3 s (bench/overshoot.mjs). The proxy's trap is a
// JavaScript function, and its entry is a stack check.
//
// Built-ins that loop in generated code (Array and TypedArray methods,
// split, replaceAll, join, sort, JSON.parse, structuredClone) check on
// their own and are left alone, as are toUpperCase / toLowerCase (at most
// ~5x over on megabyte strings, and far too common on short ones to pay a
// proxy call each).
//
// Takes: primordials, builtinProxies (passThrough). Provides nothing.
"use strict";

((globalThis) => {
  const {
    primordials: p,
    builtinProxies: { passThrough },
  } = globalThis.__dsh;

  const interruptible = [
    [p.StringPrototype, "normalize"],
    [p.StringPrototype, "localeCompare"],
    [p.StringPrototype, "toLocaleUpperCase"],
    [p.StringPrototype, "toLocaleLowerCase"],
    [p.JSON, "stringify"],
  ];
  for (let i = 0; i < interruptible.length; i++) {
    const [owner, key] = interruptible[i];
    passThrough(owner, key);
  }
})(globalThis);
