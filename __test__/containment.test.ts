import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest'
import { RUN_REPORT, type V8CodeRunReport } from '../lib/index.js'
import { fromNodeWorker, inNodeWorker, mount, mountReference, tools, until, type Mounted } from './helpers.js'

let m: Mounted
beforeAll(async () => {
  // The budget, a cap, an abort or the program ends each run here, never
  // the wall ceiling: a host runs programs below the harness's priority,
  // so beside busy processes a run's 500 ms of CPU can take many seconds
  // of wall time (one took over 10 s beside two busy loops and the suite).
  m = await mount({ computeMs: 500, maxWallMs: 120_000, maxOldGenerationSizeMb: 64, maxExternalMemoryMb: 64 })
})
afterAll(() => m.dispose())

/** After every attack: the same runtime still runs the next program. */
async function healthy() {
  expect(await m.run('return [1, 2].map((x) => x * 2)')).toEqual({ logs: [], value: [2, 4] })
}

describe('compute budget', () => {
  it.each([
    ['a synchronous loop', 'for (;;) {}'],
    ['a loop behind a pending decoy call', 'void tools.slow({}); for (;;) {}'],
    ['a microtask loop', 'const spin = () => queueMicrotask(spin); spin(); await new Promise(() => setTimeout(() => {}, 60000))'],
    ['a promise-chain loop', 'for (;;) await null'],
    ['a timer loop that burns CPU', 'await new Promise(() => setInterval(() => { const t = Date.now(); while (Date.now() - t < 50) {} }, 1))'],
    ['while(true) in finally after a throw', 'try { throw new Error("x") } finally { while (true) {} }'],
    ['a loop that catches everything', 'for (;;) { try { for (;;) {} } catch {} finally { continue } }'],
  ])('stops %s', async (_, program) => {
    const result = await m.run(program, { bindings: tools({ slow: () => new Promise(() => {}) }) })
    expect(result.error).toEqual({ kind: 'timeout', message: 'compute budget exhausted (500ms busy)' })
    await healthy()
  })
})

describe('work V8 cannot interrupt', () => {
  // A compile whose time grows with its source and the depth of its scopes:
  // 1.6 MB of source, about half a minute of one CPU, with no stack check
  // V8 could stop it at.
  const compileBomb = `new Function('{let a;'.repeat(2500) + 'q;'.repeat(800000) + '}'.repeat(2500)); return 'compiled'`

  it('past its compute budget ends its host, which names it: it fails as its budget makes it fail, executed once; a run beside it awaiting a tool completes, the next run works', async () => {
    const one = await mount({ computeMs: 500, maxWallMs: 120_000, isolateHosts: 1 })
    const reports: V8CodeRunReport[] = []
    const off = one.ctx.on(RUN_REPORT, (report) => void reports.push(report))
    try {
      let release!: (value: number) => void
      const gate = new Promise<number>((resolve) => (release = resolve))
      const beside = one.run('return (await tools.wait({})) + 1', { bindings: tools({ wait: () => gate }) })
      await until(() => one.runtime.stats().waitingOnHost === 1)
      const result = await one.run("console.log('compiling'); " + compileBomb)
      expect(result).toEqual({ logs: ['compiling'], error: { kind: 'timeout', message: 'compute budget exhausted (500ms busy)' } })
      // Settled from its host's word, not executed again alone to find out.
      expect(reports.at(-1)?.reexecutions).toBe(0)
      expect(reports.at(-1)?.hostPids).toHaveLength(1)
      expect(one.runtime.stats().lastHostExit).toMatch(/a run went on computing for \d+ ms of CPU after it was stopped/)
      release(41)
      expect(await beside).toEqual({ logs: [], value: 42 })
      expect(await one.run('return 1')).toEqual({ logs: [], value: 1 })
    } finally {
      off()
      await one.dispose()
    }
  })

  it('aborted after a tool answered it: its host is replaced all the same', async () => {
    // Nothing wakes the watchdog when a run computes again after a tool's
    // answer, nor when another thread stops it, and its look at the
    // budgets may be as far off as the run's whole budget (two minutes
    // here): the look for a stopped run that computes on is its own.
    const one = await mount({ computeMs: 120_000, maxWallMs: 120_000, isolateHosts: 1 })
    onTestFailed(() => console.error(`stats at the failure: ${JSON.stringify(one.runtime.stats())}`))
    try {
      const controller = new AbortController()
      const running = one.run(`await tools.go({}); ${compileBomb}`, { bindings: tools({ go: async () => null }), signal: controller.signal })
      await until(() => one.runtime.stats().cpuMs >= 300)
      controller.abort(new Error('enough'))
      expect((await running).error?.kind).toBe('abort')
      await until(() => one.runtime.stats().hostRestarts >= 1)
      expect(await one.run('return 1')).toEqual({ logs: [], value: 1 })
    } finally {
      await one.dispose()
    }
  })

  it('aborted, settles as aborted, and its host, whose thread it held, is replaced', async () => {
    const one = await mount({ computeMs: 120_000, maxWallMs: 120_000, isolateHosts: 1 })
    // Should the host never be replaced (seen once in a full suite, never
    // alone), what the runtime said of itself then.
    onTestFailed(() => console.error(`stats at the failure: ${JSON.stringify(one.runtime.stats())}`))
    try {
      const controller = new AbortController()
      const running = one.run(compileBomb, { signal: controller.signal })
      // Building the source costs a few ms of CPU: past that, it compiles.
      await until(() => one.runtime.stats().cpuMs >= 300)
      controller.abort(new Error('enough'))
      const result = await running
      expect(result.error?.kind).toBe('abort')
      // The harness settles an aborted run at once; the host ends once the
      // run has computed past its stop for as long as it may.
      await until(() => one.runtime.stats().hostRestarts >= 1)
      expect(await one.run('return 1')).toEqual({ logs: [], value: 1 })
    } finally {
      await one.dispose()
    }
  })
})

