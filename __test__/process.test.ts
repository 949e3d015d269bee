/**
 * The program's `process`, with Node as the oracle: every program here runs
 * in this backend and in the reference backend (a Node worker thread per
 * run, on the Node running this suite), and what each gives back must be
 * equal, but for the facts the README says differ on purpose (the process
 * ids and title, masked where a line prints them). Then the same members
 * under attack, contained like timers are, the next run unharmed; and the
 * lazy globals made after a program tampered with built-ins.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { readFileSync } from 'node:fs'
import { casesProgram, fromNodeWorker, inNodeWorker, mismatches, mount, mountReference, type Mounted } from './helpers.js'

let m: Mounted
let tight: Mounted
let reference: Awaited<ReturnType<typeof mountReference>>
beforeAll(async () => {
  m = await mount({})
  tight = await mount({ computeMs: 500, maxWallMs: 20_000, maxOldGenerationSizeMb: 64 })
  reference = await mountReference()
})
afterAll(async () => {
  await Promise.all([m.dispose(), tight.dispose(), reference.dispose()])
})

/** The same program in both backends: [isolate's result, Node's]. */
async function both(program: string) {
  return Promise.all([m.run(program), reference.run(program)])
}

/** The process ids Node prints in its warning lines (README: ours are fixed). */
const maskPid = (logs: string[]) => logs.map((line) => line.replace(/^\(node:\d+\)/, '(node:PID)'))

