/**
 * The program's world, with Node as the oracle: every case is the same
 * async source run in this Node process (Node's own globals) and as a
 * program in the isolate, its result described the same way on both sides;
 * console rendering compared with util.inspect; and the list of globals
 * compared with a Node worker thread's, the README's absent-on-purpose
 * table being the only allowed difference.
 */
import { readFileSync } from 'node:fs'
import { inspect } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { casesProgram, fromNodeWorker, inNodeWorker, mismatches, mount, type Mounted } from './helpers.js'

const cases: string[] = [
  // TextDecoder: the Latin-1 labels name windows-1252
  ...['windows-1252', 'latin1', 'ascii', 'iso-8859-1'].map(
    (label) => `[...new TextDecoder('${label}').decode(Uint8Array.from({ length: 256 }, (_, i) => i))].map((c) => c.codePointAt(0))`,
  ),
  // global, navigator
  '[typeof global, global === globalThis, Object.getOwnPropertyDescriptor(globalThis, "global").enumerable]',
  '[typeof navigator, navigator.hardwareConcurrency, navigator.language, navigator.languages, navigator.userAgent, navigator.platform]',
  'Object.prototype.toString.call(navigator)', '(() => { try { new Navigator() } catch (e) { return e } })()',
  // setImmediate / clearImmediate
  "(async () => { const order = []; setImmediate(() => order.push('a')); setImmediate((x, y) => order.push(x + y), 'b', 'c'); queueMicrotask(() => order.push('micro')); order.push('sync'); await new Promise((r) => setImmediate(r)); return order })()",
  "(async () => { const order = []; const i = setImmediate(() => order.push('cleared')); clearImmediate(i); setImmediate(() => order.push('kept')); await new Promise((r) => setImmediate(r)); return [order, i._destroyed, i._onImmediate] })()",
  '(() => { const i = setImmediate(() => {}); const shape = [Object.keys(i), i.hasRef(), i.unref() === i, i.hasRef(), i.ref().hasRef(), typeof i[Symbol.dispose]]; clearImmediate(i); return shape })()',
  "(async () => { let seen; const i = setImmediate((...a) => { seen = a }, 1, 'two'); await new Promise((r) => setImmediate(r)); return [seen, i._argv, i._destroyed] })()",
  "(() => { try { setImmediate('nope') } catch (e) { return e } })()", 'clearImmediate(undefined)', 'clearImmediate({})',
  // Event / CustomEvent
  "(() => { const e = new Event('x'); return [e.type, e.bubbles, e.cancelable, e.composed, e.defaultPrevented, e.eventPhase, e.isTrusted, e.target, e.currentTarget, e.returnValue, e.cancelBubble, e.composedPath(), typeof e.timeStamp, Object.prototype.toString.call(e)] })()",
  "(() => { const e = new Event('x', { cancelable: true, bubbles: true }); e.preventDefault(); return [e.defaultPrevented, e.returnValue, e.bubbles] })()",
  "(() => { const e = new Event('x'); e.preventDefault(); return e.defaultPrevented })()",
  '(() => { try { new Event() } catch (e) { return e } })()', "(() => { try { new Event('x', 5) } catch (e) { return e } })()",
  "[Event.NONE, Event.CAPTURING_PHASE, Event.AT_TARGET, Event.BUBBLING_PHASE, new Event('x').AT_TARGET]",
  "(() => { const e = new CustomEvent('c', { detail: { n: 1 } }); return [e.detail, new CustomEvent('d').detail, e instanceof Event, Object.prototype.toString.call(e)] })()",
  "(() => { const e = new Event('a'); e.initEvent('b', true, true); return [e.type, e.bubbles, e.cancelable] })()",
  // EventTarget
  "(() => { const t = new EventTarget(); const seen = []; const f = (e) => seen.push([e.type, e.target === t, e.currentTarget === t, e.eventPhase]); t.addEventListener('x', f); t.addEventListener('x', f); t.dispatchEvent(new Event('x')); t.removeEventListener('x', f); t.dispatchEvent(new Event('x')); return seen })()",
  "(() => { const t = new EventTarget(); const seen = []; t.addEventListener('x', () => seen.push('once'), { once: true }); t.dispatchEvent(new Event('x')); t.dispatchEvent(new Event('x')); return seen })()",
  "(() => { const t = new EventTarget(); const seen = []; t.addEventListener('x', () => seen.push(1), true); t.addEventListener('x', () => seen.push(2)); t.removeEventListener('x', () => {}, true); t.dispatchEvent(new Event('x')); return seen })()",
  "(() => { const t = new EventTarget(); t.addEventListener('x', (e) => e.preventDefault(), { passive: true }); const e = new Event('x', { cancelable: true }); return [t.dispatchEvent(e), e.defaultPrevented] })()",
  "(() => { const t = new EventTarget(); t.addEventListener('x', (e) => e.preventDefault()); return t.dispatchEvent(new Event('x', { cancelable: true })) })()",
  "(() => { const t = new EventTarget(); const seen = []; t.addEventListener('x', (e) => { seen.push(1); e.stopImmediatePropagation() }); t.addEventListener('x', () => seen.push(2)); t.dispatchEvent(new Event('x')); return seen })()",
  "(() => { const t = new EventTarget(); const seen = []; const o = { handleEvent(e) { seen.push([this === o, e.type]) } }; t.addEventListener('x', o); t.dispatchEvent(new Event('x')); return seen })()",
  "(() => { const t = new EventTarget(); const seen = []; t.addEventListener('x', () => { seen.push('a'); t.addEventListener('x', () => seen.push('late')) }); t.dispatchEvent(new Event('x')); t.dispatchEvent(new Event('x')); return seen })()",
  "(() => { const t = new EventTarget(); const seen = []; const b = () => seen.push('b'); t.addEventListener('x', () => { seen.push('a'); t.removeEventListener('x', b) }); t.addEventListener('x', b); t.dispatchEvent(new Event('x')); return seen })()",
  "(() => { const t = new EventTarget(); const c = new AbortController(); const seen = []; t.addEventListener('x', () => seen.push('x'), { signal: c.signal }); t.dispatchEvent(new Event('x')); c.abort(); t.dispatchEvent(new Event('x')); t.addEventListener('x', () => seen.push('never'), { signal: c.signal }); t.dispatchEvent(new Event('x')); return seen })()",
  "(() => { const t = new EventTarget(); const e = new Event('x'); let inner; t.addEventListener('x', () => { try { t.dispatchEvent(e) } catch (err) { inner = err } }); t.dispatchEvent(e); return [inner, e.target === t, e.currentTarget, e.eventPhase] })()",
  "(() => { try { new EventTarget().dispatchEvent({ type: 'x' }) } catch (e) { return e } })()",
  "(() => { try { new EventTarget().addEventListener('x') } catch (e) { return e } })()",
  "(() => { try { new EventTarget().addEventListener('x', 5) } catch (e) { return e } })()",
  "(() => { const t = new EventTarget(); t.addEventListener('x', null); return t.dispatchEvent(new Event('x')) })()",
  // AbortController / AbortSignal
  "(() => { const c = new AbortController(); const s = c.signal; return [s.aborted, s.reason, s.onabort, c.signal === s, Object.prototype.toString.call(s), s instanceof EventTarget] })()",
  "(() => { const c = new AbortController(); const seen = []; c.signal.addEventListener('abort', (e) => seen.push([e.type, e.isTrusted, e.target === c.signal])); c.signal.onabort = () => seen.push('onabort'); c.abort('why'); c.abort('again'); return [c.signal.aborted, c.signal.reason, seen] })()",
  '(() => { const c = new AbortController(); c.abort(); return c.signal.reason })()', '(() => { const c = new AbortController(); c.abort(); return [c.signal.reason.code, c.signal.reason instanceof DOMException] })()',
  "(() => { try { AbortSignal.abort('r').throwIfAborted() } catch (e) { return ['thrown', e] } })()", '(() => { try { AbortSignal.abort().throwIfAborted() } catch (e) { return e } })()',
  'new AbortController().signal.throwIfAborted()', '(() => { try { new AbortSignal() } catch (e) { return e } })()',
  '[AbortSignal.abort().aborted, AbortSignal.abort(42).reason]',
  "(async () => { const s = AbortSignal.timeout(5); const before = s.aborted; await new Promise((r) => s.addEventListener('abort', r)); return [before, s.aborted, s.reason] })()",
  "(() => { try { AbortSignal.timeout('5') } catch (e) { return e } })()", '(() => { try { AbortSignal.timeout(1.5) } catch (e) { return e } })()', '(() => { try { AbortSignal.timeout(-1) } catch (e) { return e } })()',
  "(async () => { const a = new AbortController(); const b = new AbortController(); const s = AbortSignal.any([a.signal, b.signal]); const before = s.aborted; b.abort('b first'); a.abort('a later'); return [before, s.aborted, s.reason] })()",
  "(() => { const s = AbortSignal.any([new AbortController().signal, AbortSignal.abort('already')]); return [s.aborted, s.reason] })()",
  '(() => { try { AbortSignal.any([1]) } catch (e) { return e } })()', '(() => { try { AbortSignal.any(5) } catch (e) { return e } })()',
  "(async () => { const s = AbortSignal.any([AbortSignal.timeout(5)]); await new Promise((r) => { s.onabort = r }); return s.reason })()",
  // performance
  "(() => { const m = performance.mark('a', { detail: { k: [1] } }); return [m.name, m.entryType, m.duration, m.detail, typeof m.startTime, m instanceof PerformanceEntry, Object.prototype.toString.call(m), Object.keys(m.toJSON())] })()",
  "(() => { performance.mark('s'); performance.mark('e'); const m = performance.measure('s-e', 's', 'e'); return [m.entryType, m.duration >= 0, m.detail, performance.getEntriesByName('s-e').length, performance.getEntriesByType('mark').map((x) => x.name), performance.getEntries().map((x) => x.entryType)] })()",
  "(() => { performance.mark('q'); performance.clearMarks('q'); performance.mark('r'); performance.measure('m', 'r'); performance.clearMeasures(); return [performance.getEntriesByType('mark').map((x) => x.name).includes('q'), performance.getEntriesByType('measure').length] })()",
  "(() => { try { performance.measure('x', 'no such mark') } catch (e) { return e } })()", '(() => { try { performance.mark() } catch (e) { return e } })()',
  "(() => { const m = performance.measure('d', { start: 1, duration: 5 }); return [m.startTime, m.duration] })()",
  '[typeof performance.timeOrigin, performance.timeOrigin === performance.timeOrigin, Math.abs(performance.timeOrigin + performance.now() - Date.now()) < 1000, Object.prototype.toString.call(performance)]',
  '(() => { try { new Performance() } catch (e) { return e } })()', "(() => { try { new PerformanceEntry() } catch (e) { return e } })()",
  "(() => { const m = new PerformanceMark('free', { startTime: 3 }); return [m.startTime, performance.getEntriesByName('free').length] })()",
  // Atomics.waitAsync with a timeout settles on its own, as in Node
  '(async () => { const i = new Int32Array(new SharedArrayBuffer(4)); const r = Atomics.waitAsync(i, 0, 0, 10); return [r.async, await r.value] })()',
  '(async () => { const i = new Int32Array(new SharedArrayBuffer(4)); const r = Atomics.waitAsync(i, 0, 0, 60000); setTimeout(() => Atomics.notify(i, 0), 5); return [r.async, await r.value] })()',
  '(() => { const i = new Int32Array(new SharedArrayBuffer(4)); return [Atomics.waitAsync(i, 0, 1, 10), Atomics.waitAsync(i, 0, 0, 0)] })()',
  // The run's own waiters (crates/sandbox-ext/js/18_atomics_wait.js): notify's counts, who it
  // wakes first, a woken waiter's timeout gone, elements apart, BigInt64Array
  '(() => { const i = new Int32Array(new SharedArrayBuffer(16)); Atomics.waitAsync(i, 1, 0, 50); Atomics.waitAsync(i, 1, 0, 50); Atomics.waitAsync(i, 2, 0, 50); return [Atomics.notify(i, 1, 1), Atomics.notify(i, 1), Atomics.notify(i, 2, 0), Atomics.notify(i, 3), Atomics.notify(new Int32Array(4), 0), Atomics.notify(i, 2, -1), Atomics.notify(i, 2, 2.9)] })()',
  "(async () => { const i = new Int32Array(new SharedArrayBuffer(8)); const a = Atomics.waitAsync(i, 0, 0, 30), b = Atomics.waitAsync(i, 0, 0); const n = Atomics.notify(i, 0, 1); const order = []; a.value.then((v) => order.push('a ' + v)); queueMicrotask(() => order.push('micro')); await a.value; const late = await Promise.race([b.value, new Promise((r) => setTimeout(() => r('pending'), 60))]); return [n, order, late, Atomics.notify(i, 0), await b.value] })()",
  "(async () => { const i = new BigInt64Array(new SharedArrayBuffer(16)); const r = Atomics.waitAsync(i, 1, 0n, 1000); return [r.async, Atomics.notify(i, 0), Atomics.notify(i, 1), await r.value, Atomics.waitAsync(i, 1, 1n), Atomics.waitAsync(i, 1, 0n, 0)] })()",
  '(async () => { const i = new Int32Array(new SharedArrayBuffer(8)); const r = Atomics.waitAsync(i.subarray(1), 0, 0, 20); return [Atomics.notify(i, 0), await r.value, Atomics.waitAsync(i, "1", 0, NaN).async, Atomics.notify(i, 1.7)] })()',
  '(() => { const i = new Int32Array(new SharedArrayBuffer(8)); let n = 0; const index = { valueOf() { n++; return 1 } }; const r = Atomics.waitAsync(i, index, 0, 0); return [r, n, Atomics.notify(i, index), n] })()',
  "(() => { const out = []; for (const f of [() => Atomics.waitAsync(new Int32Array(4), 0, 0), () => Atomics.waitAsync(new Float64Array(new SharedArrayBuffer(8)), 0, 0), () => Atomics.waitAsync(new Int32Array(new SharedArrayBuffer(4)), 5, 0), () => Atomics.notify(new Int32Array(new SharedArrayBuffer(4)), 9), () => Atomics.waitAsync(new BigInt64Array(new SharedArrayBuffer(8)), 0, 1), () => Atomics.notify(new Int32Array(new SharedArrayBuffer(4)), 0, 1n), () => Atomics.waitAsync(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1n), () => Atomics.notify({}, 0)]) { try { out.push(f()) } catch (e) { out.push(e.constructor.name + ': ' + e.message) } } return out })()",
  '[Atomics.waitAsync.name, Atomics.waitAsync.length, String(Atomics.waitAsync), Atomics.notify.name, Atomics.notify.length, String(Atomics.notify), Object.getOwnPropertyDescriptor(Atomics, "waitAsync").enumerable]',
  // crypto.subtle.digest
  "crypto.subtle.digest('SHA-256', new TextEncoder().encode('abc'))", "crypto.subtle.digest('SHA-1', new TextEncoder().encode(''))",
  "crypto.subtle.digest({ name: 'SHA-384' }, new TextEncoder().encode('The quick brown fox'))", "crypto.subtle.digest('sha-512', new Uint8Array(1000).fill(7))",
  "crypto.subtle.digest('SHA-256', new TextEncoder().encode('abc').buffer)", "crypto.subtle.digest('SHA-256', new DataView(new Uint8Array([1, 2, 3, 4]).buffer, 1, 2))",
  "crypto.subtle.digest('SHA-256', new Uint16Array([1, 2]))", "crypto.subtle.digest('SHA-256', Buffer.from('hi'))",
  "crypto.subtle.digest('MD5', new Uint8Array(1)).catch((e) => ['rejected', e])",
  "[typeof crypto.subtle, Object.prototype.toString.call(crypto.subtle), Object.prototype.toString.call(crypto), crypto.subtle instanceof SubtleCrypto, crypto instanceof Crypto]",
  '(() => { try { new SubtleCrypto() } catch (e) { return e } })()',
]

