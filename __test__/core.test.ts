import { spawnSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import os from 'node:os'
import { Context } from '@deepseek-ai/cordis'
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest'
import { mount, tools, until, V8CodeRuntime, type Mounted } from './helpers.js'

describe('service shape', () => {
  it('registers as ctx.codeRuntime with its descriptors and default config', async () => {
    const m = await mount()
    expect(m.runtime).toBeInstanceOf(V8CodeRuntime)
    expect(m.runtime.language).toBe('typescript')
    expect(m.runtime.isolation).toBe('v8-isolate')
    expect(m.runtime.config).toMatchObject({
      computeMs: 60000,
      maxWallMs: 600000,
      maxOutputBytes: 67108864,
      maxOldGenerationSizeMb: 512,
    })
    await m.dispose()
    expect(m.ctx.codeRuntime).toBeUndefined()
  })

  it('default and named exports are the class', async () => {
    const pkg = await import('../lib/index.js')
    expect(pkg.default).toBe(pkg.V8CodeRuntime)
  })

  it.each([
    [{ computeMs: 0 }, 'config.computeMs must be a positive number, got 0'],
    [{ maxWallMs: -1 }, 'config.maxWallMs must be a positive number, got -1'],
    [{ maxOutputBytes: Number.NaN }, 'config.maxOutputBytes must be a positive number, got NaN'],
    [{ maxOldGenerationSizeMb: Infinity }, 'config.maxOldGenerationSizeMb must be a positive number, got Infinity'],
    [{ maxExternalMemoryMb: 0 }, 'config.maxExternalMemoryMb must be a positive number, got 0'],
    [{ maxOutputBytes: 3 }, 'config.maxOutputBytes must be a safe integer of at least 4 and at most 1073741824, got 3'],
    [{ maxOutputBytes: 10.5 }, 'config.maxOutputBytes must be a safe integer of at least 4 and at most 1073741824, got 10.5'],
    [{ maxWallMs: 2147483648 }, 'config.maxWallMs must be at most 2147483647, got 2147483648'],
    [{ maxQueuedRuns: 1.5 }, 'config.maxQueuedRuns must be a whole number, got 1.5'],
  ])('rejects config %o through ctx.plugin, with the exact message', async (config, message) => {
    const ctx = new Context()
    await expect(ctx.plugin(V8CodeRuntime, config as never)).rejects.toThrow(new Error(`dsh-code-runtime-v8: ${message}`))
  })

  it('schema type errors come from the schema itself', async () => {
    const ctx = new Context()
    await expect(ctx.plugin(V8CodeRuntime, { computeMs: 'fast' } as never)).rejects.toThrow(/computeMs expected number but got fast/)
  })
})

describe('programs', () => {
  let m: Mounted
  beforeAll(async () => {
    m = await mount({})
  })
  afterAll(() => m.dispose())

  it('runs TypeScript as the body of an async function', async () => {
    const result = await m.run(`
      interface P { x: number }
      const p: P = { x: 2 }
      const v = await Promise.resolve(p.x as number)
      return v * 21
    `)
    expect(result).toEqual({ logs: [], value: 42 })
  })

  it('undefined completion has no value key', async () => {
    const result = await m.run('const x = 1')
    expect('value' in result).toBe(false)
    expect(result).toEqual({ logs: [] })
  })

  it('logs the contract example exactly', async () => {
    const result = await m.run("console.log('point', {x: 1, y: 2}); console.log('%s x', 'y')")
    expect(result.logs).toEqual(['point { x: 1, y: 2 }', '%s x y'])
  })

  it('all five console levels and both streams share one ordered list', async () => {
    const result = await m.run(`
      console.log('a'); console.info('b'); console.warn('c'); console.error('d'); console.debug('e')
      process.stdout.write('out\\n'); process.stderr.write('err')
      let called = null
      process.stdout.write('cb', () => { called = 'yes' })
      await new Promise((r) => setTimeout(r, 5))
      return called
    `)
    expect(result).toEqual({ logs: ['a', 'b', 'c', 'd', 'e', 'out\n', 'err', 'cb'], value: 'yes' })
  })

  it('process.env is empty and exit() ends the run with the contract message', async () => {
    expect(await m.run('return JSON.stringify(process.env)')).toEqual({ logs: [], value: '{}' })
    const exited = await m.run("console.log('before'); process.exit(3); console.log('after')")
    expect(exited).toEqual({ logs: ['before'], error: { kind: 'worker-exit', message: 'worker exited with code 3 before completing' } })
  })

  it('exit() checks its code as Node does, and exitCode is honoured', async () => {
    // Node itself, in a child process, is the oracle for what exit() throws.
    const codes = ['1.5', '"abc"', 'true', '"1.5"', '{}', '3n', 'NaN', '""', 'Symbol("s")', 'Object.create(null)', '[]']
    for (const code of codes) {
      const probe = `try { process.exit(${code}) } catch (e) { process.stdout.write([String(e), e.code, e.name, e.message].join(' | ')); process.exitCode = 0 }`
      const node = spawnSync(process.execPath, ['-e', probe], { encoding: 'utf8' })
      const ours = await m.run(`try { process.exit(${code}) } catch (e) { return [String(e), e.code, e.name, e.message].join(' | ') }`)
      expect([code, ours.value]).toEqual([code, node.stdout])
    }
    const uncaught = await m.run('process.exit(1.5)')
    expect(uncaught.error?.message).toMatch(/^RangeError \[ERR_OUT_OF_RANGE\]: The value of "code" is out of range\. It must be an integer\. Received 1\.5\n {4}at program\.ts:1:9/)
    expect(await m.run('process.exitCode = 4; process.extra = 1; process.exit()')).toEqual({
      logs: [],
      error: { kind: 'worker-exit', message: 'worker exited with code 4 before completing' },
    })
    expect(await m.run('process.exit("3")')).toEqual({ logs: [], error: { kind: 'worker-exit', message: 'worker exited with code 3 before completing' } })
  })

  it('a thrown Error reports name, message and program positions', async () => {
    const result = await m.run("const a = 1\n\n  throw new TypeError('nope')")
    expect(result.error?.kind).toBe('exception')
    expect(result.error?.message).toMatch(/^TypeError: nope\n {4}at program\.ts:3:9/)
    expect(result.error?.message).not.toMatch(/ext:|node:|file:|\/work\//)
  })

  it('a thrown non-Error is String(v); an unrenderable one has the exact message', async () => {
    expect((await m.run("throw 'xy'")).error).toEqual({ kind: 'exception', message: 'xy' })
    expect((await m.run('throw { toString() { throw 1 } }')).error).toEqual({
      kind: 'exception',
      message: 'program threw an unrenderable value',
    })
  })

  it('positions stay right after types are erased on earlier lines', async () => {
    const result = await m.run('type T = {\n  a: string\n}\nconst x: T = { a: "b" }\nnull.f()')
    expect(result.error?.message).toMatch(/program\.ts:5:6/)
  })

  it('a parse error names the line and column as written', async () => {
    const result = await m.run('const a = 1\nconst b = (\n')
    expect(result.error?.kind).toBe('exception')
    expect(result.error?.message).toMatch(/program\.ts:3:1/)
    // Errors the parser recovers from, and syntax only the strip refuses,
    // are positioned too.
    const cases: [string, RegExp][] = [
      ['let a = 1\nreturn "unterminated', /^SyntaxError: Unterminated string constant at program\.ts:2:8$/],
      ['/* unterminated comment', /^SyntaxError: Unterminated block comment at program\.ts:1:\d+$/],
      ['const x = 1\n@decorated class C {}', /^SyntaxError: .+ at program\.ts:2:1$/],
      ['const s = `open', /^SyntaxError: Unterminated template at program\.ts:1:11$/],
    ]
    for (const [program, message] of cases) {
      const failed = await m.run(program)
      expect([program, failed.error?.kind, failed.error?.message]).toEqual([program, 'exception', expect.stringMatching(message)])
    }
  })

  it.each([
    ['enum E { A, B }', /enum/i],
    ['namespace N { export const x = 1 }', /namespace|strip/i],
    ['class C { constructor(private x: number) {} }', /parameter propert|strip/i],
  ])('refuses non-erasable TypeScript: %s', async (program, message) => {
    const result = await m.run(program)
    expect(result.error?.kind).toBe('exception')
    expect(result.error?.message).toMatch(message)
  })

  it('strict mode applies', async () => {
    const result = await m.run('undeclared = 1')
    expect(result.error?.message).toMatch(/^ReferenceError: undeclared is not defined/)
  })

  it('a completion that is not lossless JSON is invalid-output', async () => {
    for (const program of ['return new Date(0)', 'return NaN', 'return -0', 'return [1,,3]', 'return () => 1', 'return 1n']) {
      expect(await m.run(program)).toEqual({
        logs: [],
        error: { kind: 'invalid-output', message: 'program completion must be lossless JSON' },
      })
    }
  })

  it('nothing survives into the next run', async () => {
    await m.run('globalThis.leak = 1; Object.prototype.polluted = 2; Array.prototype.push = null')
    expect(await m.run('return [typeof leak, typeof ({}).polluted, typeof [].push]')).toEqual({
      logs: [],
      value: ['undefined', 'undefined', 'function'],
    })
  })

  it('only the program world is visible: no Deno, Node or internals', async () => {
    const result = await m.run(`return [typeof Deno, typeof __dsh, typeof __bootstrap, typeof require,
      typeof WebAssembly, typeof process.binding, typeof globalThis.__infra]`)
    expect(result.value).toEqual(Array(7).fill('undefined'))
  })

  it('a program that never settles is reported at once', async () => {
    // An exception now, not a timeout at the wall ceiling.
    const result = await m.run('await new Promise(() => {})')
    expect(result.error).toEqual({
      kind: 'exception',
      message:
        "the program's top-level promise can never settle: nothing is pending that could resolve it (an await on a promise that is never resolved)",
    })
  })

  it('runs beyond maxConcurrentRuns wait in the queue, and all complete in order of their results', async () => {
    const narrow = await mount({ maxConcurrentRuns: 2 })
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => narrow.run(`return ${i} * 2`)))
    expect(results.map((r) => r.value)).toEqual(Array.from({ length: 20 }, (_, i) => i * 2))
    expect(narrow.runtime.stats()).toMatchObject({ queued: 0, inFlight: 0, outcomes: { ok: 20 } })
    await narrow.dispose()
  })
})