const cases: string[] = [
  // nextTick
  'typeof process.nextTick', '(() => { try { process.nextTick(5) } catch (e) { return e } })()',
  "(async () => { const seen = []; process.nextTick((...a) => seen.push(a), 1, 'two'); process.nextTick(() => seen.push('none')); await new Promise((r) => setTimeout(r, 1)); return seen })()",
  // hrtime, uptime
  '[Array.isArray(process.hrtime()), process.hrtime().length, process.hrtime().every(Number.isInteger), process.hrtime()[1] < 1e9]',
  '(() => { const d = process.hrtime(process.hrtime()); return [d.length, d.every(Number.isInteger), d[0] >= 0, d[1] >= 0 && d[1] < 1e9] })()',
  '(() => { const t = process.hrtime(); const d = process.hrtime([t[0], t[1] + 1]); return [d[0] <= 0, d[1] >= 0 && d[1] < 1e9] })()',
  'process.hrtime(5)', "process.hrtime('x')", 'process.hrtime([1])', 'process.hrtime([1, 2, 3])',
  '[typeof process.hrtime.bigint(), process.hrtime.bigint() <= process.hrtime.bigint(), process.hrtime.bigint() > 0n]',
  '[typeof process.uptime(), process.uptime() >= 0, process.uptime() < 600]',
  // memoryUsage, cpuUsage
  '(() => { const u = process.memoryUsage(); return [Object.keys(u), Object.values(u).every((v) => Number.isInteger(v) && v >= 0), u.heapUsed <= u.heapTotal, u.arrayBuffers <= u.external, u.heapTotal <= u.rss] })()',
  '[typeof process.memoryUsage.rss(), process.memoryUsage.rss() > 0]',
  '(() => { const c = process.cpuUsage(); return [Object.keys(c), Number.isInteger(c.user), Number.isInteger(c.system), c.user >= 0] })()',
  '(() => { const c = process.cpuUsage(process.cpuUsage()); return [Object.keys(c), c.user >= 0, c.system >= 0] })()',
  '(() => { const c = process.threadCpuUsage(); return [Object.keys(c), Number.isInteger(c.user), c.user >= 0] })()',
  "(async () => { let fired = false; const t = setTimeout(() => { fired = true }, 1); process.unref(t); const r = [t.hasRef()]; process.ref(t); r.push(t.hasRef(), process.ref(null), process.unref({})); await new Promise((resolve) => setTimeout(resolve, 5)); return [...r, fired] })()",
  'process.cpuUsage({ user: -1, system: 0 })', "process.cpuUsage({ user: 'x', system: 0 })", 'process.cpuUsage({ user: 0, system: -1 })',
  "process.cpuUsage({ user: 0, system: 'y' })", 'process.cpuUsage(5)',
  // the host's Node line, the machine, the run's own ids
  '[process.version, process.versions.node, typeof process.versions.v8, /^\\d+\\.\\d+\\.\\d+/.test(process.versions.v8), process.arch, process.release.name]',
  "[typeof process.pid, Number.isInteger(process.pid), typeof process.ppid, typeof process.title, typeof process.cwd(), process.cwd().startsWith('/')]",
  "[Object.prototype.toString.call(process), process.constructor.name, typeof process.emitWarning, Array.isArray(process.argv), Array.isArray(process.execArgv), typeof process.env]",
  // events
  "(() => { const seen = []; const f = (...a) => seen.push(['f', ...a]); process.on('x', f); process.once('x', (a) => seen.push(['once', a])); process.prependListener('x', () => seen.push('first')); const r = [process.emit('x', 1, 2), process.emit('x', 3), process.emit('nothing'), process.listenerCount('x'), process.listeners('x').length, process.eventNames().includes('x')]; process.off('x', f); r.push(process.listenerCount('x'), seen); process.removeAllListeners('x'); r.push(process.listenerCount('x'), process.eventNames().includes('x')); return r })()",
  "(() => { try { process.emit('error', new Error('boom')) } catch (e) { return e } })()",
  "(() => { try { process.on('x', 5) } catch (e) { return e } })()",
  "(() => { const f = () => {}; process.once('y', f); const raw = process.rawListeners('y'); const r = [raw.length, raw[0] === f, raw[0].listener === f, process.listeners('y')[0] === f]; raw[0](); return [...r, process.listenerCount('y')] })()",
  "(() => { const seen = []; process.on('newListener', (e) => seen.push(e)); process.on('z', () => {}); process.removeAllListeners('newListener'); process.removeAllListeners('z'); return seen })()",
  '(() => { const r = [process.getMaxListeners(), process.setMaxListeners(20) === process, process.getMaxListeners()]; process.setMaxListeners(10); return r })()',
  '[process.on === process.addListener, process.off === process.removeListener, typeof process.prependOnceListener]',
  // stdout / stderr, as streams
  "[typeof Object.getPrototypeOf(process.stdout).write, typeof process.stdout.end, process.stdout.isTTY, process.stdout.columns, process.stdout.writable, typeof process.stdout.on, typeof process.stderr.once, Object.getPrototypeOf(process.stdout) === Object.getPrototypeOf(process.stderr)]",
  // exitCode
  "(() => { const r = []; for (const v of [3, '4', null, undefined, 0]) { process.exitCode = v; r.push(process.exitCode) } process.exitCode = undefined; return r })()",
  '(() => { try { process.exitCode = 1.5 } catch (e) { return e } })()', "(() => { try { process.exitCode = 'abc' } catch (e) { return e } })()",
  '(() => { try { process.exitCode = true } catch (e) { return e } })()', '(() => { try { process.exitCode = {} } catch (e) { return e } })()',
  "(() => { try { process.exitCode = 'a string longer than twenty-eight characters' } catch (e) { return e } })()",
  "(() => { try { process.exitCode = \"it's\" } catch (e) { return e } })()",
  '(() => { try { process.exitCode = Object.create(null) } catch (e) { return e } })()', '(() => { try { process.exitCode = 10n } catch (e) { return e } })()',
  "(() => { const d = Object.getOwnPropertyDescriptor(process, 'exitCode'); return [typeof d.get, typeof d.set, d.enumerable, d.configurable] })()",
]

describe('each member behaves as Node', () => {
  it(`${cases.length} cases give the reference's results`, async () => {
    // A bigint (hrtime's) differs between any two runs: only its type is compared.
    const body = casesProgram(cases, { bigintValues: false })
    const [here, there] = await both(body)
    expect(here.error?.message).toBeUndefined()
    expect(there.error?.message).toBeUndefined()
    expect(mismatches(cases, there.value as unknown[], here.value as unknown[])).toEqual([])
  })
})

