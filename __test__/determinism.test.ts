/**
 * What a run reads that could differ between two executions goes through
 * its history, so that a run executed again after its host died reads
 * the same: each test has a program read a source, tell a tool what it
 * read, wait on a second tool, have its hosts killed, and return what it
 * read; the value returned must be what the tool was told, and no tool is
 * called twice. Random numbers are a stream the harness seeds per run;
 * clock readings (the wall clock, the run's monotonic clock, its CPU, its
 * memory figures) are recorded in the history and read back in order, a
 * monotonic clock read past them continuing from the last. The built-ins
 * replaced to read the run's wall clock (`Date`, `Intl.DateTimeFormat`'s
 * `format` and `formatToParts`) must look like Node's, Node being the
 * oracle. Every wait is on an event (a tool called, a stats() condition,
 * the harness's own clock passing a mark).
 */
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest'
import {
  casesProgram,
  fromNodeWorker,
  held,
  hostsReplaced,
  killHosts,
  mismatches,
  mount,
  tools,
  until,
  type Mounted,
} from './helpers.js'

let m: Mounted
beforeAll(async () => {
  m = await mount({ maxWallMs: 120_000 })
})
afterAll(() => m.dispose())

/**
 * Run `program` with the tools `tell` (which notes what it is told, and
 * when on the harness's wall clock) and `hold`, kill every host while the
 * run waits on `hold` (after `beforeKill`, given what `tell` was told and
 * when), and answer `hold` once the run was executed again; `more` are
 * further tools. Checks that the re-execution did not diverge from the
 * run's history; returns what the run settled with, what `tell` was told,
 * how often `hold` was called, and when (the harness's wall clock) the
 * hosts were killed.
 */
async function acrossAHostDeath(
  program: string,
  {
    more = {},
    beforeKill,
  }: {
    more?: Record<string, (args: unknown) => Promise<unknown>>
    beforeKill?: (told: unknown, toldAt: number) => Promise<void>
  } = {},
) {
  const told: unknown[] = []
  let toldAt = 0
  const hold = held()
  const bindings = tools({
    ...more,
    tell: async (value: unknown) => {
      told.push(value)
      toldAt = Date.now()
      return 'noted'
    },
    hold: hold.fn,
  })
  const before = m.runtime.stats()
  // Should a wait below never end, the failure says which, and how the
  // runtime and the run stood.
  let waitingFor = 'the first call of hold'
  let old: number[] = []
  let settledEarly: unknown
  onTestFailed(() => {
    const now = m.runtime.stats()
    console.error('across a host death:', JSON.stringify({ waitingFor, told, holdCalls: hold.calls, old, settledEarly, before, now }))
  })
  const result = m.run(program, { bindings })
  void result.then((settled) => (settledEarly = settled))
  await hold.called
  waitingFor = 'beforeKill'
  await beforeKill?.(told[0], toldAt)
  const killedAt = Date.now()
  old = killHosts(m)
  waitingFor = 'the hosts replaced'
  await hostsReplaced(m, old)
  // Executed again at least once: a host that dies besides (one that
  // misses the heartbeat on a loaded machine) executes it once more,
  // which is no less the run its history records.
  waitingFor = 'the run re-executed'
  await until(() => m.runtime.stats().runsReexecuted >= before.runsReexecuted + 1)
  waitingFor = 'the run settled'
  hold.answer('go')
  const settled = await result
  const after = m.runtime.stats()
  expect(after.reexecutionsDiverged).toBe(before.reexecutionsDiverged)
  expect(after.runsReexecuted).toBeGreaterThanOrEqual(before.runsReexecuted + 1)
  return { settled, told, holdCalls: hold.calls, killedAt }
}

/**
 * Run `read` (an expression) in a program that tells the tool `tell` its
 * value, then waits on `hold` while every host is killed; returns what the
 * run returned, what `tell` was told, and how often each tool was called.
 */
async function readAcrossAHostDeath(read: string, beforeKill?: (told: unknown, toldAt: number) => Promise<void>) {
  return acrossAHostDeath(`const read = ${read}; await tools.tell({ read }); await tools.hold({}); return read`, {
    beforeKill,
  })
}

