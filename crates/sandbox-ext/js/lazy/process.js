// Copyright the dsh-code-runtime-v8 authors. MIT license.
// The `process` a program sees: Node's members where they make sense for a
// program that owns nothing but its isolate, each saying only true things
// about the run (README, "process"): the event methods, nextTick with
// Node's ordering, the run's own clocks, CPU and memory, the host's Node
// line, stdout/stderr shaped as Node's streams whose writes become log
// entries, exit() and exitCode. What a Node worker's process has beyond
// that is listed in the README's table of members absent on purpose.
//
// A lazy module (14_lazy_globals.js): made on the program's first touch,
// from the host's facts (`host`, `engine`). Its top level and its methods
// are the sandbox's: they reach built-ins through primordials only, since
// the program may have replaced any of them.
//
// Takes: primordials, native (core, ops, protocol), console (writeLog), inspect,
// timers (queueTask), nodeErrors, run (reportFailure), and `host` and
// `engine`. Makes process.
"use strict";

const {
  primordials: p,
  native: { core, ops, protocol },
  console: { writeLog },
  inspect: { inspect },
  timers: { queueTask },
  nodeErrors: errors,
  run: { reportFailure },
} = dsh;
const { ObjectCreate, ObjectDefineProperty, ReflectApply, String, NumberIsInteger, ArrayIsArray } = p;

/**
 * `object[key] = value` as a fresh own property, defined, not assigned: a
 * setter the program put on Object.prototype or Function.prototype before
 * its first touch of process would take an assignment.
 */
function defineAssigned(object, key, value) {
  ObjectDefineProperty(object, key, { __proto__: null, value, writable: true, enumerable: true, configurable: true });
}

/** Node's check of an exit code: an integer, or a string of one. */
function exitCodeOf(code, caller) {
  if (code === undefined || code === null) return 0;
  if (typeof code === "number" || (typeof code === "string" && code !== "" && +code === +code)) {
    const n = +code;
    if (NumberIsInteger(n)) return n;
    throw errors.outOfRange("code", "an integer", n, caller);
  }
  throw errors.invalidArgType("code", "number", code, caller);
}

// --- env

/**
 * process.env, made as Node makes it (crates/sandbox-ext/src/process_env.rs);
 * and, as in Node, structuredClone copies it into a plain object (lazy/structured_clone.js).
 */
function makeEnv() {
  const env = ops.op_dsh_process_env();
  ops.op_dsh_host_object(env, cloneEnv);
  return env;
}
function cloneEnv() {
  const copy = {};
  const keys = p.ObjectKeys(this);
  for (let i = 0; i < keys.length; i++) defineAssigned(copy, keys[i], this[keys[i]]);
  return [protocol.hostObjects.plainObject, copy];
}

// --- events: Node's EventEmitter methods, shared by process and its streams

const kEvents = p.Symbol("events");
const kMaxListeners = p.Symbol("maxListeners");
/** The listener list of `event` on `emitter`, made on first use. */
function listenersOf(emitter, event, create) {
  let table = emitter[kEvents];
  if (table === undefined) {
    if (!create) return undefined;
    table = new p.Map();
    ObjectDefineProperty(emitter, kEvents, { __proto__: null, value: table, writable: true, configurable: true });
  }
  let list = p.MapPrototypeGet(table, event);
  if (list === undefined && create) {
    list = [];
    p.MapPrototypeSet(table, event, list);
  }
  return list;
}
function checkListener(listener) {
  if (typeof listener !== "function") throw errors.invalidArgType("listener", "Function", listener);
}
// Each entry is [listener, once]; `rawListeners` gives a once-wrapper as
// Node's (`listener` on it).
function add(emitter, event, listener, once, prepend) {
  checkListener(listener);
  const list = listenersOf(emitter, event, true);
  // As Node, 'newListener' is emitted before the listener is added.
  if (emitter[kEvents] !== undefined && p.MapPrototypeHas(emitter[kEvents], "newListener")) {
    emit(emitter, "newListener", [event, listener]);
  }
  const entry = [listener, once];
  if (prepend) p.ArrayPrototypeUnshift(list, entry);
  else list[list.length] = entry;
  return emitter;
}
function remove(emitter, event, listener) {
  checkListener(listener);
  const list = listenersOf(emitter, event, false);
  if (list === undefined) return emitter;
  for (let i = list.length - 1; i >= 0; i--) {
    if (list[i][0] === listener) {
      p.ArrayRemove(list, i, 1);
      if (list.length === 0) p.MapPrototypeDelete(emitter[kEvents], event);
      return emitter;
    }
  }
  return emitter;
}
function emit(emitter, event, args) {
  const list = listenersOf(emitter, event, false);
  if (list === undefined || list.length === 0) {
    if (event === "error") throw args[0];
    return false;
  }
  // A copy: a listener may add or remove listeners while they are called.
  const entries = p.ArrayPrototypeSlice(list);
  for (let i = 0; i < entries.length; i++) {
    const listener = entries[i][0];
    const once = entries[i][1];
    if (once) remove(emitter, event, listener);
    ReflectApply(listener, emitter, args);
  }
  return true;
}
function listenerArray(emitter, event, raw) {
  const list = listenersOf(emitter, event, false);
  if (list === undefined) return [];
  return p.ArrayPrototypeMap(list, (entry) => {
    if (!raw || !entry[1]) return entry[0];
    const wrapper = function () {
      remove(emitter, event, entry[0]);
      return ReflectApply(entry[0], this, arguments);
    };
    wrapper.listener = entry[0];
    return wrapper;
  });
}