describe('nextTick orders as Node', () => {
  it.each([
    [
      'after the synchronous part: ticks, then promise jobs, each queue drained',
      "const o = []; process.nextTick(() => o.push('tick 1')); Promise.resolve().then(() => { o.push('promise 1'); process.nextTick(() => o.push('tick from promise')); Promise.resolve().then(() => o.push('promise 2')) }); queueMicrotask(() => o.push('microtask')); process.nextTick(() => { o.push('tick 2'); process.nextTick(() => o.push('tick from tick')); Promise.resolve().then(() => o.push('promise from tick')) }); o.push('sync'); await new Promise((r) => setTimeout(r, 5)); return o",
    ],
    [
      'inside a promise job: the jobs queued first, then the ticks',
      "await null; const o = []; process.nextTick(() => o.push('tick')); Promise.resolve().then(() => o.push('promise')); o.push('sync'); await new Promise((r) => setTimeout(r, 5)); return o",
    ],
    [
      'between timer callbacks',
      "const o = []; setTimeout(() => { o.push('t1'); process.nextTick(() => o.push('tick after t1')); Promise.resolve().then(() => o.push('promise after t1')) }, 1); setTimeout(() => o.push('t2'), 1); await new Promise((r) => setTimeout(r, 30)); return o",
    ],
    [
      'between immediates',
      "const o = []; setImmediate(() => { o.push('i1'); process.nextTick(() => o.push('tick after i1')); Promise.resolve().then(() => o.push('promise after i1')) }); setImmediate(() => o.push('i2')); await new Promise((r) => setTimeout(r, 30)); return o",
    ],
    [
      'before timers and immediates',
      "const o = []; setTimeout(() => o.push('timeout'), 0); process.nextTick(() => o.push('tick')); await new Promise((r) => setTimeout(r, 30)); return o",
    ],
    [
      'deep chains through ticks, without a deep stack',
      'let n = 0; await new Promise((r) => { function f() { if (++n === 100000) r(); else process.nextTick(f) } f() }); return n',
    ],
  ])('%s', async (_, program) => {
    const [here, there] = await both(program)
    expect(there.error).toBeUndefined()
    expect(here).toEqual(there)
  })

  it('a throw in a tick fails the run as an uncaught exception, as a throw in a timer callback does', async () => {
    const [here, there] = await both("process.nextTick(() => { throw new Error('in tick') }); await new Promise((r) => setTimeout(r, 20)); return 'after'")
    const timer = await m.run("setTimeout(() => { throw new Error('in tick') }, 0); await new Promise((r) => setTimeout(r, 20)); return 'after'")
    expect(here.error?.kind).toBe(timer.error?.kind)
    expect(here.error?.message.split('\n')[0]).toBe('Error: in tick')
    expect(there.value).toBeUndefined()
  })
})

describe('exit and exitCode as Node', () => {
  it.each([
    ["process.on('exit', (code) => console.log('exit', code, process.exitCode)); process.exitCode = 3; process.exit()"],
    ["process.on('exit', (code) => console.log('exit', code)); process.exit(5)"],
    ["process.once('exit', (code) => { console.log('first', code); process.exit(9) }); process.exit(1)"],
    ['process.exitCode = 2; process.exit(undefined)'],
    ["process.exitCode = '6'; process.exit()"],
    ["process.exitCode = 7; return 'done'"],
    ["process.on('exit', () => console.log('not at completion')); return 'done'"],
  ])('%s', async (program) => {
    const [here, there] = await both(program)
    expect(here).toEqual(there)
  })
})

describe('emitWarning writes Node\'s line', () => {
  it.each([
    [
      'every form, the --trace-warnings hint once, then the event',
      "process.emitWarning('careful'); process.emitWarning('old', 'DeprecationWarning', 'DEP0999'); process.emitWarning('x', { type: 'CustomWarning', code: 'C1', detail: 'more' }); process.emitWarning(new Error('as an error')); process.emitWarning('typed', 'MyWarning'); const seen = []; process.on('warning', (w) => seen.push([w.name, w.message, w.code ?? null])); process.emitWarning('heard'); await new Promise((r) => setTimeout(r, 5)); return seen",
    ],
    [
      'timers warn of the delays Node sets to 1 ms',
      "const seen = []; process.on('warning', (w) => seen.push([w.name, w.message])); for (const delay of [2 ** 31, -1, -2, NaN, 'abc', undefined, null, 0.5, Infinity, '2147483648', 2147483647.5, -Infinity]) setTimeout(() => {}, delay); clearInterval(setInterval(() => {}, 2 ** 32)); await new Promise((r) => setTimeout(r, 5)); return seen",
    ],
    ['a warning that is not a string or Error', 'try { process.emitWarning(5) } catch (e) { return [e.name, e.code, e.message] }'],
    ['a type that is not a string', "try { process.emitWarning('x', 5) } catch (e) { return [e.name, e.code, e.message] }"],
    ['a code that is not a string', "try { process.emitWarning('x', 'T', 5) } catch (e) { return [e.name, e.code, e.message] }"],
  ])('%s', async (_, program) => {
    const [here, there] = await both(program)
    expect(there.error).toBeUndefined()
    expect({ ...here, logs: maskPid(here.logs) }).toEqual({ ...there, logs: maskPid(there.logs) })
  })
})

