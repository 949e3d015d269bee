/**
 * Each run's report (the cordis event `code-runtime-v8/run-report`): once
 * per run whatever its outcome, before `run()` resolves, in the caller's
 * async context; each figure checked against a program that makes it
 * known: exactly where it can be (calls and their bytes, log bytes, pids)
 * and as a relation where it cannot (CPU, memory peaks). Each run is
 * tagged with an `AsyncLocalStorage` store, the way a harness tags its
 * sessions, and its reports are those a listener saw under its tag.
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import type { CodeRunResult } from '@deepseek-ai/dsh-code-runtime'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { RUN_REPORT, type V8CodeRunReport } from '../lib/index.js'
import { held, hostsReplaced, killHosts, mount, tools, until, type Mounted } from './helpers.js'

const session = new AsyncLocalStorage<string>()
let m: Mounted
const seen: { tag: string | undefined; report: V8CodeRunReport }[] = []

beforeAll(async () => {
  m = await mount({ maxWallMs: 120_000 })
  m.ctx.on(RUN_REPORT, (report) => {
    seen.push({ tag: session.getStore(), report })
  })
})
afterAll(() => m.dispose())

let tags = 0
/** Run `run` under a fresh session tag; its result, and the reports seen under the tag by the time it resolved. */
async function reported(run: () => Promise<CodeRunResult>) {
  const tag = `session ${++tags}`
  const result = await session.run(tag, run)
  return { result, reports: seen.filter((entry) => entry.tag === tag).map((entry) => entry.report) }
}

/** The one report of `run`, checked to be the only one, with its result. */
async function report(run: () => Promise<CodeRunResult>) {
  const { result, reports } = await reported(run)
  expect(reports).toHaveLength(1)
  return { result, report: reports[0] as V8CodeRunReport }
}

