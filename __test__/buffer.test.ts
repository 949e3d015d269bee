/**
 * Buffer, with Node as the oracle: every case is the same source run in
 * this Node process (Node's own Buffer) and as a program in the isolate;
 * the results, described the same way on both sides (bytes as hex, errors
 * as name, code and message), must be equal. And the vendored bundle of the
 * `buffer` package must be what scripts/vendor-buffer.mjs makes today.
 */
import { readFileSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mismatches, mount, type Mounted } from './helpers.js'

/** Turns any result into plain JSON the same way in both realms. */
const DESCRIBE = `function describe(value) {
  if (typeof value === 'bigint') return { bigint: String(value) }
  if (typeof value === 'number' && !Number.isFinite(value)) return { number: String(value) }
  if (Object.is(value, -0)) return { number: '-0' }
  if (value === undefined) return { undefined: true }
  if (value instanceof Uint8Array) {
    let hex = ''
    for (const byte of value) hex += byte.toString(16).padStart(2, '0')
    return { [Buffer.isBuffer(value) ? 'buffer' : value.constructor.name]: hex }
  }
  if (value instanceof ArrayBuffer) return { ArrayBuffer: value.byteLength }
  if (Array.isArray(value)) return value.map(describe)
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, describe(v)]))
  }
  return value
}
function attempt(f) {
  try {
    return { ok: describe(f()) }
  } catch (error) {
    return { threw: { name: error.name, code: error.code ?? null, message: error.message } }
  }
}`