describe('random numbers are the same in a re-execution', () => {
  it.each([
    ['Math.random', '[Math.random(), Math.random(), Math.random()]'],
    ['crypto.getRandomValues', 'Array.from(crypto.getRandomValues(new Uint32Array(4)))'],
    ['crypto.randomUUID', 'crypto.randomUUID()'],
    ['Math.random and crypto, interleaved', '[Math.random(), crypto.randomUUID(), Math.random()]'],
  ])('%s', async (_, read) => {
    const { settled, told, holdCalls } = await readAcrossAHostDeath(read)
    expect(told).toHaveLength(1)
    expect(holdCalls).toBe(1)
    expect(settled).toEqual({ logs: [], value: (told[0] as { read: unknown }).read })
  })

  it('each run draws its own numbers', async () => {
    const first = await m.run('return [Math.random(), crypto.randomUUID()]')
    const second = await m.run('return [Math.random(), crypto.randomUUID()]')
    expect(first.value).not.toEqual(second.value)
  })

  it('Math.random is uniform over [0, 1) and looks like Node\'s', async () => {
    const program = `
      const numbers = Array.from({ length: 20000 }, () => Math.random())
      const buckets = new Array(10).fill(0)
      for (const n of numbers) buckets[Math.floor(n * 10)]++
      const d = Object.getOwnPropertyDescriptor(Math, 'random')
      return {
        inRange: numbers.every((n) => typeof n === 'number' && n >= 0 && n < 1),
        distinct: new Set(numbers).size,
        bucketsWithin20Percent: buckets.every((count) => count > 1600 && count < 2400),
        shape: [Math.random.name, Math.random.length, String(Math.random), d.writable, d.enumerable, d.configurable,
          'prototype' in Math.random, (() => { try { new Math.random(); return 'constructed' } catch (e) { return e.constructor.name } })()],
      }`
    const ours = (await m.run(program)).value as { shape: unknown[] }
    const node = await fromNodeWorker<{ shape: unknown[] }>(
      `parentPort.postMessage((() => {${program}})())`,
    )
    expect(ours).toEqual({ ...node, distinct: 20000 })
    expect(ours.shape).toEqual(node.shape)
  })
})

/**
 * A formatter that shows the time to the millisecond (in UTC, as the
 * harness parses it back): `formatted` is the time a string of it shows.
 */
const FORMATTER =
  "new Intl.DateTimeFormat('en-US', { timeZone: 'UTC', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', fractionalSecondDigits: 3, hourCycle: 'h23' })"
function formatted(text: string): number {
  const [month, day, year, hour, minute, second, ms] = (text.match(/\d+/g) ?? []).map(Number) as number[]
  return Date.UTC(year as number, (month as number) - 1, day, hour, minute, second, ms)
}

/**
 * A wall-clock source: `read` is an expression whose value shows the time
 * at `resolution` ms (1, or 1000 for `Date()`'s string); `shows` is that
 * time, in ms since the epoch. Before the kill the harness waits for its
 * own wall clock to pass into the next `resolution` step after `tell` was
 * told, so a live reading in the re-execution (which starts after the
 * kill) would show a later time than the one recorded: the case fails if
 * the reading is not read back from the history.
 */
const wall: [string, { read: string; resolution: number; shows: (value: never) => number }][] = [
  ['Date.now()', { read: 'Date.now()', resolution: 1, shows: (value: number) => value }],
  ['new Date()', { read: 'new Date().getTime()', resolution: 1, shows: (value: number) => value }],
  ['new Date(), as a string', { read: 'new Date().toISOString()', resolution: 1, shows: (value: string) => Date.parse(value) }],
  ['Date() called as a function', { read: 'Date()', resolution: 1000, shows: (value: string) => Date.parse(value) }],
  ['new Date.prototype.constructor()', { read: 'new Date.prototype.constructor().getTime()', resolution: 1, shows: (value: number) => value }],
  ['a subclass of Date', { read: 'new (class extends Date {})().getTime()', resolution: 1, shows: (value: number) => value }],
  ['Reflect.construct(Date, [])', { read: 'Reflect.construct(Date, []).getTime()', resolution: 1, shows: (value: number) => value }],
  ['Intl.DateTimeFormat#format()', { read: `${FORMATTER}.format()`, resolution: 1, shows: (value: string) => formatted(value) }],
  ['Intl.DateTimeFormat#format(undefined)', { read: `${FORMATTER}.format(undefined)`, resolution: 1, shows: (value: string) => formatted(value) }],
  [
    'Intl.DateTimeFormat#formatToParts()',
    {
      read: `${FORMATTER}.formatToParts()`,
      resolution: 1,
      shows: (value: { value: string }[]) => formatted(value.map((part) => part.value).join('')),
    },
  ],
  ['performance.timeOrigin', { read: 'performance.timeOrigin', resolution: 1, shows: (value: number) => value }],
]