describe('a run\'s report', () => {
  it('counts its calls and their bytes as they crossed, and its logs as maxOutputBytes counts them', async () => {
    const answers = [{ n: 1 }, 'text crossed as it is', ['é', null]]
    let k = 0
    const echo = async () => answers[k++]
    const long = 'y'.repeat(100_000)
    const program = `
      const got = [await tools.echo({ s: 'abc' }), await tools.echo([1, 2.5, 'é']), await tools.echo({ long: '${long}' })]
      console.log('one'); console.log({ two: 2 }); console.error('três')
      return got`
    const { result, report: figures } = await report(() => m.run(program, { bindings: tools({ echo }) }))
    expect(result).toEqual({ logs: ['one', '{ two: 2 }', 'três'], value: answers })
    // Arguments: their JSON as UTF-8; the long string crosses out of band
    // (a byte a Latin-1 character), null in its place in the JSON.
    const utf8 = (value: unknown) => Buffer.byteLength(JSON.stringify(value))
    const argumentBytes = utf8({ s: 'abc' }) + utf8([1, 2.5, 'é']) + utf8({ long: null }) + long.length
    const resultBytes = utf8(answers[0]) + Buffer.byteLength(answers[1] as string) + utf8(answers[2])
    expect(figures).toMatchObject({
      outcome: 'ok',
      calls: 3,
      refusedCalls: 0,
      argumentBytes,
      resultBytes,
      logBytes: utf8(result.logs),
      reexecutions: 0,
    })
    expect(figures.hostPids).toHaveLength(1)
    expect(m.runtime.stats().hostPids).toContain(figures.hostPids[0])
    expect(figures.wallMs).toBeGreaterThan(0)
  })

  it('charges at least the CPU the program read last, and peaks at least at what it held', async () => {
    const program = `
      const held = Array.from({ length: 40 }, () => new Array(1 << 17).fill(1.5))
      const heapUsed = process.memoryUsage().heapUsed
      const buffer = new Uint8Array(8 << 20)
      let x = 0
      for (let i = 0; i < 3e7; i++) x += i
      const cpu = process.cpuUsage()
      return { heapUsed, held: held.length + buffer.length, cpuMs: (cpu.user + cpu.system) / 1000, x }`
    const { result, report: figures } = await report(() => m.run(program))
    const value = result.value as { heapUsed: number; cpuMs: number }
    expect(figures.computeMs).toBeGreaterThanOrEqual(value.cpuMs)
    expect(figures.peakHeapBytes).toBeGreaterThanOrEqual(value.heapUsed)
    expect(figures.peakHeapBytes).toBeGreaterThanOrEqual(40 * (1 << 17) * 8)
    expect(figures.peakExternalBytes).toBeGreaterThanOrEqual(8 << 20)
  })

  it('fires once for every outcome kind, and says which', async () => {
    const small = await mount({ computeMs: 200, maxOutputBytes: 64 })
    const kinds = new Map<string, V8CodeRunReport[]>()
    small.ctx.on(RUN_REPORT, (report) => {
      const tag = session.getStore() as string
      kinds.set(tag, [...(kinds.get(tag) ?? []), report])
    })
    const aborting = new AbortController()
    const programs: [string, string, AbortSignal?][] = [
      ['ok', 'return 1'],
      ['exception', 'throw new Error("no")'],
      ['timeout', 'for (;;) {}'],
      ['worker-exit', 'process.exit(3)'],
      ['invalid-output', 'return () => 1'],
      ['output-limit', 'return "x".repeat(100)'],
      ['abort', 'await new Promise(() => setTimeout(() => {}, 3_600_000))', aborting.signal],
    ]
    try {
      const runs = programs.map(([kind, program, signal]) =>
        session.run(kind, () => small.run(program, signal ? { signal } : {})),
      )
      // Every other run has settled, and the one to abort waits on its timer.
      await until(() => {
        const stats = small.runtime.stats()
        return stats.inFlight === 1 && stats.waiting === 1
      })
      aborting.abort('enough')
      const results = await Promise.all(runs)
      for (const [[kind], result] of programs.map((entry, i) => [entry, results[i]] as const)) {
        expect(result.error?.kind ?? 'ok', kind).toBe(kind)
        const reports = kinds.get(kind) ?? []
        expect(reports.map((report) => report.outcome), kind).toEqual([kind])
        expect(reports[0]?.computeMs, kind).toBeGreaterThanOrEqual(0)
        expect(reports[0]?.hostPids, kind).toHaveLength(1)
      }
    } finally {
      await small.dispose()
    }
  })

  it('of a run aborted before it starts has no figures of a host', async () => {
    const { result, report: figures } = await report(() => m.run('return 1', { signal: AbortSignal.abort('before') }))
    expect(result.error).toEqual({ kind: 'abort', message: 'before' })
    expect(figures).toEqual({
      outcome: 'abort',
      wallMs: figures.wallMs,
      calls: 0,
      refusedCalls: 0,
      argumentBytes: 0,
      resultBytes: 0,
      logBytes: 2,
      hostPids: [],
      reexecutions: 0,
    })
  })

  it('counts refused calls, and each call once across a host death, with both hosts\' pids', async () => {
    const capped = await mount({ maxToolCalls: 3, maxWallMs: 120_000 })
    const reports: V8CodeRunReport[] = []
    capped.ctx.on(RUN_REPORT, (report) => {
      reports.push(report)
    })
    try {
      const hold = held()
      const echo = async (args: unknown) => args
      const before = capped.runtime.stats()
      const run = capped.run(
        `await tools.echo({ a: 1 }); await tools.hold({}); await tools.echo({ b: 2 })
         for (let i = 0; i < 2; i++) try { await tools.echo({}) } catch {}
         return 'done'`,
        { bindings: tools({ echo, hold: hold.fn }) },
      )
      await hold.called
      const old = killHosts(capped)
      await hostsReplaced(capped, old)
      await until(() => capped.runtime.stats().runsReexecuted === before.runsReexecuted + 1)
      hold.answer('held')
      expect(await run).toEqual({ logs: [], value: 'done' })
      expect(reports).toHaveLength(1)
      const [figures] = reports as [V8CodeRunReport]
      expect(figures).toMatchObject({ outcome: 'ok', calls: 3, refusedCalls: 2, reexecutions: 1 })
      expect(figures.argumentBytes).toBe(['{"a":1}', '{}', '{"b":2}'].join('').length)
      // A string result crosses as it is.
      expect(figures.resultBytes).toBe(['{"a":1}', 'held', '{"b":2}'].join('').length)
      expect(figures.hostPids).toHaveLength(2)
      expect(old).toContain(figures.hostPids[0])
      expect(capped.runtime.stats().hostPids).toContain(figures.hostPids[1])
    } finally {
      await capped.dispose()
    }
  })

  it('of a run whose last host died under it has no figures of a host, but its pids', async () => {
    const { result, report: figures } = await report(() => m.run('return "x".repeat(2 ** 27 + 8).split("").length'))
    expect(result.error?.kind).toBe('worker-exit')
    expect(figures.outcome).toBe('worker-exit')
    expect(figures.computeMs).toBeUndefined()
    expect(figures.peakHeapBytes).toBeUndefined()
    expect(figures.peakExternalBytes).toBeUndefined()
    expect(figures.reexecutions).toBe(1)
    expect(new Set(figures.hostPids).size).toBe(2)
  })

  it('reaches a listener in the caller\'s async context, and a listener that throws changes nothing', async () => {
    const stores: (string | undefined)[] = []
    const throwing = m.ctx.on(RUN_REPORT, () => {
      throw new Error('a listener that throws')
    })
    const rejecting = m.ctx.on(RUN_REPORT, async () => {
      throw new Error('a listener that rejects')
    })
    const noting = m.ctx.on(RUN_REPORT, () => {
      stores.push(session.getStore())
    })
    try {
      const [a, b] = await Promise.all([
        session.run('first', () => m.run('await new Promise((r) => setTimeout(r, 5)); return "a"')),
        session.run('second', () => m.run('return "b"')),
      ])
      expect([a, b]).toEqual([{ logs: [], value: 'a' }, { logs: [], value: 'b' }])
      expect(stores.sort()).toEqual(['first', 'second'])
    } finally {
      throwing()
      rejecting()
      noting()
    }
  })
})