describe('programs the TypeScript strip chokes on', () => {
  it("nested deeper than V8 compiles: Node's exception, and the host lives", async () => {
    // 20000 parentheses: swc recurses ~3.3 KB a level, past a run thread's
    // 16 MiB, which ended the host (and two more, as the run was executed
    // again alone); V8 refuses such nesting itself. (Not asked of the
    // reference: its strip, swc in WebAssembly, fails with "memory access
    // out of bounds" and then fails every later run of its process.)
    const program = `return ${'('.repeat(20_000)}1${')'.repeat(20_000)}`
    const hosts = m.runtime.stats().hostPids
    const result = await m.run(program)
    const node = await fromNodeWorker<string>(
      `try { new (Object.getPrototypeOf(async function () {}).constructor)(${JSON.stringify(program)}); parentPort.postMessage('compiled') } catch (e) { parentPort.postMessage(e.name + ': ' + e.message) }`,
    )
    expect(node).toBe('RangeError: Maximum call stack size exceeded')
    expect(result).toEqual({ logs: [], error: { kind: 'exception', message: `${node} at program.ts:0:0` } })
    expect(m.runtime.stats().hostPids).toEqual(hosts)
    await healthy()
  })

  it('in exponential time: stopped at its budget, its host ends and names it, executed once; the next run works', async () => {
    // swc's time doubles with each level of `(<any>`: 22 levels took 6 s,
    // 40 would take days, before the program's first instruction.
    const one = await mount({ computeMs: 500, maxWallMs: 120_000, isolateHosts: 1 })
    const reports: V8CodeRunReport[] = []
    const off = one.ctx.on(RUN_REPORT, (report) => void reports.push(report))
    try {
      const result = await one.run(`return ${'(<any>'.repeat(40)}1${')'.repeat(40)}`)
      expect(result).toEqual({ logs: [], error: { kind: 'timeout', message: 'compute budget exhausted (500ms busy)' } })
      expect(reports.at(-1)?.reexecutions).toBe(0)
      expect(one.runtime.stats().lastHostExit).toMatch(/a run went on computing for \d+ ms of CPU after it was stopped/)
      expect(await one.run('return 1')).toEqual({ logs: [], value: 1 })
    } finally {
      off()
      await one.dispose()
    }
  })
})

