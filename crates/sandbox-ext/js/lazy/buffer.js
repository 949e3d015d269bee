// Copyright the dsh-code-runtime-v8 authors. MIT license.
// The global Buffer: the `buffer` package (js/vendor/buffer_package.js,
// Node's API written for browsers), made to behave as Node's where the two
// differ:
// - the `base64url` encoding, which the package predates (decoding is the
//   package's base64 decoder, which already reads `-` and `_`);
// - console rendering, as Node's `<Buffer 68 69 ... 3 more bytes>`;
// - any view where Node takes one (`copy` into a typed array or DataView,
//   a Uint8Array searched for), `copyBytesFrom`, Node's base64 lengths;
// - the errors of bad arguments and out-of-range reads and writes, as
//   Node's (the same class, `code` and message: 13_node_errors.js), in
//   Node's order, per Node line where they differ (`concat`).
// A Buffer is a Uint8Array, so its memory is the capped allocator's like
// any typed array's. A lazy module (14_lazy_globals.js): the package's
// ~100 functions stay out of every isolate that never touches Buffer.
//
// Takes: primordials, native (core, ops), inspect, nodeErrors, lazyGlobals
// (lazyModule, packageIntrinsics, keepMembers), and `host`. Makes Buffer.
"use strict";

const {
  primordials: p,
  native: { core, ops },
  // Buffer.prototype.inspect is a function named inspect: Node's.
  inspect: { inspect: inspectValue, ownNonIndexKeys },
  nodeErrors: errors,
  lazyGlobals: { lazyModule, packageIntrinsics, keepMembers },
} = dsh;
const { ReflectApply, StringPrototypeToLowerCase, ObjectDefineProperty, NumberIsInteger, MathMin } = p;
// V8's own UTF-8 decoder (String::NewFromUtf8), as Node's toString uses:
// one U+FFFD per maximal invalid subsequence, where the package's decoder
// differs. It drops a leading BOM, which Node keeps.
const decodeUtf8 = core.decode;
const isAnyArrayBuffer = core.isAnyArrayBuffer;
const { nodeMajor } = host;