describe('output ledger', () => {
  it.each([
    [11, "console.log('abc'); return 'xy'", { logs: ['abc'], value: 'xy' }],
    // `["abc"]` and `"xy"` are 11 bytes: the log no longer fits beside the
    // error either, and the message keeps what the cap leaves (`[]` and
    // `"outer "`: 10 bytes), as the worker-thread backend gives.
    [10, "console.log('abc'); return 'xy'", { logs: [], error: { kind: 'output-limit', message: 'outer ' } }],
    [7, "return '€'", { logs: [], value: '€' }],
    [11, "console.log('abc'); throw 'xy'", { logs: ['abc'], error: { kind: 'exception', message: 'xy' } }],
  ])('cap %i: %s', async (cap, program, expected) => {
    const m = await mount({ maxOutputBytes: cap })
    expect(await m.run(program)).toEqual(expected)
    await m.dispose()
  })

  it('cap 6 refuses "€"; cap 10 refuses an over-budget throw', async () => {
    const six = await mount({ maxOutputBytes: 6 })
    expect((await six.run("return '€'")).error?.kind).toBe('output-limit')
    await six.dispose()
    const ten = await mount({ maxOutputBytes: 10 })
    expect((await ten.run("console.log('abc'); throw 'xy'")).error?.kind).toBe('output-limit')
    await ten.dispose()
  })

  it('the message is cut to fit and the total never exceeds the cap', async () => {
    for (const cap of [4, 5, 12, 33, 40, 64]) {
      const m = await mount({ maxOutputBytes: cap })
      const result = await m.run("for (let i = 0; i < 50; i++) console.log('line ' + i + ' €😀')")
      expect(result.error?.kind).toBe('output-limit')
      const total = Buffer.byteLength(JSON.stringify(result.logs)) + Buffer.byteLength(JSON.stringify(result.error?.message))
      expect(total).toBeLessThanOrEqual(cap)
      expect('outer output exceeded ' + cap + ' bytes').toContain(result.error?.message)
      await m.dispose()
    }
  })

  it('at the smallest cap (4) the message is empty and no log is kept', async () => {
    const m = await mount({ maxOutputBytes: 4 })
    expect(await m.run("for (let i = 0; i < 50; i++) console.log('line ' + i + ' €😀')")).toEqual({
      logs: [],
      error: { kind: 'output-limit', message: '' },
    })
    await m.dispose()
  })

  it('the 64 MiB default boundary is exact', async () => {
    const m = await mount({})
    const fits = await m.run('return "x".repeat(67108860)')
    expect(fits.error).toBeUndefined()
    expect((fits.value as string).length).toBe(67108860)
    expect((await m.run('return "x".repeat(67108861)')).error).toEqual({
      kind: 'output-limit',
      message: 'outer output exceeded 67108864 bytes',
    })
    await m.dispose()
  })

  it('a pre-aborted run and a transpile failure go through the same ledger', async () => {
    const m = await mount({ maxOutputBytes: 64 })
    const controller = new AbortController()
    controller.abort('r'.repeat(1000))
    expect(await m.runtime.run({ program: 'return 1', bindings: [], signal: controller.signal })).toEqual({
      logs: [],
      error: { kind: 'output-limit', message: 'outer output exceeded 64 bytes' },
    })
    expect((await m.run('enum ' + 'E'.repeat(200) + ' { A }')).error).toEqual({
      kind: 'output-limit',
      message: 'outer output exceeded 64 bytes',
    })
    await m.dispose()
  })

  it('a giant Error message becomes output-limit, not a truncated value', async () => {
    const m = await mount({ maxOutputBytes: 1000 })
    expect((await m.run('throw new Error("x".repeat(50_000_000))')).error?.kind).toBe('output-limit')
    await m.dispose()
  })

  it('logs reach the host whole and in order across many turns (by count and by size)', async () => {
    // The host takes logs a chunk per event-loop turn (at most 65536
    // entries or 4 Mi UTF-16 units): both limits are crossed several times.
    const m = await mount({})
    const many = await m.run('for (let i = 0; i < 200_000; i++) console.log(String(i)); return 1')
    expect(many.value).toBe(1)
    expect(many.logs).toEqual(Array.from({ length: 200_000 }, (_, i) => String(i)))
    const big = await m.run("for (let i = 0; i < 12; i++) console.log(String.fromCharCode(97 + i).repeat(1_500_000) + '\\ud800'); return 2")
    expect(big.value).toBe(2)
    expect(big.logs).toEqual(Array.from({ length: 12 }, (_, i) => String.fromCharCode(97 + i).repeat(1_500_000) + '\ud800'))
    await m.dispose()
  })

  it('logs written before a failure are kept', async () => {
    const m = await mount({ computeMs: 200 })
    const result = await m.run("console.log('one'); console.log('two'); for (;;) {}")
    expect(result).toEqual({ logs: ['one', 'two'], error: { kind: 'timeout', message: 'compute budget exhausted (200ms busy)' } })
    await m.dispose()
  })
})