/** The run's monotonic clock, its CPU and its memory figures. */
const others: [string, string][] = [
  ['performance.now()', 'performance.now()'],
  ["performance.mark()'s default start", "performance.mark('a').startTime"],
  ["performance.measure()'s default end", "performance.measure('m').duration"],
  ['Event#timeStamp', "new Event('x').timeStamp"],
  ['process.hrtime() and hrtime.bigint()', '[process.hrtime(), String(process.hrtime.bigint())]'],
  ['process.hrtime(previous)', 'process.hrtime([0, 1])'],
  ['process.uptime()', 'process.uptime()'],
  ['process.cpuUsage()', 'process.cpuUsage()'],
  ['process.threadCpuUsage()', 'process.threadCpuUsage()'],
  ['process.memoryUsage()', 'process.memoryUsage()'],
  ['process.memoryUsage.rss()', 'process.memoryUsage.rss()'],
  // Many readings: a clock read in a loop until it passes a mark. The
  // recorded readings end the loop after as many turns again (the wall
  // clock's whole milliseconds kept once with a count; the monotonic
  // clock's many distinct readings handed over in batches).
  ['Date.now() in a loop', '(() => { let n = 0; const end = Date.now() + 3; while (Date.now() < end) n++; return n })()'],
  ['performance.now() in a loop', '(() => { let n = 0; const end = performance.now() + 3; while (performance.now() < end) n++; return n })()'],
]

