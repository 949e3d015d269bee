// Copyright the dsh-code-runtime-v8 authors. MIT license.
// performance, as Node's: now() and timeOrigin on the run's own clock
// (op_dsh_now counts from the run's start), and the user timing API
// (mark, measure, their entries and clears) with Node's entry classes and
// console rendering. Node's observers, resource timing and event-loop
// figures describe a process the program does not have, so they are absent.
// A lazy module (14_lazy_globals.js).
//
// Takes: primordials, native (ops), api, inspect, lazyGlobals (the
// domException and structuredClone modules), nodeErrors. Makes performance, Performance,
// PerformanceEntry, PerformanceMark, PerformanceMeasure.
"use strict";

const {
  primordials: p,
  native: { ops },
  api: { internalKey: INTERNAL, setToStringTag },
  inspect: { inspect },
  lazyGlobals: { load },
  nodeErrors: errors,
} = dsh;
const { domException } = load("domException");
// The module's own function, not the global a program can replace.
const { structuredClone } = load("structuredClone");
const { checkConstructorKey } = errors;
const customInspect = p.SymbolFor("nodejs.util.inspect.custom");

const now = () => ops.op_dsh_now();


class PerformanceEntry {
  #name;
  #type;
  #start;
  #duration;
  constructor(key = undefined, name = undefined, type = undefined, start = 0, duration = 0) {
    checkConstructorKey(key);
    this.#name = name;
    this.#type = type;
    this.#start = start;
    this.#duration = duration;
  }
  get name() {
    return this.#name;
  }
  get entryType() {
    return this.#type;
  }
  get startTime() {
    return this.#start;
  }
  get duration() {
    return this.#duration;
  }
  toJSON() {
    return { name: this.#name, entryType: this.#type, startTime: this.#start, duration: this.#duration };
  }
  [customInspect](depth, options) {
    if (depth < 0) return this;
    const inner = { __proto__: null, ...options, depth: options.depth == null ? null : options.depth - 1 };
    return `${this.constructor.name} ${inspect(this.toJSON(), inner)}`;
  }
}

class PerformanceMark extends PerformanceEntry {
  #detail;
  constructor(name, options = undefined) {
    if (arguments.length === 0) throw errors.missingArgs(["name"]);
    const start = options?.startTime ?? now();
    if (typeof start !== "number") throw errors.invalidArgType("startTime", "number", start);
    if (start < 0) throw invalidTimestamp(start);
    super(INTERNAL, `${name}`, "mark", start, 0);
    const detail = options?.detail;
    this.#detail = detail === undefined ? null : structuredClone(detail);
  }
  get detail() {
    return this.#detail;
  }
  toJSON() {
    return { ...super.toJSON(), detail: this.#detail };
  }
}

class PerformanceMeasure extends PerformanceEntry {
  #detail;
  constructor(key, name, start, duration, detail) {
    super(key, name, "measure", start, duration);
    this.#detail = detail;
  }
  get detail() {
    return this.#detail;
  }
  toJSON() {
    return { ...super.toJSON(), detail: this.#detail };
  }
}

// The run's entries, in the order made.
const entries = [];
let timeOrigin;

/** Node's error for a time before the run's origin. */
const invalidTimestamp = (time) => errors.nodeError(p.TypeError, "ERR_PERFORMANCE_INVALID_TIMESTAMP", `${time} is not a valid timestamp`);
/** Node's error for measure options that contradict each other. */
const invalidMeasure = (message) => errors.nodeError(p.TypeError, "ERR_PERFORMANCE_MEASURE_INVALID_OPTIONS", message);

function markTime(name) {
  if (typeof name === "number") {
    if (name < 0) throw invalidTimestamp(name);
    return name;
  }
  for (let i = entries.length - 1; i >= 0; i--) {
    if (entries[i].entryType === "mark" && entries[i].name === name) return entries[i].startTime;
  }
  throw domException(`The "${name}" performance mark has not been set`, "SyntaxError", markTime);
}

function filtered(name, type) {
  const out = [];
  for (let i = 0; i < entries.length; i++) {
    if ((name === undefined || entries[i].name === name) && (type === undefined || entries[i].entryType === type)) p.ArrayPrototypePush(out, entries[i]);
  }
  return p.ArrayPrototypeSort(out, (a, b) => a.startTime - b.startTime);
}

function clear(type, name) {
  for (let i = entries.length - 1; i >= 0; i--) {
    if (entries[i].entryType === type && (name === undefined || entries[i].name === `${name}`)) p.ArrayRemove(entries, i, 1);
  }
}

class Performance {
  constructor(key = undefined) {
    checkConstructorKey(key);
  }
  now() {
    return now();
  }
  get timeOrigin() {
    // Fixed at its first read in the run: the epoch time of the run's start.
    if (timeOrigin === undefined) timeOrigin = ops.op_dsh_wall_now() - now();
    return timeOrigin;
  }
  mark(name, options = undefined) {
    // Not a spread: it would read the program-mutable array iterator.
    const mark = p.ReflectConstruct(PerformanceMark, arguments.length === 0 ? [] : [name, options]);
    p.ArrayPrototypePush(entries, mark);
    return mark;
  }
  measure(name, startOrOptions = undefined, endMark = undefined) {
    if (arguments.length === 0) throw errors.missingArgs(["name"]);
    let start;
    let end;
    let detail = null;
    if (startOrOptions !== null && typeof startOrOptions === "object") {
      // Node's checks, when the options name a start or an end.
      if (startOrOptions.start !== undefined || startOrOptions.end !== undefined) {
        if (endMark !== undefined) throw invalidMeasure("endMark must not be specified");
        if (startOrOptions.start !== undefined && startOrOptions.end !== undefined && startOrOptions.duration !== undefined) {
          throw invalidMeasure("Must not have options.start, options.end, and options.duration specified");
        }
      }
      if (startOrOptions.start !== undefined) start = markTime(startOrOptions.start);
      if (startOrOptions.end !== undefined) end = markTime(startOrOptions.end);
      if (startOrOptions.duration !== undefined) {
        if (start === undefined && end !== undefined) start = end - startOrOptions.duration;
        else end = (start ?? 0) + startOrOptions.duration;
      }
      if (startOrOptions.detail !== undefined) detail = structuredClone(startOrOptions.detail);
    } else if (startOrOptions !== undefined) {
      start = markTime(startOrOptions);
    }
    if (endMark !== undefined) end = markTime(endMark);
    start ??= 0;
    end ??= now();
    const measure = new PerformanceMeasure(INTERNAL, `${name}`, start, end - start, detail);
    p.ArrayPrototypePush(entries, measure);
    return measure;
  }
  getEntries() {
    return filtered(undefined, undefined);
  }
  getEntriesByName(name, type = undefined) {
    return filtered(`${name}`, type === undefined ? undefined : `${type}`);
  }
  getEntriesByType(type) {
    return filtered(undefined, `${type}`);
  }
  clearMarks(name = undefined) {
    clear("mark", name);
  }
  clearMeasures(name = undefined) {
    clear("measure", name);
  }
  toJSON() {
    return { timeOrigin: this.timeOrigin };
  }
}

setToStringTag(PerformanceEntry);
setToStringTag(PerformanceMark);
setToStringTag(PerformanceMeasure);
setToStringTag(Performance);

return { __proto__: null, performance: new Performance(INTERNAL), Performance, PerformanceEntry, PerformanceMark, PerformanceMeasure };