class EventEmitter {
  addListener(event, listener) {
    return add(this, event, listener, false, false);
  }
  prependListener(event, listener) {
    return add(this, event, listener, false, true);
  }
  once(event, listener) {
    return add(this, event, listener, true, false);
  }
  prependOnceListener(event, listener) {
    return add(this, event, listener, true, true);
  }
  removeListener(event, listener) {
    return remove(this, event, listener);
  }
  removeAllListeners(event) {
    const table = this[kEvents];
    if (table === undefined) return this;
    if (arguments.length === 0) ObjectDefineProperty(this, kEvents, { __proto__: null, value: undefined, writable: true, configurable: true });
    else p.MapPrototypeDelete(table, event);
    return this;
  }
  emit(event, ...args) {
    return emit(this, event, args);
  }
  listeners(event) {
    return listenerArray(this, event, false);
  }
  rawListeners(event) {
    return listenerArray(this, event, true);
  }
  listenerCount(event, listener) {
    const list = listenersOf(this, event, false);
    if (list === undefined) return 0;
    if (listener === undefined) return list.length;
    let count = 0;
    for (let i = 0; i < list.length; i++) if (list[i][0] === listener) count++;
    return count;
  }
  eventNames() {
    const table = this[kEvents];
    if (table === undefined) return [];
    const names = [];
    const entries = p.MapPrototypeEntries(table);
    for (;;) {
      const step = p.MapIteratorPrototypeNext(entries);
      if (step.done) return names;
      names[names.length] = step.value[0];
    }
  }
  setMaxListeners(n) {
    if (typeof n !== "number" || n < 0 || p.NumberIsNaN(n)) {
      throw errors.outOfRange("n", "a non-negative number", n);
    }
    ObjectDefineProperty(this, kMaxListeners, { __proto__: null, value: n, writable: true, configurable: true });
    return this;
  }
  getMaxListeners() {
    return this[kMaxListeners] === undefined ? 10 : this[kMaxListeners];
  }
}

// As Node's: `on` is `addListener`, `off` is `removeListener`.
ObjectDefineProperty(EventEmitter.prototype, "on", { __proto__: null, value: EventEmitter.prototype.addListener, writable: true, configurable: true });
ObjectDefineProperty(EventEmitter.prototype, "off", { __proto__: null, value: EventEmitter.prototype.removeListener, writable: true, configurable: true });

// --- stdout / stderr -------------------------------------------------------

/** A callback of a write or end: called once, after the current operation. */
function later(callback) {
  if (typeof callback === "function") queueTask(() => callback(null));
}

/**
 * process.stdout / process.stderr, shaped as a Node worker's: a writable
 * stream whose `write` is on the prototype (as Node's is, so a program
 * that calls `Object.getPrototypeOf(process.stdout).write` still
 * writes), each write one log entry in the run's one ordered list. As in
 * a worker, they are not TTYs: `isTTY` and `columns` are undefined.
 */
class Writable extends EventEmitter {
  write(chunk, encoding, callback) {
    writeLog(typeof chunk === "string" ? chunk : String(chunk));
    later(typeof encoding === "function" ? encoding : callback);
    return true;
  }
  /** Node's end(): the last chunk if any, then the callback. */
  end(chunk, encoding, callback) {
    if (typeof chunk === "function") callback = chunk;
    else if (chunk !== undefined && chunk !== null) writeLog(typeof chunk === "string" ? chunk : String(chunk));
    later(typeof encoding === "function" ? encoding : callback);
    return this;
  }
  cork() {}
  uncork() {}
  setDefaultEncoding() {
    return this;
  }
  get writable() {
    return true;
  }
}