describe('clock readings are the same in a re-execution', () => {
  it.each(wall)('%s', async (_, { read, resolution, shows }) => {
    const { settled, told, holdCalls, killedAt } = await readAcrossAHostDeath(read, async (_, toldAt) => {
      const next = (Math.floor(toldAt / resolution) + 1) * resolution
      await until(() => Date.now() >= next)
    })
    expect(told).toHaveLength(1)
    expect(holdCalls).toBe(1)
    const value = (told[0] as { read: never }).read
    expect(settled).toEqual({ logs: [], value })
    // The case can fail: at the kill the wall clock showed a later step
    // than the value, and the re-execution read its clock after the kill.
    expect(Number.isFinite(shows(value))).toBe(true)
    expect(Math.floor(killedAt / resolution) * resolution).toBeGreaterThan(shows(value))
  })

  it.each(others)('%s', async (_, read) => {
    const { settled, told, holdCalls } = await readAcrossAHostDeath(read)
    expect(told).toHaveLength(1)
    expect(holdCalls).toBe(1)
    expect(settled).toEqual({ logs: [], value: (told[0] as { read: unknown }).read })
  })

  it("console.time's lines are the recorded ones, and the re-execution's own line continues from them", async () => {
    const program =
      "console.time('t'); for (let i = 0; i < 1e5; i++); console.timeLog('t'); await tools.tell({}); await tools.hold({}); console.timeEnd('t'); return 1"
    // A calm run's logs: a line from timeLog, one from timeEnd.
    const calm = await m.run(program, { bindings: tools({ tell: async () => 'noted', hold: async () => 'go' }) })
    // Node's formatTime: "1.234ms" (trailing zeros dropped), "1.234s", ...
    const LINE = /^t: (\d+(\.\d{1,3})?ms|\d+\.\d{3}s)$/
    const duration = (line: string) => Number(line.slice(3, line.endsWith('ms') ? -2 : -1)) * (line.endsWith('ms') ? 1 : 1000)
    expect(calm).toEqual({ logs: [expect.stringMatching(LINE), expect.stringMatching(LINE)], value: 1 })
    // Killed while waiting on `hold`: the re-execution writes the timeLog
    // line again from the recorded readings (another duration would be a
    // log entry not the recorded one: a divergence, which the helper
    // rules out), and the line after the history, from timeEnd, is on a
    // clock that went on from them.
    const { settled, told, holdCalls } = await acrossAHostDeath(program)
    expect(told).toEqual([{}])
    expect(holdCalls).toBe(1)
    expect(settled).toEqual({ logs: [expect.stringMatching(LINE), expect.stringMatching(LINE)], value: 1 })
    expect(duration(settled.logs[1] as string)).toBeGreaterThanOrEqual(duration(settled.logs[0] as string))
  })

  it('a monotonic clock read past the recorded readings goes on from the last of them', async () => {
    const program = `
      await tools.pause({})
      const read = () => [performance.now(), String(process.hrtime.bigint()), process.cpuUsage().user]
      const before = read()
      await tools.tell({ before })
      await tools.hold({})
      return { before, after: read() }`
    // `pause` is answered once the harness's clock has gone on 100 ms: not
    // a synchronisation, but the first execution's monotonic clock then
    // reads at least that much at `before`, while the re-execution (whose
    // `pause` is answered from the history at once) reaches `after` sooner
    // on its own clock; a clock that started again would go back there.
    const pause = async () => {
      const from = performance.now()
      await until(() => performance.now() - from >= 100)
      return 'go'
    }
    const { settled, told, holdCalls } = await acrossAHostDeath(program, { more: { pause } })
    expect(told).toHaveLength(1)
    expect(holdCalls).toBe(1)
    const { before, after } = settled.value as { before: [number, string, number]; after: [number, string, number] }
    expect(settled.logs).toEqual([])
    expect(told[0]).toEqual({ before })
    expect(before[0]).toBeGreaterThanOrEqual(100)
    expect(after[0]).toBeGreaterThanOrEqual(before[0])
    expect(BigInt(after[1]) >= BigInt(before[1])).toBe(true)
    expect(after[2]).toBeGreaterThanOrEqual(before[2])
  })
})

/**
 * Facts a program can observe of the built-ins replaced to read the run's
 * wall clock (crates/sandbox-ext/js/16_clock.js): each must be Node's. Only facts that do not
 * change with the time are compared.
 */