/** Evaluates the package (js/vendor/buffer_package.js) and adapts it. */
function makeBuffer() {
  // The bundle reads built-ins through `intrinsics` (scripts/vendor-buffer.mjs).
  const { Buffer, INSPECT_MAX_BYTES } = lazyModule("bufferPackage")(packageIntrinsics);
  // The bundler renamed the package's function (`Buffer2`): Node's is `Buffer`.
  ObjectDefineProperty(Buffer, "name", { __proto__: null, value: "Buffer", configurable: true });
  // Buffer's members are the program's to replace; what is made here is
  // made by these, as Node's own functions do not read them either.
  const allocUnsafe = Buffer.allocUnsafe;
  const proto = Buffer.prototype;
  const isUint8Array = (value) => p.ArrayBufferIsView(value) && p.TypedArrayPrototypeGetSymbolToStringTag(value) === "Uint8Array";

  const lower = (encoding) => (typeof encoding === "string" ? StringPrototypeToLowerCase(encoding) : encoding);
  const isBase64Url = (encoding) => lower(encoding) === "base64url";
  const isUtf8 = (encoding) => encoding === undefined || lower(encoding) === "utf8" || lower(encoding) === "utf-8";
  const isHex = (encoding) => lower(encoding) === "hex";
  /** The encoding to hand the package: base64url decodes as base64. */
  const decoding = (encoding) => (isBase64Url(encoding) ? "base64" : encoding);

  /** Node decodes hex up to the first pair that is not two hex digits. */
  function hexPrefix(string) {
    let end = 0;
    while (end + 1 < string.length && p.RegExpPrototypeExec(/^[0-9a-fA-F]{2}$/, p.StringPrototypeSlice(string, end, end + 2)) !== null) end += 2;
    return p.StringPrototypeSlice(string, 0, end);
  }

  /**
   * Replace `owner[name]` by `make(original)`, keeping name and length. The
   * package lacks some of Node's lower-case aliases (`readBigUint64LE`):
   * those are made from the method they stand for (`readBigUInt64LE`).
   */
  function patch(owner, name, make) {
    const original = typeof owner[name] === "function" ? owner[name] : owner[p.StringReplaceAllLiteral(name, "Uint", "UInt")];
    const replacement = make(original);
    ObjectDefineProperty(replacement, "name", { __proto__: null, value: original.name, configurable: true });
    ObjectDefineProperty(replacement, "length", { __proto__: null, value: original.length, configurable: true });
    // Enumerable, as the package's and Node's are (both assign them).
    ObjectDefineProperty(owner, name, { __proto__: null, value: replacement, writable: true, enumerable: true, configurable: true });
  }

  /** Define `owner[name]`, a method Node has and the package has not, as Node assigns it. */
  function add(owner, method) {
    ObjectDefineProperty(owner, method.name, { __proto__: null, value: method, writable: true, enumerable: true, configurable: true });
  }

  // --- views: Node takes any ArrayBuffer view where the package takes a Buffer

  /** The byte length of `view`, a typed array or a DataView. */
  function viewByteLength(view) {
    return core.isTypedArray(view) ? p.TypedArrayPrototypeGetByteLength(view) : p.DataViewPrototypeGetByteLength(view);
  }

  /** The `length` bytes of `view` (a typed array or a DataView) from byte `start`, as a Uint8Array. */
  function bytesOf(view, start, length) {
    const typed = core.isTypedArray(view);
    const buffer = typed ? p.TypedArrayPrototypeGetBuffer(view) : p.DataViewPrototypeGetBuffer(view);
    const offset = typed ? p.TypedArrayPrototypeGetByteOffset(view) : p.DataViewPrototypeGetByteOffset(view);
    return new p.Uint8Array(buffer, offset + start, length);
  }

  /**
   * `bytes` made a Buffer, as the package makes one (a Uint8Array of
   * Buffer.prototype), not through Buffer's members, which the program may
   * replace.
   */
  const asBuffer = (bytes) => p.ObjectSetPrototypeOf(bytes, proto);

  /** Node's ERR_INVALID_ARG_VALUE: the value as console shows it. */
  const invalidArgValue = (name, value) =>
    errors.nodeError(p.TypeError, "ERR_INVALID_ARG_VALUE", `The argument '${name}' is invalid. Received ${inspectValue(value)}`);

  /** Node's toInteger: a safe integer (a fraction floored), or `fallback`. */
  function toInteger(value, fallback) {
    value = +value;
    if (!(value >= -9007199254740991 && value <= 9007199254740991)) return fallback;
    return value % 1 === 0 ? value : p.MathFloor(value);
  }

  /** Node's validateInteger, from `min` to the largest safe integer. */
  function validateInteger(value, name, min, max = 9007199254740991) {
    errors.validateNumber(value, name);
    if (!NumberIsInteger(value)) throw errors.outOfRange(name, "an integer", value);
    if (value < min || value > max) throw errors.outOfRange(name, `>= ${min} && <= ${max}`, value);
  }

  // --- encodings -----------------------------------------------------------

  patch(Buffer, "isEncoding", (isEncoding) => function (encoding) {
    return isBase64Url(encoding) || ReflectApply(isEncoding, this, [encoding]);
  });
  /** Buffer.isEncoding as made above, whatever the program makes it (Node's own functions do not read it). */
  const isEncoding = Buffer.isEncoding;
  const knownEncoding = (encoding) => ReflectApply(isEncoding, Buffer, [encoding]);

  function checkEncoding(encoding) {
    if (encoding !== undefined && encoding !== null && encoding !== "" && !knownEncoding(encoding)) {
      throw errors.unknownEncoding(encoding);
    }
  }

  const isLatin1 = (encoding) => {
    const name = lower(encoding);
    return name === "latin1" || name === "binary" || name === "ascii";
  };

  // Strings become bytes in native code, straight into the Buffer: the
  // package builds a JS array of the bytes first (8 heap bytes per byte).
  patch(Buffer, "from", (from) => function (value, encodingOrOffset, length) {
    if (typeof value === "string") {
      // As Node: an encoding that is not a non-empty string means UTF-8.
      if (typeof encodingOrOffset !== "string" || encodingOrOffset === "" || isUtf8(encodingOrOffset)) {
        const bytes = ReflectApply(allocUnsafe, Buffer, [ops.op_dsh_utf8_length(value)]);
        ops.op_dsh_utf8_write(value, bytes);
        return bytes;
      }
      if (isLatin1(encodingOrOffset)) {
        const bytes = ReflectApply(allocUnsafe, Buffer, [value.length]);
        ops.op_dsh_latin1_write(value, bytes);
        return bytes;
      }
      checkEncoding(encodingOrOffset);
      if (isHex(encodingOrOffset)) value = hexPrefix(value);
      return ReflectApply(from, this, [value, decoding(encodingOrOffset)]);
    }
    if (isAnyArrayBuffer(value)) return fromArrayBuffer(value, encodingOrOffset, length);
    if (typeof value === "object" && value !== null || typeof value === "function") {
      try {
        return ReflectApply(from, this, [value, encodingOrOffset, length]);
      } catch (error) {
        // The package's own words for a value it cannot take: Node's instead.
        if (!(error instanceof p.TypeError) || !p.StringPrototypeStartsWith(error.message, "The first argument must be one of type")) throw error;
      }
    }
    throw errors.invalidArgType("first argument", ["string", "Buffer", "ArrayBuffer", "Array", "Array-like Object"], value);
  });
  /** A string's bytes in an encoding, as Buffer.from makes them (whatever the program made Buffer.from). */
  const stringBytes = Buffer.from;

  /** Node's fromArrayBuffer: a view of its bytes, offset and length as Node reads them. */
  function fromArrayBuffer(buffer, byteOffset, length) {
    if (byteOffset === undefined) {
      byteOffset = 0;
    } else {
      byteOffset = +byteOffset;
      if (p.NumberIsNaN(byteOffset)) byteOffset = 0;
    }
    // Read as Node reads it.
    const maxLength = buffer.byteLength - byteOffset;
    if (maxLength < 0) throw outOfBounds("offset");
    if (length === undefined) {
      length = maxLength;
    } else {
      length = +length;
      if (length > 0) {
        if (length > maxLength) throw outOfBounds("length");
      } else {
        length = 0;
      }
    }
    return asBuffer(new p.Uint8Array(buffer, byteOffset, length));
  }

  const outOfBounds = (name) => errors.nodeError(p.RangeError, "ERR_BUFFER_OUT_OF_BOUNDS", `"${name}" is outside of buffer bounds`);

  // Node's base64 length: a quarter of the units times three, less what
  // one or two trailing "=" pad, whatever the units are (the package counts
  // what would decode).
  function base64ByteLength(string) {
    let units = string.length;
    if (units > 0 && p.StringPrototypeCharCodeAt(string, units - 1) === 0x3d) units--;
    if (units > 1 && p.StringPrototypeCharCodeAt(string, units - 1) === 0x3d) units--;
    return (units * 3) >>> 2;
  }

  patch(Buffer, "byteLength", (byteLength) => function (string, encoding) {
    if (typeof string !== "string" && !p.ArrayBufferIsView(string) && !isAnyArrayBuffer(string)) {
      throw errors.invalidArgType("string", ["string", "Buffer", "ArrayBuffer"], string);
    }
    // As Node: no encoding, or one it does not know, counts UTF-8.
    if (typeof string === "string" && (!encoding || isUtf8(encoding) || !knownEncoding(encoding))) return ops.op_dsh_utf8_length(string);
    if (typeof string === "string" && (isBase64Url(encoding) || lower(encoding) === "base64")) return base64ByteLength(string);
    return ReflectApply(byteLength, this, [string, decoding(encoding)]);
  });

  add(Buffer, function copyBytesFrom(view, offset, length) {
    if (!core.isTypedArray(view)) throw errors.invalidArgType("view", ["TypedArray"], view);
    const units = p.TypedArrayPrototypeGetLength(view);
    if (units === 0) return asBuffer(new p.Uint8Array(0));
    const unit = p.TypedArrayPrototypeGetByteLength(view) / units;
    let from = 0;
    let to = units;
    if (offset !== undefined || length !== undefined) {
      if (offset !== undefined) {
        validateInteger(offset, "offset", 0);
        if (offset >= units) return asBuffer(new p.Uint8Array(0));
        from = offset;
      }
      if (length !== undefined) {
        validateInteger(length, "length", 0);
        to = MathMin(from + length, units);
      }
    }
    const copy = asBuffer(new p.Uint8Array((to - from) * unit));
    p.TypedArrayPrototypeSet(copy, bytesOf(view, from * unit, (to - from) * unit), 0);
    return copy;
  });

  /** Node's check of a size to allocate. */
  function checkSize(size) {
    errors.validateNumber(size, "size");
    if (!(size >= 0 && size <= 9007199254740991)) throw errors.outOfRange("size", ">= 0 && <= 9007199254740991", size);
  }

  patch(Buffer, "allocUnsafe", (allocUnsafeOf) => function (size) {
    checkSize(size);
    return ReflectApply(allocUnsafeOf, this, [size]);
  });
  patch(Buffer, "allocUnsafeSlow", (allocUnsafeSlow) => function (size) {
    checkSize(size);
    return ReflectApply(allocUnsafeSlow, this, [size]);
  });


  function utf8Slice(buffer, start, end) {
    const bytes = new p.Uint8Array(p.TypedArrayPrototypeGetBuffer(buffer), p.TypedArrayPrototypeGetByteOffset(buffer) + start, end - start);
    const bom = bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf;
    try {
      return (bom ? "\ufeff" : "") + decodeUtf8(bytes);
    } catch {
      throw errors.nodeError(p.Error, "ERR_STRING_TOO_LONG", "Cannot create a string longer than 0x1fffffe8 characters");
    }
  }

  // Node's toString: the range first (an empty one is "" whatever the
  // encoding), then the encoding.
  patch(proto, "toString", (toString) => function (encoding, start, end) {
    const length = this.length;
    if (arguments.length === 0) return utf8Slice(this, 0, length);
    if (start <= 0) start = 0;
    else if (start >= length) return "";
    else start = p.MathTrunc(start) || 0;
    if (end === undefined || end > length) end = length;
    else end = p.MathTrunc(end) || 0;
    if (end <= start) return "";
    if (encoding === undefined || isUtf8(encoding)) return utf8Slice(this, start, end);
    // As Node: an encoding given (null, "" too) is one it knows.
    if (!knownEncoding(encoding)) throw errors.unknownEncoding(encoding);
    if (!isBase64Url(encoding)) return ReflectApply(toString, this, [encoding, start, end]);
    const base64 = ReflectApply(toString, this, ["base64", start, end]);
    return p.StringReplaceAllLiteral(p.StringReplaceAllLiteral(p.StringReplaceAllLiteral(base64, "+", "-"), "/", "_"), "=", "");
  });

  // Node's write: its forms (string[, encoding]; string, offset[, length]
  // [, encoding]), its checks in its order (offsets, the encoding, then
  // the string), a length past the end cut to it.
  patch(proto, "write", (write) => function (string, offset, length, encoding) {
    const size = p.TypedArrayPrototypeGetLength(this);
    if (offset === undefined) {
      offset = 0;
      length = size;
      encoding = undefined;
    } else if (length === undefined && typeof offset === "string") {
      encoding = offset;
      offset = 0;
      length = size;
    } else {
      validateInteger(offset, "offset", 0, size);
      const remaining = size - offset;
      if (length === undefined) {
        length = remaining;
      } else if (typeof length === "string") {
        encoding = length;
        length = remaining;
      } else {
        validateInteger(length, "length", 0, size);
        if (length > remaining) length = remaining;
      }
    }
    if (encoding && !isUtf8(encoding)) checkEncoding(encoding);
    if (typeof string !== "string") throw errors.nodeError(p.TypeError, "ERR_INVALID_ARG_TYPE", "argument must be a string");
    return ReflectApply(write, this, [isHex(encoding) ? hexPrefix(string) : string, offset, length, encoding ? decoding(encoding) : undefined]);
  });

  patch(proto, "equals", () => function (otherBuffer) {
    if (!isUint8Array(otherBuffer)) throw errors.invalidArgType("otherBuffer", ["Buffer", "Uint8Array"], otherBuffer);
    if (this === otherBuffer) return true;
    if (this.length !== otherBuffer.length) return false;
    for (let i = 0; i < this.length; i++) if (this[i] !== otherBuffer[i]) return false;
    return true;
  });

  // Node's compare: its offsets checked in its order, then the bytes.
  patch(proto, "compare", (compare) => function (target, targetStart, targetEnd, sourceStart, sourceEnd) {
    if (!isUint8Array(target)) throw errors.invalidArgType("target", ["Buffer", "Uint8Array"], target);
    if (arguments.length === 1) return ReflectApply(compare, this, [target]);
    const targetLength = p.TypedArrayPrototypeGetLength(target);
    const sourceLength = p.TypedArrayPrototypeGetLength(this);
    if (targetStart === undefined) targetStart = 0;
    else validateInteger(targetStart, "targetStart", 0);
    if (targetEnd === undefined) targetEnd = targetLength;
    else validateInteger(targetEnd, "targetEnd", 0, targetLength);
    if (sourceStart === undefined) sourceStart = 0;
    else validateInteger(sourceStart, "sourceStart", 0);
    if (sourceEnd === undefined) sourceEnd = sourceLength;
    else validateInteger(sourceEnd, "sourceEnd", 0, sourceLength);
    if (sourceStart >= sourceEnd) return targetStart >= targetEnd ? 0 : -1;
    if (targetStart >= targetEnd) return 1;
    // Both ranges now lie within their buffers (each end is checked
    // against its length, each start is below its end).
    const sourceCount = sourceEnd - sourceStart;
    const targetCount = targetEnd - targetStart;
    const count = MathMin(sourceCount, targetCount);
    for (let i = 0; i < count; i++) {
      const a = this[sourceStart + i];
      const b = target[targetStart + i];
      if (a !== b) return a < b ? -1 : 1;
    }
    return sourceCount > targetCount ? 1 : sourceCount < targetCount ? -1 : 0;
  });

  // Node's copy: into any view, its offsets as Node reads them.
  patch(proto, "copy", () => function (target, targetStart, sourceStart, sourceEnd) {
    if (!p.ArrayBufferIsView(target)) throw errors.invalidArgType("target", ["Buffer", "Uint8Array"], target);
    // Each length read where Node reads it: an offset's valueOf may resize
    // or detach a buffer before.
    const integer = (value) => (NumberIsInteger(value) ? value : toInteger(value, 0));
    if (targetStart === undefined) targetStart = 0;
    else if ((targetStart = integer(targetStart)) < 0) throw errors.outOfRange("targetStart", ">= 0", targetStart);
    if (sourceStart !== undefined) {
      sourceStart = integer(sourceStart);
      const sourceLength = viewByteLength(this);
      if (sourceStart < 0 || sourceStart > sourceLength) throw errors.outOfRange("sourceStart", `>= 0 && <= ${sourceLength}`, sourceStart);
    } else {
      sourceStart = 0;
    }
    if (sourceEnd === undefined) sourceEnd = viewByteLength(this);
    else if ((sourceEnd = integer(sourceEnd)) < 0) throw errors.outOfRange("sourceEnd", ">= 0", sourceEnd);
    const sourceLength = viewByteLength(this);
    const targetLength = viewByteLength(target);
    if (targetStart >= targetLength || sourceStart >= sourceEnd) return 0;
    const count = MathMin(sourceEnd - sourceStart, targetLength - targetStart, sourceLength - sourceStart);
    if (count <= 0) return 0;
    // set() copies through a copy where the two share memory, as memmove.
    p.TypedArrayPrototypeSet(bytesOf(target, 0, targetLength), bytesOf(this, sourceStart, count), targetStart);
    return count;
  });

  patch(Buffer, "compare", (compare) => function (buf1, buf2) {
    if (!isUint8Array(buf1)) throw errors.invalidArgType("buf1", ["Buffer", "Uint8Array"], buf1);
    if (!isUint8Array(buf2)) throw errors.invalidArgType("buf2", ["Buffer", "Uint8Array"], buf2);
    return ReflectApply(compare, this, [buf1, buf2]);
  });

  patch(Buffer, "concat", (concat) => function (list, length) {
    if (!p.ArrayIsArray(list)) throw errors.invalidArgType("list", "Array", list);
    if (list.length === 0) return ReflectApply(allocUnsafe, Buffer, [0]);
    const checkMembers = () => {
      for (let i = 0; i < list.length; i++) {
        if (!isUint8Array(list[i])) throw errors.invalidArgType(`list[${i}]`, ["Buffer", "Uint8Array"], list[i]);
      }
    };
    // Node 24 and later check the members first; Node 22 sums their
    // lengths first (reading a member's length, which throws for null) and
    // checks each as it copies it.
    if (nodeMajor >= 24) checkMembers();
    if (length === undefined) {
      length = 0;
      for (let i = 0; i < list.length; i++) if (list[i].length) length += list[i].length;
    } else {
      validateInteger(length, "length", 0);
    }
    if (nodeMajor < 24) checkMembers();
    return ReflectApply(concat, this, [list, length]);
  });

  // Index loops and no destructuring of arrays: both would read the
  // program-mutable Array.prototype[Symbol.iterator].
  const SWAPS = [["swap16", 16], ["swap32", 32], ["swap64", 64]];
  for (let s = 0; s < SWAPS.length; s++) {
    const name = SWAPS[s][0];
    const bits = SWAPS[s][1];
    patch(proto, name, (swap) => function () {
      if (this.length % (bits / 8) !== 0) {
        throw errors.nodeError(p.RangeError, "ERR_INVALID_BUFFER_SIZE", `Buffer size must be a multiple of ${bits}-bits`);
      }
      return ReflectApply(swap, this, []);
    });
  }

  // Node's fill: its forms and checks in its order; a string filled as
  // its bytes in the encoding (none: Node's ERR_INVALID_ARG_VALUE), a view
  // as its bytes, anything else as a number (Node's ToUint32: an object
  // is 0, a BigInt throws).
  patch(proto, "fill", (fill) => function (value, offset, end, encoding) {
    const size = p.TypedArrayPrototypeGetLength(this);
    if (typeof value === "string") {
      if (offset === undefined || typeof offset === "string") {
        encoding = offset;
        offset = 0;
        end = size;
      } else if (typeof end === "string") {
        encoding = end;
        end = size;
      }
      if (encoding !== undefined && !isUtf8(encoding) && !knownEncoding(encoding)) {
        if (typeof encoding !== "string") throw errors.invalidArgType("encoding", "string", encoding);
        throw errors.unknownEncoding(encoding);
      }
    }
    if (offset === undefined) {
      offset = 0;
      end = size;
    } else {
      validateInteger(offset, "offset", 0);
      if (end === undefined) end = size;
      else validateInteger(end, "end", 0, size);
      if (offset >= end) return this;
    }
    let pattern;
    if (typeof value === "string") {
      if (value.length === 0) {
        pattern = 0;
      } else {
        pattern = ReflectApply(stringBytes, Buffer, [value, encoding]);
        if (p.TypedArrayPrototypeGetLength(pattern) === 0) throw invalidArgValue("value", value);
      }
    } else if (p.ArrayBufferIsView(value)) {
      if (viewByteLength(value) === 0) throw invalidArgValue("value", value);
      pattern = asBuffer(bytesOf(value, 0, viewByteLength(value)));
    } else {
      pattern = +value;
    }
    return ReflectApply(fill, this, [pattern, offset, end]);
  });

  /** The fill above, whatever the program makes Buffer.prototype.fill. */
  const fillAsNode = proto.fill;

  // As Node's: filled as fill fills, from 0 to the end.
  patch(Buffer, "alloc", (alloc) => function (size, fill, encoding) {
    checkSize(size);
    const made = ReflectApply(alloc, this, [size]);
    if (fill !== undefined && fill !== 0 && size > 0) ReflectApply(fillAsNode, made, [fill, 0, made.length, encoding]);
    return made;
  });
  /** Node's answer for an empty needle (src/node_buffer.cc, IndexOfOffset). */
  function emptyNeedleAt(length, byteOffset, forward) {
    if (typeof byteOffset === "string") byteOffset = undefined;
    byteOffset = +byteOffset;
    if (p.NumberIsNaN(byteOffset)) byteOffset = forward ? 0 : length;
    byteOffset = p.MathTrunc(byteOffset);
    if (byteOffset < 0) return byteOffset + length >= 0 ? length + byteOffset : 0;
    return byteOffset <= length ? byteOffset : length;
  }

  const SEARCHES = [["indexOf", true], ["lastIndexOf", false], ["includes", true]];
  for (let s = 0; s < SEARCHES.length; s++) {
    const name = SEARCHES[s][0];
    const forward = SEARCHES[s][1];
    patch(proto, name, (method) => function (value, byteOffset, encoding) {
      if (typeof value !== "string" && typeof value !== "number" && !isUint8Array(value)) {
        throw errors.invalidArgType("value", ["number", "string", "Buffer", "Uint8Array"], value);
      }
      if (typeof value === "string" ? value.length === 0 : typeof value === "object" && p.TypedArrayPrototypeGetLength(value) === 0) {
        const at = emptyNeedleAt(this.length, byteOffset, forward);
        return name === "includes" ? at !== -1 : at;
      }
      // The package searches for Buffers only: a Uint8Array, as one.
      if (typeof value === "object") value = asBuffer(bytesOf(value, 0, p.TypedArrayPrototypeGetLength(value)));
      const args = [value, byteOffset, encoding];
      for (let i = 1; i < 3; i++) if (isBase64Url(args[i])) args[i] = "base64";
      return ReflectApply(method, this, args);
    });
  }

  // --- reads and writes: Node's argument checks, before the package's ------
  // (lib/internal/buffer.js: the order of the checks decides which error a
  // bad call gets, so it is Node's order.)

  /** Node's checkBounds: `size` bytes at `offset`. */
  function checkBounds(buffer, offset, size) {
    errors.validateNumber(offset, "offset");
    if (!NumberIsInteger(offset) || offset < 0 || offset + size > buffer.length) {
      throw errors.bounds(offset, buffer.length - size);
    }
  }

  /** The values an integer write of `size` bytes takes, and Node's words for them. */
  function intRange(signed, size, bigint) {
    const n = bigint ? "n" : "";
    const bits = size * 8;
    const min = signed ? -(2 ** (bits - 1)) : 0;
    const max = signed ? 2 ** (bits - 1) - 1 : 2 ** bits - 1;
    let text;
    if (size > 4) {
      text = signed ? `>= -(2${n} ** ${bits - 1}${n}) and < 2${n} ** ${bits - 1}${n}` : `>= 0${n} and < 2${n} ** ${bits}${n}`;
    } else {
      text = `>= ${min}${n} and <= ${max}${n}`;
    }
    if (bigint) return { min: signed ? -(2n ** 63n) : 0n, max: signed ? 2n ** 63n - 1n : 2n ** 64n - 1n, text };
    return { min, max, text };
  }

  /** Node's checks of an integer write; returns the value to write. */
  function checkIntWrite(buffer, value, offset, size, range, bigint) {
    if (!bigint) value = +value;
    if (size === 1) errors.validateNumber(offset, "offset");
    if (value > range.max || value < range.min) throw errors.outOfRange("value", range.text, value);
    checkBounds(buffer, offset, size);
    return value;
  }

  const READS = [
    // [method suffixes, bytes, signed, bigint, float]
    [["UInt8", "Uint8"], 1, false], [["Int8"], 1, true],
    [["UInt16LE", "UInt16BE", "Uint16LE", "Uint16BE"], 2, false], [["Int16LE", "Int16BE"], 2, true],
    [["UInt32LE", "UInt32BE", "Uint32LE", "Uint32BE"], 4, false], [["Int32LE", "Int32BE"], 4, true],
    [["BigUInt64LE", "BigUInt64BE", "BigUint64LE", "BigUint64BE"], 8, false, true], [["BigInt64LE", "BigInt64BE"], 8, true, true],
    [["FloatLE", "FloatBE"], 4, false, false, true], [["DoubleLE", "DoubleBE"], 8, false, false, true],
  ];
  for (let i = 0; i < READS.length; i++) {
    const entry = READS[i];
    const suffixes = entry[0];
    const size = entry[1];
    const signed = entry[2];
    const bigint = entry[3];
    const float = entry[4];
    const range = float ? undefined : intRange(signed, size, bigint);
    for (let j = 0; j < suffixes.length; j++) {
      patch(proto, `read${suffixes[j]}`, (read) => function (offset = 0) {
        checkBounds(this, offset, size);
        return ReflectApply(read, this, [offset]);
      });
      patch(proto, `write${suffixes[j]}`, (write) => function (value, offset = 0) {
        if (float) {
          value = +value;
          checkBounds(this, offset, size);
        } else {
          value = checkIntWrite(this, value, offset, size, range, bigint);
        }
        return ReflectApply(write, this, [value, offset]);
      });
    }
  }

  /** Node's check of readUIntLE's and friends' `byteLength` (1 to 6). */
  function checkByteLength(byteLength) {
    if (!(byteLength >= 1 && byteLength <= 6 && NumberIsInteger(byteLength))) throw errors.bounds(byteLength, 6, "byteLength");
  }

  const VARIABLE = [["UIntLE", false], ["UIntBE", false], ["UintLE", false], ["UintBE", false], ["IntLE", true], ["IntBE", true]];
  for (let v = 0; v < VARIABLE.length; v++) {
    const suffix = VARIABLE[v][0];
    const signed = VARIABLE[v][1];
    patch(proto, `read${suffix}`, (read) => function (offset, byteLength) {
      if (offset === undefined) throw errors.invalidArgType("offset", "number", offset);
      checkByteLength(byteLength);
      checkBounds(this, offset, byteLength);
      return ReflectApply(read, this, [offset, byteLength]);
    });
    patch(proto, `write${suffix}`, (write) => function (value, offset, byteLength) {
      checkByteLength(byteLength);
      value = checkIntWrite(this, value, offset, byteLength, intRange(signed, byteLength, false), false);
      return ReflectApply(write, this, [value, offset, byteLength]);
    });
  }

  // --- console rendering, as Node's Buffer.prototype[inspect.custom] -------

  const customInspect = p.SymbolFor("nodejs.util.inspect.custom");
  ObjectDefineProperty(proto, customInspect, {
    __proto__: null,
    writable: true,
    configurable: true,
    enumerable: false,
    value: function inspect(recurseTimes, ctx) {
      const max = INSPECT_MAX_BYTES;
      const shown = MathMin(max, this.length);
      const remaining = this.length - max;
      let str = "";
      for (let i = 0; i < shown; i++) {
        str += (i === 0 ? "" : " ") + p.StringPrototypePadStart(p.NumberPrototypeToString(this[i], 16), 2, "0");
      }
      if (remaining > 0) str += ` ... ${remaining} more byte${remaining > 1 ? "s" : ""}`;
      if (ctx) {
        const keys = ownNonIndexKeys(this);
        if (keys.length !== 0) {
          const extras = { __proto__: null };
          for (let i = 0; i < keys.length; i++) extras[keys[i]] = this[keys[i]];
          if (this.length !== 0) str += ", ";
          str += p.StringPrototypeSlice(inspectValue(extras, { __proto__: null, ...ctx, breakLength: Infinity, compact: true }), 27, -2);
        }
      }
      return `<${this.constructor.name} ${str}>`;
    },
  });

  // Node 24 raised the pool from 8 KiB to 64 KiB. Nothing is pooled here;
  // the number is what a program reads.
  Buffer.poolSize = nodeMajor >= 24 ? 64 * 1024 : 8 * 1024;
  // The package calls Buffer's methods as made here, not as the program
  // may replace them (Buffer.from = null broke buf.indexOf('b')).
  keepMembers(Buffer);
  keepMembers(proto);
  return Buffer;
}

return { __proto__: null, Buffer: makeBuffer() };