describe('stdout and stderr, every path into the one ledger', () => {
  it('the prototype write, the instance write and console share one ordered list', async () => {
    const program = `
      const proto = Object.getPrototypeOf(process.stdout)
      console.log('a')
      proto.write.call(process.stdout, 'b')
      process.stderr.write('c', () => console.log('written'))
      Object.getPrototypeOf(process.stderr).write.call(process.stderr, 'd')
      await new Promise((r) => setTimeout(r, 5))
      return 1`
    const [here, there] = await both(program)
    expect(here).toEqual({ logs: ['a', 'b', 'c', 'd', 'written'], value: 1 })
    // The same entries in the reference, whose prototype writes travel its
    // worker's pipe and so arrive in their own time.
    expect([...there.logs].sort()).toEqual([...here.logs].sort())
  })

  it('counts the prototype write against the output cap', async () => {
    const capped = await mount({ maxOutputBytes: 80 })
    const result = await capped.run("const write = (t) => Object.getPrototypeOf(process.stdout).write.call(process.stdout, t); write('a'.repeat(20)); write('b'.repeat(100)); return 1")
    await capped.dispose()
    expect(result.error?.kind).toBe('output-limit')
    expect(result.logs[0]).toBe('a'.repeat(20))
  })
})

describe('process under attack', () => {
  /** After every attack: the same runtime still runs the next program. */
  async function healthy() {
    expect(await tight.run('return [typeof process.nextTick, process.exitCode ?? null, process.listenerCount("exit")]')).toEqual({ logs: [], value: ['function', null, 0] })
  }

  it.each([
    ['a tick that queues itself forever', 'function f() { process.nextTick(f) } f(); await new Promise(() => {})'],
    ['ticks that double every turn', 'function f() { process.nextTick(f); process.nextTick(f) } f(); await new Promise(() => {})'],
    ['ticks that burn CPU', 'process.nextTick(function f() { const t = Date.now(); while (Date.now() - t < 50) {} process.nextTick(f) }); await new Promise(() => {})'],
    ['a tick that recurses until the stack overflows, caught, forever', 'function deep() { deep() } function f() { try { deep() } catch {} process.nextTick(f) } f(); await new Promise(() => {})'],
  ])('%s is stopped', async (_, program) => {
    const result = await tight.run(program)
    expect(['timeout', 'worker-exit']).toContain(result.error?.kind)
    await healthy()
  })

  it('a throw in each of a thousand ticks fails the run with the first', async () => {
    const result = await tight.run("for (let i = 0; i < 1000; i++) process.nextTick(() => { throw new Error('tick ' + i) }); await new Promise((r) => setTimeout(r, 10))")
    expect(result.error?.message.split('\n')[0]).toBe('Error: tick 0')
    await healthy()
  })

  it('replacing process.nextTick, emit and stream writes changes nothing the sandbox does with them', async () => {
    const result = await tight.run(`
      process.nextTick = () => { throw new Error('replaced nextTick') }
      Object.getPrototypeOf(process).emit = () => { throw new Error('replaced emit') }
      process.stdout.write = process.stderr.write = () => { throw new Error('replaced write') }
      console.log('console still logs')
      setTimeout(() => {}, 1)
      process.exitCode = 4
      process.exit()`)
    expect(result).toEqual({ logs: ['console still logs'], error: { kind: 'worker-exit', message: 'worker exited with code 4 before completing' } })
    await healthy()
  })

  it('a warning is still written after the program replaced process.nextTick and String.prototype', async () => {
    const result = await tight.run(`
      process.nextTick = () => { throw new Error('replaced') }
      String.prototype.toString = () => 'x'
      process.emitWarning('still')
      await new Promise((r) => setTimeout(r, 5))
      return 'ok'`)
    expect(result.value).toBe('ok')
    expect(result.logs).toEqual(['(node:1) Warning: still\n(Use `node --trace-warnings ...` to show where the warning was created)\n'])
    await healthy()
  })
})

