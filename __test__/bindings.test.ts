import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { RUN_REPORT, type V8CodeRunReport } from '../lib/index.js'
import { mount, mountReference, tools, type Mounted } from './helpers.js'

let m: Mounted
beforeAll(async () => {
  // Below the test timeout, so a stuck run still fails its test with a
  // result; far above what any run here needs, so a loaded machine never
  // ends one at the ceiling (2000 sequential calls took 15 s beside two
  // busy loops and the suite).
  m = await mount({ maxWallMs: 120_000 })
})
afterAll(() => m.dispose())

/**
 * Collect Node's garbage (and let finalizers run between collections), for
 * the tests that read the harness's RSS.
 */
async function collect(): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc
  expect(gc, 'the suite runs Node with --expose-gc').toBeTypeOf('function')
  for (let i = 0; i < 3; i++) {
    gc!()
    await new Promise((resolve) => setImmediate(resolve))
  }
}

const echo = () => {
  const seen: unknown[] = []
  return { seen, fns: { echo: async (args: unknown) => (seen.push(args), args) } }
}

describe('namespaces', () => {
  it('are null-prototype objects whose every name is an own property', async () => {
    const calls: string[] = []
    const fn = (name: string) => async () => (calls.push(name), name)
    const functions = Object.create(null)
    for (const name of ['__proto__', 'constructor', 'hasOwnProperty', 'toString', 'a b', '']) functions[name] = fn(name)
    const result = await m.run(
      `return [Object.getPrototypeOf(tools) === null, typeof tools.valueOf, Object.keys(tools).length,
        await tools['__proto__']({}), await tools.constructor({}), await tools.hasOwnProperty({}), await tools['a b']({}), await tools['']({})]`,
      { bindings: [{ global: 'tools', functions }] },
    )
    expect(result).toEqual({ logs: [], value: [true, 'undefined', 6, '__proto__', 'constructor', 'hasOwnProperty', 'a b', ''] })
  })

  it('members are read-only and permanent, as in the reference backend', async () => {
    const result = await m.run(
      `const d = Object.getOwnPropertyDescriptor(tools, 'echo')
       const out = [d.writable, d.enumerable, d.configurable, Object.isFrozen(tools), Object.isExtensible(tools)]
       try { tools.echo = 5 } catch (e) { out.push(e instanceof TypeError) }
       try { delete tools.echo } catch (e) { out.push(e instanceof TypeError) }
       out.push(typeof tools.echo, await tools.echo(1))
       return out`,
      { bindings: tools(echo().fns) },
    )
    expect(result.value).toEqual([false, true, false, false, true, true, true, 'function', 1])
  })

  it('members are functions shaped as the reference\'s, and print as its do', async () => {
    const program = `const f = tools.echo
      let constructed
      try { new f({}); constructed = true } catch (e) { constructed = e instanceof TypeError }
      console.log(tools)
      console.log(f)
      return [f.name, f.length, typeof f.prototype, constructed, Object.getOwnPropertyNames(f).sort(), Object.getPrototypeOf(f) === Function.prototype]`
    const reference = await mountReference()
    try {
      const expected = await reference.run(program, { bindings: tools(echo().fns) })
      expect(await m.run(program, { bindings: tools(echo().fns) })).toEqual(expected)
      expect(expected.value).toEqual(['value', 1, 'undefined', true, ['length', 'name'], true])
    } finally {
      await reference.dispose()
    }
  })

  it('allow globals named like builtins, and a namespace named like an error class', async () => {
    const result = await m.run('return [await Error.f({}), await process.f({}), await ToolCallError.f({})]', {
      bindings: [
        { global: 'Error', functions: { f: async () => 1 } },
        { global: 'process', functions: { f: async () => 2 } },
        { global: 'ToolCallError', functions: { f: async () => 3 } },
      ] as never,
    })
    expect(result).toEqual({ logs: [], value: [1, 2, 3] })
  })

  it('are the program\'s parameters, not globals, as the reference backend hands them (then the console)', async () => {
    const programs = [
      'return [typeof globalThis.tools, typeof tools, typeof ToolError, typeof globalThis.ToolError, typeof kv.get, arguments.length]',
      'const tools = 1; return tools',
      'let ToolError = 1; return ToolError',
      'const console = 1; return console',
      'var tools = 2; return tools',
      'tools = 3; return tools',
      'try { await tools.fail({}) } catch (e) { return [e instanceof ToolError, e.name, e.tool, String(e)] }',
      'function f() { return typeof tools } return [f(), eval("typeof kv"), (0, eval)("typeof kv"), new Function("return typeof tools")()]',
    ]
    const bindings = () => [
      {
        global: 'tools',
        functions: {
          fail: async () => {
            throw new Error('nope')
          },
        },
        errorClass: { name: 'ToolError', memberNameProperty: 'tool' },
      },
      { global: 'kv', functions: { get: async () => 1 } },
    ]
    // A syntax error's first line: the reference's message goes on with its
    // worker's stack, ours with the program's position.
    const outcome = (result: { value?: unknown; error?: { kind: string; message: string } }) =>
      result.error ? [result.error.kind, result.error.message.split('\n')[0].replace(/ at program\.ts:\d+:\d+$/, '')] : result.value
    const reference = await mountReference()
    try {
      for (const program of programs) {
        const expected = outcome(await reference.run(program, { bindings: bindings() }))
        expect([program, outcome(await m.run(program, { bindings: bindings() }))]).toEqual([program, expected])
      }
    } finally {
      await reference.dispose()
    }
  })

  it('an immediate set after a tool\'s reply runs before a timer set beside it, as in the reference backend', async () => {
    const program =
      "const out = []; await tools.echo(1); setTimeout(() => out.push('t'), 0); setImmediate(() => out.push('i')); setTimeout(() => out.push('t2'), 1); setImmediate(() => out.push('i2')); await new Promise((r) => setTimeout(r, 10)); return out"
    const reference = await mountReference()
    try {
      const expected = await reference.run(program, { bindings: tools(echo().fns) })
      expect(expected.value).toEqual(['i', 'i2', 't', 't2'])
      expect(await m.run(program, { bindings: tools(echo().fns) })).toEqual(expected)
    } finally {
      await reference.dispose()
    }
  })

  it('immediates set by the program\'s synchronous part run before its timers, however long that part computes, as in the reference backend', async () => {
    // The reference runs that part in an I/O callback, after which Node
    // runs the immediates before any timer; here the loop's first turn
    // reaches the timers first, which, due by then, ran first.
    const program =
      "const out = []; setTimeout(() => out.push('t'), 0); setImmediate(() => { out.push('i'); setImmediate(() => out.push('i3')) }); setTimeout(() => out.push('t1'), 1); setImmediate(() => out.push('i2')); const s = Date.now(); while (Date.now() - s < 5); await new Promise((r) => setTimeout(r, 20)); return out"
    const reference = await mountReference()
    try {
      const expected = await reference.run(program, { bindings: tools(echo().fns) })
      expect(expected.value).toEqual(['i', 'i2', 't', 't1', 'i3'])
      expect(await m.run(program, { bindings: tools(echo().fns) })).toEqual(expected)
    } finally {
      await reference.dispose()
    }
  })

  it.each([
    [[{ global: '$tools', functions: {} }], /not a usable identifier/],
    [[{ global: 'lambda', functions: {} }], /not a usable identifier/],
    [[{ global: 'console', functions: {} }], /reserved binding global/],
    [[{ global: '__name__', functions: {} }], /reserved binding global/],
    [[{ global: 't', functions: {} }, { global: 't', functions: {} }], /duplicate binding global/],
    [[{ global: 't', functions: {}, errorClass: { name: 'bad-name', memberNameProperty: 'm' } }], /error class.*not a usable identifier/],
    [[{ global: 't', functions: {}, errorClass: { name: 'console', memberNameProperty: 'm' } }], /reserved binding global/],
    [[{ global: 't', functions: {}, errorClass: { name: 't', memberNameProperty: 'm' } }], /duplicate injected global/],
    [
      [
        { global: 'a', functions: {}, errorClass: { name: 'E', memberNameProperty: 'm' } },
        { global: 'b', functions: {}, errorClass: { name: 'E', memberNameProperty: 'm' } },
      ],
      /duplicate injected global/,
    ],
    [[{ global: 't', functions: {}, errorClass: { name: 'E', memberNameProperty: '' } }], /member property.*not usable/],
    [[{ global: 't', functions: {}, errorClass: { name: 'E', memberNameProperty: 'stack' } }], /member property.*not usable/],
    [[{ global: 't', functions: {}, errorClass: { name: 'E', memberNameProperty: '__x__' } }], /member property.*not usable/],
  ])('misuse rejects run(): %j', async (bindings, message) => {
    await expect(m.runtime.run({ program: 'return 1', bindings: bindings as never })).rejects.toThrow(message)
  })
})