describe('wall ceiling and abort', () => {
  it('a timer that never fires ends at the wall ceiling', async () => {
    const short = await mount({ maxWallMs: 200 })
    expect(await short.run('await new Promise((r) => setTimeout(r, 100000))')).toEqual({
      logs: [],
      error: { kind: 'timeout', message: 'wall-clock ceiling reached (200ms)' },
    })
    expect(await short.run('return 1')).toEqual({ logs: [], value: 1 })
    await short.dispose()
  })

  it('abort stops a hot loop mid-flight and keeps its logs', async () => {
    const controller = new AbortController()
    // The program tells the host it is about to spin (after its log); the
    // abort comes once its run is computing again, so the loop is what it stops.
    let spinning: () => void = () => {}
    const started = new Promise<void>((resolve) => (spinning = resolve))
    const pending = m.runtime.run({
      program: "console.log('in'); await tools.spinning({}); for (;;) {}",
      bindings: tools({
        spinning: async () => {
          spinning()
          return null
        },
      }),
      signal: controller.signal,
    })
    await started
    await until(() => m.runtime.stats().computing === 1 && m.runtime.stats().waitingOnHost === 0)
    controller.abort('user cancelled')
    expect(await pending).toEqual({ logs: ['in'], error: { kind: 'abort', message: 'user cancelled' } })
    await healthy()
  })

  it('100 runs aborted at random points all resolve, and the runtime stays healthy', async () => {
    const programs = [
      'for (;;) {}',
      'await new Promise((r) => setTimeout(r, 50)); for (;;) {}',
      'let s = 0; for (let i = 0; i < 1e6; i++) s += i; return s',
      'await tools.never({})',
      'console.log("x".repeat(1000)); await null; return 1',
    ]
    // Should a run never resolve, the failure says which runs and what the
    // runtime reports of them (its test timeout is the only bound here).
    const unresolved = new Set(Array.from({ length: 100 }, (_, i) => i))
    onTestFailed(() => {
      console.error(`unresolved runs: ${[...unresolved].join(' ')}; stats: ${JSON.stringify(m.runtime.stats())}`)
    })
    const runs = Array.from({ length: 100 }, (_, i) => {
      const controller = new AbortController()
      const run = m.runtime.run({
        program: programs[i % programs.length] as string,
        bindings: tools({ never: () => new Promise(() => {}) }),
        signal: controller.signal,
      })
      setTimeout(() => controller.abort(`abort ${i}`), Math.random() * 30)
      return run.finally(() => unresolved.delete(i))
    })
    const results = await Promise.all(runs)
    // Programs 0, 1 and 3 cannot finish on their own: each ends by its
    // abort. Programs 2 and 4 finish with their value unless the abort
    // came first.
    const finished = [undefined, undefined, { logs: [], value: 499999500000 }, undefined, { logs: ['x'.repeat(1000)], value: 1 }]
    for (const [i, result] of results.entries()) {
      const aborted = { kind: 'abort', message: `abort ${i}` }
      const own = finished[i % programs.length]
      if (own === undefined || result.error !== undefined) expect(result.error).toEqual(aborted)
      else expect(result).toEqual(own)
    }
    await healthy()
  })
})

