// Copyright the dsh-code-runtime-v8 authors. MIT license.
// Replacing a built-in by a proxy that stands for it, without the program
// being able to tell: 11_memory_caps.js checks memory after some built-ins,
// 12_interruptible.js gives others a stack check per call.
//
// A proxy keeps its built-in's name, length, prototype, own properties,
// `instanceof` and the errors of a wrong call. What would give it away is
// `Function.prototype.toString` ("function () { [native code] }", without
// the name), so that is proxied too, and prints each proxy as the
// built-in it stands for. The replaced property keeps its attributes.
//
// Takes: primordials. Provides builtinProxies: { replace, wrapCalls,
// wrapGetter, passThrough }.
"use strict";

((globalThis) => {
  const { primordials: p, provide } = globalThis.__dsh;
  const { Proxy, ReflectApply, ObjectDefineProperty, ObjectGetOwnPropertyDescriptor } = p;

  /** Each proxy here, to the built-in it stands for. */
  const targets = new p.WeakMap();

  /** Replace the built-in `owner[key]` by `proxy`, keeping its attributes. */
  function replace(owner, key, proxy) {
    const descriptor = ObjectGetOwnPropertyDescriptor(owner, key);
    p.WeakMapPrototypeSet(targets, proxy, descriptor.value);
    descriptor.value = proxy;
    ObjectDefineProperty(owner, key, descriptor);
  }

  /**
   * Replace the built-in function `owner[key]` by a proxy whose calls go
   * through `apply(target, receiver, args)`.
   */
  function wrapCalls(owner, key, apply) {
    replace(owner, key, new Proxy(owner[key], { __proto__: null, apply }));
  }

  /**
   * Replace the getter of the built-in accessor `owner[key]` by a proxy
   * whose calls go through `apply(target, receiver, args)`.
   */
  function wrapGetter(owner, key, apply) {
    const descriptor = ObjectGetOwnPropertyDescriptor(owner, key);
    const proxy = new Proxy(descriptor.get, { __proto__: null, apply });
    p.WeakMapPrototypeSet(targets, proxy, descriptor.get);
    descriptor.get = proxy;
    ObjectDefineProperty(owner, key, descriptor);
  }

  // `Function.prototype.toString` of a proxy is "function () { [native
  // code] }"; of the built-in it stands for, its own name.
  wrapCalls(p.FunctionPrototype, "toString", (target, receiver, args) => {
    const builtin = p.WeakMapPrototypeGet(targets, receiver);
    return ReflectApply(target, builtin === undefined ? receiver : builtin, args);
  });

  provide("builtinProxies", {
    __proto__: null,
    replace,
    wrapCalls,
    wrapGetter,
    /**
     * Call `owner[key]` through a proxy that does nothing but call it: its
     * trap, a JavaScript function, starts with a stack check
     * (12_interruptible.js).
     */
    passThrough: (owner, key) => wrapCalls(owner, key, (target, receiver, args) => ReflectApply(target, receiver, args)),
  });
})(globalThis);