const shapes = [
  'Date.name', 'Date.length', 'String(Date)', 'Function.prototype.toString.call(Date)', 'String(Date.now)', 'Date.now.name', 'Date.now.length',
  "(({ writable, enumerable, configurable }) => [writable, enumerable, configurable])(Object.getOwnPropertyDescriptor(globalThis, 'Date'))",
  "(({ writable, enumerable, configurable }) => [writable, enumerable, configurable])(Object.getOwnPropertyDescriptor(Date, 'now'))",
  "(({ writable, enumerable, configurable }) => [writable, enumerable, configurable])(Object.getOwnPropertyDescriptor(Date.prototype, 'constructor'))",
  'Object.getOwnPropertyNames(Date).sort()', 'Object.getPrototypeOf(Date) === Function.prototype', "'prototype' in Date.now",
  'Date.prototype.constructor === Date', 'new Date(0).constructor === Date', 'Date.prototype.constructor.now === Date.now',
  'typeof Date()', 'Date(1, 2, 3).length > 20', 'typeof Date.call(null, 0)', 'new Date() instanceof Date',
  '(() => { class D extends Date {}; return [new D(0).getTime(), new D() instanceof D, new D() instanceof Date, Object.getPrototypeOf(D) === Date] })()',
  'Reflect.construct(Date, [0]).getTime()', 'Object.getPrototypeOf(Reflect.construct(Date, [0], Array)) === Array.prototype',
  'new (Date.bind(null, 0))().getTime()', 'new Date(2020, 1, 3).getDate()', 'Object.getPrototypeOf(new Date()) === Date.prototype',
  "Date.UTC(2020, 0, 1)", "Date.parse('2020-01-01T00:00:00Z')", 'Date.prototype.toString.call(new Date(0))', 'Object.prototype.toString.call(new Date(0))',
  '(() => { try { return Date.prototype.toString.call({}) } catch (e) { return e } })()',
  '(() => { try { return new Date.now() } catch (e) { return e } })()',
  '(() => { try { return Reflect.construct(Date.now, []) } catch (e) { return e } })()',
  "String(Object.getOwnPropertyDescriptor(Intl.DateTimeFormat.prototype, 'format').get)",
  "(({ get }) => [get.name, get.length])(Object.getOwnPropertyDescriptor(Intl.DateTimeFormat.prototype, 'format'))",
  "(({ enumerable, configurable, set }) => [enumerable, configurable, typeof set])(Object.getOwnPropertyDescriptor(Intl.DateTimeFormat.prototype, 'format'))",
  "(({ writable, enumerable, configurable }) => [writable, enumerable, configurable])(Object.getOwnPropertyDescriptor(Intl.DateTimeFormat.prototype, 'formatToParts'))",
  "(() => { const f = new Intl.DateTimeFormat('en'); return [f.format === f.format, f.format.name, f.format.length, String(f.format), 'prototype' in f.format] })()",
  'String(Intl.DateTimeFormat.prototype.formatToParts)', 'Intl.DateTimeFormat.prototype.formatToParts.name', 'Intl.DateTimeFormat.prototype.formatToParts.length',
  "new Intl.DateTimeFormat('en').format(0)", "JSON.stringify(new Intl.DateTimeFormat('en').formatToParts(0))",
  "[0, 1e12].map(new Intl.DateTimeFormat('en', { timeZone: 'UTC', dateStyle: 'full', timeStyle: 'long' }).format)",
  "(() => { try { Intl.DateTimeFormat.prototype.format } catch (e) { return e.constructor.name } })()",
  '(() => { try { return Intl.DateTimeFormat.prototype.formatToParts.call({}) } catch (e) { return e } })()',
  "(() => { try { return new (new Intl.DateTimeFormat('en').format)() } catch (e) { return e.constructor.name } })()",
  "(() => { try { return new Intl.DateTimeFormat.prototype.formatToParts() } catch (e) { return e } })()",
]

describe('the replaced Date and Intl.DateTimeFormat look like Node\'s', () => {
  it(`${shapes.length} facts are Node's`, async () => {
    const body = casesProgram(shapes)
    const ours = await m.run(body)
    expect(ours.error).toBeUndefined()
    const node = await fromNodeWorker<unknown[]>(
      `const AsyncFunction = (async () => {}).constructor
       new AsyncFunction(${JSON.stringify(body)})().then((value) => parentPort.postMessage(value))`,
    )
    expect(mismatches(shapes, node, ours.value as unknown[])).toEqual([])
  })

  it("the error of a format read off the prototype is Node's, but for how the engine prints the receiver", async () => {
    // How each engine prints that receiver in an error, through a built-in
    // this runtime does not replace (Map.prototype.get): V8 after Node 22's
    // prints the prototype "[object Intl.DateTimeFormat]" where Node's
    // prints "#<DateTimeFormat>", replaced built-in or not.
    const program = `
      const message = (f) => { try { f() } catch (e) { return [e.constructor.name, e.message] } }
      const [, control] = message(() => Map.prototype.get.call(Intl.DateTimeFormat.prototype))
      const receiver = control.slice(control.indexOf('incompatible receiver ') + 'incompatible receiver '.length)
      const [name, text] = message(() => Intl.DateTimeFormat.prototype.format)
      return { name, text: text.replace(receiver, '<receiver>'), receiver }`
    const ours = (await m.run(program)).value as { name: string; text: string; receiver: string }
    const node = await fromNodeWorker<typeof ours>(`parentPort.postMessage((() => {${program}})())`)
    expect({ name: ours.name, text: ours.text }).toEqual({ name: node.name, text: node.text })
    expect(ours.text).toMatch(/<receiver>$/)
  })
})