describe('memory', () => {
  it.each([
    ['an array bomb', 'const a = []; for (;;) a.push([1, 2, 3, 4, 5, 6, 7, 8])'],
    ['a string bomb', 'const a = []; let s = "x"; for (;;) { s = s + s.slice(0, 1e6) + "y"; a.push(s) }'],
    ['an object bomb', 'const a = []; for (let i = 0; ; i++) a.push({ i, s: "k" + i })'],
    ['a closure bomb', 'let f = () => 0; const a = []; for (let i = 0; ; i++) { const g = f; f = () => g() + i; a.push(f) }'],
  ])('%s ends as worker-exit naming the heap limit', async (_, program) => {
    const result = await mount({ maxOldGenerationSizeMb: 32, computeMs: 20_000 }).then(async (small) => {
      const r = await small.run(program)
      expect((await small.run('return "next"')).value).toBe('next')
      await small.dispose()
      return r
    })
    expect(result.error?.kind).toBe('worker-exit')
    expect(result.error?.message).toBe('heap limit reached: the program exceeded maxOldGenerationSizeMb (32 MiB)')
  })

  it('a cap smaller than the sandbox itself: the isolate is still made, a program within it runs, a bomb ends naming the cap, no host dies', async () => {
    // Deserializing the sandbox alone outgrows a cap of a few MiB: it is
    // made under more, and the program's cap is set back when the run
    // starts (at least a quarter above the heap then live).
    const tiny = await mount({ maxOldGenerationSizeMb: 0.5 })
    try {
      expect(await tiny.run('console.log("small"); return [1, 2, 3].map((x) => x * 2)')).toEqual({ logs: ['small'], value: [2, 4, 6] })
      const bomb = await tiny.run('const a = []; for (;;) a.push({ x: a.length })')
      expect(bomb.error).toEqual({ kind: 'worker-exit', message: 'heap limit reached: the program exceeded maxOldGenerationSizeMb (0.5 MiB)' })
      expect((await tiny.run('return "next"')).value).toBe('next')
      // A host that ended says how in lastHostExit.
      const stats = tiny.runtime.stats()
      expect(stats, `a host ended: ${stats.lastHostExit}`).toMatchObject({ hostRestarts: 0, runsLostToHostExits: 0 })
    } finally {
      await tiny.dispose()
    }
  })

  it.each([
    ['one huge ArrayBuffer', 'new ArrayBuffer(200 * 1024 * 1024)'],
    ['a huge typed array', 'new Float64Array(50 * 1024 * 1024)'],
    ['many small buffers', 'const keep = []; for (;;) keep.push(new Uint8Array(1024 * 1024))'],
    ['a caught allocation failure', 'const keep = []; for (;;) { try { keep.push(new ArrayBuffer(8 * 1024 * 1024)) } catch {} }'],
  ])('%s ends as worker-exit naming the external-memory limit', async (_, program) => {
    const result = await m.run(program)
    expect(result.error?.kind).toBe('worker-exit')
    expect(result.error?.message).toBe("external memory limit reached: the program's memory outside the heap exceeded maxExternalMemoryMb (64 MiB)")
    await healthy()
  })

  it('WebAssembly is not available, so its memory cannot be grown outside the caps', async () => {
    const result = await m.run('new WebAssembly.Memory({ initial: 1 }).grow(60000)')
    expect(result.error?.kind).toBe('exception')
    expect(result.error?.message).toMatch(/WebAssembly is not defined/)
    await healthy()
  })

  it('deep recursion is a RangeError exception', async () => {
    const result = await m.run('const f = (n: number): number => f(n + 1) + 1; return f(0)')
    expect(result.error?.kind).toBe('exception')
    expect(result.error?.message).toMatch(/^RangeError: Maximum call stack size exceeded/)
    await healthy()
  })

  it('Atomics.wait cannot block the isolate', async () => {
    const result = await m.run('Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 60000)')
    expect(result.error?.kind).toBe('exception')
    expect(result.error?.message).toMatch(/Atomics\.wait/)
    await healthy()
  })

  it('a log flood ends at the output cap', async () => {
    // Its own compute budget: 64 MiB of entries cost some 0.3-0.5 s of CPU
    // to make and send to the harness, which is not what this test is about.
    const flood = await mount({ computeMs: 10_000 })
    const result = await flood.run('for (;;) console.log("flood ".repeat(1000))')
    expect(result.error?.kind).toBe('output-limit')
    expect(await flood.run('return 1')).toEqual({ logs: [], value: 1 })
    await flood.dispose()
    await healthy()
  })
})