// --- the process -----------------------------------------------------------

/** A tick's callback, guarded: a throw fails the run as an uncaught exception does. */
function runTick(callback, args) {
  try {
    if (args === undefined) callback();
    else ReflectApply(callback, undefined, args);
  } catch (error) {
    reportFailure(error);
  }
}

function nextTick(callback, ...args) {
  if (typeof callback !== "function") throw errors.invalidArgType("callback", "Function", callback);
  // deno_core's tick queue: drained after the current operation, before
  // promise jobs, and between timer callbacks, as Node's is.
  core.queueNextTick({ __proto__: null, callback: runTick, args: [callback, args.length === 0 ? undefined : args], snapshot: undefined });
}

const NS_PER_SEC = 1e9;
/** Nanoseconds since the run started, on the run's monotonic clock. */
const nowNs = () => ops.op_dsh_now() * 1e6;

function hrtime(time) {
  const ns = nowNs();
  const sec = p.MathFloor(ns / NS_PER_SEC);
  const nsec = p.MathFloor(ns - sec * NS_PER_SEC);
  if (time !== undefined) {
    if (!ArrayIsArray(time)) throw errors.invalidArgType("time", "Array", time);
    if (time.length !== 2) throw errors.outOfRange("time", 2, time.length);
    const dsec = sec - time[0];
    const dnsec = nsec - time[1];
    return dnsec < 0 ? [dsec - 1, dnsec + NS_PER_SEC] : [dsec, dnsec];
  }
  return [sec, nsec];
}
defineAssigned(hrtime, "bigint", function bigint() {
  return p.BigInt(p.MathFloor(nowNs()));
});

const memory = new p.Float64Array(5);
function memoryUsage() {
  ops.op_dsh_memory_usage(memory);
  return { rss: memory[0], heapTotal: memory[1], heapUsed: memory[2], external: memory[3], arrayBuffers: memory[4] };
}
defineAssigned(memoryUsage, "rss", function rss() {
  ops.op_dsh_memory_usage(memory);
  return memory[0];
});

const validUsage = (n) => typeof n === "number" && n <= 9007199254740991 && n >= 0;
/** The run's CPU as computeMs counts it (all of it `user`: one clock, the thread's). */
function cpuUsage(prevValue) {
  if (prevValue) {
    const keys = ["user", "system"];
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i];
      if (!validUsage(prevValue[key])) {
        if (typeof prevValue !== "object") throw errors.invalidArgType("prevValue", "object", prevValue);
        errors.validateNumber(prevValue[key], `prevValue.${key}`);
        throw errors.nodeError(p.RangeError, "ERR_INVALID_ARG_VALUE", `The property 'prevValue.${key}' is invalid. Received ${inspect(prevValue[key])}`, cpuUsage);
      }
    }
  }
  const user = p.MathRound(ops.op_dsh_cpu_usage());
  if (prevValue) return { user: user - prevValue.user, system: 0 - prevValue.system };
  return { user, system: 0 };
}

/**
 * Node's process.emitWarning: the warning is emitted as a 'warning'
 * event on the next tick, and the default listener writes Node's line
 * to stderr (a log entry).
 */
function emitWarning(warning, type, code, ctor) {
  let detail;
  if (type !== null && typeof type === "object" && !ArrayIsArray(type)) {
    ctor = type.ctor;
    code = type.code;
    if (typeof type.detail === "string") detail = type.detail;
    type = type.type || "Warning";
  } else if (typeof type === "function") {
    ctor = type;
    code = undefined;
    type = "Warning";
  }
  if (type !== undefined && typeof type !== "string") throw errors.invalidArgType("type", "string", type);
  if (typeof code === "function") {
    ctor = code;
    code = undefined;
  } else if (code !== undefined && typeof code !== "string") {
    throw errors.invalidArgType("code", "string", code);
  }
  if (typeof warning === "string") {
    const made = new p.Error(warning);
    made.name = String(type || "Warning");
    if (code !== undefined) made.code = code;
    if (detail !== undefined) made.detail = detail;
    p.ErrorCaptureStackTrace(made, ctor || process.emitWarning);
    warning = made;
  } else if (!p.ObjectPrototypeIsPrototypeOf(p.ErrorPrototype, warning)) {
    throw errors.invalidArgType("warning", ["Error", "string"], warning);
  }
  nextTick(() => emit(process, "warning", [warning]));
}

