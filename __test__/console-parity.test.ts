/**
 * Console parity: every value is built from the SAME source in this Node
 * process and inside the isolate; the isolate's log line must equal Node's
 * util.inspect(value, {depth: 4, maxArrayLength: 100, maxStringLength: 10000})
 * (strings raw), and console methods must print what Node's Console prints.
 */
import { Writable } from 'node:stream'
import { Console } from 'node:console'
import { inspect } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mount, type Mounted } from './helpers.js'

const OPTIONS = { depth: 4, maxArrayLength: 100, maxStringLength: 10000 }

const base: string[] = [
  // primitives
  'undefined', 'null', 'true', 'false', '0', '-0', '1.5', '-42', 'NaN', 'Infinity', '-Infinity', '1e21', '2 ** 53',
  '123n', '-5n', "Symbol('s')", 'Symbol()', "Symbol.for('registered')", 'Symbol.iterator',
  // strings inside containers
  "['plain']", "[\"it's\"]", "['say \"hi\"']", "['both \\' and \"']", "['both \\' \" and `']", "['tab\\there']",
  "['new\\nline']", "['\\u0001\\u001f\\u007f']", "['back\\\\slash']", "['emoji 😀']", "['lone \\ud800 surrogate']",
  "['x'.repeat(20000)]", "['line one\\nline two\\nline three that is long enough to be split in the output']",
  "{ s: 'a'.repeat(100) }", "[['nested', ['deeper', ['deepest']]]]", "['']",
  // objects
  '{}', '{ a: 1 }', '{ a: 1, b: 2 }', "{ 'key with space': 1, 'a-b': 2, valid_id: 3, $dollar: 4, '1x': 5, 42: 6 }",
  '{ nested: { deeper: { deepest: { bottom: { below: 1 } } } } }',
  '{ a: { b: { c: { d: { e: { f: 1 } } } } } }',
  '{ arr: [1, 2, 3], obj: { x: 1 }, str: "s", n: null, u: undefined }',
  'Object.fromEntries(Array.from({ length: 30 }, (_, i) => ["key" + i, i]))',
  'Object.fromEntries(Array.from({ length: 5 }, (_, i) => ["longer_key_name_" + i, "value number " + i]))',
  '{ [Symbol("sym")]: 1, regular: 2 }', "{ __proto__: null, a: 1 }", 'Object.create(null)',
  "JSON.parse('{\"__proto__\": 1}')", "Object.defineProperty({}, 'hidden', { value: 1 })",
  "Object.defineProperty({ v: 1 }, 'g', { get() { return 1 }, enumerable: true })",
  "Object.defineProperty({}, 's', { set(v) {}, enumerable: true })",
  "Object.defineProperty({}, 'gs', { get() { return 1 }, set(v) {}, enumerable: true })",
  '{ f() {}, g: function () {}, h: () => 1, i: async () => 1, j: function* () {}, k: async function* () {} }',
  "{ [Symbol.toStringTag]: 'Custom' }", "Object.assign(Object.create({ inherited: 1 }), { own: 2 })",
  // arrays
  '[]', '[1]', '[1, 2, 3]', 'Array.from({ length: 7 }, (_, i) => i)', 'Array.from({ length: 26 }, (_, i) => i * 100)',
  'Array.from({ length: 100 }, (_, i) => i)', 'Array.from({ length: 101 }, (_, i) => i)', 'Array.from({ length: 250 }, (_, i) => i % 7)',
  "Array.from({ length: 30 }, (_, i) => 'item' + i)", "Array.from({ length: 12 }, (_, i) => 'x'.repeat(i))",
  '[1, , 3]', '[, , 1]', 'new Array(5)', '[1, 2, 3].concat(new Array(200))', "Object.assign([1, 2], { extra: 'prop' })",
  '[[1, 2], [3, 4]]', '[[[[[[1]]]]]]', '[{ a: 1 }, { b: 2 }]', 'Array.from({ length: 8 }, (_, i) => ({ id: i, name: "n" + i }))',
  '[undefined, null, NaN, -0, 0n]', "[1, 'two', { three: 3 }, [4], () => 5]", 'Array.from({ length: 10 }, (_, i) => -i * 1.5)',
  'Array.from({ length: 16 }, (_, i) => 2n ** BigInt(i * 4))',
  // collections
  'new Map()', "new Map([['a', 1], ['b', { c: 2 }]])", 'new Map([[{ k: 1 }, [1, 2]]])', 'new Set()', 'new Set([1, 2, 3])',
  "new Set(['a', { b: 1 }])", 'new Map(Array.from({ length: 120 }, (_, i) => [i, i]))', 'new Set(Array.from({ length: 120 }, (_, i) => i))',
  'new WeakMap()', 'new WeakSet()', "Object.assign(new Map([[1, 2]]), { extra: true })",
  // URLSearchParams iterators: what they have left
  "new URLSearchParams('a=1&b=2&c=3').entries()", "new URLSearchParams('a=1&b=2').keys()", "new URLSearchParams('a=1&b=2').values()",
  "{ x: { y: new URLSearchParams('a=1').entries() } }", "[new URLSearchParams('').entries()]",
  "new URLSearchParams(Array.from({ length: 12 }, (_, i) => ['key' + i, 'v'.repeat(i * 3)])).entries()",
  "(() => { const i = new URLSearchParams('a=1&b=2').entries(); i.next(); return i })()",
  "(() => { const i = new URLSearchParams('a=1').keys(); [...i]; return i })()",
  // TextEncoder and TextDecoder
  'new TextEncoder()', "new TextDecoder('latin1', { fatal: true })", '[new TextEncoder(), new TextDecoder()]', "{ d: { e: new TextDecoder('utf-16le', { ignoreBOM: true }) } }",
  // dates and regexps
  'new Date(0)', 'new Date(1700000000123)', "new Date('invalid')", '/ab+c/gi', 'new RegExp("a/b")', "Object.assign(/x/, { flag: 1 })",
  // errors with fixed stacks
  "(() => { const e = new Error('boom'); e.stack = 'Error: boom\\n    at fn (program.ts:1:1)'; return e })()",
  "(() => { const e = new TypeError('bad'); e.stack = 'TypeError: bad'; return e })()",
  "(() => { const e = new RangeError('r'); e.stack = 'RangeError: r\\n    at x (y.ts:2:3)'; e.code = 'E_CODE'; return e })()",
  "(() => { const e = new Error('outer', { cause: 'inner' }); e.stack = 'Error: outer\\n    at a (b.ts:1:1)'; return e })()",
  "(() => { class MyError extends Error {}; const e = new MyError('mine'); e.stack = 'Error: mine\\n    at q (w.ts:1:1)'; return e })()",
  "(() => { class MyError extends Error { constructor(m) { super(m); this.name = 'MyError' } }; const e = new MyError('named'); e.stack = 'MyError: named\\n    at q (w.ts:1:1)'; return e })()",
  "(() => { const e = new Error('no stack'); e.stack = undefined; return e })()",
  "{ err: (() => { const e = new Error('inner'); e.stack = 'Error: inner\\n    at z (z.ts:1:1)'; return e })() }",
  // class instances
  'new (class Foo {})()', 'new (class Foo { constructor() { this.a = 1 } })()', 'new (class Bar { x = 1; y = [1, 2] })()',
  'new (class extends Array {})()', '(() => { class List extends Array {}; return List.from([1, 2]) })()',
  '(() => { class P { constructor() { this.x = 1 } }; return [new P(), new P()] })()',
  '(() => { function Legacy() { this.v = 1 }; return new Legacy() })()', 'Object.create(Object.create(null))',
  // functions and classes
  'function named() {}', '() => {}', 'async function af() {}', 'function* gen() {}', 'class A {}', 'class B extends Array {}',
  '(class {})', 'Object.assign(function withProps() {}, { p: 1 })', 'Math.max', 'Array', '[function inArray() {}]',
  // boxed primitives
  'new Number(3)', "new String('boxed')", 'new Boolean(false)', 'Object(1n)', "Object(Symbol('b'))", '-0 === 0 ? new Number(-0) : 0',
  // typed arrays and buffers
  'new Uint8Array([1, 2, 3])', 'new Float64Array(2)', 'new Int16Array(120)', 'new BigInt64Array([1n, -1n])',
  'new ArrayBuffer(4)', 'new Uint8Array([255, 0, 16]).buffer', 'new DataView(new ArrayBuffer(2))', 'new Uint8Array(0)',
  // promises and proxies
  'Promise.resolve(42)', 'new Promise(() => {})', '(() => { const p = Promise.reject(new Error("r")); p.catch(() => {}); p.stack = undefined; return 1 })()',
  '(() => { const p = Promise.reject(3); p.catch(() => {}); return p })()', 'Promise.resolve({ nested: [1, 2] })',
  'new Proxy({ target: 1 }, {})', 'new Proxy([1, 2], { get() { return "trap" } })',
  // circular
  '(() => { const o = { name: "root" }; o.self = o; return o })()',
  '(() => { const a = [1]; a.push(a); return a })()',
  '(() => { const o = { child: { } }; o.child.parent = o; o.child.again = o.child; return o })()',
  '(() => { const m = new Map(); m.set("me", m); return m })()',
  // depth
  '{ l1: { l2: { l3: { l4: { l5: { l6: 1 } } } } } }', '[[[[[[["deep"]]]]]]]', '{ a: [{ b: [{ c: [{ d: 1 }] }] }] }',
  // custom inspect
  "({ [Symbol.for('nodejs.util.inspect.custom')]() { return 'custom!' } })",
  "({ [Symbol.for('nodejs.util.inspect.custom')]() { return { replaced: true } } })",
  "({ [Symbol.for('nodejs.util.inspect.custom')](depth, options) { return options.stylize('styled', 'special') + ':' + Object.keys(options).join() } })",
  // collection iterators (previewed without being advanced)
  "new Map([['a', 1], ['b', { c: 2 }]]).entries()", "new Map([['a', 1]]).keys()", "new Map([['a', [1, 2]]]).values()",
  'new Set([1, 2, 3]).values()', "new Set(['x']).entries()", '(() => { const it = new Set([1, 2, 3]).values(); it.next(); return it })()',
  'new Map(Array.from({ length: 120 }, (_, i) => [i, i])).entries()', '[1, 2][Symbol.iterator]()',
  // where the Node lines render differently (02_inspect.js, dialect)
  '{ [Symbol("a b")]: 1, [Symbol()]: 2, [Symbol.iterator]: 3, plain: 4 }', "{ 'a\\nb': 1, __proto__: { inherited: 1 } }",
  "(() => { const e = new Error('k'); e.stack = 'Error: k'; e[Symbol('extra')] = 1; return e })()",
  "(() => { const e = new Error('n'); e.stack = 'Error: n'; Object.defineProperty(e, 'not-an-id', { value: 2 }); return e })()",
  "(() => { class Foo { get [Symbol.toStringTag]() { return 'ns.Foo' } }; return new Foo() })()",
  "(() => { class FooBar { get [Symbol.toStringTag]() { return 'Foo' } }; return new FooBar() })()",
  "(() => { class Foobar { get [Symbol.toStringTag]() { return 'Foo' } }; return new Foobar() })()",
  "(() => { class Foo { get [Symbol.toStringTag]() { return 'Bar' } }; return new Foo() })()",
  "(() => { class Foo { get [Symbol.toStringTag]() { return 'Foo' } }; return new Foo() })()",
  "(() => { class M extends Map { get [Symbol.toStringTag]() { return 'x.M' } }; return new M([[1, 2]]) })()",
  "(() => { class A extends Array { get [Symbol.toStringTag]() { return 'lib.A' } }; return A.from([1]) })()",
  "Object.defineProperty(Object.create(null), Symbol.toStringTag, { value: 'T' })",
  'new Proxy(new Proxy({ x: 1 }, {}), {})', 'new Proxy(function f() {}, {})', 'new Proxy(new Map([[1, 2]]), {})',
  '(() => { const r = Proxy.revocable({}, {}); r.revoke(); return r.proxy })()',
  "(() => { const e = new Error('s'); e.stack = 'SuppressedError: s\\n    at u (v.ts:1:1)'; e.name = 'SuppressedError'; return Object.defineProperties(e, { error: { value: 'thrown' }, suppressed: { value: 'earlier' } }) })()",
  // Buffers
  "Buffer.from('hi')", 'Buffer.alloc(0)', 'Buffer.alloc(50, 1)', 'Buffer.alloc(51, 2)', 'Buffer.alloc(300)',
  "Object.assign(Buffer.from('ab'), { extra: 1, more: 'x' })", "Object.assign(Buffer.alloc(0), { only: true })",
  "Buffer.from('hi').subarray(1)",
  // events (Events and Immediates carry clocks and ids: world.test.ts masks those)
  'new AbortController().signal', "AbortSignal.abort('why')", 'new AbortController()', 'new EventTarget()', 'navigator',
  // misc
  'globalThis.Math', 'JSON', '[new Date(0), /r/, 1n, Symbol("x")]', "'top-level strings are raw'", '(function () { return arguments })(1, 2)',
]

