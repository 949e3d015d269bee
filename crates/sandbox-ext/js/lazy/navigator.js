// Copyright the dsh-code-runtime-v8 authors. MIT license.
// `navigator`, as Node has it: a Navigator whose hardwareConcurrency,
// language(s), userAgent and platform are what the host's Node reports
// (seal() hands them over: crates/isolate-host/src/isolate.rs). A lazy module
// (14_lazy_globals.js).
//
// Takes: primordials, api (internalKey), nodeErrors (checkConstructorKey),
// and `host`. Makes navigator, Navigator.
"use strict";

const {
  primordials: p,
  api: { internalKey: INTERNAL },
  nodeErrors: { checkConstructorKey },
} = dsh;
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

return { __proto__: null, navigator: new Navigator(INTERNAL), Navigator };