describe('failures inside the event loop', () => {
  it('an unhandled rejection fails the run with its message', async () => {
    const result = await m.run('Promise.reject(new Error("lost")); await new Promise((r) => setTimeout(r, 20)); return 1')
    expect(result.error?.kind).toBe('exception')
    expect(result.error?.message).toMatch(/^Error: lost/)
  })

  it('a rejection the synchronous part left unhandled fails the run before a timer already due can run, as in Node', async () => {
    // The synchronous part outlasts its own 2 ms timer, so the timer is due
    // when the event loop first turns: the rejection must still come first.
    const body = 'Promise.reject(new Error("first")); const wait = new Promise((r) => setTimeout(r, 2)); const until = Date.now() + 20; while (Date.now() < until);'
    const result = await m.run(`${body} await wait; return 1`)
    expect(result.error?.kind).toBe('exception')
    expect(result.error?.message).toMatch(/^Error: first/)
    const node = spawnSync(process.execPath, ['--input-type=module', '-e', `
      process.on('unhandledRejection', (e) => console.log('rejection ' + e.message))
      ${body} await wait; console.log('timer')`], { encoding: 'utf8' })
    expect(node.stdout).toBe('rejection first\ntimer\n')
    await healthy()
  })

  it('a throw in a timer callback fails the run with its message', async () => {
    const result = await m.run('setTimeout(() => { throw new TypeError("in timer") }, 1); await new Promise((r) => setTimeout(r, 50)); return 1')
    expect(result.error?.kind).toBe('exception')
    expect(result.error?.message).toMatch(/^TypeError: in timer/)
    expect(result.error?.message).not.toMatch(/ext:/)
  })

  it('once the completion settles, pending timers and calls are dropped', async () => {
    const result = await m.run('setTimeout(() => console.log("late"), 10); void tools.never({}); return "now"', {
      bindings: tools({ never: () => new Promise(() => {}) }),
    })
    expect(result).toEqual({ logs: [], value: 'now' })
  })

  it('a timer that fell due before the completion settled is dropped with it, as in the reference', async () => {
    // The busy wait makes the timer due before the event loop's first turn,
    // which holds timer callbacks back and settles the run.
    const program = `setTimeout(() => { console.log("late"); void tools.record({}) }, 0)
      const start = Date.now(); while (Date.now() - start < 20) {}
      void tools.never({}); return "now"`
    const recorded: unknown[] = []
    const bindings = tools({ never: () => new Promise(() => {}), record: async (args) => void recorded.push(args) })
    const reference = await mountReference()
    try {
      expect(await reference.run(program, { bindings })).toEqual({ logs: [], value: 'now' })
    } finally {
      await reference.dispose()
    }
    expect(await m.run(program, { bindings })).toEqual({ logs: [], value: 'now' })
    await healthy()
    expect(recorded).toEqual([])
  })
})

describe('no ambient authority', () => {
  it.each([
    ['Deno', 'return typeof Deno'],
    ['internal ops via globalThis', 'return Object.getOwnPropertyNames(globalThis).filter((k) => /^(Deno|__|op_)/.test(k))'],
    ['require', 'return typeof require'],
    ['process.binding', 'return [typeof process.binding, typeof process.dlopen, typeof process.kill, Object.keys(process.env)]'],
    ['Function("return this")', 'const g = Function("return this")(); return [g === globalThis, typeof g.Deno, typeof g.__dsh]'],
    ['constructor chains', 'const F = (async () => {}).constructor; const g = await new F("return this")(); return [typeof g.Deno, typeof (0, eval)("this").Deno]'],
    ['a bootstrap stashed in an error stack', 'try { null.x } catch (e) { return typeof e.stack === "string" && !/ext:|Deno/.test(e.stack) }'],
  ])('%s is not reachable', async (_, program) => {
    const result = await m.run(program)
    expect(result.error).toBeUndefined()
    expect(JSON.stringify(result.value)).not.toMatch(/object|function|"Deno"/)
  })

  it('dynamic import of anything fails', async () => {
    for (const specifier of ['fs', 'node:fs', 'ext:core/mod.js', 'data:text/javascript,export default 1', 'https://example.com/x.js']) {
      const result = await m.run(`return await import(${JSON.stringify(specifier)})`)
      expect(result.error?.kind).toBe('exception')
    }
    await healthy()
  })

  it('prototype pollution aimed at the bridge changes nothing', async () => {
    const seen: unknown[] = []
    const result = await m.run(
      `Object.prototype.then = function (ok) { ok('forged') }
       Promise.prototype.then = function () { throw new Error('hijacked') }
       Object.defineProperty(Object.prototype, 'namespaces', { get() { throw new Error('poisoned') } })
       Array.prototype[Symbol.iterator] = function* () { yield 'forged' }
       const r = await tools.f({ a: 1 })
       return r`,
      { bindings: tools({ f: async (args) => (seen.push(args), { ok: true }) }) },
    )
    expect(seen).toEqual([{ a: 1 }])
    // The bridge is untouched by the tampering; what the program then gets
    // is plain JavaScript: resolving with { ok: true } looks up its
    // (forged, inherited) `then`, which resolves 'forged'.
    expect(result).toEqual({ logs: [], value: 'forged' })
    await healthy()
  })
})