describe('abort and disposal', () => {
  it('a pre-aborted signal resolves without compiling', async () => {
    const m = await mount({})
    const controller = new AbortController()
    controller.abort(new Error('stop now'))
    expect(await m.runtime.run({ program: 'this is not even TypeScript', bindings: [], signal: controller.signal })).toEqual({
      logs: [],
      error: { kind: 'abort', message: 'Error: stop now' },
    })
    await m.dispose()
  })

  it('disposal aborts live runs, keeps their logs and rejects later runs', async () => {
    const m = await mount({})
    // Each program tells the host it has logged (a binding call) before it
    // spins or waits; disposal comes once both have.
    let ready = 0
    let bothReady: () => void = () => {}
    const readyNow = new Promise<void>((resolve) => (bothReady = resolve))
    const bindings = tools({
      ready: async () => {
        if (++ready === 2) bothReady()
        return null
      },
    })
    const live = [
      m.run("console.log('spinning'); await tools.ready({}); for (;;) {}", { bindings }),
      m.run("console.log('waiting'); await tools.ready({}); await new Promise((r) => setTimeout(r, 100000))", { bindings }),
    ]
    await readyNow
    await m.dispose()
    const results = await Promise.all(live)
    expect(results[0]).toEqual({ logs: ['spinning'], error: { kind: 'abort', message: 'runtime disposed' } })
    expect(results[1]).toEqual({ logs: ['waiting'], error: { kind: 'abort', message: 'runtime disposed' } })
    await expect(m.runtime.run({ program: 'return 1', bindings: [] })).rejects.toThrow(/after disposal/)
  })

  it('a tool that disposes of its runtime while it is called ends its run as disposed, and Node goes on', async () => {
    // The call reaches the tool from Node's main thread woken by the host
    // (the Node bell), inside the addon's own call into JS: disposal then
    // closes what that call is still using, once it returns.
    const m = await mount({})
    let disposed: Promise<void> | undefined
    const bindings = tools({
      stop: () => {
        disposed = m.dispose()
        return 1
      },
    })
    const result = await m.run('await new Promise((r) => setTimeout(r, 20)); return await tools.stop({})', { bindings })
    expect(result).toEqual({ logs: [], error: { kind: 'abort', message: 'runtime disposed' } })
    await disposed
    await expect(m.runtime.run({ program: 'return 1', bindings: [] })).rejects.toThrow(/after disposal/)
    const other = await mount({})
    expect(await other.run('return await tools.one({})', { bindings: tools({ one: async () => 1 }) })).toEqual({ logs: [], value: 1 })
    await other.dispose()
  })

  it('a second provider in one context fails the way cordis fails it, leaking nothing', async () => {
    // The runtime's own threads (named dsh-*) and isolate hosts (child
    // processes of this one): Node's other threads (libuv, V8's platform,
    // vitest) come and go on their own.
    /** A task's or process's name, or '' once it has ended (between the listing and the read). */
    const comm = (path: string) => {
      try {
        return readFileSync(path, 'utf8').trim()
      } catch {
        return ''
      }
    }
    const threadNames = () =>
      readdirSync('/proc/self/task')
        .map((task) => comm(`/proc/self/task/${task}/comm`))
        .filter((name) => name.startsWith('dsh-'))
    const hostPids = () =>
      readdirSync('/proc').filter((pid) => {
        if (!/^\d+$/.test(pid) || !comm(`/proc/${pid}/comm`).startsWith('dsh-isolate-h')) return false
        try {
          const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
          return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === process.pid
        } catch {
          return false
        }
      })
    const ctx = new Context()
    const first = await ctx.plugin(V8CodeRuntime, {} as never)
    const runtime = ctx.codeRuntime as unknown as V8CodeRuntime
    const count = () => ({ threads: threadNames(), hosts: hostPids() })
    // The first provider settled: its prepared reserve filled (one thread
    // per prepared isolate), and the hosts it names are the children alive
    // (not one that has died while its replacement is on its way).
    const settled = () => {
      const stats = runtime.stats()
      const alive = hostPids()
      return (
        stats.preparedIsolates === os.availableParallelism() &&
        stats.hostPids.length === alive.length &&
        stats.hostPids.every((pid) => alive.includes(String(pid)))
      )
    }
    await until(settled)
    let before = { ...count(), restarts: runtime.stats().hostRestarts }
    expect(before.hosts.length).toBeGreaterThan(0)
    await expect(ctx.plugin(V8CodeRuntime, {} as never)).rejects.toThrow(/service "codeRuntime" has been registered/)
    // Whatever the refused provider made must be gone, once its disposal
    // (if any) has finished: wait until the counts are back. A leak never
    // gets there, and the test times out. (At most `before`: a thread of
    // an earlier test's disposal, counted in `before`, may end meanwhile.)
    // Should the first provider replace a host meanwhile (a missed
    // heartbeat on a loaded machine), its settled state after that is the
    // new baseline. Should a leak keep this waiting until the suite's
    // timeout, the failure says what was left.
    let last = count()
    onTestFailed(() => {
      const stats = runtime.stats()
      console.error('second provider:', JSON.stringify({ before, last, firstHosts: stats.hostPids, restarts: stats.hostRestarts }))
    })
    await until(() => {
      last = count()
      if (last.threads.length <= before.threads.length && last.hosts.length <= before.hosts.length) return true
      const restarts = runtime.stats().hostRestarts
      if (restarts !== before.restarts && settled()) before = { ...count(), restarts }
      return false
    })
    expect(await ctx.codeRuntime.run({ program: 'return 1', bindings: [] })).toEqual({ logs: [], value: 1 })
    await first.dispose()
    expect(ctx.codeRuntime).toBeUndefined()
  })
})