describe('calls', () => {
  it('send exactly one argument, a fresh copy', async () => {
    const seen: unknown[] = []
    const result = await m.run(
      `const arg = { a: [1, 2] }
       const back = await tools.f(arg, 'extra')
       arg.a.push(3)
       return [back, arg.a.length]`,
      { bindings: tools({ f: async (...args: unknown[]) => (seen.push(args), (args[0] as { a: number[] }).a.length) }) },
    )
    expect(result).toEqual({ logs: [], value: [2, 3] })
    expect(seen).toEqual([[{ a: [1, 2] }]])
  })

  it('a missing argument is undefined, which is not lossless: the host is never called', async () => {
    const e = echo()
    const result = await m.run('try { await tools.echo() } catch (err) { return err.message }', { bindings: tools(e.fns) })
    expect(result.value).toBe('binding arguments must be lossless JSON')
    expect(e.seen).toEqual([])
  })

  it.each([
    ['undefined', 'undefined'],
    ['a function', '() => 1'],
    ['a bigint', '1n'],
    ['a symbol', 'Symbol()'],
    ['NaN', 'NaN'],
    ['Infinity', '[Infinity]'],
    ['-0', '{ x: -0 }'],
    ['a Date', 'new Date()'],
    ['a Map', 'new Map()'],
    ['a class instance', 'new (class Foo {})()'],
    ['an array subclass', 'new (class A extends Array {})()'],
    ['a sparse array', '[1, , 3]'],
    ['a decorated array', 'Object.assign([1], { extra: 1 })'],
    ['a symbol key', '{ [Symbol("k")]: 1 }'],
    ['a non-enumerable key', 'Object.defineProperty({}, "k", { value: 1 })'],
    ['a symbol key beside string keys', '{ a: 1, [Symbol("k")]: 1 }'],
    ['a non-enumerable key beside enumerable ones', 'Object.defineProperty({ a: 1 }, "k", { value: 1 })'],
    ['a non-enumerable key of a null-prototype object', 'Object.defineProperty(Object.create(null), "k", { value: 1 })'],
    ['a cycle', '(() => { const o: any = {}; o.self = o; return o })()'],
    ['a cycle 40 deep', '(() => { const root: any = {}; let o = root; for (let i = 0; i < 40; i++) o = o.next = {}; o.back = root; return root })()'],
    ['a forged prototype', 'Object.setPrototypeOf({}, { constructor: Object })'],
    ['a spoofed Array prototype', 'Object.setPrototypeOf([], Object.create(Array.prototype))'],
    ['a Proxy', 'new Proxy({}, {})'],
    ['a Proxy of an array', 'new Proxy([1], {})'],
    ['a throwing getter', '{ get x() { throw new Error("boom") } }'],
    ['a nested undefined', '{ a: [{ b: undefined }] }'],
  ])('arguments that are not lossless JSON reject without reaching the host: %s', async (_, expression) => {
    const e = echo()
    const result = await m.run(`try { await tools.echo(${expression}); return 'called' } catch (err) { return err.message }`, {
      bindings: tools(e.fns),
    })
    expect(result).toEqual({ logs: [], value: 'binding arguments must be lossless JSON' })
    expect(e.seen).toEqual([])
  })

  it('getters run exactly once and a literal "__proto__" key survives', async () => {
    const e = echo()
    const result = await m.run(
      `let reads = 0
       const arg = JSON.parse('{"__proto__": {"x": 1}}')
       Object.defineProperty(arg, 'g', { get() { reads++; return reads }, enumerable: true })
       const back = await tools.echo(arg)
       return [reads, Object.keys(back), Object.getPrototypeOf(back) === Object.prototype, back.g]`,
      { bindings: tools(e.fns) },
    )
    expect(result.value).toEqual([1, ['__proto__', 'g'], true, 1])
    expect(Object.keys(e.seen[0] as object)).toEqual(['__proto__', 'g'])
  })

  it('mutated intrinsics cannot change the verdict or the bytes', async () => {
    const e = echo()
    const result = await m.run(
      `Array.isArray = () => true
       Object.getPrototypeOf = () => Object.prototype
       Object.keys = () => []
       Reflect.ownKeys = () => []
       JSON.stringify = () => '"forged"'
       JSON.parse = () => 'forged'
       Object.prototype.toJSON = () => 'forged'
       Array.prototype.toJSON = () => 'forged'
       Function.prototype.toString = () => 'function Object() { [native code] }'
       Object.defineProperty(Object.prototype, 'value', { get() { return 'forged' }, configurable: true })
       const ok = await tools.echo({ a: [1, 'two', { three: null }] })
       let refused = 'no'
       try { await tools.echo(new Date()) } catch (err) { refused = err.message }
       return { ok, refused }`,
      { bindings: tools(e.fns) },
    )
    expect(result.error).toBeUndefined()
    expect(e.seen).toEqual([{ a: [1, 'two', { three: null }] }])
    expect((result.value as { refused: string }).refused).toBe('binding arguments must be lossless JSON')
  })

  it('mutated intrinsics before return cannot forge the completion', async () => {
    const result = await m.run(`JSON.stringify = () => '1'; Array.isArray = () => false; Object.prototype.toJSON = () => 2
      return [{ a: 1 }]`)
    expect(result).toEqual({ logs: [], value: [{ a: 1 }] })
    const forged = await m.run('Object.getPrototypeOf = () => Object.prototype; return new Map()')
    expect(forged.error?.kind).toBe('invalid-output')
  })

  it('an array nested 3000 deep goes to the host and back and is returned intact', async () => {
    const e = echo()
    const result = await m.run(
      `let v: unknown[] = []
       for (let i = 0; i < 2999; i++) v = [v]
       return await tools.echo(v)`,
      { bindings: tools(e.fns) },
    )
    let depth = 0
    for (let v = result.value as unknown[]; Array.isArray(v); v = v[0] as unknown[]) depth++
    expect(depth).toBe(3000)
  })

  it('a resolution that is not lossless JSON rejects the call', async () => {
    for (const resolution of [new Date(), Number.NaN, { get x() { throw new Error('getter') } }, [1, , 2], () => 1, undefined]) {
      const result = await m.run('try { await tools.f({}); return "resolved" } catch (e) { return e.message }', {
        bindings: tools({ f: async () => resolution }),
      })
      expect(result.value).toBe('binding resolution must be lossless JSON')
    }
  })

  it('host rejections: an Error gives its message, anything else String(thrown)', async () => {
    const result = await m.run(
      `const out = []
       for (const name of ['err', 'str', 'obj', 'sync', 'plain']) {
         try { out.push(await tools[name]({})) } catch (e) { out.push([e instanceof Error, e.message]) }
       }
       return out`,
      {
        bindings: tools({
          err: async () => {
            throw new TypeError('typed failure')
          },
          str: () => Promise.reject('just a string'),
          obj: () => Promise.reject({ toString: () => 'custom' }),
          sync: (() => {
            throw new Error('thrown synchronously')
          }) as never,
          plain: (() => 7) as never,
        }),
      },
    )
    expect(result.value).toEqual([
      [true, 'typed failure'],
      [true, 'just a string'],
      [true, 'custom'],
      [true, 'thrown synchronously'],
      7,
    ])
  })

  it('functions are looked up when called, as the reference does; a member that is not a function is an unknown binding', async () => {
    const functions: Record<string, unknown> = {
      first: async () => {
        functions.swap = async () => 'swapped in'
        functions.gone = 'not a function'
        return 1
      },
      swap: async () => 'original',
      gone: async () => 'still here',
      notFn: 42,
    }
    const result = await m.run(
      `const out = [await tools.first({})]
       for (const name of ['swap', 'gone', 'notFn']) { try { out.push(await tools[name]({})) } catch (e) { out.push(e.message) } }
       return out`,
      { bindings: [{ global: 'tools', functions: functions as never }] },
    )
    expect(result.value).toEqual([1, 'swapped in', 'unknown binding "tools.gone"', 'unknown binding "tools.notFn"'])
  })

  it('a string a tool resolves with arrives exactly, large or small, whatever it holds', async () => {
    // Strings cross as they are (no JSON pass); one with a lone surrogate
    // crosses as JSON (UTF-8 cannot carry it).
    const piece = 'é😀"\\\n\u0000<\u2028>x'
    // `mid`: ~770 K units, read out into room that just covers a huge page
    // (three bytes a unit); `big`: megabytes past it.
    const strings = {
      big: piece.repeat(300_000),
      mid: piece.repeat(70_000),
      small: piece,
      empty: '',
      lone: `${piece}\ud800`,
      json: '{"a":1}',
      minusZero: '-0',
    }
    const result = await m.run(
      `const piece = ${JSON.stringify(piece)}
       const expected = { big: piece.repeat(300_000), mid: piece.repeat(70_000), small: piece, empty: '', lone: piece + '\\ud800', json: '{"a":1}', minusZero: '-0' }
       const out = {}
       for (const name of Object.keys(expected)) {
         const got = await tools.get({ name })
         out[name] = typeof got === 'string' && got === expected[name]
       }
       return out`,
      { bindings: tools({ get: async (args) => strings[(args as { name: keyof typeof strings }).name] }) },
    )
    expect(result).toEqual({
      logs: [],
      value: { big: true, mid: true, small: true, empty: true, lone: true, json: true, minusZero: true },
    })
  })

  it('lone surrogates survive every crossing: arguments, resolutions, keys and rejection messages', async () => {
    const result = await m.run(
      `const codes = (s) => Array.from({ length: s.length }, (_, i) => s.charCodeAt(i))
       const out = []
       try { await tools.fail({}) } catch (e) { out.push(codes(e.message)) }
       try { await tools.failStr({}) } catch (e) { out.push(codes(e.message)) }
       const v = await tools.value({})
       out.push(codes(v.s), codes(Object.keys(v.k)[0]), codes((await tools.echo({ s: '\\ud801' })).s))
       return out`,
      {
        bindings: tools({
          fail: async () => {
            throw new Error('a\ud800b')
          },
          failStr: () => Promise.reject('x\udc00'),
          value: async () => ({ s: 'v\ud800', k: { '\udfff': 1 } }),
          echo: async (args) => args,
        }),
      },
    )
    expect(result.value).toEqual([[97, 0xd800, 98], [120, 0xdc00], [118, 0xd800], [0xdfff], [0xd801]])
  })

  it('host functions returning hostile promises or thenables are answered and never break the host', async () => {
    const hostile = Promise.resolve('never seen')
    Object.defineProperty(hostile, 'constructor', {
      get() {
        throw new Error('constructor getter')
      },
    })
    const result = await m.run(
      `const out = []
       for (const name of ['ctor', 'thenGetter', 'thenable', 'thenThrows']) {
         try { out.push(await tools[name]({})) } catch (e) { out.push([e instanceof Error, e.message]) }
       }
       return out`,
      {
        bindings: tools({
          ctor: (() => hostile) as never,
          thenGetter: (() => ({
            get then() {
              throw new Error('then getter')
            },
          })) as never,
          thenable: (() => ({ then: (resolve: (v: unknown) => void) => resolve(5) })) as never,
          thenThrows: (() => ({
            then() {
              throw 'then threw'
            },
          })) as never,
        }),
      },
    )
    expect(result.value).toEqual([[true, 'constructor getter'], [true, 'then getter'], 5, [true, 'then threw']])
    expect((await m.run('return 1')).value).toBe(1)
  })

  it('a tool\'s promise is followed as the reference backend follows it: an own `then` of a native promise unread, a subclass\'s and a thenable\'s called', async () => {
    // Built per backend: a promise is settled once, and each backend must
    // see its own.
    const shapes = () => {
      class Subclass extends Promise<unknown> {}
      return tools({
        ownThen: (() => Object.assign(Promise.resolve('intrinsic'), { then: (resolve: (v: unknown) => void) => resolve('own then') })) as never,
        subclass: (() => Object.assign(Subclass.resolve('subclass'), { then: (resolve: (v: unknown) => void) => resolve('subclass then') })) as never,
        rejected: (() => Promise.reject(new Error('rejected'))) as never,
        thenable: (() => ({ then: (resolve: (v: unknown) => void) => resolve('thenable') })) as never,
        plain: (() => 'plain') as never,
      })
    }
    const program = `const out = []
      for (const name of ['ownThen', 'subclass', 'rejected', 'thenable', 'plain']) {
        try { out.push(await tools[name]({})) } catch (e) { out.push(['threw', e.message]) }
      }
      return out`
    const reference = await mountReference()
    try {
      const expected = await reference.run(program, { bindings: shapes() })
      expect(expected.value).toEqual(['intrinsic', 'subclass then', ['threw', 'rejected'], 'thenable', 'plain'])
      expect(await m.run(program, { bindings: shapes() })).toEqual(expected)
    } finally {
      await reference.dispose()
    }
  })

  it('errorClass: one class per run, instanceof, own enumerable name and member, message not enumerable, stack at the await', async () => {
    const result = await m.run(
      `let e1, e2
       try { await tools.fail({}) } catch (e) { e1 = e }
       try { await tools.other({}) } catch (e) { e2 = e }
       return [e1 instanceof ToolCallError, e1 instanceof Error, e1.constructor === e2.constructor,
         Object.keys(e1), e1.name, e1.tool, e2.tool, String(e1),
         Object.getOwnPropertyDescriptor(e1, 'message')?.enumerable, /^ToolCallError: nope\\n {4}at async program\\.ts:2:\\d+$/.test(e1.stack)]`,
      {
        bindings: tools(
          {
            fail: async () => {
              throw new Error('nope')
            },
            other: async () => {
              throw 'also'
            },
          },
          { name: 'ToolCallError', memberNameProperty: 'tool' },
        ),
      },
    )
    expect(result.value).toEqual([true, true, true, ['name', 'tool'], 'ToolCallError', 'fail', 'other', 'ToolCallError: nope', false, true])
  })

  it('without errorClass rejections are plain Errors, and args failures use the class too', async () => {
    const plain = await m.run('try { await tools.f({}) } catch (e) { return [e.constructor === Error, e.name, e.message] }', {
      bindings: tools({ f: async () => Promise.reject(new Error('x')) }),
    })
    expect(plain.value).toEqual([true, 'Error', 'x'])
    const typed = await m.run('try { await tools.f(undefined) } catch (e) { return [e instanceof E, e.member, e.message] }', {
      bindings: tools({ f: async () => 1 }, { name: 'E', memberNameProperty: 'member' }),
    })
    expect(typed.value).toEqual([true, 'f', 'binding arguments must be lossless JSON'])
  })

  it('binding traffic is not counted against maxOutputBytes', async () => {
    const small = await mount({ maxOutputBytes: 64 })
    const big = 'x'.repeat(1_000_000)
    const result = await small.run('const r = await tools.f("y".repeat(1000000)); return r.length', {
      bindings: tools({ f: async (args) => big + (args as string) }),
    })
    expect(result).toEqual({ logs: [], value: 2_000_000 })
    await small.dispose()
  })

  it('Promise.all over many calls, from many concurrent runs, routes every reply to its own run', async () => {
    const runs = Array.from({ length: 8 }, (_, r) =>
      m.run(`const xs = await Promise.all(Array.from({ length: 500 }, (_, i) => tools.id({ r: ${r}, i })))
             return xs.every((x, i) => x.r === ${r} && x.i === i)`, {
        bindings: tools({ id: async (args) => (await new Promise((ok) => setTimeout(ok, Math.random() * 3)), args) }),
      }),
    )
    expect((await Promise.all(runs)).map((r) => r.value)).toEqual(Array(8).fill(true))
  })

  it('replies after the run settled are dropped; abort does not wait for in-flight calls', async () => {
    let release: (v: unknown) => void = () => {}
    const late = new Promise((r) => (release = r))
    const first = await m.run('void tools.slow({}); return "done"', { bindings: tools({ slow: () => late }) })
    expect(first).toEqual({ logs: [], value: 'done' })
    release(1)
    const controller = new AbortController()
    const pending = m.runtime.run({ program: 'await tools.never({})', bindings: tools({ never: () => new Promise(() => {}) }), signal: controller.signal })
    setTimeout(() => controller.abort('stop'), 50)
    // Aborted, not ended by the wall ceiling: the abort does not wait for the call.
    expect(await pending).toEqual({ logs: [], error: { kind: 'abort', message: 'stop' } })
    expect((await m.run('return 1')).value).toBe(1)
  })

  it('a never-settling host call ends at the wall ceiling', async () => {
    const short = await mount({ maxWallMs: 300 })
    const result = await short.run('await tools.never({})', { bindings: tools({ never: () => new Promise(() => {}) }) })
    expect(result).toEqual({ logs: [], error: { kind: 'timeout', message: 'wall-clock ceiling reached (300ms)' } })
    await short.dispose()
  })

  it('a run waiting on 20000 binding calls is charged its own work, not its waits', async () => {
    // A host function that takes ~100 us. A pump spins for a reply while
    // its previous wait ended within its spin (200 us): here the function's
    // 100 us and a round trip of ~60-110 us, at the edge of it on a quiet
    // machine and past it on a loaded one, where pumps park instead
    // (parking is not charged either). The program's own work is ~300-800
    // ms of CPU (the upper end measured beside two busy loops and a
    // build), under half the budget; charged, each wait would add at least
    // the function's 100 us (2000 ms in all, past the budget). So this
    // checks waits end to end, spun or parked; mailbox.rs's unit test
    // checks the spin itself, on any machine with more than one CPU (on
    // one, no pump spins).
    const tight = await mount({ computeMs: 2000, maxToolCalls: 20000 })
    const result = await tight.run('let s = 0; for (let i = 0; i < 20000; i++) s += await tools.echo(i); return s', {
      bindings: tools({
        echo: async (i) => {
          const until = performance.now() + 0.1
          while (performance.now() < until);
          return i
        },
      }),
    })
    expect(result).toEqual({ logs: [], value: (19999 * 20000) / 2 })
    await tight.dispose()
  })

  it('sequential calls never hold the host\'s event loop: it turns between an answer and the next call', async () => {
    // The host waits briefly, awake, for a program's next call after each
    // answer; that call must still be taken in a later event-loop turn, so
    // the host's own work (here a setImmediate chain) interleaves with it.
    let turns = 0
    let running = true
    const turn = () => {
      turns++
      if (running) setImmediate(turn)
    }
    setImmediate(turn)
    const result = await m.run('let s = 0; for (let i = 0; i < 2000; i++) s += await tools.echo(i); return s', {
      bindings: tools({ echo: async (i) => i }),
    })
    running = false
    expect(result).toEqual({ logs: [], value: (1999 * 2000) / 2 })
    expect(turns).toBeGreaterThanOrEqual(2000)
  })

  it('awaiting a slow binding is not charged to the compute budget', async () => {
    const tight = await mount({ computeMs: 1000 })
    const result = await tight.run('return await tools.slow({})', {
      bindings: tools({ slow: () => new Promise((r) => setTimeout(() => r('late'), 1500)) }),
    })
    expect(result).toEqual({ logs: [], value: 'late' })
    await tight.dispose()
  })
})