describe('structuredClone, whose rebuilding runs no program code', () => {
  it('a DOMException whose class the program replaced: the clone is whole, as Node makes it, and the host lives', async () => {
    // V8 rebuilds a clone halfway at a time; program code run then (a
    // constructor the program put in DOMException's place, a setter on
    // what it returns) could reshape an object V8 is still filling in,
    // which corrupted the host's heap (SIGTRAP). The clone's DOMExceptions
    // are made by V8's API alone, and given their data once it is whole.
    const program = `const e = new DOMException('m', 'AbortError'); const o = { e }; e.stack = o
let ran = 0
Object.setPrototypeOf(DOMException, function () { ran++; return { set stack(v) { v.a = 1; v.b = 2; delete v.a; const j = []; for (let i = 0; i < 3e5; i++) j.push({ i }) } } })
const c = structuredClone(o)
const k = []; for (let i = 0; i < 1e6; i++) k.push({ i })
return [c.e instanceof DOMException, c.e.stack === c, c.e.name, c.e.message, ran]`
    const hosts = m.runtime.stats().hostPids
    const [result, node] = await Promise.all([m.run(program), inNodeWorker(`return JSON.stringify(await (async () => { ${program} })())`)])
    expect(result).toEqual({ logs: [], value: JSON.parse(node) })
    expect(m.runtime.stats().hostPids).toEqual(hosts)
    await healthy()
  })

  it("a parent the program gave DOMException brands nothing of the program's, and a buffer a getter transfers away is refused, as in Node", async () => {
    const program = `const f = Object.freeze({ q: 1 })
Object.setPrototypeOf(DOMException, function () { return f })
const made = new DOMException('m')
Object.setPrototypeOf(DOMException, Error)
const c = structuredClone({ f })
const ab = new ArrayBuffer(64), e = new DOMException('m')
Object.defineProperty(e, 'stack', { get() { structuredClone(0, { transfer: [ab] }); return 's' } })
let moved
try { moved = structuredClone({ ab, e }, { transfer: [ab] }).ab.byteLength } catch (error) { moved = [error.name, error.message] }
return [Object.prototype.toString.call(c.f), JSON.stringify(c.f), made === f, moved]`
    const [result, node] = await Promise.all([m.run(program), inNodeWorker(`return JSON.stringify(await (async () => { ${program} })())`)])
    expect(result).toEqual({ logs: [], value: JSON.parse(node) })
    await healthy()
  })
})

describe('the host process', () => {
  const child = fileURLToPath(new URL('./fixtures/exit-while-live.mjs', import.meta.url))
  it.each(['exit', 'dispose-then-exit', 'idle'])('survives %s with runs live and exits cleanly', (mode) => {
    const result = spawnSync(process.execPath, [child, mode], { encoding: 'utf8', timeout: 60_000 })
    expect(result.signal).toBeNull()
    expect(result.stderr).not.toMatch(/Fatal|panicked|Segmentation/)
    expect(result.stdout).toContain(`ok ${mode}`)
    expect(result.status).toBe(0)
  })

  it("lets go of a worker thread's event loop when the worker ends with its runtime live and undisposed", () => {
    const result = spawnSync(process.execPath, [child, 'worker-undisposed'], { encoding: 'utf8', timeout: 60_000 })
    expect(result.signal).toBeNull()
    expect(result.stderr).not.toMatch(/Fatal|panicked|Assertion|open handles/)
    expect(result.stdout).toContain('ok worker-undisposed')
    expect(result.status).toBe(0)
  })

  it('loads in a worker thread beside the main thread without initialising V8 twice', () => {
    const result = spawnSync(process.execPath, [child, 'worker'], { encoding: 'utf8', timeout: 60_000 })
    expect(result.stderr).not.toMatch(/Fatal|panicked/)
    expect(result.stdout).toContain('ok worker')
    expect(result.status).toBe(0)
  })
})

