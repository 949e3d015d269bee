// Copyright the dsh-code-runtime-v8 authors. MIT license.
// Math.random from the run's random stream: the harness seeds each run
// (crates/protocol/src/frame.rs, RunSeed), so a run executed again on
// another host after its host died draws the same numbers in the same
// order, and its calls and logs that depend on them are the recorded ones
// (crates/protocol/src/history.rs). V8's own Math.random is seeded per
// context, with no seed a host can give it, hence the replacement;
// crypto.getRandomValues and randomUUID read the same stream
// (js/lazy/crypto.js, op_dsh_random).
//
// Numbers are drawn 64 at a time (one op call), as V8 fills a cache of its
// own, each from 53 random bits, uniform over [0, 1) like V8's. The cache
// is this isolate's: a run's isolate is fresh, so its cache starts empty
// and its first number is the stream's first.
//
// Takes: primordials, native (ops), builtinProxies (wrapCalls). Provides
// nothing.
"use strict";

((globalThis) => {
  const {
    primordials: p,
    native: { ops },
    builtinProxies: { wrapCalls },
  } = globalThis.__dsh;

  const NUMBERS = 64;
  const words = new p.Uint32Array(2 * NUMBERS);
  const bytes = new p.Uint8Array(p.TypedArrayPrototypeGetBuffer(words));
  let next = words.length;

  function random() {
    if (next === words.length) {
      ops.op_dsh_random(bytes);
      next = 0;
    }
    // 27 bits and 26 bits: 53 in all, the integer below 2^53 over 2^53.
    const high = words[next] >>> 5;
    const low = words[next + 1] >>> 6;
    next += 2;
    return (high * 67108864 + low) / 9007199254740992;
  }

  wrapCalls(p.Math, "random", () => random());
})(globalThis);