// Node's onWarning: its hint about --trace-warnings comes with the first
// warning only.
let traceHintShown = false;
function onWarning(warning) {
  if (!p.ObjectPrototypeIsPrototypeOf(p.ErrorPrototype, warning)) return;
  const deprecation = warning.name === "DeprecationWarning";
  let message = `(node:${process.pid}) `;
  if (warning.code) message += `[${warning.code}] `;
  message += typeof warning.toString === "function" ? `${warning.toString()}` : p.ErrorPrototypeToString(warning);
  if (typeof warning.detail === "string") message += `\n${warning.detail}`;
  if (!traceHintShown) {
    message += `\n(Use \`node ${deprecation ? "--trace-deprecation" : "--trace-warnings"} ...\` to show where the warning was created)`;
    traceHintShown = true;
  }
  writeLog(`${message}\n`);
}

// Node's process is an instance of a class named `process`.
const ProcessPrototype = ObjectCreate(EventEmitter.prototype);
const ProcessConstructor = function process() {};
ProcessConstructor.prototype = ProcessPrototype;
ObjectDefineProperty(ProcessPrototype, "constructor", { __proto__: null, value: ProcessConstructor, writable: true, configurable: true });

// Node's process.ref / unref: whatever the object's own ref / unref does
// (a Timeout's or an Immediate's here).
const kRef = p.SymbolFor("nodejs.ref");
const kUnref = p.SymbolFor("nodejs.unref");
function callRef(object, symbol, name) {
  if (object === null || object === undefined) return;
  const fn = object[symbol] || object[name];
  if (typeof fn === "function") ReflectApply(fn, object, []);
}

// A literal, whose members are defined, not assigned: a setter the program
// put on Object.prototype before its first touch of process takes none.
const process = {
  __proto__: ProcessPrototype,
  version: `v${host.nodeVersion}`,
  versions: { node: host.nodeVersion, v8: engine.v8 },
  arch: engine.arch,
  release: { name: "node" },
  title: "node",
  // The program is alone in its world, as a container's first process is:
  // the host's process ids say nothing about the run (README, "process").
  pid: 1,
  ppid: 0,
  env: makeEnv(),
  argv: [],
  execArgv: [],
  platform: "sandbox",
  stdout: new Writable(),
  stderr: new Writable(),
  nextTick,
  hrtime,
  uptime: function uptime() {
    return ops.op_dsh_now() / 1000;
  },
  memoryUsage,
  cpuUsage,
  // The run has one thread, and cpuUsage is already its CPU.
  threadCpuUsage: function threadCpuUsage(prevValue) {
    return cpuUsage(prevValue);
  },
  ref: function ref(maybeRefable) {
    callRef(maybeRefable, kRef, "ref");
  },
  unref: function unref(maybeRefable) {
    callRef(maybeRefable, kUnref, "unref");
  },
  emitWarning,
  // No file system: the run's working directory is the root of nothing.
  cwd: function cwd() {
    return "/";
  },
};
ObjectDefineProperty(process, p.SymbolToStringTag, { __proto__: null, value: "process", configurable: true, writable: false, enumerable: false });
// As Node's: checked when set, a string of an integer kept as the
// number, null as undefined.
let exitCode;
function setExitCode(code, caller) {
  exitCode = code === null || code === undefined ? undefined : exitCodeOf(code, caller);
}
ObjectDefineProperty(process, "exitCode", {
  __proto__: null,
  get: function get() {
    return exitCode;
  },
  set: function set(code) {
    setExitCode(code, set);
  },
  enumerable: true,
  configurable: false,
});
let exiting = false;
defineAssigned(process, "exit", function exit(code) {
  // As Node: an argument, even undefined, replaces exitCode.
  if (arguments.length !== 0) setExitCode(code, exit);
  const status = exitCodeOf(exitCode, exit);
  // As Node: the 'exit' listeners run once, before the run ends, told
  // the code.
  if (!exiting) {
    exiting = true;
    try {
      emit(process, "exit", [exitCode || 0]);
    } catch {
      // A throw in an exit listener does not stop the exit.
    }
  }
  ops.op_dsh_exit(status);
  // The op has asked for termination; nothing after exit() may run.
  for (;;) {}
});
add(process, "warning", onWarning, false, false);

return { __proto__: null, process };
