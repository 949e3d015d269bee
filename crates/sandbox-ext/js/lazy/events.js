// Copyright the dsh-code-runtime-v8 authors. MIT license.
// Event, CustomEvent and EventTarget, as Node has them (the DOM standard's
// events without a tree: a target is its event's only path), and
// AbortController / AbortSignal on top (abort, timeout, any,
// throwIfAborted, reason, onabort). A throw inside a listener fails the
// run, as a throw inside a timer callback does (Node reports it as an
// uncaught exception). Console rendering is Node's for each. A lazy
// module (14_lazy_globals.js).
//
// Takes: primordials, native (ops), api, inspect, lazyGlobals (the
// domException module), timers (setTimer), nodeErrors, run (reportFailure),
// and `host`. Makes
// Event, CustomEvent, EventTarget, AbortSignal, AbortController.
"use strict";

const {
  primordials: p,
  native: { ops },
  api: { internalKey: INTERNAL, setToStringTag },
  inspect: { inspect },
  lazyGlobals: { load },
  timers: { setTimer },
  nodeErrors: errors,
  run: { reportFailure },
} = dsh;
// The module's own class, not the global a program can replace.
const { DOMException } = load("domException");
const { ObjectDefineProperty, ReflectApply, String } = p;
const { checkConstructorKey } = errors;
const customInspect = p.SymbolFor("nodejs.util.inspect.custom");

/** `Name { ...fields }` as Node's events render (depth one less inside). */
function inspectAs(self, fields, depth, options) {
  const name = self.constructor.name;
  if (depth < 0) return name;
  const inner = { __proto__: null, ...options, depth: p.NumberIsInteger(options.depth) ? options.depth - 1 : options.depth };
  return `${name} ${inspect(fields, inner)}`;
}


const NONE = 0;
const AT_TARGET = 2;
const PHASES = { __proto__: null, NONE, CAPTURING_PHASE: 1, AT_TARGET, BUBBLING_PHASE: 3 };

class Event {
  #type;
  #bubbles;
  #cancelable;
  #composed;
  #defaultPrevented = false;
  #timeStamp = ops.op_dsh_now();
  #propagationStopped = false;
  #target = null;
  #currentTarget = null;
  #phase = NONE;
  #dispatching = false;
  #inPassiveListener = false;
  #trusted = false;

  constructor(type, options = undefined) {
    if (arguments.length === 0) throw errors.missingArgs(["type"]);
    if (options !== undefined && options !== null && typeof options !== "object" && typeof options !== "function") {
      throw errors.invalidArgType("options", "object", options);
    }
    this.#type = `${type}`;
    this.#bubbles = !!options?.bubbles;
    this.#cancelable = !!options?.cancelable;
    this.#composed = !!options?.composed;
  }