let m: Mounted
beforeAll(async () => {
  m = await mount({})
})
afterAll(() => m.dispose())

describe('each global behaves as Node', () => {
  it(`${cases.length} cases give Node's results`, async () => {
    const body = casesProgram(cases)
    const result = await m.run(body)
    expect(result.error?.message).toBeUndefined()
    const AsyncFunction = (async () => {}).constructor as new (body: string) => () => Promise<unknown[]>
    const node = await new AsyncFunction(body)()
    expect(mismatches(cases, node, result.value as unknown[])).toEqual([])
  })

  it("crypto's methods taken off it refuse, as a Node worker's do", async () => {
    // Node's main thread differs here (its crypto global is made another
    // way): the worker is the reference's world.
    const program = `const out = []; const t = (f) => { try { out.push(['ok', String(f())]) } catch (e) { out.push([e.name, e.code ?? null, e.message, String(e)]) } }
const u = new Uint8Array(2); const { randomUUID, getRandomValues } = crypto
t(() => randomUUID().length); t(() => getRandomValues(u).length); t(() => crypto.getRandomValues()); t(() => crypto.getRandomValues.call({}, u)); t(() => crypto.randomUUID.call(Object.create(Crypto.prototype)))
t(() => crypto.getRandomValues.call({}, 5)); t(() => crypto.getRandomValues(u).length); t(() => crypto.randomUUID().length)
return JSON.stringify(out)`
    const [result, node] = await Promise.all([m.run(program), inNodeWorker(program)])
    expect(result).toEqual({ logs: [], value: node })
  })

  it("subtle.digest's and performance's argument errors are a Node worker's", async () => {
    const program = `const out = []
for (const f of [() => crypto.subtle.digest('SHA-256'), () => crypto.subtle.digest('SHA-256', 'str'), () => crypto.subtle.digest({}, new Uint8Array(1)), () => crypto.subtle.digest('MD5', new Uint8Array(1)), () => crypto.subtle.digest({ name: 'sha-1' }, new Uint8Array(1))]) { try { out.push(['ok', (await f()).byteLength]) } catch (e) { out.push([e.name, e.code ?? null, e.message, String(e)]) } }
performance.mark('a')
for (const f of [() => performance.measure('m', { start: 0, end: 1, duration: 1 }), () => performance.measure('m', { duration: 1 }), () => performance.measure('m', { start: 0 }, 'a'), () => performance.measure('m', { duration: 1 }, 'a'), () => performance.mark('x', { startTime: -1 }), () => performance.mark('x', { startTime: '1' }), () => performance.measure('m', { start: -1 }), () => performance.measure('m', 'nope')]) { try { out.push(['ok', f().name]) } catch (e) { out.push([e.name, e.code ?? null, e.message, String(e)]) } }
return JSON.stringify(out)`
    const [result, node] = await Promise.all([m.run(program), inNodeWorker(program)])
    expect(result).toEqual({ logs: [], value: node })
  })

  it('a throw inside an event listener fails the run, as one inside a timer callback does', async () => {
    const listener = await m.run("const t = new EventTarget(); t.addEventListener('x', () => { throw new Error('in listener') }); t.dispatchEvent(new Event('x')); await new Promise((r) => setTimeout(r, 10)); return 'after'")
    const timer = await m.run("setTimeout(() => { throw new Error('in listener') }, 0); await new Promise((r) => setTimeout(r, 10)); return 'after'")
    expect(listener.error?.kind).toBe(timer.error?.kind)
    expect(listener.error?.message).toMatch(/^Error: in listener\n/)
  })
})

