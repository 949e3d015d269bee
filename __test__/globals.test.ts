/**
 * The program's world beyond console: each snippet runs as an async
 * function body both in this Node process and in the isolate, and the
 * values must be equal (Node's behaviour is the oracle).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mount, type Mounted } from './helpers.js'

let m: Mounted
beforeAll(async () => {
  // Below the test timeout, so a stuck run still fails its test with a
  // result; far above what any run here needs on a loaded machine.
  m = await mount({ maxWallMs: 120_000 })
})
afterAll(() => m.dispose())

const AsyncFunction = (async () => {}).constructor as new (body: string) => () => Promise<unknown>

async function inNode(body: string): Promise<unknown> {
  return JSON.parse(JSON.stringify(await new AsyncFunction(`'use strict';\n${body}`)()))
}

const snippets: Record<string, string> = {
  'TextEncoder.encode': "return Array.from(new TextEncoder().encode('aé€😀\\ud800'))",
  'TextEncoder.encoding and encodeInto': "const d = new Uint8Array(5); const r = new TextEncoder().encodeInto('a€😀', d); return [new TextEncoder().encoding, r.read, r.written, Array.from(d)]",
  'TextEncoder.encodeInto edges': "const e = new TextEncoder(); return [[0, 3, 4, 8].map((n) => { const d = new Uint8Array(n); const r = e.encodeInto('\\ud800x😀', d); return [r.read, r.written, Array.from(d)] }), e.encodeInto('', new Uint8Array(2))]",
  'TextDecoder utf-8 with replacement': 'return new TextDecoder().decode(new Uint8Array([0x61, 0xc3, 0xa9, 0xff, 0xe2, 0x82, 0xac, 0xf0, 0x9f, 0x98, 0x80, 0xc3]))',
  'TextDecoder streaming': "const d = new TextDecoder(); return d.decode(new Uint8Array([0xe2, 0x82]), { stream: true }) + '|' + d.decode(new Uint8Array([0xac]))",
  'TextDecoder BOM and labels': 'return [new TextDecoder().decode(new Uint8Array([0xef, 0xbb, 0xbf, 0x41])), new TextDecoder("utf-16le").decode(new Uint8Array([0x41, 0, 0x42, 0])), new TextDecoder("latin1").encoding, new TextDecoder("UTF8").encoding]',
  'TextDecoder fatal': 'try { new TextDecoder("utf-8", { fatal: true }).decode(new Uint8Array([0xff])); return "no" } catch (e) { return e.name }',
  'TextDecoder unknown label': 'try { new TextDecoder("klingon"); return "no" } catch (e) { return e.name }',
  'btoa and atob': "return [btoa('hello'), btoa(''), btoa('\\xff\\xfe'), atob('aGVsbG8='), atob(' aGVs bG8 '), atob('YQ')]",
  'btoa refuses wide characters': "try { btoa('€'); return 'no' } catch (e) { return e.name }",
  'atob refuses bad input': "try { atob('a'); return 'no' } catch (e) { return e.name }",
  'URL components': "const u = new URL('https://user:pw@Example.COM:8080/a/../b/c?x=1&y=%20z#frag'); return [u.href, u.origin, u.protocol, u.username, u.password, u.host, u.hostname, u.port, u.pathname, u.search, u.hash, String(u), JSON.stringify({ u })]",
  'URL relative to a base': "return [new URL('../x?q', 'http://h/a/b/c').href, new URL('//other/p', 'https://h/').href, new URL('file:///tmp/a b').href]",
  'URL setters': "const u = new URL('http://h/p'); u.pathname = '/new path'; u.search = 'a=1'; u.hash = 'h'; u.port = '81'; u.hostname = 'example.org'; u.protocol = 'https'; u.username = 'me'; return u.href",
  'URL invalid': "try { new URL('not a url'); return 'no' } catch (e) { return [e.name, e.code, e.message] }",
  'URL.canParse and default ports': "return [URL.canParse('http://x'), URL.canParse('nope'), URL.canParse('/p', 'http://h'), new URL('https://h:443/').port, new URL('http://h:80/').host]",
  'URL idna and percent-encoding': "return [new URL('http://münchen.de/ä?ö=ü#ß').href, new URL('http://h/%7Efoo').pathname]",
  'URL searchParams stay in sync': "const u = new URL('http://h/?a=1&b=2'); u.searchParams.append('c', 'x y'); u.searchParams.delete('a'); const s1 = u.href; u.search = '?z=9'; return [s1, u.searchParams.get('z'), u.searchParams.get('b')]",
  'URLSearchParams parse and serialize': "const p = new URLSearchParams('?a=1&a=2&b=x+y&c=%E2%82%AC&d&=e'); return [p.getAll('a'), p.get('b'), p.get('c'), p.get('d'), p.get(''), p.has('a'), p.has('a', '2'), p.size, p.toString()]",
  'URLSearchParams from record and pairs': "return [new URLSearchParams({ a: '1', 'b c': 'ü&=' }).toString(), new URLSearchParams([['x', '1'], ['y', '2']]).toString()]",
  'URLSearchParams mutations and sort': "const p = new URLSearchParams('b=2&a=1&b=3'); p.set('b', '9'); p.append('0', '!*()~\\''); p.sort(); const seen = []; p.forEach((v, k) => seen.push(k + '=' + v)); return [p.toString(), seen, [...p.keys()], [...p.values()], [...p]]",
  'structuredClone': "const src = { d: new Date(0), m: new Map([[1, { x: 1 }]]), s: new Set([1]), r: /x/g, a: [1, [2]], n: null, u: undefined }; src.self = src; const c = structuredClone(src); return [c !== src, c.self === c, c.d.getTime(), c.m.get(1).x, c.s.has(1), c.r.flags, c.a[1][0], 'u' in c]",
  'URL and URLSearchParams prototypes are shaped as Node\'s': "return [URL, URLSearchParams].map((C) => [C.name, Reflect.ownKeys(C.prototype).map(String), Object.getOwnPropertyDescriptor(C.prototype, Symbol.toStringTag), C.prototype[Symbol.iterator] === C.prototype.entries, Object.prototype.toString.call(new C('http://a'))])",
  'URLSearchParams iterators are Node\'s': "const q = new URLSearchParams('a=1&b=2&c=3'); const it = q.entries(); it.next(); const P = Object.getPrototypeOf(it); const v = q.values(); q.append('d', '4'); const out = [Reflect.ownKeys(P).map(String), Object.getPrototypeOf(P) === Object.getPrototypeOf(Object.getPrototypeOf([][Symbol.iterator]())), Object.getOwnPropertyDescriptor(P, 'next').enumerable, Object.getOwnPropertyDescriptor(P, Symbol.toStringTag), Object.prototype.toString.call(it), it[Symbol.iterator]() === it, [...v], [...q.keys()], it.next(), 'constructor' in P && P.constructor === Object]; try { P.next.call({}) } catch (e) { out.push([e.name, e.code, e.message]) } return out",
  'structuredClone refuses functions': "try { structuredClone(() => 1); return 'no' } catch (e) { return e.name }",
  // Node marks its URL objects as host objects it does not clone (a
  // subclass's instance too, an object merely inheriting from the
  // prototype not); the sandbox's mark is a V8 private no program reaches,
  // so an object of its own carrying deno_core's public key clones.
  'structuredClone refuses URL and URLSearchParams, at any depth': "const out = []; class U extends URL {}; for (const v of [new URL('http://a/b?c=1'), new URLSearchParams('a=1'), new URL('http://a').searchParams, [1, { u: new URL('http://a') }], new Map([[1, new URLSearchParams()]]), new U('http://a'), Object.create(URL.prototype), Object.create(URLSearchParams.prototype), { [Symbol.for('Deno.core.hostObject')]: () => 1, a: 1 }]) { try { out.push(['cloned', structuredClone(v)]) } catch (e) { out.push([e.name, e.code, e.message, e instanceof DOMException]) } } return out",
  'structuredClone of a DOMException is a DOMException': "const e = new DOMException('m', { name: 'AbortError', cause: 1 }); e.extra = 2; class D extends DOMException {} const out = []; for (const v of [e, new D('n', 'DataCloneError'), new DOMException()]) { const c = structuredClone({ v }).v; out.push([c instanceof DOMException, c instanceof Error, c.constructor.name, c.name, c.message, c.code, c.stack === v.stack, typeof Object.getOwnPropertyDescriptor(c, 'stack').get, 'extra' in c, 'cause' in c, Object.keys(c), Object.prototype.toString.call(c)]) } return out",
  'structuredClone keeps what a DOMException\'s data refers to': "const e = new DOMException('m', 'AbortError'); e.stack = e; const c = structuredClone(e); let d = new DOMException('0'); for (let i = 1; i < 3000; i++) { const n = new DOMException(String(i)); n.stack = d; d = n } const chain = structuredClone([d, d]); let depth = 0; for (let x = chain[0]; x instanceof DOMException; x = x.stack) depth++; const k = 'DSH_V8_CLONE_TEST'; process.env[k] = 'v'; const env = structuredClone({ a: process.env, b: process.env }); delete process.env[k]; return [c.stack === c, c.name, c.message, chain[0] === chain[1], depth, chain[0].stack.message, env.a === env.b, Object.getPrototypeOf(env.a) === Object.prototype, env.a[k]]",
  'structuredClone moves what it transfers': "const a = new ArrayBuffer(4); new Uint8Array(a).set([1, 2, 3, 4]); const v = new Uint8Array(a, 1, 2); const c = structuredClone({ v, a }, { transfer: [a] }); const r = new ArrayBuffer(2, { maxByteLength: 8 }); const rc = structuredClone(r, { transfer: new Set([r]) }); const u = new ArrayBuffer(3); const uc = structuredClone(1, { transfer: [u] }); return [a.byteLength, a.detached, v.length, c.a.byteLength, c.v.buffer === c.a, Array.from(c.v), r.detached, rc.byteLength, rc.resizable, rc.maxByteLength, u.detached, uc]",
  'structuredClone checks its options and transfer list as Node does': "const d = new ArrayBuffer(1); structuredClone(d, { transfer: [d] }); const a = new ArrayBuffer(1); const out = []; for (const f of [() => structuredClone(), () => structuredClone(1, 5), () => structuredClone(1, 'x'), () => structuredClone(1, null), () => structuredClone(1, () => {}), () => structuredClone(1, { transfer: 5 }), () => structuredClone(1, { transfer: 'ab' }), () => structuredClone(1, { transfer: null }), () => structuredClone(1, { transfer: [a, null] }), () => structuredClone(1, { transfer: [{}] }), () => structuredClone(1, { transfer: [new Uint8Array(1)] }), () => structuredClone(1, { transfer: [new SharedArrayBuffer(1)] }), () => structuredClone(1, { transfer: [a, a] }), () => structuredClone(1, { transfer: [d] }), () => structuredClone(d), () => structuredClone(1, { get transfer() { throw new RangeError('getter') } }), () => structuredClone(1, { transfer: { [Symbol.iterator]() { throw new RangeError('iterator') } } }), () => structuredClone({ get a() { throw new RangeError('a getter') } }), () => structuredClone({ f() {} }, { transfer: [a] })]) { try { out.push(['cloned', f()]) } catch (e) { out.push([e.name, e.code ?? null, e.message, e instanceof DOMException]) } } return [out, a.detached]",
  // Node's env is the process's environment, so the snippet keeps to keys of its own.
  'process.env holds strings, as Node\'s': "const k = 'DSH_V8_ENV_TEST_'; const env = process.env; const out = []; const t = (f) => { try { out.push(f()) } catch (e) { out.push([e.name, e.code ?? null, e.message]) } }; t(() => { env[k + 'A'] = 1; return [typeof env[k + 'A'], env[k + 'A']] }); t(() => { env[k + 'B'] = { toString() { return 'b' } }; env[k + 'C'] = undefined; env[k + 'D'] = null; env[k + 'E'] = [1, 2]; return [env[k + 'B'], env[k + 'C'], env[k + 'D'], env[k + 'E']] }); t(() => { env[Symbol('s')] = 'x' }); t(() => { env[k + 'F'] = Symbol('v') }); t(() => Object.defineProperty(env, k + 'G', { value: 2, writable: true, enumerable: true, configurable: true })[k + 'G']); t(() => Object.defineProperty(env, k + 'H', { value: 2 })); t(() => Object.defineProperty(env, k + 'I', { value: 2, writable: true, enumerable: true, configurable: false })); t(() => Object.defineProperty(env, k + 'J', { get() { return 'j' } })); t(() => Object.defineProperty(env, k + 'K', { enumerable: true })); t(() => [delete env[k + 'nothing'], delete env[k + 'A'], k + 'A' in env, env[k + 'A'] === undefined]); t(() => ['toString' in env, Symbol.iterator in env, env[Symbol.iterator] === undefined, typeof env.hasOwnProperty, Object.getOwnPropertyDescriptor(env, k + 'B')]); t(() => Object.keys(env).filter((key) => key.startsWith(k)).sort()); t(() => { const c = structuredClone(env); return [Object.getPrototypeOf(c) === Object.prototype, c[k + 'B'], c[k + 'G']] }); t(() => Object.freeze(env)); t(() => Object.seal(env)); t(() => Object.preventExtensions(env)); t(() => [Reflect.preventExtensions(env), Object.isExtensible(env), Object.isFrozen(env)]); t(() => { try { Object.defineProperty(env, k + 'L', { value: 1 }) } catch (e) { return [e.stack.split('\\n')[0], String(e), Object.keys(e), Object.getOwnPropertyDescriptor(e, 'code')] } }); t(() => Object.entries(env).filter(([key]) => key.startsWith(k)).sort()); for (const key of Object.keys(env)) if (key.startsWith(k)) delete env[key]; t(() => Object.keys(env).filter((key) => key.startsWith(k))); return out",
  'crypto.randomUUID': 'const ids = Array.from({ length: 50 }, () => crypto.randomUUID()); return [ids.every((id) => /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(id)), new Set(ids).size]',
  'crypto.getRandomValues': 'const a = crypto.getRandomValues(new Uint32Array(64)); const b = crypto.getRandomValues(new Uint8Array(0)); let err; try { crypto.getRandomValues(new Float32Array(1)) } catch (e) { err = e.name } let big; try { crypto.getRandomValues(new Uint8Array(65537)) } catch (e) { big = e.name } return [a.length, new Set(a).size > 60, b.length, err, big]',
  'performance.now is monotonic': 'const a = performance.now(); await new Promise((r) => setTimeout(r, 20)); const b = performance.now(); return [typeof a, b - a >= 15]',
  // Set in the order they fall due: a timer set later with a shorter delay
  // is due later still if the machine pauses the program long enough
  // between the two calls, and would then rightly run second.
  'setTimeout ordering and args': "const out = []; await new Promise((done) => { setTimeout((x) => out.push(x), 5, 'a'); setTimeout((x) => out.push(x), 20, 'b'); setTimeout(() => { out.push('c'); done(null) }, 40) }); return out",
  'DOMException shape': "const e = new DOMException('m', 'AbortError'); const d = new DOMException('x'); const c = new DOMException('y', { name: 'DataCloneError', cause: 1 }); return [Object.prototype.toString.call(e), e instanceof Error, Object.keys(e), Object.getOwnPropertyNames(e), e.code, String(e), e.name, e.message, e.stack.split('\\n')[0], DOMException.ABORT_ERR, DOMException.prototype.DATA_CLONE_ERR, d.name, d.code, c.name, c.code, c.cause, Object.getOwnPropertyNames(c), Object.getOwnPropertyNames(DOMException.prototype), DOMException.length]",
  'web APIs throw DOMExceptions': "const out = []; for (const f of [() => structuredClone(() => 1), () => atob('***'), () => atob('a'), () => atob('YQ='), () => btoa('€'), () => crypto.getRandomValues(new Uint8Array(70000)), () => crypto.getRandomValues(new Float32Array(2))]) { try { f(); out.push('no throw') } catch (e) { out.push([e.name, e.code, e.message, e instanceof DOMException, e.stack.split('\\n')[0]]) } } return out",
  'timers are Timeout objects like Node\'s': "const t = setTimeout(() => {}, 10); const shape = [typeof t, t.hasRef(), t.unref() === t, t.hasRef(), t.ref() === t, t.hasRef(), typeof +t, Object.prototype.toString.call(t), typeof t.refresh, typeof t.close]; clearTimeout(t); return shape",
  'timers clear by object, number, string and close()': "let fired = 0; const ts = [0, 1, 2, 3].map(() => setTimeout(() => fired++, 5)); clearTimeout(ts[0]); clearTimeout(+ts[1]); clearTimeout(String(+ts[2])); ts[3].close(); clearTimeout({}); clearTimeout(undefined); await new Promise((r) => setTimeout(r, 20)); return fired",
  // Orders, not durations. Node (and deno_core, which mirrors its timer
  // lists) keeps a refreshed timer in its delay's list, whose due time is
  // only recomputed when the loop reaches it; so a refreshed timer can run
  // before another delay's timer that fell due earlier (next snippet). m2
  // shares t's delay and is set after it, so the refresh moves t behind it:
  // m1 (set first, so due first) then m2 then t, however the machine delays
  // the calls or the loop.
  'refresh restarts a pending timer': "const order = []; let done; const finished = new Promise((r) => { done = r }); setTimeout(() => { order.push('m1'); t.refresh() }, 10); const t = setTimeout(() => { order.push('t'); done() }, 30); setTimeout(() => order.push('m2'), 30); await finished; return order",
  // t is refreshed to fall due after m2, but the loop's next turn (the
  // callback blocks) comes after both are due: t's list, due first before
  // the refresh, runs first.
  'a refreshed timer keeps its list\'s place': "const order = []; let done; const finished = new Promise((r) => { done = r }); setTimeout(() => { order.push('m1'); const t = setTimeout(() => { order.push('t'); done() }, 30); setTimeout(() => order.push('m2'), 35); let s = Date.now(); while (Date.now() - s < 10); t.refresh(); s = Date.now(); while (Date.now() - s < 40); }, 1); await finished; return order",
  // All three due before the loop's first turn (the program blocks), set in
  // the order they fall due: the callbacks that turn runs are held and
  // released in order, and m1's refresh takes effect before t's turn.
  'refresh in a callback that fell due with its timer': "const order = []; let done; const finished = new Promise((r) => { done = r }); setTimeout(() => { order.push('m1'); t.refresh() }, 10); const t = setTimeout(() => { order.push('t'); done() }, 30); setTimeout(() => order.push('m2'), 35); const s = Date.now(); while (Date.now() - s < 50); await finished; return order",
  'clearTimeout in a callback that fell due with its timer': "const order = []; let t; setTimeout(() => { order.push('m1'); clearTimeout(t) }, 10); t = setTimeout(() => order.push('t'), 30); const s = Date.now(); while (Date.now() - s < 50); await new Promise((r) => setTimeout(r, 60)); return order",
  // Set after the loop's first turn, whose callbacks are held, so t's
  // callback runs as it falls due.
  'a timer refreshed in its own callback is cleared by its id': "await new Promise((r) => setTimeout(r, 1)); let n = 0; const t = setTimeout(() => { n++; if (n === 1) { t.refresh(); clearTimeout(+t) } }, 5); await new Promise((r) => setTimeout(r, 40)); return n",
  'refresh re-arms a timer that fired; a cleared one stays cleared': "let n = 0; let done; const finished = new Promise((r) => { done = r }); const t = setTimeout(() => { if (++n < 3) t.refresh(); else done() }, 5); await finished; let m = 0; const c = setTimeout(() => m++, 5); await new Promise((r) => setTimeout(r, 10)); clearTimeout(c); c.refresh(); await new Promise((r) => setTimeout(r, 20)); return [n, m, Object.getOwnPropertyNames(t.constructor)]",
  // The reference's worker keeps its event loop alive while the program
  // runs: unref changes what hasRef says, not whether a timer fires.
  'an unref\'d timer or immediate still fires for a program that awaits it': "const out = []; out.push(await new Promise((r) => { setTimeout(() => r('timeout'), 5).unref() })); out.push(await new Promise((r) => { setImmediate(() => r('immediate')).unref() })); let n = 0; await new Promise((r) => { const i = setInterval(() => { if (++n === 3) { clearInterval(i); r() } }, 1); i.unref() }); const t = setTimeout(() => {}, 1); t.unref(); const i = setImmediate(() => {}); i.unref(); const shape = [t.hasRef(), i.hasRef(), t.ref().hasRef(), i.ref().hasRef()]; clearTimeout(t); clearImmediate(i); return [out, n, shape]",
  'clearTimeout cancels': "const out = []; const t = setTimeout(() => out.push('no'), 5); clearTimeout(t); await new Promise((r) => setTimeout(r, 20)); return out",
  'setInterval runs until cleared': 'let n = 0; await new Promise((done) => { const id = setInterval(() => { if (++n === 3) { clearInterval(id); done(null) } }, 2) }); return n',
  'timers refuse a callback that is not a function': "const out = []; for (const f of [() => setTimeout(5), () => setInterval('x'), () => setTimeout(), () => setImmediate({})]) { try { f(); out.push('no throw') } catch (e) { out.push([e.name, e.code, e.message, String(e)]) } } return out",
  'a timer callback\'s this is its Timeout or Immediate': "const out = []; await new Promise((r) => { const t = setTimeout(function () { out.push([this === t, this.constructor.name]); r() }, 1) }); await new Promise((r) => { const t = setInterval(function () { out.push([this === t, this.constructor.name]); clearInterval(t); r() }, 1) }); await new Promise((r) => { const i = setImmediate(function (a) { out.push([this === i, this.constructor.name, a]); r() }, 'z') }); await new Promise((r) => setTimeout(function (a, b) { out.push([a, b, this.constructor.name]); r() }, 1, 'x', 'y')); return out",
  'TextDecoder.decode refuses what is not bytes': "const out = []; for (const label of ['utf-8', 'utf-16le', 'latin1']) for (const input of ['abc', 5, null, {}, [1, 2], new ArrayBuffer(2), new SharedArrayBuffer(2), new DataView(new ArrayBuffer(1)), undefined]) { try { out.push(new TextDecoder(label).decode(input)) } catch (e) { out.push([label, e.name, e.code, e.message, String(e)]) } } return out",
  'atob and btoa refuse as Node does': "const out = []; for (const f of [() => atob(), () => btoa(), () => atob('%'), () => atob('a'), () => atob('ab=c'), () => atob('abc=='), () => atob('ab==='), () => atob('=='), () => atob('a b c d'), () => atob('abc\\u00ff'), () => atob('ab= ='), () => atob(' YQ = = '), () => atob('YR'), () => atob(null), () => atob(12345678)]) { try { out.push(f()) } catch (e) { out.push([e.name, e.code ?? null, e.message]) } } return out",
  // Node runs immediates after each phase's events, before the next timers.
  'an immediate set after an await runs before a timer set beside it': "const out = []; await new Promise((r) => setTimeout(r, 1)); setTimeout(() => out.push('t'), 0); setImmediate(() => out.push('i')); setTimeout(() => out.push('t1'), 1); setImmediate(() => out.push('i2')); await new Promise((r) => setTimeout(r, 10)); return out",
  'queueMicrotask runs before timers': "const out = []; setTimeout(() => out.push('timer'), 0); queueMicrotask(() => out.push('micro')); await new Promise((r) => setTimeout(r, 10)); return out",
  'Intl': "return [new Intl.NumberFormat('de-DE', { style: 'currency', currency: 'EUR' }).format(1234.5), new Intl.DateTimeFormat('en-GB', { timeZone: 'UTC', dateStyle: 'full' }).format(new Date(0)), new Intl.PluralRules('ar').select(3), ['b', 'a', 'C'].sort(new Intl.Collator('en').compare), new Intl.RelativeTimeFormat('fr').format(-1, 'day'), 'ǅ'.toLocaleLowerCase('tr')]",
  'JSON, Math, Date, RegExp basics': "return [JSON.stringify({ a: [1, { b: 2 }] }), Math.max(1, 3), new Date(Date.UTC(2020, 1, 29)).toISOString(), 'a-b_c'.replace(/[-_]/g, ' '), [3, 1, 2].toSorted(), Object.groupBy([1, 2, 3], (x) => (x % 2 ? 'odd' : 'even'))]",
}

describe('the process surface is the sandbox\'s own, not the host\'s', () => {
  it('has an empty env, write() that returns true, and nothing else of Node', async () => {
    const result = await m.run("return [JSON.stringify(process.env), process.stdout.write('x'), typeof process.exit, typeof process.binding, typeof process.dlopen]")
    expect(result).toEqual({ logs: ['x'], value: ['{}', true, 'function', 'undefined', 'undefined'] })
  })
})

describe('globals behave like Node', () => {
  it.each(Object.entries(snippets))('%s', async (_, body) => {
    const result = await m.run(body)
    expect(result.error).toBeUndefined()
    expect(result.value).toEqual(await inNode(body))
  })
})