describe('long string arguments (they cross beside the JSON)', () => {
  // Each case is an expression over `big` (one-byte), `wide` (two-byte, a
  // lone surrogate first), `latin` (one-byte, not ASCII), `short`, `huge`
  // (one-byte, more than a huge page: `dsh_protocol::text`), and `mid` and
  // `midWide` (shorter than the tool's external strings, which start at
  // 64 Ki units: src/binding_calls.rs); the long ones are past the length
  // at which strings leave the JSON.
  const prelude = `const big = 'y'.repeat(70_000) + 'end'
    const wide = '\\ud800' + 'w😀'.repeat(40_000) + '\\udc00'
    const latin = 'é\\u00ff'.repeat(40_000)
    const short = 'short'
    const huge = 'h'.repeat(3 << 20) + '\u00e9\u00ff'
    const mid = 'm'.repeat(20_000) + '\u00e9'
    const midWide = '\u0436'.repeat(20_000) + '\ud800'`
  const cases: [string, string][] = [
    ['the whole argument', 'big'],
    ['an object member', '{ text: big }'],
    ['two-byte, with lone surrogates', '{ wide, list: [wide] }'],
    ['one-byte but not ASCII', '{ latin }'],
    ['strings inside arrays, beside nulls', '[null, big, null, [short, [latin, null]], null]'],
    ['several, beside short strings', '{ a: big, b: short, c: { d: wide, e: [latin, big] }, f: big }'],
    ['the same string object twice', '(() => { const s = big + big; return { a: s, b: [s, s] } })()'],
    ['a "__proto__" key', `(() => { const o = JSON.parse('{"__proto__":0,"x":{"__proto__":1}}'); o['__proto__'] = big; o.x['__proto__'] = wide; return o })()`],
    ['keys that need escaping', `({ ['a"\\\\\\n\\u0000\\ud800é']: big, ['\\udfff']: [latin] })`],
    ['a null-prototype object', 'Object.assign(Object.create(null), { x: big, y: null })'],
    ['nested deep', 'JSON.parse("[".repeat(500) + "0" + "]".repeat(500)).concat([big])'],
    ['one-byte, megabytes (a block of its own on each side)', '{ path: "huge.txt", text: huge }'],
    ['past the out-of-band length, short of an external string (copied)', '{ mid, midWide }'],
  ]
  const program = `${prelude}
    const args = [${cases.map(([, expression]) => expression).join(',\n')}]
    const back = []
    for (const arg of args) back.push(await tools.take(arg))
    return back`

  it('reach the tool exactly as the reference backend delivers them', async () => {
    // The prelude's strings are long enough to leave the JSON.
    const { losslessJson } = await import('../lib/lossless-json.js')
    expect(losslessJson.OUT_OF_BAND_LENGTH).toBeLessThanOrEqual(70_000)
    const seen = { v8: [] as unknown[], reference: [] as unknown[] }
    const bindings = (into: unknown[]) => tools({ take: async (arg: unknown) => (into.push(arg), into.length) })
    const reference = await mountReference()
    try {
      const expected = await reference.run(program, { bindings: bindings(seen.reference) })
      const result = await m.run(program, { bindings: bindings(seen.v8) })
      expect(expected.error).toBeUndefined()
      expect(result).toEqual(expected)
    } finally {
      await reference.dispose()
    }
    expect(seen.v8.length).toBe(cases.length)
    cases.forEach(([name], i) => {
      const [v8, reference] = [seen.v8[i], seen.reference[i]]
      // Equal values (strings compared code unit by code unit), the same
      // own keys in the same order, plain prototypes.
      expect([name, v8]).toEqual([name, reference])
      if (v8 !== null && typeof v8 === 'object') {
        expect([name, Reflect.ownKeys(v8)]).toEqual([name, Reflect.ownKeys(reference as object)])
        expect(Object.getPrototypeOf(v8)).toBe(Array.isArray(v8) ? Array.prototype : Object.prototype)
      }
    })
    const proto = seen.v8[7] as Record<string, unknown>
    expect(Object.hasOwn(proto, '__proto__') && typeof proto['__proto__']).toBe('string')
  })

  it('come back unchanged through an echo, whatever the program put on Object.prototype, and a value that is not lossless still never reaches the tool', async () => {
    const e = echo()
    const result = await m.run(
      `${prelude}
       for (const name of ['paths', 'strings']) Object.defineProperty(Object.prototype, name, { get: () => '[[0]]', set() {}, configurable: true })
       const arg = { a: [big, wide], b: { latin } }
       const back = await tools.echo(arg)
       let refused = ''
       try { await tools.echo({ big, bad: undefined }) } catch (err) { refused = err.message }
       return [back.a[0] === big, back.a[1] === wide, back.b.latin === latin, refused]`,
      { bindings: tools(e.fns) },
    )
    expect(result).toEqual({ logs: [], value: [true, true, true, 'binding arguments must be lossless JSON'] })
    expect(e.seen.length).toBe(1)
  })

  it('index accessors a program puts on Array.prototype and Object.prototype cannot skew its arguments or its completion, as in the reference', async () => {
    // The encoder's lists are fresh arrays: an append to one would call
    // the program's setter (which here drops long strings, and every value
    // at index 1) and read back its getter, instead of making the element.
    const program = `const big = 'y'.repeat(70_000)
      for (const [proto, index] of [[Array.prototype, 0], [Array.prototype, 1], [Object.prototype, 2]]) {
        Object.defineProperty(proto, index, {
          set(v) { if (index !== 1 && !(typeof v === 'string' && v.length > 60_000)) Object.defineProperty(this, index, { value: v, writable: true, enumerable: true, configurable: true }) },
          get() { return 'forged' },
          configurable: true,
        })
      }
      const back = await tools.take({ a: 1, text: big, list: [1, 2, 3], nested: [[4, [5, 6, 7]], { x: [big, big, 'z'] }] })
      return [back, [1, 2, 3], { a: [9, 8, 7], b: [[big]] }]`
    const seen = { v8: [] as unknown[], reference: [] as unknown[] }
    const bindings = (into: unknown[]) => tools({ take: async (arg: unknown) => (into.push(arg), into.length) })
    const one = await mount({ isolateHosts: 1 })
    const reference = await mountReference()
    try {
      const expected = await reference.run(program, { bindings: bindings(seen.reference) })
      expect(expected.error).toBeUndefined()
      expect(await one.run(program, { bindings: bindings(seen.v8) })).toEqual(expected)
      expect(seen.v8).toEqual(seen.reference)
      expect(seen.v8.length).toBe(1)
      expect(one.runtime.stats()).toMatchObject({ hostRestarts: 0, runsLostToHostExits: 0 })
      expect(await one.run('return 1')).toEqual({ logs: [], value: 1 })
    } finally {
      await reference.dispose()
      await one.dispose()
    }
  })

  it('Buffer\'s methods (the package\'s and the sandbox\'s: indexOf, copyBytesFrom, from, alloc with a fill, toString, byteLength) do not go through the members of Buffer a program replaced, as Node\'s do not', async () => {
    const program = `const from = Buffer.from
      const alloc = Buffer.alloc
      const isBuffer = Buffer.isBuffer
      const made = from('abc')
      Buffer.from = Buffer.alloc = Buffer.allocUnsafe = Buffer.prototype.fill = Buffer.isEncoding = Buffer.isBuffer = Buffer.prototype.slice = null
      return [made.indexOf(new Uint8Array([98, 99])), made.includes(new Uint8Array([])), from('héllo', 'latin1').length, from('héllo').length,
        isBuffer(Buffer.copyBytesFrom(new Uint16Array([1, 2]), 1)), Buffer.copyBytesFrom(new Uint8Array([9, 8]), 1).toString('hex'), alloc(3, 'ab').toString(),
        made.indexOf('b'), made.toString('hex'), alloc(2, '6162', 'hex').toString(), Buffer.byteLength('abcd', 'hex'), from('6162', 'hex').toString()]`
    const reference = await mountReference()
    try {
      const expected = await reference.run(program)
      expect(expected).toEqual({ logs: [], value: [1, true, 5, 6, true, '08', 'aba', 1, '616263', 'ab', 2, 'ab'] })
      expect(await m.run(program)).toEqual(expected)
    } finally {
      await reference.dispose()
    }
  })

  it.each([
    ['a setter that shortens the list it is called on', "set(v) { this.length = 2 }"],
    ['a setter that defines the element itself', "set(v) { Object.defineProperty(this, 1, { value: 'forged', writable: true, enumerable: true, configurable: true }) }"],
    ['a getter with no setter (a store into a hole throws in strict code)', ''],
  ])('an index accessor on Array.prototype with %s cannot forge the completion, as in the reference', async (_, setter) => {
    // The encoder's lists have no prototype: no store of its reaches the
    // program's accessors, and no setter is handed one of its lists.
    const program = `Object.defineProperty(Array.prototype, 1, { configurable: true, get() { return 'forged' }, ${setter} })
      return [[7, 2, 3], { a: [4, [5, 6]], b: [[8, 9]] }]`
    const reference = await mountReference()
    try {
      const expected = await reference.run(program)
      expect(expected).toEqual({ logs: [], value: [[7, 2, 3], { a: [4, [5, 6]], b: [[8, 9]] }] })
      expect(await m.run(program)).toEqual(expected)
    } finally {
      await reference.dispose()
    }
  })

  it('a getter that calls a tool while the argument is encoded keeps both calls whole', async () => {
    const e = echo()
    const result = await m.run(
      `const big = 'g'.repeat(70_000)
       let inner
       const arg = { first: big, get second() { inner = tools.echo({ inner: big + 'i' }); return big + 's' }, third: big }
       const back = await tools.echo(arg)
       const innerBack = await inner
       return [back.first === big, back.second === big + 's', back.third === big, innerBack.inner === big + 'i']`,
      { bindings: tools(e.fns) },
    )
    expect(result).toEqual({ logs: [], value: [true, true, true, true] })
  })

  it('that a tool keeps stay whole after its run and through collections, and are given back once it drops them', async () => {
    // Long ones reach the tool as external strings over the bytes they
    // crossed as (src/binding_calls.rs): freed too early, they would read
    // as other bytes; never freed, the harness would keep their megabytes.
    // What each kept string must hold, unit by unit (read at intervals and
    // at the end: building the expected strings whole would put tens of
    // megabytes of garbage into the very RSS this test reads).
    const texts = [
      ...Array.from({ length: 10 }, (_, i) => ({ length: (4 << 20) + 1, unit: (k: number) => (k < 4 << 20 ? 0x6b : 0x30 + i) })),
      { length: 3 * 40_000 + 1, unit: (k: number) => (k === 120_000 ? 0x30 : [0x436, 0xd83d, 0xde00][k % 3]) },
      { length: 80_001, unit: (k: number) => (k === 80_000 ? 0x30 : 0xe9) },
      { length: 70_000, unit: () => 0x7a },
    ]
    const whole = (text: unknown, { length, unit }: (typeof texts)[number]) => {
      if (typeof text !== 'string' || text.length !== length) return false
      for (let k = 0; k < length; k += k < length - 64 ? 1009 : 1) if (text.charCodeAt(k) !== unit(k)) return false
      return true
    }
    let kept: unknown[] = []
    const keep = tools({ keep: async (arg: unknown) => (kept.push(arg), kept.length) })
    // A runtime of its own: the blocks the strings arrived in are kept for
    // later long arguments once let go (crates/protocol/src/large_block.rs)
    // until the runtime is disposed.
    const own = await mount({ maxWallMs: 120_000 })
    await collect()
    const before = process.memoryUsage().rss
    const result = await own.run(
      `let n = 0
       for (let i = 0; i < 10; i++) n = await tools.keep({ i, text: 'k'.repeat(4 << 20) + i })
       n = await tools.keep(['\u0436\ud83d\ude00'.repeat(40_000) + 0, '\u00e9'.repeat(80_000) + 0])
       return n`,
      { bindings: keep },
    )
    expect(result).toEqual({ logs: [], value: 11 })
    // Other runs and collections in between, with the strings still held.
    await collect()
    expect(await own.run(`return await tools.keep('z'.repeat(70_000)).then(() => 'again')`, { bindings: keep })).toEqual({ logs: [], value: 'again' })
    await collect()
    const held = process.memoryUsage().rss
    const strings = [
      ...(kept.slice(0, 10) as { i: number; text: string }[]).map(({ i, text }, at) => i === at && text),
      ...(kept[10] as string[]),
      kept[11],
    ]
    expect(strings.map((text, at) => whole(text, texts[at]))).toEqual(texts.map(() => true))
    // 40 MB of one-byte text held: given back once nothing refers to it
    // and the runtime that kept its blocks for reuse is gone.
    expect(held - before).toBeGreaterThan(30 << 20)
    kept = []
    strings.length = 0
    await collect()
    await own.dispose()
    await collect()
    const after = process.memoryUsage().rss
    expect(held - after, `RSS before ${before}, holding ${held}, after ${after}`).toBeGreaterThan(30 << 20)
  })

  it("that a tool drops are collected while the harness runs, with no collection asked for, and their blocks read into again", async () => {
    // V8 does not count an external string's bytes towards collecting it,
    // and each call adds a few hundred bytes to Node's heap: unreported
    // (src/binding_calls.rs, ExternalBytes), 300 arguments of 4 MB stayed
    // mapped, +1.2 GB of RSS, until something else made Node collect.
    const own = await mount({ maxWallMs: 120_000 })
    await collect()
    const faults = () => process.resourceUsage().minorPageFault
    const before = { rss: process.memoryUsage().rss, faults: faults() }
    const result = await own.run(
      `const text = 'q'.repeat(4 << 20); let n = 0
       for (let i = 0; i < 300; i++) n += await tools.take({ text })
       return n`,
      { bindings: tools({ take: async ({ text }: { text: string }) => text.length }) },
    )
    expect(result).toEqual({ logs: [], value: 300 * (4 << 20) })
    const after = { rss: process.memoryUsage().rss, faults: faults() }
    await own.dispose()
    // Bounded by V8's external-memory limit and the blocks kept for reuse
    // (128 MiB at most: crates/protocol/src/large_block.rs).
    expect(after.rss - before.rss, `RSS before ${before.rss}, after ${after.rss}`).toBeLessThan(400 << 20)
    // Each argument crossed into a block of the harness's; read into a
    // fresh one, it cost 1024 faults (one a page), 300 K for the run. Kept
    // blocks come back as the strings are collected and are read into
    // again, faulted in already.
    expect(after.faults - before.faults).toBeLessThan(100 * 1024)
  })
})