describe('lazy globals made after the program tampered with built-ins', () => {
  // What the harness's own suite does to the boundary's built-ins, then a
  // first touch of one lazy global (crates/sandbox-ext/js/14_lazy_globals.js) per run.
  const TAMPER = `
    const arrayPrototype = Array.prototype, objectPrototype = Object.prototype, stringPrototype = String.prototype
    Array.isArray = () => false
    arrayPrototype.at = arrayPrototype.includes = arrayPrototype.pop = arrayPrototype.push = () => { throw new Error('mutated array method') }
    Object.defineProperty = Object.getOwnPropertyDescriptor = Object.getPrototypeOf = Object.keys = () => { throw new Error('mutated object method') }
    Object.hasOwn = () => false
    Number.isFinite = Number.isSafeInteger = () => false
    Reflect.apply = Reflect.ownKeys = () => { throw new Error('mutated reflect method') }
    Set.prototype.add = Set.prototype.has = () => { throw new Error('mutated set method') }
    stringPrototype.charCodeAt = stringPrototype.codePointAt = stringPrototype.slice = () => { throw new Error('mutated string method') }
    Function.prototype.toString = () => 'mutated'
    objectPrototype.get = () => undefined
    objectPrototype.constructor = arrayPrototype.constructor = null
    const { Uint8Array: U8 } = globalThis
    globalThis.Array = globalThis.Error = globalThis.Function = globalThis.Number = globalThis.Object = globalThis.Reflect = globalThis.Set = globalThis.String = undefined
  `
  const USES: [string, string][] = [
    ['Buffer', "const b = Buffer.from('aGk=', 'base64'); return JSON.stringify([b.toString('hex'), b.toString(), Buffer.concat([b, Buffer.from('!')]).toString('base64'), b.readUInt16BE(0), Buffer.byteLength('héllo'), Buffer.from('ff', 'hex')[0], Buffer.isBuffer(b)])"],
    ['crypto', "return JSON.stringify([crypto.randomUUID().length, crypto.getRandomValues(new U8(4)).length, new U8(await crypto.subtle.digest('SHA-256', new U8(3)))[0], typeof Crypto, typeof SubtleCrypto])"],
    ['events', "const t = new EventTarget(); let n = 0; t.addEventListener('x', () => n++); t.dispatchEvent(new CustomEvent('x', { detail: 1 })); const c = new AbortController(); c.abort('r'); return JSON.stringify([n, c.signal.aborted, c.signal.reason, AbortSignal.abort().reason.name, new Event('e').type])"],
    ['navigator', 'return JSON.stringify([typeof navigator.hardwareConcurrency, navigator.userAgent, typeof Navigator])'],
    ['performance', "performance.mark('a'); performance.mark('b'); return JSON.stringify([performance.measure('m', 'a', 'b').name, performance.getEntriesByType('mark').length, typeof performance.now(), typeof PerformanceEntry, typeof PerformanceMark, typeof PerformanceMeasure, typeof Performance])"],
    ['DOMException', "const e = new DOMException('m', 'AbortError'); const c = new DOMException('n', { name: 'DataCloneError', cause: 1 }); return JSON.stringify([e.name, e.message, e.code, e instanceof DOMException, DOMException.ABORT_ERR, c.code, c.cause])"],
    ['TextEncoder, TextDecoder, atob and btoa', "const b = new TextEncoder().encode('h\u00e9llo \ud83d\ude00'); const into = new TextEncoder().encodeInto('ab\u00e9', new U8(3)); return JSON.stringify([[...b], new TextDecoder().decode(b), new TextDecoder('latin1').decode(new U8([104, 233])), into.read, into.written, btoa('hi!'), atob(' aGk= ')])"],
    ['URL and URLSearchParams', "const u = new URL('/a b?x=1#f', 'https://user@example.test:8080'); u.searchParams.append('y', '\u00e9 &'); u.port = '443'; return JSON.stringify([u.href, u.origin, u.host, u.pathname, u.search, [...u.searchParams.keys()], URL.canParse('nope'), new URLSearchParams('a=1&b=2&a=3').getAll('a'), new URLSearchParams({ k: 'v w' }).toString()])"],
    // Setters on Object.prototype for names process has: Node's was made before any program ran.
    ['process', "let hit = 0; const proto = ({}).__proto__; for (const name of ['ppid', 'execArgv', 'bigint', 'rss']) proto.__defineSetter__(name, () => { hit++ }); let seen; process.on('x', (v) => { seen = v }); process.emit('x', 7); return JSON.stringify([hit, seen, process.listenerCount('x'), typeof process.ppid, typeof process.execArgv.length, typeof process.hrtime.bigint(), typeof process.memoryUsage.rss(), process.exitCode, typeof process.nextTick])"],
    ['structuredClone', "const v = structuredClone({ a: [1, { b: 2n }], d: new Date(0), m: new Map([[1, { n: 2 }]]), u: new U8([7]) }); let error; try { structuredClone(() => 1) } catch (e) { error = [e.name, e.code] } return JSON.stringify([v.a[0], typeof v.a[1].b, v.d.getTime(), v.m.get(1).n, v.u[0], error])"],
  ]

  // The oracle is the same use in a Node worker thread, untampered: Node
  // made its own before any program ran, and its worker's internals (async
  // hooks, messaging) do not survive this tampering.
  it.each(USES)('%s works as in Node', async (_, use) => {
    const [here, there] = await Promise.all([m.run(TAMPER + use), inNodeWorker(`const { Uint8Array: U8 } = globalThis\n${use}`)])
    expect(there).not.toMatch(/^threw/)
    expect(here).toEqual({ logs: [], value: there })
    expect((await m.run('return [typeof Function, typeof Object.keys, "ab".slice(1)]')).value).toEqual(['function', 'function', 'b'])
  })

  it("Buffer's methods keep working after the program replaced the built-ins they use, as Node's do", async () => {
    // Node's own worker does not survive this much (its messaging uses
    // these built-ins): the oracle is the same uses, untampered, in Node.
    const uses = "const b = Buffer.from('aGk=', 'base64'); return JSON.stringify([b.toString('hex'), b.toString('base64'), Buffer.from('ff00', 'hex').readUInt16BE(0), Buffer.from([1, 2, 3]).toJSON(), Buffer.alloc(3, 'x').toString('latin1'), Buffer.from('héllo', 'latin1').toString('ascii'), Buffer.from([0, 0, 128, 63]).readFloatLE(0), Buffer.from('abc').toString('ucs2'), Buffer.from('x').equals(Buffer.from('x'))])"
    const hostile = `
      const typed = Object.getPrototypeOf(Uint8Array.prototype)
      Array.prototype[Symbol.iterator] = function* () { throw new Error('mutated iterator') }
      Math.pow = Math.floor = Math.min = () => { throw new Error('mutated math') }
      String.fromCharCode = () => { throw new Error('mutated fromCharCode') }
      String.prototype.toLowerCase = String.prototype.charCodeAt = () => { throw new Error('mutated string method') }
      Uint8Array.prototype.set = typed.set = typed.subarray = () => { throw new Error('mutated typed array method') }
      Function.prototype.call = Function.prototype.apply = () => { throw new Error('mutated call') }
      Object.setPrototypeOf = Object.defineProperty = () => { throw new Error('mutated object method') }
      Object.prototype.get = () => undefined
    `
    const [here, there] = await Promise.all([m.run(hostile + uses), reference.run(uses)])
    expect(there.error).toBeUndefined()
    expect(here).toEqual(there)
  })
  it('a first touch at the end of the stack fails as any call there does, and the global works once there is stack again', async () => {
    // Each lazy module is compiled on first touch (from the host's code
    // cache after its first isolate): at the stack's end that compile
    // throws V8's RangeError, which must leave nothing half made.
    const program = `
      let refused = 0
      function deeper() {
        try {
          return deeper()
        } catch {
          try {
            return typeof URL
          } catch (error) {
            if (!(error instanceof RangeError)) throw error
            refused++
            throw error
          }
        }
      }
      return [deeper(), refused > 0, typeof URL, new URL('/b?c=1', 'https://a.test').href, new TextEncoder().encode('é').length]
    `
    for (let i = 0; i < 2; i++) {
      expect(await m.run(program)).toEqual({ logs: [], value: ['function', true, 'function', 'https://a.test/b?c=1', 2] })
    }
  })
})