// Wrap each base value in containers too, to exercise indentation and breaking.
const wrappers = [
  (v: string) => v,
  (v: string) => `[${v}]`,
  (v: string) => `{ value: ${v} }`,
  (v: string) => `{ outer: { inner: [${v}, ${v}] } }`,
]
const corpus = [...new Set(base.flatMap((v) => wrappers.map((w) => w(v))))]

function nodeValue(source: string): unknown {
  return new Function(`'use strict'; return (${source})`)()
}

function expectedLine(values: unknown[]): string {
  return values.map((v) => (typeof v === 'string' ? v : inspect(v, OPTIONS))).join(' ')
}

let m: Mounted
beforeAll(async () => {
  m = await mount({})
})
afterAll(() => m.dispose())

describe('inspect parity with Node', () => {
  it(`renders ${corpus.length} values exactly like util.inspect`, async () => {
    expect(corpus.length).toBeGreaterThanOrEqual(300)
    const program = corpus.map((source) => `console.log(${source})`).join('\n')
    const result = await m.run(program)
    expect(result.error).toBeUndefined()
    const mismatches: string[] = []
    corpus.forEach((source, i) => {
      const expected = expectedLine([nodeValue(source)])
      if (result.logs[i] !== expected) mismatches.push(`${source}\n  node:    ${JSON.stringify(expected)}\n  isolate: ${JSON.stringify(result.logs[i])}`)
    })
    console.info(`inspect parity: ${corpus.length - mismatches.length}/${corpus.length} match`)
    expect(mismatches).toEqual([])
  })

  it('joins multiple arguments with one space, strings raw, no %-formatting', async () => {
    const args = "'%s and %d', 42, { a: [1] }, 'tail', null"
    const result = await m.run(`console.log(${args})`)
    expect(result.logs).toEqual([expectedLine(nodeValue(`[${args}]`) as unknown[])])
  })

  it('errors render with the program stack', async () => {
    const result = await m.run("const e = new Error('real')\nconsole.log(e)\nconsole.log({ e })")
    expect(result.logs[0]).toBe('Error: real\n    at program.ts:1:11')
    expect(result.logs[1]).toBe('{\n  e: Error: real\n      at program.ts:1:11\n}')
  })
})

