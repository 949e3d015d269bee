// Copyright the dsh-code-runtime-v8 authors. MIT license.
// Placeholder inspect; replaced by the Node-parity port (issue 5).
"use strict";
((globalThis) => {
  const { primordials: p } = globalThis.__dsh;
  function inspect(value) {
    try {
      if (typeof value === "string") return "'" + value + "'";
      if (typeof value === "bigint") return value + "n";
      if (typeof value === "symbol") return p.SymbolPrototypeToString(value);
      if (typeof value !== "object" || value === null) return p.String(value);
      const keys = p.ObjectKeys(value);
      const parts = p.ArrayPrototypeMap(keys, (k) => k + ": " + inspect(value[k]));
      return keys.length === 0 ? "{}" : "{ " + p.ArrayPrototypeJoin(parts, ", ") + " }";
    } catch {
      return "[object]";
    }
  }
  globalThis.__dsh.inspect = inspect;
})(globalThis);
