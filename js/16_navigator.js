// Copyright the dsh-code-runtime-v8 authors. MIT license.
// `global` (=== globalThis) and `navigator`, as Node has them: a Navigator
// whose hardwareConcurrency, language(s), userAgent and platform are what
// the host's Node reports (seal() hands them over: src/isolate.rs).
"use strict";

((globalThis) => {
  const dsh = globalThis.__dsh;
  const { primordials: p } = dsh;
  const errors = dsh.nodeErrors;

  let host = { __proto__: null, nodeMajor: 0, hardwareConcurrency: 1, platform: "" };
  p.ArrayPrototypePush(dsh.nodeLineFollowers, (facts) => {
    host = facts;
  });

  const { internalKey: INTERNAL, checkConstructorKey } = dsh;
  // Node reads the language from ICU's default locale.
  let language;

  class Navigator {
    constructor(key = undefined) {
      checkConstructorKey(key);
    }
    get hardwareConcurrency() {
      return host.hardwareConcurrency;
    }
    get language() {
      language ??= new p.IntlDateTimeFormat().resolvedOptions().locale;
      return language;
    }
    get languages() {
      return [this.language];
    }
    get userAgent() {
      return `Node.js/${host.nodeMajor}`;
    }
    get platform() {
      return host.platform;
    }
  }

  const define = (name, value) => p.ArrayPrototypePush(dsh.webGlobals, [name, value]);
  define("navigator", new Navigator(INTERNAL));
  define("Navigator", Navigator);
  // Enumerable, as Node's is.
  p.ArrayPrototypePush(dsh.webGlobals, ["global", globalThis, true]);
})(globalThis);