  static isEvent(value) {
    return value !== null && typeof value === "object" && #type in value;
  }
  static trusted(event) {
    event.#trusted = true;
    return event;
  }
  static startDispatch(event, target) {
    if (event.#dispatching) throw errors.nodeError(p.Error, "ERR_EVENT_RECURSION", `The event "${event.#type}" is already being dispatched`);
    event.#dispatching = true;
    event.#target = target;
    event.#currentTarget = target;
    event.#phase = AT_TARGET;
  }
  static endDispatch(event) {
    event.#dispatching = false;
    event.#currentTarget = null;
    event.#phase = NONE;
    event.#propagationStopped = false;
  }
  static stopped(event) {
    return event.#propagationStopped;
  }
  static setPassive(event, passive) {
    event.#inPassiveListener = passive;
  }

  get type() {
    return this.#type;
  }
  get bubbles() {
    return this.#bubbles;
  }
  get cancelable() {
    return this.#cancelable;
  }
  get composed() {
    return this.#composed;
  }
  get defaultPrevented() {
    return this.#cancelable && this.#defaultPrevented;
  }
  get timeStamp() {
    return this.#timeStamp;
  }
  get isTrusted() {
    return this.#trusted;
  }
  get target() {
    return this.#target;
  }
  get currentTarget() {
    return this.#currentTarget;
  }
  get srcElement() {
    return this.#target;
  }
  get eventPhase() {
    return this.#phase;
  }
  get returnValue() {
    return !this.defaultPrevented;
  }
  set returnValue(value) {
    if (!value) this.preventDefault();
  }
  get cancelBubble() {
    return this.#propagationStopped;
  }
  set cancelBubble(value) {
    if (value) this.stopPropagation();
  }
  composedPath() {
    return this.#dispatching ? [this.#currentTarget] : [];
  }
  preventDefault() {
    if (!this.#inPassiveListener) this.#defaultPrevented = true;
  }
  stopPropagation() {
    this.#propagationStopped = true;
  }
  stopImmediatePropagation() {
    this.#propagationStopped = true;
  }
  initEvent(type, bubbles = false, cancelable = false) {
    if (arguments.length === 0) throw errors.missingArgs(["type"]);
    if (this.#dispatching) return;
    this.#type = `${type}`;
    this.#bubbles = !!bubbles;
    this.#cancelable = !!cancelable;
  }
  [customInspect](depth, options) {
    return inspectAs(this, { type: this.#type, defaultPrevented: this.#defaultPrevented, cancelable: this.#cancelable, timeStamp: this.#timeStamp }, depth, options);
  }
}
const { isEvent, trusted, startDispatch, endDispatch, stopped, setPassive } = Event;
delete Event.isEvent;
delete Event.trusted;
delete Event.startDispatch;
delete Event.endDispatch;
delete Event.stopped;
delete Event.setPassive;

class CustomEvent extends Event {
  #detail;
  constructor(type, options = undefined) {
    if (arguments.length === 0) throw errors.missingArgs(["type"]);
    super(type, options);
    this.#detail = options?.detail ?? null;
  }
  get detail() {
    return this.#detail;
  }
}

setToStringTag(Event);
setToStringTag(CustomEvent);
// On the constructor only, as Node has them.
const phaseNames = p.ObjectKeys(PHASES);
for (let i = 0; i < phaseNames.length; i++) {
  ObjectDefineProperty(Event, phaseNames[i], { __proto__: null, value: PHASES[phaseNames[i]], enumerable: true });
}

function validListener(listener) {
  if (typeof listener === "function" || (listener !== null && typeof listener === "object" && typeof listener.handleEvent === "function")) return true;
  if (listener === null || listener === undefined) return false;
  if (typeof listener === "object") return true; // handleEvent is looked up at dispatch, as in Node
  throw errors.invalidArgType("listener", "EventListener", listener);
}

function flatten(options) {
  if (typeof options === "boolean") return { capture: options, once: false, passive: false, signal: undefined };
  if (options === null || options === undefined) return { capture: false, once: false, passive: false, signal: undefined };
  return { capture: !!options.capture, once: !!options.once, passive: !!options.passive, signal: options.signal };
}

class EventTarget {
  // type -> the first of its listeners, each
  // { callback, capture, once, passive, removed, next }, in the order added.
  #listeners = new p.Map();

  addEventListener(type, listener, options = undefined) {
    if (arguments.length < 2) throw errors.missingArgs(["type", "listener"]);
    if (!validListener(listener)) return;
    const { capture, once, passive, signal } = flatten(options);
    if (signal !== undefined && !isAbortSignal(signal)) throw errors.invalidArgType("options.signal", "AbortSignal", signal);
    if (signal?.aborted) return;
    type = String(type);
    const entry = { __proto__: null, callback: listener, capture, once, passive, removed: false, next: undefined };
    let last = p.MapPrototypeGet(this.#listeners, type);
    if (last === undefined) {
      p.MapPrototypeSet(this.#listeners, type, entry);
    } else {
      for (;;) {
        if (last.callback === listener && last.capture === capture) return;
        if (last.next === undefined) break;
        last = last.next;
      }
      last.next = entry;
    }
    if (signal !== undefined) {
      signal.addEventListener("abort", () => this.removeEventListener(type, listener, { capture }), { once: true });
    }
  }

  removeEventListener(type, listener, options = undefined) {
    if (arguments.length < 2) throw errors.missingArgs(["type", "listener"]);
    const capture = typeof options === "boolean" ? options : !!options?.capture;
    type = String(type);
    let previous;
    for (let entry = p.MapPrototypeGet(this.#listeners, type); entry !== undefined; entry = entry.next) {
      if (entry.callback === listener && entry.capture === capture) {
        // Unlinked, but it keeps its `next`: a dispatch standing on it
        // goes on from there (as Node's list does).
        entry.removed = true;
        if (previous !== undefined) previous.next = entry.next;
        else if (entry.next !== undefined) p.MapPrototypeSet(this.#listeners, type, entry.next);
        else p.MapPrototypeDelete(this.#listeners, type);
        return;
      }
      previous = entry;
    }
  }

  dispatchEvent(event) {
    if (!isEvent(event)) throw errors.invalidArgType("event", "Event", event);
    startDispatch(event, this);
    try {
      // As Node: the next listener is taken before each call, so one added
      // by the last listener runs in this dispatch, one added earlier too.
      let entry = p.MapPrototypeGet(this.#listeners, event.type);
      while (entry !== undefined) {
        const next = entry.next;
        if (!entry.removed) {
          if (entry.once) this.removeEventListener(event.type, entry.callback, { capture: entry.capture });
          setPassive(event, entry.passive);
          try {
            const callback = entry.callback;
            if (typeof callback === "function") ReflectApply(callback, this, [event]);
            else ReflectApply(callback.handleEvent, callback, [event]);
          } catch (error) {
            reportFailure(error);
          }
          setPassive(event, false);
          if (stopped(event)) break;
        }
        entry = next;
      }
    } finally {
      endDispatch(event);
    }
    return !event.defaultPrevented;
  }

  [customInspect](depth, options) {
    return inspectAs(this, {}, depth, options);
  }
}
setToStringTag(EventTarget);

// --- AbortSignal / AbortController --------------------------------------


function abortError() {
  return new DOMException("This operation was aborted", "AbortError");
}

// AbortSignal.any's argument errors: Node 22 validates the array itself,
// 24 and later convert it as a WebIDL sequence, with other words.
const webidlSequence = host.nodeMajor >= 24;
function anyArgumentError(index, value) {
  if (index === -1) {
    return errors.nodeError(p.TypeError, "ERR_INVALID_ARG_TYPE", webidlSequence ? "signals cannot be converted to sequence." : "Value can not be converted to sequence.");
  }
  if (webidlSequence) return errors.nodeError(p.TypeError, "ERR_INVALID_ARG_TYPE", `signals[${index}] is not of type AbortSignal.`);
  return errors.invalidArgType(`signals[${index}]`, "AbortSignal", value);
}

class AbortSignal extends EventTarget {
  #aborted = false;
  #reason = undefined;
  #onabort = null;
  // DOM's dependent signals (AbortSignal.any): a dependent one follows
  // its sources, which are never dependent themselves; a source lists the
  // dependents it aborts after its own event.
  #dependent = false;
  #sources = [];
  #dependents = [];

  constructor(key = undefined) {
    checkConstructorKey(key);
    super();
  }

  static isSignal(value) {
    return value !== null && typeof value === "object" && #aborted in value;
  }
  /**
   * Abort `signal` with `reason`, as DOM's "signal abort": its dependents
   * take the reason first, then its abort event fires, then theirs.
   */
  static signalAbort(signal, reason) {
    if (signal.#aborted) return;
    signal.#aborted = true;
    signal.#reason = reason;
    const following = [];
    for (let i = 0; i < signal.#dependents.length; i++) {
      const dependent = signal.#dependents[i];
      if (dependent.#aborted) continue;
      dependent.#aborted = true;
      dependent.#reason = reason;
      p.ArrayPrototypePush(following, dependent);
    }
    signal.dispatchEvent(trusted(new Event("abort")));
    for (let i = 0; i < following.length; i++) following[i].dispatchEvent(trusted(new Event("abort")));
  }

  get aborted() {
    return this.#aborted;
  }
  get reason() {
    return this.#reason;
  }
  get onabort() {
    return this.#onabort;
  }
  set onabort(handler) {
    if (this.#onabort !== null) this.removeEventListener("abort", this.#onabort);
    this.#onabort = typeof handler === "function" ? handler : null;
    if (this.#onabort !== null) this.addEventListener("abort", this.#onabort);
  }
  throwIfAborted() {
    if (this.#aborted) throw this.#reason;
  }

  static abort(reason = abortError()) {
    const signal = newSignal();
    signal.#aborted = true;
    signal.#reason = reason;
    return signal;
  }

  static timeout(delay) {
    if (typeof delay !== "number") throw errors.invalidArgType("delay", "number", delay);
    if (!p.NumberIsInteger(delay)) throw errors.outOfRange("delay", "an integer", delay);
    if (delay < 0 || delay > 4294967295) throw errors.outOfRange("delay", ">= 0 && <= 4294967295", delay);
    const signal = newSignal();
    setTimer(() => signalAbort(signal, new DOMException("The operation was aborted due to timeout", "TimeoutError")), delay);
    return signal;
  }

  static any(signals) {
    if (signals === null || typeof signals !== "object" || typeof signals[p.SymbolIterator] !== "function") {
      throw anyArgumentError(-1, signals);
    }
    const sources = [];
    let i = 0;
    for (const signal of signals) {
      if (!isAbortSignal(signal)) throw anyArgumentError(i, signal);
      p.ArrayPrototypePush(sources, signal);
      i++;
    }
    const result = newSignal();
    for (let j = 0; j < sources.length; j++) {
      if (sources[j].#aborted) {
        result.#aborted = true;
        result.#reason = sources[j].#reason;
        return result;
      }
    }
    // DOM's: it follows the signals given, or, for one that follows
    // others, those.
    result.#dependent = true;
    for (let j = 0; j < sources.length; j++) {
      const signal = sources[j];
      const followed = signal.#dependent ? signal.#sources : [signal];
      for (let k = 0; k < followed.length; k++) {
        const source = followed[k];
        if (p.ArrayPrototypeIncludes(result.#sources, source)) continue;
        p.ArrayPrototypePush(result.#sources, source);
        p.ArrayPrototypePush(source.#dependents, result);
      }
    }
    return result;
  }

  [customInspect](depth, options) {
    return inspectAs(this, { aborted: this.#aborted }, depth, options);
  }
}
const { isSignal: isAbortSignal, signalAbort } = AbortSignal;
delete AbortSignal.isSignal;
delete AbortSignal.signalAbort;
setToStringTag(AbortSignal);

const newSignal = () => new AbortSignal(INTERNAL);

class AbortController {
  #signal = newSignal();
  get signal() {
    return this.#signal;
  }
  abort(reason = abortError()) {
    signalAbort(this.#signal, reason);
  }
  [customInspect](depth, options) {
    return inspectAs(this, { signal: this.#signal }, depth, options);
  }
}
setToStringTag(AbortController);

return { __proto__: null, Event, CustomEvent, EventTarget, AbortSignal, AbortController };