describe('long string results (they cross beside the JSON)', () => {
  // What read_file, a shell or a search returns: objects and arrays
  // holding long strings, at any depth. Each case is a tool's result; the
  // program describes what it received (every string's length and a
  // checksum of its code units, every object's keys and prototype), and
  // the description must be the reference backend's.
  const big = 'y'.repeat(70_000) + 'end'
  const wide = '\u{1F600}w'.repeat(40_000) + '\u00e9'
  const latin = '\u00e9\u00ff'.repeat(40_000)
  const lone = '\ud800' + 'z'.repeat(70_000) + '\udc00'
  // Megabytes (more than a huge page, 2 MiB, of units and of bytes): read
  // into a block of their own on each side (`dsh_protocol::text`), with
  // characters of two and four UTF-8 bytes at the end.
  const huge = 'h'.repeat(3 << 20) + '\u00e9\u{1F600}'
  // All ASCII (written one byte a unit, they cross as Latin-1 and are not
  // decoded: \`ReplyText::Latin1\`), and one-byte strings just past ASCII.
  const everyAscii = Array.from({ length: 128 }, (_, unit) => String.fromCharCode(unit)).join('').repeat(600)
  const cases: [string, () => unknown][] = [
    ["read_file's shape", () => ({ path: 'a.txt', text: big })],
    ["a shell's shape", () => ({ stdout: latin, stderr: wide, code: 0 })],
    ['an array of matches', () => [{ line: 1, text: big }, { line: 2, text: wide }, null, [latin, 'short']]],
    ['a lone surrogate (it stays in the JSON)', () => ({ text: lone, list: [lone, big] })],
    ['the same string in several places', () => ({ a: big, b: [big, { c: big }] })],
    ['a "__proto__" key', () => JSON.parse(`{"__proto__":${JSON.stringify(big)},"x":{"__proto__":${JSON.stringify(latin)}}}`)],
    ['keys that need escaping', () => ({ ['a"\\\n\u0000\ud800\u00e9']: big, ['\udfff']: [latin] })],
    ['a null-prototype object', () => Object.assign(Object.create(null), { x: big, y: null })],
    ['nested deep', () => JSON.parse('['.repeat(300) + JSON.stringify(wide) + ']'.repeat(300))],
    ['a long string beside a short one in an array', () => ['short', big]],
    ['a bare string of megabytes', () => huge],
    ['a string of megabytes beside the JSON', () => ({ path: 'huge.txt', text: huge })],
    ['every ASCII character, bare', () => everyAscii],
    ['every ASCII character beside the JSON', () => ({ text: everyAscii, short: everyAscii.slice(0, 300) })],
    ['a bare ASCII string of megabytes', () => 'a'.repeat(3 << 20)],
    ['ASCII but for its last character, U+0080', () => 'b'.repeat(70_000) + '\u0080'],
    ['ASCII but for a U+00FF beside the JSON', () => ({ text: '\u00ff' + 'c'.repeat(70_000) })],
  ]
  const program = `
    const describe = (v) => {
      if (typeof v === 'string') {
        let sum = 0
        for (let i = 0; i < v.length; i++) sum = (sum * 31 + v.charCodeAt(i)) >>> 0
        return ['string', v.length, sum]
      }
      if (v === null || typeof v !== 'object') return v
      const proto = Object.getPrototypeOf(v)
      const kind = Array.isArray(v) ? 'array' : proto === Object.prototype ? 'object' : 'other'
      return [kind, Reflect.ownKeys(v).filter((k) => k !== 'length').map((k) => [k, describe(v[k])])]
    }
    const seen = []
    for (let i = 0; i < ${cases.length}; i++) seen.push(describe(await tools.result({ i })))
    return seen`
  const bindings = () => tools({ result: async ({ i }: { i: number }) => (cases[i] as [string, () => unknown])[1]() })

  it('reach the program exactly as the reference backend delivers them', async () => {
    const { losslessJson } = await import('../lib/lossless-json.js')
    expect(losslessJson.OUT_OF_BAND_LENGTH).toBeLessThanOrEqual(70_000)
    const reference = await mountReference()
    try {
      const expected = await reference.run(program, { bindings: bindings() })
      const result = await m.run(program, { bindings: bindings() })
      expect(expected.error).toBeUndefined()
      const described = (result.value ?? []) as unknown[]
      cases.forEach(([name], i) => expect([name, described[i]]).toEqual([name, (expected.value as unknown[])[i]]))
      expect(result).toEqual(expected)
    } finally {
      await reference.dispose()
    }
  })

  it('are what the run report counts as the result bytes: the JSON and each string beside it, as UTF-8', async () => {
    const text = '\u00e9'.repeat(70_000)
    const reports: V8CodeRunReport[] = []
    const off = m.ctx.on(RUN_REPORT, (report) => void reports.push(report))
    try {
      const result = await m.run('const r = await tools.read({}); return r.text === "\u00e9".repeat(70_000)', {
        bindings: tools({ read: async () => ({ path: 'a', text }) }),
      })
      expect(result).toEqual({ logs: [], value: true })
    } finally {
      off()
    }
    // The JSON crossed with null in the string's place.
    expect(reports.map((report) => report.resultBytes)).toEqual([Buffer.byteLength('{"path":"a","text":null}') + 2 * 70_000])
  })

  it("are kept for the next run's replies only while the runtime lives: disposed, it gives them back", async () => {
    // Each long reply's text is a block of the harness's, kept after its
    // run for the next run's (crates/protocol/src/large_block.rs); a
    // runtime that goes must not leave them to a process that stays.
    const own = await mount()
    await collect()
    const before = process.memoryUsage().rss
    const result = await own.run('let n = 0; for (let i = 0; i < 40; i++) n += (await tools.page({ i })).text.length; return n', {
      bindings: tools({ page: async () => ({ path: 'p', text: 'r'.repeat(1 << 20) }) }),
    })
    expect(result).toEqual({ logs: [], value: 40 << 20 })
    await own.dispose()
    await collect()
    const after = process.memoryUsage().rss
    expect(after - before, `RSS before ${before}, after ${after}`).toBeLessThan(24 << 20)
  })
})

