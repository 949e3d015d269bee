// Copyright the dsh-code-runtime-v8 authors. MIT license.
// The program's console. Every method produces its output the way Node's
// console prints it (lib/internal/console/constructor.js, MIT license,
// Copyright Node.js contributors), without colors and with the seam's
// rules: strings raw, everything else through inspect, joined by a space,
// no %-format processing, no trailing newline. Each call appends ONE log
// entry through the output ledger, eagerly, so logs survive any failure.
//
// Takes: primordials, native (core, ops), inspect. Provides console:
// { writeLog, makeConsole }.
"use strict";

((globalThis) => {
  const {
    primordials: p,
    native: { core, ops },
    inspect: { inspect, getStringWidth, programStack },
    provide,
  } = globalThis.__dsh;
  const {
    ObjectCreate,
    ObjectKeys,
    ObjectHasOwn,
    ArrayIsArray,
    ArrayPrototypeJoin,
    ArrayPrototypeMap,
    ArrayPrototypePush,
    ArrayPrototypeUnshift,
    ReflectApply,
    StringPrototypeRepeat,
    StringReplaceAllLiteral,
    StringPrototypeIncludes,
    StringPrototypeSlice,
    MathMax,
    MathFloor,
    Number,
  } = p;

  /** Append one entry to the run's logs (the ledger may stop the run). */
  function writeLog(text) {
    if (!ops.op_dsh_log(text)) {
      // Output cap crossed: the run is being terminated; stop here.
      for (;;) {}
    }
  }

  function render(args) {
    return ArrayPrototypeJoin(
      ArrayPrototypeMap(args, (arg) => (typeof arg === "string" ? arg : inspect(arg))),
      " ",
    );
  }

  const tableChars = {
    __proto__: null,
    middleMiddle: "\u2500",
    rowMiddle: "\u253c",
    topRight: "\u2510",
    topLeft: "\u250c",
    leftMiddle: "\u251c",
    topMiddle: "\u252c",
    bottomRight: "\u2518",
    bottomLeft: "\u2514",
    bottomMiddle: "\u2534",
    rightMiddle: "\u2524",
    left: "\u2502 ",
    right: " \u2502",
    middle: " \u2502 ",
  };

  function renderRow(row, columnWidths) {
    let out = tableChars.left;
    for (let i = 0; i < row.length; i++) {
      const cell = row[i];
      const needed = columnWidths[i] - getStringWidth(cell);
      out += cell + StringPrototypeRepeat(" ", p.MathMax(0, needed));
      if (i !== row.length - 1) out += tableChars.middle;
    }
    return out + tableChars.right;
  }

  function renderTable(head, columns) {
    const rows = [];
    const columnWidths = ArrayPrototypeMap(head, (h) => getStringWidth(h));
    let longestColumn = 0;
    for (let i = 0; i < columns.length; i++) longestColumn = MathMax(longestColumn, columns[i].length);
    for (let i = 0; i < head.length; i++) {
      const column = columns[i];
      for (let j = 0; j < longestColumn; j++) {
        if (rows[j] === undefined) rows[j] = [];
        const value = (rows[j][i] = ObjectHasOwn(column, j) ? column[j] : "");
        columnWidths[i] = MathMax(columnWidths[i] || 0, getStringWidth(value));
      }
    }
    const divider = ArrayPrototypeMap(columnWidths, (w) => StringPrototypeRepeat(tableChars.middleMiddle, w + 2));
    let result = tableChars.topLeft + ArrayPrototypeJoin(divider, tableChars.topMiddle) + tableChars.topRight + "\n" +
      renderRow(head, columnWidths) + "\n" +
      tableChars.leftMiddle + ArrayPrototypeJoin(divider, tableChars.rowMiddle) + tableChars.rightMiddle + "\n";
    for (let i = 0; i < rows.length; i++) result += renderRow(rows[i], columnWidths) + "\n";
    return result + tableChars.bottomLeft + ArrayPrototypeJoin(divider, tableChars.bottomMiddle) + tableChars.bottomRight;
  }

  // Node's formatTime (internal/util/debuglog).
  function formatTime(ms) {
    let hours = 0;
    let minutes = 0;
    let seconds = 0;
    if (ms >= 1000) {
      if (ms >= 60000) {
        if (ms >= 3600000) {
          hours = MathFloor(ms / 3600000);
          ms = ms % 3600000;
        }
        minutes = MathFloor(ms / 60000);
        ms = ms % 60000;
      }
      seconds = ms / 1000;
    }
    const pad = (value) => p.StringPrototypePadStart(`${value}`, 2, "0");
    if (hours !== 0 || minutes !== 0) {
      const parts = p.StringSplitLiteral(p.NumberPrototypeToFixed(seconds, 3), ".");
      const res = hours !== 0 ? `${hours}:${pad(minutes)}` : minutes;
      return `${res}:${pad(parts[0])}.${parts[1]} (${hours !== 0 ? "h:m" : ""}m:ss.mmm)`;
    }
    if (seconds !== 0) return `${p.NumberPrototypeToFixed(seconds, 3)}s`;
    return `${Number(p.NumberPrototypeToFixed(ms, 3))}ms`;
  }

  function makeConsole() {
    const console = ObjectCreate(null);
    let groupIndent = "";
    const counts = new p.Map();
    const timers = new p.Map();

    function emit(text) {
      if (groupIndent.length !== 0) {
        if (StringPrototypeIncludes(text, "\n")) text = StringReplaceAllLiteral(text, "\n", `\n${groupIndent}`);
        text = groupIndent + text;
      }
      writeLog(text);
    }
    const print = (...args) => emit(render(args));

    const methods = {
      __proto__: null,
      log: print,
      info: print,
      debug: print,
      warn: print,
      error: print,
      dirxml: print,
      dir(object, options) {
        emit(inspect(object, { __proto__: null, customInspect: false, ...(options !== null && typeof options === "object" ? options : {}) }));
      },
      trace(...args) {
        const err = { name: "Trace", message: render(args) };
        p.ErrorCaptureStackTrace(err, methods.trace);
        emit(programStack(err.stack));
      },
      assert(expression, ...args) {
        if (!expression) {
          if (args.length && typeof args[0] === "string") args[0] = `Assertion failed: ${args[0]}`;
          else ArrayPrototypeUnshift(args, "Assertion failed");
          emit(render(args));
        }
      },
      count(label = "default") {
        label = `${label}`;
        const count = (p.MapPrototypeGet(counts, label) ?? 0) + 1;
        p.MapPrototypeSet(counts, label, count);
        emit(`${label}: ${count}`);
      },
      countReset(label = "default") {
        p.MapPrototypeDelete(counts, `${label}`);
      },
      group(...data) {
        if (data.length > 0) emit(render(data));
        groupIndent += "  ";
      },
      groupEnd() {
        groupIndent = StringPrototypeSlice(groupIndent, 0, MathMax(0, groupIndent.length - 2));
      },
      time(label = "default") {
        label = `${label}`;
        if (p.MapPrototypeHas(timers, label)) {
          emit(`Warning: Label '${label}' already exists for console.time()`);
          return;
        }
        p.MapPrototypeSet(timers, label, ops.op_dsh_now());
      },
      timeEnd(label = "default") {
        label = `${label}`;
        const start = p.MapPrototypeGet(timers, label);
        if (start === undefined) {
          emit(`Warning: No such label '${label}' for console.timeEnd()`);
          return;
        }
        p.MapPrototypeDelete(timers, label);
        emit(`${label}: ${formatTime(ops.op_dsh_now() - start)}`);
      },
      timeLog(label = "default", ...data) {
        label = `${label}`;
        const start = p.MapPrototypeGet(timers, label);
        if (start === undefined) {
          emit(`Warning: No such label '${label}' for console.timeLog()`);
          return;
        }
        // Not `[line, ...data]`: a spread runs the program-mutable array iterator.
        ArrayPrototypeUnshift(data, `${label}: ${formatTime(ops.op_dsh_now() - start)}`);
        emit(render(data));
      },
      table(tabularData, properties) {
        if (tabularData === null || typeof tabularData !== "object") return print(tabularData);
        const inspectCell = (v) => {
          const depth = v !== null && typeof v === "object" && !ArrayIsArray(v) && !core.isTypedArray(v) && ObjectKeys(v).length > 2 ? -1 : 0;
          return inspect(v, { __proto__: null, depth, maxArrayLength: 3, breakLength: Infinity });
        };
        const indexArray = (length) => {
          const out = [];
          for (let i = 0; i < length; i++) ArrayPrototypePush(out, inspectCell(i));
          return out;
        };
        if (core.isMap(tabularData)) {
          const keys = [];
          const values = [];
          const iterator = p.MapPrototypeEntries(tabularData);
          for (let step = p.MapIteratorPrototypeNext(iterator); !step.done; step = p.MapIteratorPrototypeNext(iterator)) {
            ArrayPrototypePush(keys, inspectCell(step.value[0]));
            ArrayPrototypePush(values, inspectCell(step.value[1]));
          }
          return emit(renderTable(["(iteration index)", "Key", "Values"], [indexArray(keys.length), keys, values]));
        }
        if (core.isSet(tabularData)) {
          const values = [];
          const iterator = p.SetPrototypeValues(tabularData);
          for (let step = p.SetIteratorPrototypeNext(iterator); !step.done; step = p.SetIteratorPrototypeNext(iterator)) {
            ArrayPrototypePush(values, inspectCell(step.value));
          }
          return emit(renderTable(["(iteration index)", "Values"], [indexArray(values.length), values]));
        }
        const map = { __proto__: null };
        let hasPrimitives = false;
        const valuesKeyArray = [];
        const indexKeyArray = ObjectKeys(tabularData);
        for (let i = 0; i < indexKeyArray.length; i++) {
          const item = tabularData[indexKeyArray[i]];
          const primitive = item === null || (typeof item !== "function" && typeof item !== "object");
          if (properties === undefined && primitive) {
            hasPrimitives = true;
            valuesKeyArray[i] = inspectCell(item);
          } else {
            const keys = properties || ObjectKeys(item);
            for (let k = 0; k < keys.length; k++) {
              const key = keys[k];
              map[key] ??= [];
              if ((primitive && properties) || !ObjectHasOwn(item, key)) map[key][i] = "";
              else map[key][i] = inspectCell(item[key]);
            }
          }
        }
        const keys = ObjectKeys(map);
        const values = ArrayPrototypeMap(keys, (key) => map[key]);
        if (hasPrimitives) {
          ArrayPrototypePush(keys, "Values");
          ArrayPrototypePush(values, valuesKeyArray);
        }
        ArrayPrototypeUnshift(keys, "(index)");
        ArrayPrototypeUnshift(values, indexKeyArray);
        return emit(renderTable(keys, values));
      },
    };
    methods.groupCollapsed = methods.group;
    const names = ObjectKeys(methods);
    for (let i = 0; i < names.length; i++) {
      const name = names[i];
      const method = methods[name];
      console[name] = function (...args) {
        ReflectApply(method, undefined, args);
      };
      p.ObjectDefineProperty(console[name], "name", { __proto__: null, value: name });
    }
    return console;
  }
  provide("console", { __proto__: null, writeLog, makeConsole });
})(globalThis);
