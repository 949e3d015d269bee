// Copyright the dsh-code-runtime-v8 authors. MIT license.
// The lossless-JSON boundary (CONTRACT section 5), in one piece that serves
// both sides of the bridge: the isolate loads it into the startup snapshot
// (over the intrinsics 00_primordials.js captured), and the Node host loads
// the same file over its own realm's intrinsics (src-ts/lossless-json.ts).
//
// encode(value) walks the value iteratively (no stack depth limit), reads
// every property exactly once, and produces compact JSON text, or returns
// `undefined` when the value is not lossless JSON. It never calls toJSON,
// never consults a mutable prototype, and refuses Proxies outright.
"use strict";

((globalThis) => {
  function createLosslessJson(p) {
    const {
      ArrayIsArray,
      ArrayPrototype,
      ObjectPrototype,
      ObjectGetPrototypeOf,
      ObjectGetOwnPropertyDescriptor,
      ObjectIs,
      ObjectHasOwn,
      ReflectOwnKeys,
      NumberIsFinite,
      JSONStringify,
      JSONParse,
      SetPrototypeAdd,
      SetPrototypeHas,
      SetPrototypeDelete,
      ArrayPrototypeJoin,
      isProxy,
    } = p;
    const SafeSet = p.Set;
    const RegExpPrototypeExec = p.RegExpPrototypeExec;
    const SUSPICIOUS_NUMBER = new p.RegExp("-0|[eE][+-]?\\d{3}|\\d{309}");

    // Frames of the explicit walk stack. `LEAVE` pops an ancestor off the
    // cycle set; `SEP`/`TEXT` emit literal text; `VALUE` visits a value.
    const VALUE = 0;
    const TEXT = 1;
    const LEAVE = 2;

    /**
     * Encode a lossless JSON value as compact JSON text.
     * @param value the candidate value
     * @param maxUnits optional bound on the text's UTF-16 length; the walk
     *   stops early (returning TOO_LARGE) once the text would exceed it.
     *   UTF-8 bytes of escaped JSON are never fewer than its UTF-16 units,
     *   so a text longer than the byte budget can never fit it.
     * @returns the JSON text, `undefined` when not lossless, or TOO_LARGE
     */
    function encode(value, maxUnits) {
      const limit = maxUnits === undefined ? Infinity : maxUnits;
      // Fast path for a primitive root.
      switch (typeof value) {
        case "string": {
          const text = JSONStringify(value);
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
      const out = [];
      let outLength = 0;
      const ancestors = new SafeSet();
      // Parallel arrays as the work stack: kinds and payloads.
      const kinds = [VALUE];
      const items = [value];
      let top = 1;
      const push = (kind, item) => {
        kinds[top] = kind;
        items[top] = item;
        top++;
      };
      const emit = (text) => {
        out[out.length] = text;
        outLength += text.length;
        return outLength <= limit;
      };
      while (top > 0) {
        top--;
        const kind = kinds[top];
        const item = items[top];
        items[top] = undefined;
        if (kind === TEXT) {
          if (!emit(item)) return TOO_LARGE;
          continue;
        }
        if (kind === LEAVE) {
          SetPrototypeDelete(ancestors, item);
          continue;
        }
        const v = item;
        if (v === null) {
          if (!emit("null")) return TOO_LARGE;
          continue;
        }
        switch (typeof v) {
          case "string":
            if (!emit(JSONStringify(v))) return TOO_LARGE;
            continue;
          case "boolean":
            if (!emit(v ? "true" : "false")) return TOO_LARGE;
            continue;
          case "number":
            if (!NumberIsFinite(v) || ObjectIs(v, -0)) return undefined;
            if (!emit("" + v)) return TOO_LARGE;
            continue;
          case "object":
            break;
          default:
            return undefined;
        }
        if (isProxy(v) || SetPrototypeHas(ancestors, v)) return undefined;
        const proto = ObjectGetPrototypeOf(v);
        if (ArrayIsArray(v)) {
          if (proto !== ArrayPrototype) return undefined;
          const keys = ReflectOwnKeys(v);
          const length = v.length;
          if (keys.length !== length + 1) return undefined;
          // Read every slot once, up front: a getter may run, and a slot
          // that is missing (sparse) fails the value.
          const slots = [];
          for (let i = 0; i < length; i++) {
            const desc = ObjectGetOwnPropertyDescriptor(v, i);
            if (desc === undefined || !desc.enumerable) return undefined;
            slots[i] = ObjectHasOwn(desc, "value") ? desc.value : v[i];
          }
          SetPrototypeAdd(ancestors, v);
          push(LEAVE, v);
          push(TEXT, "]");
          for (let i = length - 1; i >= 0; i--) {
            push(VALUE, slots[i]);
            if (i > 0) push(TEXT, ",");
          }
          if (!emit("[")) return TOO_LARGE;
          continue;
        }
        if (proto !== ObjectPrototype && proto !== null) return undefined;
        const keys = ReflectOwnKeys(v);
        const values = [];
        for (let i = 0; i < keys.length; i++) {
          const key = keys[i];
          if (typeof key !== "string") return undefined;
          const desc = ObjectGetOwnPropertyDescriptor(v, key);
          if (desc === undefined || !desc.enumerable) return undefined;
          values[i] = ObjectHasOwn(desc, "value") ? desc.value : v[key];
        }
        SetPrototypeAdd(ancestors, v);
        push(LEAVE, v);
        push(TEXT, "}");
        for (let i = keys.length - 1; i >= 0; i--) {
          push(VALUE, values[i]);
          push(TEXT, (i > 0 ? "," : "") + JSONStringify(keys[i]) + ":");
        }
        if (!emit("{")) return TOO_LARGE;
      }
      return ArrayPrototypeJoin(out, "");
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
      // JSON.parse yields -0 only from a "-0..." literal and Infinity only
      // from an exponent of 3+ digits or a 309+ digit literal: text with
      // none of these needs no second look (a string containing one just
      // takes the walk below).
      if (RegExpPrototypeExec(SUSPICIOUS_NUMBER, text) === null) return value;
      const stack = [value];
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

    const TOO_LARGE = p.ObjectFreeze({ __proto__: null, tooLarge: true });
    return p.ObjectFreeze({ __proto__: null, encode, decode, TOO_LARGE });
  }

  globalThis.__dsh.createLosslessJson = createLosslessJson;
  globalThis.__dsh.losslessJson = createLosslessJson(globalThis.__dsh.primordials);
})(globalThis);