describe('the same long string in several places', () => {
  it('crosses once each way: the run report counts its bytes once, in the argument and in the result', async () => {
    const reports: V8CodeRunReport[] = []
    const off = m.ctx.on(RUN_REPORT, (report) => void reports.push(report))
    const seen: unknown[] = []
    try {
      const result = await m.run(
        `const s = 'y'.repeat(70_000)
         // Equal, not identical: the same value twice.
         const t = 'y'.repeat(35_000) + 'y'.repeat(35_000)
         const back = await tools.echo({ a: s, b: [t, { c: s }] })
         return [back.a === s, back.b[0] === s, back.b[1].c === s, back.z === 'x'.repeat(70_000)]`,
        { bindings: tools({ echo: async (arg: unknown) => (seen.push(arg), { ...(arg as object), z: 'x'.repeat(70_000) }) }) },
      )
      expect(result).toEqual({ logs: [], value: [true, true, true, true] })
    } finally {
      off()
    }
    const s = 'y'.repeat(70_000)
    expect(seen).toEqual([{ a: s, b: [s, { c: s }] }])
    expect(reports.map(({ argumentBytes, resultBytes }) => [argumentBytes, resultBytes])).toEqual([
      [Buffer.byteLength('{"a":null,"b":[null,{"c":null}]}') + 70_000, Buffer.byteLength('{"a":null,"b":[null,{"c":null}],"z":null}') + 2 * 70_000],
    ])
  })
})