describe('console renders them as Node does', () => {
  // The numbers that differ between any two runs (clocks, async ids) are
  // masked on both sides; everything else must be equal.
  const mask = (text: string) =>
    text
      .replace(/(timeStamp|startTime|duration): [\d.e-]+/g, '$1: <n>')
      .replace(/(Symbol\((?:asyncId|triggerId)\)\]?): \d+/g, '$1: <n>')
  const OPTIONS = { depth: 4, maxArrayLength: 100, maxStringLength: 10000 }
  const values = [
    "new Event('x')", "new CustomEvent('c', { detail: 1 })", 'new EventTarget()', 'new AbortController()', 'new AbortController().signal',
    "AbortSignal.abort('r')", 'navigator', "performance.mark('m')", "performance.mark('d', { detail: { a: [1] } })",
    "performance.measure('ms')", '{ e: new Event("x"), s: AbortSignal.abort(), list: [new EventTarget()] }',
    '{ deep: { deeper: { deepest: { event: new Event("x"), signal: new AbortController().signal } } } }',
    'setImmediate(() => {})', "setImmediate((a) => a, 'arg')", '[setImmediate(function named() {})]',
  ]
  it(`${values.length} values render like util.inspect`, async () => {
    const result = await m.run(values.map((source) => `console.log(${source})`).join('\n'))
    expect(result.error).toBeUndefined()
    const AsyncFunction = (async () => {}).constructor as new (...args: string[]) => (...args: unknown[]) => Promise<string[]>
    // Each rendered as soon as it is made, as the program logs them (pending
    // Immediates are linked to each other, and change once they run).
    const node = await new AsyncFunction(
      'inspect',
      'OPTIONS',
      `const made = [], text = []\n${values.map((source) => `made.push(${source}); text.push(inspect(made.at(-1), OPTIONS))`).join('\n')}\n` +
        'for (const v of made) if (v && v._idleNext !== undefined) clearImmediate(v)\nreturn text',
    )(inspect, OPTIONS)
    const mismatches = values.flatMap((source, i) => {
      const expected = mask(node[i])
      const actual = mask(result.logs[i] as string)
      return expected === actual ? [] : [`${source}\n  node:    ${JSON.stringify(expected)}\n  isolate: ${JSON.stringify(actual)}`]
    })
    expect(mismatches).toEqual([])
  })
})