describe('rendering the program cannot hook', () => {
  it('String.prototype[Symbol.split/replace] and Array[Symbol.species] never reach the sandbox\'s own rendering', async () => {
    // The same body with and without hooks that throw (and record) when
    // called: every line, the URL parse and the thrown error's stack must
    // come out the same, and no hook may have run.
    const body = `console.group('g')
console.log({ text: 'multi\\nline' }, 'two\\nlines')
console.log(new Error('inner'))
console.groupEnd()
const params = new URLSearchParams('a=1+2&b=x+y&c')
console.log(params.get('a'), params.get('b'), params.has('c'))
console.log(calls.join(','))
throw new Error('end')`
    const hooks = `const calls = []
const hook = (name) => function () { calls.push(name); throw new Error('hooked ' + name) }
String.prototype[Symbol.split] = hook('split')
String.prototype[Symbol.replace] = hook('replace')
Object.defineProperty(Array, Symbol.species, { get: hook('species') })
`
    const plain = await m.run(`const calls = []\n\n\n\n\n${body}`)
    const hooked = await m.run(`${hooks}${body}`)
    expect(plain.logs.at(-1)).toBe('')
    expect(plain.error?.message).toMatch(/^Error: end\n {4}at program\.ts:13:7/)
    expect(hooked).toEqual(plain)
  })
})