describe("the sandbox's own lists after the program spoiled Array.prototype", () => {
  // Array.prototype.slice / splice / map make their result through
  // `constructor[Symbol.species]`, and destructuring and spreading an array
  // run its iterator: the sandbox's own lists must do neither. (Node's own
  // performance.clearMarks fails on a null constructor, hence not here.)
  const NO_CONSTRUCTOR = 'Array.prototype.constructor = null\n'
  const NO_ITERATOR = "Array.prototype[Symbol.iterator] = function* () { throw new Error('iterated') }\n"
  it.each([
    ['Atomics.notify', NO_CONSTRUCTOR, "const ia = new Int32Array(new SharedArrayBuffer(16)); const w = Atomics.waitAsync(ia, 0, 0); const n = Atomics.notify(ia, 0, 1); return JSON.stringify([n, await w.value])"],
    ['process events', NO_CONSTRUCTOR, "let seen; process.on('x', (v) => { seen = v }); process.once('x', () => {}); process.emit('x', 7); return JSON.stringify([seen, process.listenerCount('x'), process.listeners('x').length, process.rawListeners('x').length])"],
    ['TextEncoder.encodeInto', NO_ITERATOR, "const r = new TextEncoder().encodeInto('ab\\u00e9', new Uint8Array(3)); return JSON.stringify([r.read, r.written])"],
    ['console.timeLog with data', NO_ITERATOR, "console.time('t'); console.timeLog('t', 'more', 1); return 'logged'"],
  ])('%s works as in Node', async (_, spoil, use) => {
    const [here, there] = await Promise.all([m.run(spoil + use), inNodeWorker(spoil + use)])
    expect(there).not.toMatch(/^threw/)
    expect(here.error).toBeUndefined()
    expect(here.value).toBe(there)
    // timeLog's line carries a duration: its shape, not its text.
    expect(here.logs).toEqual(use.includes('timeLog') ? [expect.stringMatching(/^t: \d+(\.\d+)?m?s more 1$/)] : [])
  })
})