describe("a call's copies of its argument", () => {
  // Long strings leave the heap as copies, one per distinct string a call
  // passes (the same string in several places of one argument crosses
  // once): each call's copies are charged to maxExternalMemoryMb until
  // they are sent, and a turn's calls cross in frames the harness accepts.
  it.each([
    ['40 strings that differ only at their end, in one call', 'await tools.size(Array.from({ length: 40 }, (_, i) => s + i))'],
    ['one string passed to 40 calls at once', 'await Promise.all(Array.from({ length: 40 }, () => tools.size(s)))'],
  ])('%s ends at maxExternalMemoryMb, and its host serves on', async (_, call) => {
    const one = await mount({ isolateHosts: 1, maxExternalMemoryMb: 16, maxWallMs: 20_000 })
    try {
      // A bystander on the same (only) host, waiting on a tool until the hostile run is done.
      let release = (_: unknown) => {}
      const gate = new Promise((resolve) => (release = resolve))
      const bystander = one.run('return await tools.wait({})', { bindings: tools({ wait: () => gate }) })
      let reached = 0
      const size = async (args: unknown) => {
        reached++
        return JSON.stringify(args).length
      }
      // 4 MiB of heap string; 40 copies of it are 160 MiB outside the heap.
      const result = await one.run(`const s = 'x'.repeat(4 << 20)\n${call}\nreturn 'sent'`, { bindings: tools({ size }) })
      expect(result.error?.kind).toBe('worker-exit')
      expect(result.error?.message).toMatch(/external memory limit.*maxExternalMemoryMb \(16 MiB\)/)
      // Only the few calls that fit under the cap at once can have crossed.
      expect(reached).toBeLessThanOrEqual(4)
      release(7)
      expect(await bystander).toEqual({ logs: [], value: 7 })
      // Under the cap the same string still crosses, as often as it fits;
      // in 40 places of one argument it is one copy.
      const fits = await one.run(
        `const s = 'x'.repeat(4 << 20)\nreturn [await tools.size(s), await tools.size([s, s]), await tools.size(Array(40).fill(s))]`,
        { bindings: tools({ size }) },
      )
      expect(fits).toEqual({ logs: [], value: [(4 << 20) + 2, 2 * ((4 << 20) + 2) + 3, 40 * ((4 << 20) + 2) + 41] })
      expect(one.runtime.stats()).toMatchObject({ hostRestarts: 0, runsLostToHostExits: 0 })
    } finally {
      await one.dispose()
    }
  })

  it('a turn whose calls together are longer than a frame delivers every call, in order', async () => {
    const seen: number[] = []
    const roomy = await mount({ maxExternalMemoryMb: 256, maxWallMs: 20_000 })
    // 12 calls of 8 MiB strings: 96 MiB, more than one frame's 64 MiB.
    const result = await roomy.run(
      `const s = 'y'.repeat(8 << 20)
       return await Promise.all(Array.from({ length: 12 }, (_, i) => tools.size({ i, s })))`,
      {
        bindings: tools({
          size: async (args) => {
            const { i, s } = args as { i: number; s: string }
            seen.push(i)
            return s.length
          },
        }),
      },
    ).finally(() => roomy.dispose())
    expect(result).toEqual({ logs: [], value: Array(12).fill(8 << 20) })
    expect(seen).toEqual(Array.from({ length: 12 }, (_, i) => i))
  })
})