describe('console methods match Node\'s Console', () => {
  /**
   * Node's Console writing to a capture. Table cells are rendered with
   * table's own options, which a Console's inspectOptions would override,
   * so tables are compared against a default Console.
   */
  function nodeConsole(calls: string): string[] {
    const lines: string[] = []
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk).replace(/\n$/, ''))
        done()
      },
    })
    const inspectOptions = calls.includes('console.table') ? { colors: false } : { ...OPTIONS, colors: false }
    const c = new Console({ stdout: sink, stderr: sink, inspectOptions })
    new Function('console', `'use strict'; ${calls}`)(c)
    return lines
  }

  it.each([
    ['table of objects', "console.table([{ a: 1, b: 'x' }, { a: 2, c: true }])"],
    ['table of primitives', 'console.table([1, 2, 3])'],
    ['table with columns', "console.table([{ a: 1, b: 2 }, { a: 3, b: 4 }], ['a'])"],
    ['table of a map', "console.table(new Map([['k', 1], ['j', { deep: [1, 2, 3, 4] }]]))"],
    ['table of a set', "console.table(new Set(['x', 'y']))"],
    ['table of nested objects', 'console.table({ r1: { c1: 1, c2: [1, 2, 3, 4, 5] }, r2: { c1: { a: 1, b: 2, c: 3 } } })'],
    ['table of a primitive', "console.table('not tabular')"],
    ['groups', "console.group('g1'); console.log('in g1'); console.group(); console.log({ a: 1 }); console.log('two\\nlines'); console.groupEnd(); console.groupEnd(); console.log('out')"],
    ['groupCollapsed', "console.groupCollapsed('c'); console.info('inside'); console.groupEnd()"],
    ['assert', "console.assert(true, 'never'); console.assert(false, 'failed', 'x'); console.assert(false); console.assert(0, { o: 1 })"],
    ['count', "console.count(); console.count(); console.count('x'); console.countReset(); console.count()"],
    ['dir', 'console.dir({ a: { b: { c: { d: { e: { f: 1 } } } } } }); console.dir([1, 2], { depth: 0 })'],
    ['dirxml', 'console.dirxml({ x: 1 }, [2])'],
  ])('%s', async (_, calls) => {
    const result = await m.run(calls)
    expect(result.error).toBeUndefined()
    expect(result.logs.join('\n')).toBe(nodeConsole(calls).join('\n'))
  })

  it('time, timeLog and timeEnd print a label and a duration', async () => {
    const result = await m.run("console.time('t'); console.timeLog('t', 'mid'); console.timeEnd('t'); console.timeEnd('t')")
    expect(result.logs[0]).toMatch(/^t: \d+(\.\d+)?ms mid$/)
    expect(result.logs[1]).toMatch(/^t: \d+(\.\d+)?ms$/)
    expect(result.logs[2]).toBe("Warning: No such label 't' for console.timeEnd()")
  })

  it('trace prints Trace: with the program stack', async () => {
    const result = await m.run("function f() { console.trace('here', 1) }\nf()")
    expect(result.logs[0]).toBe('Trace: here 1\n    at f (program.ts:1:24)\n    at program.ts:2:1')
  })
})