describe("the README's process tables", () => {
  /** The backticked names that open each row of the README's tables under `### \`process\``. */
  function tables(): [string[], string[]] {
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8')
    const section = readme.slice(readme.indexOf('### `process`'), readme.indexOf('### Absent on purpose'))
    const [present, absent] = section.split('Absent on purpose, each')
    const names = (text: string) =>
      text
        .split('\n')
        .filter((line) => line.startsWith('| `'))
        .flatMap((row) => [...row.split('|')[1].matchAll(/`([A-Za-z_]\w*)/g)].map((match) => match[1]))
    return [names(present), names(absent)]
  }

  it("cover every member of a Node worker's process: present here, or absent with a reason", async () => {
    const [present, absent] = tables()
    const node = await fromNodeWorker<string[]>(
      'const names = new Set(); for (let o = process; o && o !== Object.prototype; o = Object.getPrototypeOf(o)) for (const k of Object.getOwnPropertyNames(o)) names.add(k); parentPort.postMessage([...names])',
    )
    const result = await m.run(`return ${JSON.stringify([...node, ...present, ...absent])}.map((name) => [name, name in process])`)
    const here = new Map(result.value as [string, boolean][])
    expect(absent.length).toBeGreaterThan(40)
    expect(node.filter((name) => name !== 'constructor' && !here.get(name) && !absent.includes(name))).toEqual([])
    expect(absent.filter((name) => here.get(name))).toEqual([])
    expect(present.filter((name) => !here.get(name))).toEqual([])
  })
})