const cases: string[] = [
  // from, with every encoding Node has
  "Buffer.from('hi there')", "Buffer.from('héllo wörld ✓ 😀')", "Buffer.from('héllo', 'utf-8')", "Buffer.from('héllo', 'UTF8')",
  "Buffer.from('aGVsbG8gd29ybGQ=', 'base64')", "Buffer.from('aGVsbG8gd29ybGQ', 'base64')", "Buffer.from('aGVs bG8\\nd29y', 'base64')",
  "Buffer.from('a-_b', 'base64')", "Buffer.from('%%%aGk=', 'base64')", "Buffer.from('aGk=aGk=', 'base64')", "Buffer.from('a', 'base64')",
  "Buffer.from('aGVsbG8_d29ybGQ-', 'base64url')", "Buffer.from('aGVsbG8gd29ybGQ=', 'base64url')", "Buffer.from('', 'base64url')",
  "Buffer.from('68656c6c6f', 'hex')", "Buffer.from('68656c6c6', 'hex')", "Buffer.from('6g', 'hex')", "Buffer.from('ABCDEF', 'hex')", "Buffer.from('zz00', 'hex')",
  "Buffer.from('héllo', 'latin1')", "Buffer.from('héllo', 'binary')", "Buffer.from('héllo ✓', 'ascii')", "Buffer.from('hé', 'ucs2')",
  "Buffer.from('hé', 'ucs-2')", "Buffer.from('hé', 'utf16le')", "Buffer.from('hé', 'utf-16le')", "Buffer.from('hi', 'nope')",
  'Buffer.from([1, 2, 256, -1, 3.7, "4"])', 'Buffer.from(new Uint16Array([1, 258]))', 'Buffer.from(new Uint16Array([1, 258]).buffer)',
  'Buffer.from(new Uint8Array([1, 2, 3, 4]).buffer, 1, 2)', "Buffer.from(Buffer.from('copy'))", "Buffer.from({ length: 2, 0: 7, 1: 8 })",
  "Buffer.from('x', 5)", "Buffer.from('\\ud800 lone', 'utf8')", "Buffer.from('\\udc00x\\ud83d')", "Buffer.from('x'.repeat(3) + '\\u{10ffff}', 'ascii')",
  "Buffer.byteLength('héllo', 'nope')", "Buffer.byteLength('héllo', 'latin1')", "Buffer.byteLength('\\ud800')",
  'Buffer.from(42)', 'Buffer.from(null)', "Buffer.from(new String('boxed'))",
  // views where Node takes them, and what the package lacks
  "(() => { const t = new Uint8Array(5); return [Buffer.from('hello').copy(t), t] })()",
  "(() => { const t = new Uint8Array(5); return [Buffer.from('hello').copy(t, 1, 1, 3), t] })()",
  "(() => { const t = new Uint16Array(2); return [Buffer.from('hello').copy(t), Array.from(t)] })()",
  "(() => { const t = new DataView(new ArrayBuffer(4)); return [Buffer.from('hello').copy(t), t.getUint8(0), t.getUint8(3)] })()",
  "(() => { const x = Buffer.from('hello'); return [x.copy(x, 1, 0, 4), x] })()",
  "Buffer.from('hello').copy(new Uint8Array(5), -1)", "Buffer.from('hello').copy(new Uint8Array(5), 0, 10)", "Buffer.from('hello').copy(new Uint8Array(5), 0, 1.5)",
  "Buffer.from('hello').copy(new Uint8Array(5), '1')", "Buffer.from('hello').copy(new Uint8Array(5), 0, 0, -1)", "Buffer.from('hello').copy('abc')",
  "Buffer.from('hello').copy(new Uint8Array(5), 0, 2, 1)", "Buffer.from('hello').copy(new Uint8Array(3), 1, 1, 99)", "Buffer.from('hello').copy(new Uint8Array(5), 5)",
  "Buffer.from('hello').indexOf(new Uint8Array([108, 111]))", "Buffer.from('hello').includes(new Uint8Array([108]))",
  "Buffer.from('hello').lastIndexOf(new Uint8Array([108]))", "Buffer.from('hello').indexOf(new Uint8Array(new Uint8Array([0, 108, 108]).buffer, 1))",
  "Buffer.from('hello').indexOf({})", "Buffer.from('hello').includes(true)", "Buffer.from('hello').indexOf(new Uint16Array([108]))", "Buffer.from('hello').lastIndexOf(null)",
  "[Buffer.byteLength('aGVs bG8=', 'base64'), Buffer.byteLength('aGVs\\nbG8g\\nd29y', 'base64'), Buffer.byteLength('aGk', 'base64url'), Buffer.byteLength('a!!!', 'base64')]",
  "[Buffer.byteLength('aGk=\\n', 'base64'), Buffer.byteLength('aGk=', 'base64url'), Buffer.byteLength('==', 'base64'), Buffer.byteLength('=', 'base64'), Buffer.byteLength('', 'BASE64')]",
  'Buffer.copyBytesFrom(new Uint16Array([1, 256]), 1)', 'Buffer.copyBytesFrom(new Uint16Array([1, 256, 3]), 1, 1)', 'Buffer.copyBytesFrom(new Uint16Array([1, 2, 3]), 1, 5)',
  'Buffer.copyBytesFrom(new Float64Array(0))', 'Buffer.copyBytesFrom(new Uint8Array([1, 2]), 5)', 'Buffer.copyBytesFrom(new Uint8Array([1, 2]), 0, 0)',
  // write's forms and checks, in Node's order
  "Buffer.alloc(4).write('abc', 5)", "Buffer.alloc(4).write('abc', -1)", "Buffer.alloc(4).write('abc', 0, 10)", "Buffer.alloc(4).write('abc', 1.5)",
  'Buffer.alloc(4).write(123)', 'Buffer.alloc(4).write()', "Buffer.alloc(4).write(Buffer.from('x'))", "Buffer.alloc(4).write('x', null)",
  "Buffer.alloc(4).write('x', 1, -1)", "Buffer.alloc(4).write('xyz', 1, 1.5)", "Buffer.alloc(4).write('x', 1, '1')", "Buffer.alloc(4).write('abc', 'nope')",
  "Buffer.alloc(4).write(5, 'nope')", "(() => { const b = Buffer.alloc(4); return [b.write('abc', 1, 'hex'), b] })()", "(() => { const b = Buffer.alloc(4); return [b.write('abcdef', 1, 2), b] })()",
  "Buffer.alloc(4).write('abc', '1')", "Buffer.alloc(4).write('abc', 4)", "(() => { const b = Buffer.alloc(4); return [b.write('ab', 0, 4, 'ucs2'), b] })()",
  "(() => { const b = Buffer.alloc(4); return [b.write('abc', undefined, 2), b] })()", "(() => { const b = Buffer.alloc(4); return [b.write('abc', 0, undefined, 'latin1'), b] })()",
  "Buffer.alloc(4).write('abc', 2 ** 53)", "Buffer.alloc(4).write('abc', NaN)", "Buffer.alloc(4).write('abc', 1, NaN)", "(() => { const b = Buffer.alloc(4); return [b.write('aGk=', 'base64url'), b] })()",
  "(() => { const b = Buffer.alloc(6); return [b.write('héllo', 1, 'UTF-8'), b.write('ab', 4, ''), b] })()", "(() => { const b = Buffer.alloc(3); return [b.write('6g6', 'hex'), b] })()",
  // fill, alloc, allocUnsafe, concat, compare and from(ArrayBuffer): Node's checks
  "Buffer.alloc(3).fill('a', 5)", "Buffer.alloc(3).fill('a', 0, 5)", "Buffer.alloc(3).fill('a', -1)", "Buffer.alloc(3).fill('a', 1.5)",
  "Buffer.alloc(3).fill('a', null)", "Buffer.alloc(3).fill('a', 0, null)", 'Buffer.alloc(3).fill({})', 'Buffer.alloc(3, {})', 'Buffer.alloc(4).fill([1, 2])',
  'Buffer.alloc(3).fill(1n)', "Buffer.alloc(4).fill('zz', 'hex')", "Buffer.alloc(4, 'zz', 'hex')", "Buffer.alloc(3).fill('a', 'nope')", "Buffer.alloc(3).fill('a', 1, 'latin1')",
  "Buffer.alloc(3).fill('a', 2, 1)", "Buffer.alloc(3).fill('')", "Buffer.alloc(3).fill(true)", 'Buffer.alloc(3).fill(257)', "Buffer.alloc(4).fill(new Uint8Array([1, 2]))", "Buffer.alloc(4).fill(new Uint8Array(0))",
  'Buffer.allocUnsafe(-1)', "Buffer.allocUnsafe('3')", 'Buffer.allocUnsafe(2 ** 53)', 'Buffer.allocUnsafeSlow(-1)', 'Buffer.allocUnsafeSlow(NaN)', 'Buffer.alloc(NaN)', 'Buffer.alloc(1.5).length',
  "Buffer.concat([Buffer.from('ab')], -1)", "Buffer.concat([Buffer.from('ab')], '3')", "Buffer.concat([Buffer.from('ab')], null)", "Buffer.concat([Buffer.from('abc')], 2.5)", 'Buffer.concat([null])',
  "Buffer.from('abc').compare(Buffer.from('abc'), 0, 5)", "Buffer.from('abc').compare(Buffer.from('abc'), -1)", "Buffer.from('abc').compare(Buffer.from('abc'), 0, 3, 0, 9)",
  "Buffer.from('abc').compare(Buffer.from('abc'), 1.5)", "Buffer.from('abc').compare(Buffer.from('abc'), '1')", "Buffer.from('abc').compare(Buffer.from('bc'), 1, 3, 1, 3)",
  'Buffer.from(new ArrayBuffer(4), 5)', 'Buffer.from(new ArrayBuffer(4), 1, 5)', "Buffer.from(new ArrayBuffer(4), '1')", 'Buffer.from(new ArrayBuffer(4), -1)', 'Buffer.from(new ArrayBuffer(4), 0, -1)',
  'Buffer.from({})', "Buffer.from('abc').toString(null)", "Buffer.from('abc').toString('')",
  // An offset's valueOf that resizes the target: lengths read after it, as Node reads them.
  "(() => { const ab = new ArrayBuffer(8, { maxByteLength: 8 }); return Buffer.from('abcdefgh').copy(new Uint8Array(ab), { valueOf() { ab.resize(2); return 0 } }) })()",
  "(() => { const ab = new ArrayBuffer(8, { maxByteLength: 8 }); const t = new Uint8Array(ab); return [Buffer.from('abcdefgh').copy(t, 0, { valueOf() { ab.resize(3); return 1 } }), t] })()",
  'Buffer.copyBytesFrom([1])', 'Buffer.copyBytesFrom(new Uint8Array(2), -1)', "Buffer.copyBytesFrom(new Uint8Array(2), '1')", 'Buffer.copyBytesFrom(new Uint8Array(2), 1.5)',
  'Buffer.copyBytesFrom(new DataView(new ArrayBuffer(1)))', '[Buffer.copyBytesFrom.name, Buffer.copyBytesFrom.length, Object.keys(Buffer).includes("copyBytesFrom"), Object.keys(Buffer).includes("from")]',
  '(() => { const b = Buffer.copyBytesFrom(new Uint8Array([9])); return [Buffer.isBuffer(b), b] })()',
  // alloc and friends
  'Buffer.alloc(4)', 'Buffer.alloc(4, 1)', "Buffer.alloc(5, 'ab')", "Buffer.alloc(4, 'aGk=', 'base64')", 'Buffer.alloc(0)', 'Buffer.alloc(-1)',
  "Buffer.alloc('4')", 'Buffer.allocUnsafe(3).fill(9)', 'Buffer.allocUnsafeSlow(2).fill(1)',
  // concat, byteLength, compare, equals
  "Buffer.concat([Buffer.from('ab'), Buffer.from('cd')])", "Buffer.concat([Buffer.from('ab'), new Uint8Array([99])], 2)",
  "Buffer.concat([Buffer.from('ab')], 5)", 'Buffer.concat([])', "Buffer.concat(['nope'])",
  "Buffer.byteLength('héllo')", "Buffer.byteLength('aGVsbG8=', 'base64')", "Buffer.byteLength('aGVsbG8', 'base64url')",
  "Buffer.byteLength('abcd', 'hex')", "Buffer.byteLength('hé', 'ucs2')", 'Buffer.byteLength(new Uint16Array(3))', 'Buffer.byteLength(5)',
  "Buffer.compare(Buffer.from('a'), Buffer.from('b'))", "Buffer.from('abc').compare(Buffer.from('abd'))",
  "Buffer.from('abc').compare(Buffer.from('xbcx'), 1, 3, 1, 3)", "Buffer.from('abc').equals(Buffer.from('abc'))",
  "Buffer.from('abc').equals(new Uint8Array([97, 98, 99]))", "Buffer.from('abc').equals('abc')",
  // toString(encoding, start, end)
  "Buffer.from('héllo').toString()", "Buffer.from('héllo').toString('hex')", "Buffer.from('hello world').toString('base64')",
  "Buffer.from([0xfb, 0xff, 0xbf]).toString('base64')", "Buffer.from([0xfb, 0xff, 0xbf]).toString('base64url')",
  "Buffer.from('hello').toString('base64url')", "Buffer.from('héllo').toString('latin1')", "Buffer.from('héllo').toString('ascii')",
  "Buffer.from('hé', 'ucs2').toString('ucs2')", "Buffer.from('hello world').toString('utf8', 6)", "Buffer.from('hello world').toString('utf8', 2, 5)",
  "Buffer.from('hello').toString('utf8', -3, 100)", "Buffer.from('hello').toString('utf8', 4, 2)", "Buffer.from([0xe2, 0x82]).toString()",
  'Buffer.from([0xff, 0xfe, 0x41, 0xc3]).toString()', "Buffer.from('abc').toString('nope')", "Buffer.from('hello').toString(undefined, 1)",
  // slice, subarray
  "Buffer.from('hello').slice(1, 3)", "Buffer.from('hello').subarray(-2)", "(() => { const b = Buffer.from('hello'); b.subarray(0, 1)[0] = 74; return b })()",
  "Buffer.isBuffer(Buffer.from('hello').slice(1))", "Buffer.from('hello').subarray(3, 1)",
  // indexOf, includes, lastIndexOf
  "Buffer.from('hello world').indexOf('o')", "Buffer.from('hello world').indexOf('o', 5)", "Buffer.from('hello world').indexOf(Buffer.from('wor'))",
  "Buffer.from('hello world').indexOf(111)", "Buffer.from('hello world').indexOf('zz')", "Buffer.from('hello world').indexOf('')",
  "Buffer.from('hello world').lastIndexOf('o')", "Buffer.from('hello world').includes('world')", "Buffer.from('hello world').includes('World')",
  "Buffer.from('hello world').indexOf('6f', 0, 'hex')", "Buffer.from('hello world').indexOf('o', -4)",
  // reads
  'Buffer.from([1, 2, 3, 4, 5, 6, 7, 8]).readUInt8(1)', 'Buffer.from([1, 2, 3, 4]).readUInt16LE(1)', 'Buffer.from([1, 2, 3, 4]).readUInt16BE()',
  'Buffer.from([1, 2, 3, 4]).readUInt32LE(0)', 'Buffer.from([0xff, 0xff, 0xff, 0xff]).readInt32BE(0)', 'Buffer.from([0x80]).readInt8(0)',
  'Buffer.from([1, 2, 3, 4, 5, 6]).readUIntBE(0, 6)', 'Buffer.from([1, 2, 3, 4, 5, 6]).readIntLE(0, 6)', 'Buffer.from([1, 2, 3]).readUint16LE(0)',
  'Buffer.from([0, 0, 0x80, 0x3f]).readFloatLE(0)', 'Buffer.from([0x40, 0x09, 0x21, 0xfb, 0x54, 0x44, 0x2d, 0x18]).readDoubleBE(0)',
  'Buffer.from([1, 0, 0, 0, 0, 0, 0, 0x80]).readBigInt64LE(0)', 'Buffer.from([1, 0, 0, 0, 0, 0, 0, 0x80]).readBigUInt64LE(0)',
  // out-of-range reads
  'Buffer.from([1, 2]).readUInt8(2)', 'Buffer.from([1, 2]).readUInt16LE(1)', 'Buffer.from([1, 2]).readUInt32LE(0)', 'Buffer.from([1, 2]).readUInt8(-1)',
  'Buffer.from([1, 2]).readUInt8(0.5)', "Buffer.from([1, 2]).readUInt8('1')", 'Buffer.from([1, 2]).readUInt8(NaN)', 'Buffer.alloc(0).readUInt8(0)',
  'Buffer.from([1, 2]).readDoubleLE(0)', 'Buffer.from([1, 2]).readBigUInt64BE(0)', 'Buffer.from([1, 2, 3]).readUIntLE(0, 7)',
  // writes
  '(() => { const b = Buffer.alloc(8); return [b.writeUInt8(255, 0), b.writeUInt16LE(0x1234, 1), b.writeInt32BE(-2, 3), b] })()',
  '(() => { const b = Buffer.alloc(8); return [b.writeDoubleLE(1.5), b] })()', '(() => { const b = Buffer.alloc(8); return [b.writeFloatBE(0.25, 2), b] })()',
  '(() => { const b = Buffer.alloc(8); return [b.writeBigUInt64BE(2n ** 63n), b] })()', '(() => { const b = Buffer.alloc(6); return [b.writeUIntBE(0x123456, 1, 3), b] })()',
  "(() => { const b = Buffer.alloc(6); return [b.write('héllo'), b] })()", "(() => { const b = Buffer.alloc(6); return [b.write('ab', 4), b] })()",
  "(() => { const b = Buffer.alloc(6); return [b.write('6869', 1, 'hex'), b] })()", "(() => { const b = Buffer.alloc(6); return [b.write('aGk', 0, 2, 'base64url'), b] })()",
  'Buffer.alloc(2).writeUInt8(256, 0)', 'Buffer.alloc(2).writeUInt8(1, 2)', 'Buffer.alloc(2).writeUInt16LE(1, 1)', 'Buffer.alloc(2).writeInt8(-129)',
  'Buffer.alloc(4).writeUInt32BE(-1)', 'Buffer.alloc(4).writeInt32LE(2 ** 31)', 'Buffer.alloc(8).writeBigInt64LE(2n ** 63n)', 'Buffer.alloc(8).writeBigUInt64LE(1)',
  // fill, swap, copy, toJSON, keys
  "Buffer.alloc(5).fill('ab', 1)", "Buffer.alloc(4).fill('6869', 'hex')", 'Buffer.from([1, 2, 3, 4]).swap16()', 'Buffer.from([1, 2, 3, 4]).swap32()',
  'Buffer.from([1, 2, 3]).swap16()', "(() => { const t = Buffer.alloc(4); return [Buffer.from('abc').copy(t, 1), t] })()",
  "Buffer.from('hi').toJSON()", "JSON.stringify({ b: Buffer.from('hi') })", "[...Buffer.from('hi').entries()]", "Array.from(Buffer.from('hi').keys())",
  // identity and the class
  "Buffer.isBuffer(Buffer.from('x'))", 'Buffer.isBuffer(new Uint8Array(1))', "Buffer.from('x') instanceof Uint8Array", "Buffer.isEncoding('base64url')",
  "Buffer.isEncoding('UTF-8')", "Buffer.isEncoding('nope')", "Object.getPrototypeOf(Buffer.prototype) === Uint8Array.prototype", 'Buffer.poolSize',
  "typeof Buffer.from('x').readUInt8", "Buffer.from('abc').reverse()", "Buffer.from('abc').map((x) => x + 1)", "Buffer.from('x').constructor.name",
]

let m: Mounted
beforeAll(async () => {
  m = await mount({})
})
afterAll(() => m.dispose())

describe('Buffer behaves as Node', () => {
  it(`${cases.length} cases give Node's results`, async () => {
    const program = `${DESCRIBE}\nreturn [${cases.map((source) => `attempt(() => ${source})`).join(',\n')}]`
    const result = await m.run(program)
    expect(result.error).toBeUndefined()
    const node = new Function(`${DESCRIBE}\nreturn [${cases.map((source) => `attempt(() => ${source})`).join(',\n')}]`)()
    expect(mismatches(cases, node, result.value as unknown[])).toEqual([])
  })
})

describe('the vendored buffer package', () => {
  it('is what scripts/vendor-buffer.mjs makes from the installed packages', async () => {
    const { bundle, OUTPUT } = await import('../scripts/vendor-buffer.mjs')
    expect(readFileSync(OUTPUT, 'utf8')).toBe(await bundle())
  })
})