describe('globals made on first touch', () => {
  // The lazy globals (crates/sandbox-ext/js/14_lazy_globals.js) are compiled after the program
  // started: a program that replaced built-ins and globals first must still
  // get them working, as Node's (which loads its own lazily too) are. The
  // same program runs in a Node worker thread, whose realm it may spoil.
  const TAMPER = `
    globalThis.Function = function () { throw new Error('Function used') }
    globalThis.Symbol = undefined
    globalThis.Reflect = undefined
    delete globalThis.DOMException
    Object.prototype.polluted = 'yes'
    Array.prototype.push = function () { throw new Error('push used') }
  `
  const WORLD = `
    Object.defineProperty = () => { throw new Error('defineProperty used') }
    const out = []
    const target = new EventTarget()
    let seen = 0
    target.addEventListener('x', () => { seen++ })
    target.dispatchEvent(new CustomEvent('x', { detail: 1 }))
    out[out.length] = seen
    const reason = AbortSignal.abort().reason
    out[out.length] = [reason.name, reason.message, reason instanceof Error]
    const controller = new AbortController()
    controller.abort()
    out[out.length] = controller.signal.reason.name
    performance.mark('a')
    performance.mark('b')
    out[out.length] = [performance.measure('m', 'a', 'b').name, performance.getEntriesByType('mark').length]
    out[out.length] = [typeof navigator.hardwareConcurrency, navigator.userAgent]
    out[out.length] = crypto.randomUUID().length
    out[out.length] = Array.from(new Uint8Array(await crypto.subtle.digest('SHA-256', new Uint8Array(3))).slice(0, 4))
    out[out.length] = [Object.prototype.toString.call(new Event('e')), Object.prototype.toString.call(crypto)]
    return JSON.stringify(out)
  `
  // Buffer is the \`buffer\` package, which reads built-in methods such as
  // Object.defineProperty as they are when it runs (README, "Buffer").
  const BUFFER = `return JSON.stringify([Array.from(Buffer.from('aGk=', 'base64')), Buffer.concat([Buffer.from('a'), Buffer.from('b')]).toString()])`

  it.each([
    ['events, AbortSignal, performance, navigator and crypto', WORLD, /^\[1,/],
    ['Buffer', BUFFER, /^\[\[104,105\],"ab"\]$/],
  ])('%s work as in Node after the program tampered with globals and built-ins', async (_, program, shape) => {
    const inNode = await inNodeWorker(TAMPER + program)
    expect(inNode).toMatch(shape)
    const result = await m.run(TAMPER + program)
    expect(result.error).toBeUndefined()
    expect(result.value).toBe(inNode)
    expect((await m.run('return [typeof Function, typeof DOMException]')).value).toEqual(['function', 'function'])
  })
})

describe('the global surface', () => {
  /** Every backticked name in the README's absent-on-purpose table. */
  function absentOnPurpose(): string[] {
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8')
    const section = readme.slice(readme.indexOf('### Absent on purpose'), readme.indexOf('\n## ', readme.indexOf('### Absent on purpose')))
    const rows = section.split('\n').filter((line) => line.startsWith('| `'))
    return rows.flatMap((row) => [...row.split('|')[1].matchAll(/`([^`]+)`/g)].map((match) => match[1]))
  }
  /** The engine's own globals that Node 22's older engine lacks. */
  const NEWER_ENGINE = ['AsyncDisposableStack', 'DisposableStack', 'Float16Array', 'SuppressedError']

  it("differs from a Node worker thread's only by the README's absent-on-purpose list", async () => {
    const names = await fromNodeWorker<string[]>('parentPort.postMessage(Object.getOwnPropertyNames(globalThis))')
    // An eval'd worker also gets the CommonJS wrapper's names as globals;
    // a program (like a worker started from a file) has none of them. And
    // `gc` is there only because the suite runs Node with --expose-gc.
    const notGlobals = ['require', 'module', 'exports', '__filename', '__dirname', 'gc']
    const nodeGlobals = new Set(names.filter((name) => !notGlobals.includes(name)))
    const result = await m.run('return Object.getOwnPropertyNames(globalThis)')
    const here = new Set(result.value as string[])
    const absent = absentOnPurpose()
    expect(absent.length).toBeGreaterThan(30)
    expect([...nodeGlobals].filter((name) => !here.has(name) && !absent.includes(name))).toEqual([])
    expect(absent.filter((name) => here.has(name))).toEqual([])
    expect([...here].filter((name) => !nodeGlobals.has(name) && !NEWER_ENGINE.includes(name))).toEqual([])
  })

  it("enumerates the same globals as a Node worker thread, but for the absent-on-purpose list", async () => {
    const names = await fromNodeWorker<string[]>('parentPort.postMessage(Object.keys(globalThis))')
    const notGlobals = ['require', 'module', 'exports', '__filename', '__dirname', 'gc']
    const absent = absentOnPurpose()
    const nodeKeys = names.filter((name) => !notGlobals.includes(name) && !absent.includes(name)).sort()
    // Before and after the program's first touch of the lazy globals
    // (crates/sandbox-ext/js/14_lazy_globals.js), which replace their accessors by values.
    const result = await m.run('const before = Object.keys(globalThis); void [performance, crypto, navigator]; return [before, Object.keys(globalThis)]')
    const [before, after] = result.value as [string[], string[]]
    expect(before.sort()).toEqual(nodeKeys)
    expect(after.sort()).toEqual(nodeKeys)
  })

  it('feature detection of what is absent works', async () => {
    const result = await m.run("return [typeof fetch, typeof WebAssembly, typeof ReadableStream, typeof require, 'fetch' in globalThis]")
    expect(result.value).toEqual(['undefined', 'undefined', 'undefined', 'undefined', false])
  })
})
