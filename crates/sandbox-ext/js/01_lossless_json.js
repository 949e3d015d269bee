// Copyright the dsh-code-runtime-v8 authors. MIT license.
// The lossless-JSON boundary (docs/CONTRACT.md §5), in one piece that serves
// both sides of the bridge: the isolate loads it into the startup snapshot
// (over the intrinsics 00_primordials.js captured), and the Node host loads
// the same file over its own realm's intrinsics (ts/lossless-json.ts).
//
// encode(value) walks the value iteratively (no stack depth limit), reads
// every property exactly once, and produces compact JSON text, or returns
// `undefined` when the value is not lossless JSON. It never calls toJSON,
// never consults a mutable prototype, and refuses Proxies outright.
//
// A call's argument, and a tool's result, may leave their long strings out
// of the JSON: encode then writes `null` in their places and collects them
// with the JSON array of their paths, and decodeWithStrings puts them back
// on the other side (crates/protocol/src/out_of_band.rs says why and
// checks an argument's paths; crates/protocol/src/frame.rs's Answer).
//
// Takes: primordials. Provides losslessJson: { encode, decode,
// decodeWithStrings, TOO_LARGE, OUT_OF_BAND_LENGTH, create(scanLongStrings) }.
"use strict";

((globalThis) => {
  /**
   * @param p the realm's captured intrinsics
   * @param scanLongStrings whether this realm's JSON.stringify is slower on
   *   a long string than a scan for what it would escape (V8 before 13.8,
   *   which made it a SIMD copy: the host's Node 22 and 24, not the isolate)
   */
  function createLosslessJson(p, scanLongStrings) {
    const {
      ArrayIsArray,
      ArrayPrototype,
      ObjectPrototype,
      ObjectGetPrototypeOf,
      ObjectIs,
      ReflectOwnKeys,
      ObjectGetOwnPropertyNames,
      ObjectGetOwnPropertySymbols,
      NumberIsFinite,
      JSONStringify,
      JSONParse,
      SetPrototypeAdd,
      SetPrototypeHas,
      SetPrototypeDelete,
      ObjectPrototypePropertyIsEnumerable,
      StringPrototypeIsWellFormed,
      isProxy,
    } = p;
    const SafeSet = p.Set;
    const ObjectDefineProperty = p.ObjectDefineProperty;
    const ObjectSetPrototypeOf = p.ObjectSetPrototypeOf;
    const ObjectHasOwn = p.ObjectHasOwn;
    const ObjectKeys = p.ObjectKeys;
    const StringPrototypeCharCodeAt = p.StringPrototypeCharCodeAt;
    const StringPrototypeIndexOf = p.StringPrototypeIndexOf;
    const RegExpPrototypeExec = p.RegExpPrototypeExec;
    // Where JSON.parse could yield -0 or an overflowed Infinity: a number
    // token "-0..." (in JSON a number starts the text or follows "[", ","
    // or ":", after optional white space), an exponent of 3+ digits (an
    // underflow to -0 too), or a literal of 309+ digits. Inside strings
    // these only cost the walk. Three patterns, each tried only where it
    // could match: as one alternation, tried at every "[", "," and ":",
    // they cost half to two thirds of parsing a small object's text.
    const NEGATIVE_ZERO = new p.RegExp("(?:^|[[,:])[ \\t\\n\\r]*-0");
    const LONG_EXPONENT = new p.RegExp("[eE][+-]?\\d{3}");
    const LONG_LITERAL = new p.RegExp("\\d{309}");
    // What JSON.stringify escapes in a string: a quote, a backslash, a
    // control character, a surrogate (a lone one becomes \udXXX; paired
    // ones are left to JSON.stringify too). Where JSON.stringify is slow on
    // long strings (4 MiB: ~25 ms on Node 22's V8, ~7 ms to scan, ~4 ms for
    // V8 14's JSON.stringify), a string with none of them is its JSON text
    // between quotes.
    const ESCAPED = new p.RegExp('["\\\\\\u0000-\\u001f\\ud800-\\udfff]');
    /** Below this length JSON.stringify is as quick as the scan. */
    const LONG_STRING = scanLongStrings ? 16384 : Infinity;

    /**
     * Strings at least this long leave the JSON when the caller collects
     * them: below it, the JSON pass costs less than a string of its own.
     */
    const OUT_OF_BAND_LENGTH = 16384;

    /**
     * How many strings of its length a long string is compared with before
     * it is taken as new: the same string in several places crosses once,
     * and many strings of one length cost a bounded number of comparisons
     * each.
     */
    const SAME_STRING_CANDIDATES = 8;

    /**
     * Up to this length a string is scanned here for what JSON.stringify
     * would escape (ESCAPED's characters, one by one: on a short string
     * the regex's call costs more than the scan, and a call of
     * JSON.stringify more still).
     */
    const SHORT_STRING = 32;

    /**
     * Up to this depth a container is checked against the open ones (its
     * possible cycle) by a scan of the walk's stack; past it, through a Set
     * of them made then: a scan is quicker than a Set's calls at the depths
     * values have, and a hostile value nested far deeper costs no more
     * than a Set per container.
     */
    const SCANNED_DEPTH = 32;

    /**
     * JSON text of a string (a value or a key): JSON.stringify, spared for
     * a short or long one with nothing to escape.
     */
    function quote(s) {
      if (s.length <= SHORT_STRING) {
        for (let i = 0; i < s.length; i++) {
          const c = StringPrototypeCharCodeAt(s, i);
          if (c < 0x20 || c === 0x22 || c === 0x5c || (c >= 0xd800 && c <= 0xdfff)) return JSONStringify(s);
        }
        return '"' + s + '"';
      }
      return s.length >= LONG_STRING && RegExpPrototypeExec(ESCAPED, s) === null ? '"' + s + '"' : JSONStringify(s);
    }

    // The encoder's lists are its own: a program may define index
    // accessors on Array.prototype or Object.prototype, which a store into
    // an ordinary array's hole reaches (a setter called with the list as
    // `this`, a getter answering for the element, or a getter alone making
    // the store throw), so `return [1, 2, 3]` read back what a getter said.
    // The children read of the program's containers, and the walk's
    // stacks, are lists of no prototype (`ownList`), where no store reaches
    // anything; a list handed out defines what it appends (`setOwn`).

    /** An empty list whose stores reach nothing but its own elements. */
    function ownList() {
      const list = [];
      ObjectSetPrototypeOf(list, null);
      return list;
    }

    /**
     * `list[i] = value` on a list with Array.prototype, defined where `i` is
     * past its end (a call into the runtime: for rare appends only).
     */
    function setOwn(list, i, value) {
      if (i < list.length) list[i] = value;
      else ObjectDefineProperty(list, i, { __proto__: null, value, writable: true, enumerable: true, configurable: true });
    }

    /**
     * Encode a lossless JSON value as compact JSON text.
     * @param value the candidate value
     * @param maxUnits optional bound on the text's UTF-16 length; the walk
     *   stops early (returning TOO_LARGE) once the text would exceed it.
     *   UTF-8 bytes of escaped JSON are never fewer than its UTF-16 units,
     *   so a text longer than the byte budget can never fit it.
     * @param outOfBand optional `{ paths: "", strings: null, wellFormed }`:
     *   strings of OUT_OF_BAND_LENGTH units or more are written as `null`
     *   and collected here instead, each once, in the order of their first
     *   places (`strings` becomes their array), with `paths` the JSON array
     *   of their places, each its string's index and then its path (keys as
     *   the JSON string tokens written for them, indices as numbers:
     *   crates/protocol/src/out_of_band.rs); left as it is when there are
     *   none. With `wellFormed`, only well-formed
     *   strings are collected (they will cross as UTF-8; the JSON keeps a
     *   lone surrogate as an escape)
     * @returns the JSON text, `undefined` when not lossless, or TOO_LARGE
     */
    function encode(value, maxUnits, outOfBand) {
      const limit = maxUnits === undefined ? Infinity : maxUnits;
      // A primitive root needs no walk.
      switch (typeof value) {
        case "string": {
          if (outOfBand !== undefined && beside(outOfBand, value)) {
            outOfBand.paths = "[[0]]";
            outOfBand.strings = [value];
            return "null";
          }
          const text = quote(value);
          return text.length <= limit ? text : TOO_LARGE;
        }
        case "number":
          if (!NumberIsFinite(value) || ObjectIs(value, -0)) return undefined;
          return "" + value;
        case "boolean":
          return value ? "true" : "false";
        case "object":
          if (value === null) return "null";
          break;
        default:
          return undefined;
      }
      // The root container, its children read once. A container of
      // primitives that stay in the JSON (most arguments and results) is
      // written here; one that holds a container, or a string that leaves
      // the JSON, is handed to the walk with the children already read.
      const rootValues = ownList();
      const rootKeys = readContainer(value, rootValues, 0);
      if (rootKeys === false) return undefined;
      let out = rootKeys === null ? "[" : "{";
      for (let i = 0; i < rootValues.length; i++) {
        const child = rootValues[i];
        let text;
        switch (typeof child) {
          case "string":
            if (outOfBand !== undefined && beside(outOfBand, child)) return walk(value, rootKeys, rootValues, limit, outOfBand);
            text = quote(child);
            break;
          case "number":
            if (!NumberIsFinite(child) || ObjectIs(child, -0)) return undefined;
            text = "" + child;
            break;
          case "boolean":
            text = child ? "true" : "false";
            break;
          case "object":
            if (child !== null) return walk(value, rootKeys, rootValues, limit, outOfBand);
            text = "null";
            break;
          default:
            return undefined;
        }
        if (i > 0) out += ",";
        if (rootKeys !== null) out += quote(rootKeys[i]) + ":";
        out += text;
        if (out.length > limit) return TOO_LARGE;
      }
      out += rootKeys === null ? "]" : "}";
      return out.length <= limit ? out : TOO_LARGE;
    }

    /** Whether `outOfBand` takes the string. */
    function beside(outOfBand, string) {
      return string.length >= OUT_OF_BAND_LENGTH && (!outOfBand.wellFormed || StringPrototypeIsWellFormed(string));
    }

    /**
     * Check one container and read its children once into `values` (an
     * `ownList`) from `base` on: a dense plain array (returns null), or a
     * plain / null-prototype object with only enumerable string keys
     * (returns its keys); false when it is not lossless JSON.
     */
    function readContainer(v, values, base) {
      if (isProxy(v)) return false;
      const proto = ObjectGetPrototypeOf(v);
      if (ArrayIsArray(v)) {
        if (proto !== ArrayPrototype) return false;
        const length = v.length;
        if (ReflectOwnKeys(v).length !== length + 1) return false;
        for (let i = 0; i < length; i++) {
          // Own and enumerable, or the array is sparse; a getter runs once.
          if (!ObjectPrototypePropertyIsEnumerable(v, i)) return false;
          values[base + i] = v[i];
        }
        return null;
      }
      if (proto !== ObjectPrototype && proto !== null) return false;
      // As many own string keys as enumerable ones, and no symbol keys. Not
      // Reflect.ownKeys: V8 answers these three from the object's enum
      // cache when every key is an enumerable string (Object.keys makes the
      // cache, so it goes first), and builds Reflect.ownKeys's list anew
      // each time (a quarter of what encoding a small object cost).
      const keys = ObjectKeys(v);
      if (ObjectGetOwnPropertyNames(v).length !== keys.length) return false;
      if (ObjectGetOwnPropertySymbols(v).length !== 0) return false;
      for (let i = 0; i < keys.length; i++) values[base + i] = v[keys[i]];
      return keys;
    }

    /**
     * The rest of encode, for a root that holds a container or a string
     * that leaves the JSON: `rootKeys` and `values` are what readContainer
     * read of it (its children from 0 on).
     */
    function walk(root, rootKeys, values, limit, outOfBand) {
      // The walk keeps one frame per open container (its children read
      // once, up front) in parallel arrays, and emits primitives inline; it
      // never recurses. Frames are not objects: allocating one per
      // container was most of the cost of encoding a small value. The
      // children of every open container are in `values`, one container's
      // after its parent's (a frame is where its own start and end), so a
      // walk makes one list of them. The stacks append as plain stores
      // (they have no prototype): defining each append cost more than the
      // rest of encoding a small nested value.
      const containers = ownList();
      const keyLists = ownList();
      const starts = ownList();
      const ends = ownList();
      const nexts = ownList();
      // Cycle check past SCANNED_DEPTH: the containers open then and since.
      let ancestors;
      let depth = 0;
      let out = "";
      // The collected strings' places, as JSON text without its closing "]".
      let paths = "";
      let places = 0;
      let strings = 0;
      containers[0] = root;
      keyLists[0] = rootKeys;
      starts[0] = 0;
      ends[0] = values.length;
      nexts[0] = 0;
      depth = 1;
      out = rootKeys === null ? "[" : "{";
      while (depth > 0) {
        const top = depth - 1;
        const keys = keyLists[top];
        const i = nexts[top];
        if (i === ends[top] - starts[top]) {
          out += keys === null ? "]" : "}";
          if (ancestors !== undefined) SetPrototypeDelete(ancestors, containers[top]);
          depth = top;
          continue;
        }
        nexts[top] = i + 1;
        if (i > 0) out += ",";
        if (keys !== null) out += quote(keys[i]) + ":";
        const child = values[starts[top] + i];
        switch (typeof child) {
          case "string":
            if (outOfBand !== undefined && beside(outOfBand, child)) {
              out += "null";
              collect(child);
            } else {
              out += quote(child);
            }
            break;
          case "number":
            if (!NumberIsFinite(child) || ObjectIs(child, -0)) return undefined;
            out += "" + child;
            break;
          case "boolean":
            out += child ? "true" : "false";
            break;
          case "object":
            if (child === null) {
              out += "null";
              break;
            }
            if (!open(child)) return undefined;
            break;
          default:
            return undefined;
        }
        if (out.length > limit) return TOO_LARGE;
      }
      if (out.length > limit) return TOO_LARGE;
      if (places > 0) outOfBand.paths = paths + "]";
      return out;

      /** Collect the string whose place is the current child's. */
      function collect(string) {
        // The same string collected before (one of the few of its length
        // compared), or a new one.
        let index = strings;
        for (let s = 0, compared = 0; s < strings && compared < SAME_STRING_CANDIDATES; s++) {
          const known = outOfBand.strings[s];
          if (known.length !== string.length) continue;
          compared++;
          if (known === string) {
            index = s;
            break;
          }
        }
        let place = "[" + index;
        for (let f = 0; f < depth; f++) {
          const i = nexts[f] - 1;
          const keys = keyLists[f];
          // The key token exactly as the JSON text has it.
          place += "," + (keys === null ? "" + i : quote(keys[i]));
        }
        paths += (places++ === 0 ? "[" : ",") + place + "]";
        if (index === strings) {
          if (strings === 0) outOfBand.strings = [];
          setOwn(outOfBand.strings, strings++, string);
        }
      }

      /**
       * Open a container within the root: check it (not an open one, and
       * see readContainer) and read its children once, push its frame and
       * write its opening bracket; false when it is not lossless JSON.
       */
      function open(v) {
        if (ancestors === undefined && depth >= SCANNED_DEPTH) {
          ancestors = new SafeSet();
          for (let f = 0; f < depth; f++) SetPrototypeAdd(ancestors, containers[f]);
        }
        if (ancestors === undefined) {
          for (let f = 0; f < depth; f++) if (containers[f] === v) return false;
        } else if (SetPrototypeHas(ancestors, v)) {
          return false;
        }
        // After its parent's children: what is there belonged to
        // containers closed since.
        const base = ends[depth - 1];
        values.length = base;
        const keys = readContainer(v, values, base);
        if (keys === false) return false;
        if (ancestors !== undefined) SetPrototypeAdd(ancestors, v);
        containers[depth] = v;
        keyLists[depth] = keys;
        starts[depth] = base;
        ends[depth] = values.length;
        nexts[depth] = 0;
        depth++;
        out += keys === null ? "[" : "{";
        return true;
      }
    }

    /** Whether JSON.parse of `text` could have made -0 or Infinity. */
    function suspicious(text) {
      return (
        (StringPrototypeIndexOf(text, "-0") !== -1 && RegExpPrototypeExec(NEGATIVE_ZERO, text) !== null) ||
        RegExpPrototypeExec(LONG_EXPONENT, text) !== null ||
        (text.length >= 309 && RegExpPrototypeExec(LONG_LITERAL, text) !== null)
      );
    }

    /**
     * Decode JSON text produced by the other side of the bridge, and check
     * it again: JSON.parse cannot yield functions or cycles, but it can
     * yield -0 or an overflowed Infinity, which are not lossless.
     * @returns the decoded value, or `undefined` when the text is not
     *   lossless JSON.
     */
    function decode(text) {
      if (typeof text !== "string") return undefined;
      let value;
      try {
        value = JSONParse(text);
      } catch {
        return undefined;
      }
      // JSON.parse yields -0 only from a "-0..." number token (or an
      // underflowing exponent) and Infinity only from an exponent of 3+
      // digits or a 309+ digit literal: text with none of these
      // (NEGATIVE_ZERO, LONG_EXPONENT, LONG_LITERAL) needs no second look.
      // A string holds no number at all.
      if (typeof value === "string" || !suspicious(text)) return value;
      const stack = ownList();
      stack[0] = value;
      let top = 1;
      while (top > 0) {
        const v = stack[--top];
        stack[top] = undefined;
        if (typeof v === "number") {
          if (!NumberIsFinite(v) || ObjectIs(v, -0)) return undefined;
        } else if (v !== null && typeof v === "object") {
          const keys = ReflectOwnKeys(v);
          for (let i = 0; i < keys.length; i++) {
            const key = keys[i];
            if (key !== "length" || !ArrayIsArray(v)) stack[top++] = v[key];
          }
        }
      }
      return value;
    }

    /**
     * Decode JSON text whose long strings crossed beside it (see encode's
     * `outOfBand`), and put each in its places: a `null` at each path.
     * @param pathsText the JSON array of the strings' places
     * @param strings the strings, in the order of their first places
     * @returns the value, or `undefined` when the text is not lossless JSON,
     *   a path does not lead to a `null`, or the places do not name each
     *   string in order (an argument's places were checked against the
     *   text before; this never trusts that check)
     */
    function decodeWithStrings(text, pathsText, strings) {
      const value = decode(text);
      if (value === undefined) return undefined;
      let paths;
      try {
        paths = JSONParse(pathsText);
      } catch {
        return undefined;
      }
      if (!ArrayIsArray(paths)) return undefined;
      // The root's place is the holder's slot 0.
      const holder = [value];
      // Strings named so far: a place names one of them, or the next.
      let named = 0;
      for (let s = 0; s < paths.length; s++) {
        const path = paths[s];
        if (!ArrayIsArray(path)) return undefined;
        const index = path[0];
        if (typeof index !== "number" || !(index >= 0 && index <= named && index < strings.length) || index % 1 !== 0) {
          return undefined;
        }
        if (index === named) named++;
        // The place is container[step].
        let container = holder;
        let step = 0;
        for (let i = 1; i < path.length; i++) {
          const next = container[step];
          const key = path[i];
          // Own members of JSON.parse's containers only: an index of an
          // array, a key of an object.
          if (next === null || typeof next !== "object") return undefined;
          if (ArrayIsArray(next) ? typeof key !== "number" || !(key < next.length) : typeof key !== "string" || !ObjectHasOwn(next, key)) {
            return undefined;
          }
          container = next;
          step = key;
        }
        if (container[step] !== null) return undefined;
        container[step] = strings[index];
      }
      return named === strings.length ? holder[0] : undefined;
    }

    const TOO_LARGE = p.ObjectFreeze({ __proto__: null, tooLarge: true });
    return p.ObjectFreeze({ __proto__: null, encode, decode, decodeWithStrings, TOO_LARGE, OUT_OF_BAND_LENGTH });
  }

  const { primordials, provide } = globalThis.__dsh;
  // The isolate's V8 copies long strings in JSON.stringify; the host realm
  // makes its own with create(), told whether its V8 does.
  provide("losslessJson", {
    __proto__: null,
    ...createLosslessJson(primordials, false),
    create: (scanLongStrings) => createLosslessJson(primordials, scanLongStrings),
  });
})(globalThis);