describe('the shared lossless-JSON code, host side', () => {
  it('decode refuses -0 and overflowing numbers however they are spelled, and keeps look-alike strings', async () => {
    const { losslessJson } = await import('../lib/lossless-json.js')
    const refused = ['-0', '[-0.0]', '{"a":-0e5}', '1e400', '[1E+999]', `1${'0'.repeat(400)}`, '{"x":[[-0]]}', ' -0', '[ -0]', '{"a": \n\t-0}', '[1,\r-0.0]', '[-1e-400]', `[-0.${'0'.repeat(400)}1]`]
    for (const text of refused) expect([text, losslessJson.decode(text)]).toEqual([text, undefined])
    expect(losslessJson.decode('{"a":"-0","b":"1e999","c":-10}')).toEqual({ a: '-0', b: '1e999', c: -10 })
    expect(losslessJson.decode('{"since":"2026-01-01","id":"topic 1-0","n":[10,-10.5,0]}')).toEqual({ since: '2026-01-01', id: 'topic 1-0', n: [10, -10.5, 0] })
    expect(losslessJson.decode('not json')).toBeUndefined()
  })

  it('encode refuses what is not lossless even at the root', async () => {
    const { encodeLossless } = await import('../lib/lossless-json.js')
    for (const value of [undefined, Number.NaN, -0, Infinity, 1n, Symbol('s'), () => 1]) expect(encodeLossless(value)).toBeUndefined()
    expect(encodeLossless('é"\n')).toBe(JSON.stringify('é"\n'))
    expect(encodeLossless({ a: [1, null, true, 'x'] })).toBe('{"a":[1,null,true,"x"]}')
    const hidden = [
      { a: 1, [Symbol('k')]: 2 },
      Object.defineProperty({ a: 1 }, 'k', { value: 1 }),
      Object.defineProperty(Object.create(null), 'k', { value: 1 }),
      { a: [Object.defineProperty({ b: 1 }, Symbol('k'), { value: 1 })] },
    ]
    for (const value of hidden) expect(encodeLossless(value)).toBeUndefined()
  })

  it('reads each property once, whether the root is written flat or handed to the walk', async () => {
    const { encodeLossless } = await import('../lib/lossless-json.js')
    let reads = 0
    const counted = (value: unknown) => ({ get: () => (reads++, value), enumerable: true })
    const flat = Object.defineProperties({}, { a: counted(1), b: counted('x') })
    expect(encodeLossless(flat)).toBe('{"a":1,"b":"x"}')
    expect(reads).toBe(2)
    // A container after a primitive, and a string that leaves the JSON.
    const nested = Object.defineProperties({}, { a: counted(1), b: counted({ c: [2] }), d: counted(null) })
    expect(encodeLossless(nested)).toBe('{"a":1,"b":{"c":[2]},"d":null}')
    expect(reads).toBe(5)
    const long = 'y'.repeat(20_000)
    const beside = { paths: '', strings: null as string[] | null, wellFormed: true }
    const withLong = Object.defineProperties([], { 0: counted(1), 1: counted(long), 2: counted(true), length: { value: 3, writable: true } })
    expect(encodeLossless(withLong, beside)).toBe('[1,null,true]')
    expect(beside).toEqual({ paths: '[[0,1]]', strings: [long], wellFormed: true })
    expect(reads).toBe(8)
  })

  it('refuses a cycle at any depth and takes the same container twice, above and below the depth its cycle check scans to', async () => {
    const { encodeLossless } = await import('../lib/lossless-json.js')
    // Nested `depth` deep, the innermost holding `inner`.
    const chain = (depth: number, inner: (outer: unknown[]) => unknown) => {
      const root: unknown[] = []
      let at = root
      for (let i = 1; i < depth; i++) at.push((at = []))
      at.push(inner(root))
      return { root, at }
    }
    for (const depth of [2, 31, 32, 33, 100]) {
      // Back to the root, and back to its own container.
      expect(encodeLossless(chain(depth, (root) => root).root), `depth ${depth}`).toBeUndefined()
      const { root, at } = chain(depth, () => null)
      at.push(at)
      expect(encodeLossless(root), `depth ${depth}`).toBeUndefined()
      // One object in two places, one after the other and deeper: no cycle.
      const shared = { x: [1] }
      const twice = chain(depth, () => [shared, [shared, { y: shared }]]).root
      expect(encodeLossless(twice), `depth ${depth}`).toBe(JSON.stringify(twice))
    }
    // Refused as soon as it closes: each getter on the cycle runs once,
    // whichever container it closes on, above or below 32 deep.
    for (const [depth, length] of [[1, 1], [1, 2], [1, 5], [40, 2], [40, 12]]) {
      let reads = 0
      const ring: object[] = Array.from({ length }, () => ({}))
      ring.forEach((node, i) =>
        Object.defineProperty(node, 'next', { get: () => (reads++, ring[(i + 1) % length]), enumerable: true }),
      )
      expect(encodeLossless(chain(depth, () => ring[0]).root), `${length} in a cycle ${depth} deep`).toBeUndefined()
      expect(reads, `${length} in a cycle ${depth} deep`).toBe(length)
    }
    // Taken again once closed: a container open when the walk first went
    // past 32, and one met again after the walk came back above it.
    const deep = chain(40, () => 1).root
    expect(encodeLossless([deep, deep])).toBe(JSON.stringify([deep, deep]))
    const shared = { s: 1 }
    const after = [chain(40, () => shared).root, shared, [shared]]
    expect(encodeLossless(after)).toBe(JSON.stringify(after))
  })

  it('encodes short strings and keys exactly as JSON.stringify does, whatever code unit they hold', async () => {
    const { encodeLossless } = await import('../lib/lossless-json.js')
    // Every code unit, alone and at either end of strings on both sides of
    // the length up to which the encoder scans them itself (32).
    const mismatches: unknown[] = []
    for (let unit = 0; unit <= 0xffff; unit++) {
      const c = String.fromCharCode(unit)
      for (const text of [c, `ab${c}`, c + 'x'.repeat(31), 'x'.repeat(31) + c, 'x'.repeat(32) + c]) {
        const value = { [text]: [text] }
        if (encodeLossless(value) !== JSON.stringify(value)) mismatches.push([unit, text, encodeLossless(value)])
      }
    }
    expect(mismatches).toEqual([])
    const pair = '\ud83d\ude00'
    expect(encodeLossless({ [pair]: pair })).toBe(JSON.stringify({ [pair]: pair }))
  })

  it('decodeWithStrings puts each string at its nulls, and refuses places that lead elsewhere or name strings out of order', async () => {
    const { losslessJson } = await import('../lib/lossless-json.js')
    const place = (text: string, paths: string, strings: string[]) => losslessJson.decodeWithStrings(text, paths, strings)
    expect(place('null', '[[0]]', ['s'])).toBe('s')
    expect(place('{"a":[null,{"__proto__":null}]}', '[[0,"a",0],[1,"a",1,"__proto__"]]', ['x', 'y'])).toEqual({ a: ['x', JSON.parse('{"__proto__":"y"}')] })
    // One string in several places.
    expect(place('[null,{"b":null},null]', '[[0,0],[1,1,"b"],[0,2]]', ['x', 'y'])).toEqual(['x', { b: 'y' }, 'x'])
    const refused: [string, string, string[]][] = [
      ['{"a":1}', '[[0,"a"]]', ['s']],
      ['{"a":null}', '[[0,"b"]]', ['s']],
      ['{"a":null}', '[[0,"a"]]', []],
      ['{"a":null}', '[[0,"a"]]', ['s', 't']],
      ['{"a":null}', '[[1,"a"]]', ['s', 't']],
      ['{"a":null,"b":null}', '[[1,"a"],[0,"b"]]', ['s', 't']],
      ['{"a":null}', '[["a"]]', ['s']],
      ['{"a":null}', '[[-1,"a"]]', ['s']],
      ['{"a":null}', '[[0.5,"a"]]', ['s']],
      ['{"a":null}', '[["0","a"]]', ['s']],
      ['[null]', '[[0,"0"]]', ['s']],
      ['{"0":null}', '[[0,0]]', ['s']],
      ['[null]', '[[0,1]]', ['s']],
      ['{}', '[[0,"__proto__"]]', ['s']],
      ['{}', '[[0,"constructor"]]', ['s']],
      ['[null]', '[[0,"length"]]', ['s']],
      ['{"a":null}', '{"a":0}', ['s']],
      ['{"a":null}', 'not json', ['s']],
      ['{"a":null}', '[[0,"a","b"]]', ['s']],
      ['{"a":null}', '["a"]', ['s']],
      ['{"a":null}', '[[]]', ['s']],
      ['-0', '[[0]]', ['s']],
    ]
    for (const [text, paths, strings] of refused) expect([text, paths, place(text, paths, strings)]).toEqual([text, paths, undefined])
    expect(Object.prototype).not.toHaveProperty('polluted')
  })

  it("encodes long strings exactly as JSON.stringify does, whatever they hold", async () => {
    const { encodeLossless } = await import('../lib/lossless-json.js')
    // Long enough for the scan that spares JSON.stringify, with each
    // character JSON.stringify escapes (or keeps) at the start, middle, end.
    const long = 'a'.repeat(20_000)
    const tricky = ['', '"', '\\', '\n', '\u0000', '\u001f', '\u007f', 'é', '\ud800', '\udc00', '\ud83d\ude00', '\u2028', '/']
    for (const special of tricky) {
      for (const text of [special + long, long + special + long, long + special]) {
        expect(encodeLossless(text)).toBe(JSON.stringify(text))
        expect(encodeLossless({ text, list: [text] })).toBe(JSON.stringify({ text, list: [text] }))
      }
    }
  })
})
