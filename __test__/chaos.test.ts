/**
 * Chaos, deterministically: programs from a seeded generator (calls,
 * Promise.all of calls, CPU loops and console output; no clock, no
 * timer), run once where no host dies, then all at once while the shared
 * hosts are killed on events the same seed chooses (the k-th tool call the
 * harness hands the tools). Every run's value and logs must equal those of
 * its run where no host died, and every tool call must happen once. The
 * seed is printed; DSH_CHAOS_SEED runs one again.
 *
 * Timers racing tool replies are left out: their order is not in the
 * runs' history yet (a re-executed run whose logs show it diverges, and
 * fails saying so: reexecution.test.ts), and neither are clocks.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { alive, mount, tools, until, type Mounted } from './helpers.js'

/** mulberry32: a small PRNG whose stream the seed fixes. */
function prng(seed: number) {
  let state = seed >>> 0
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  return { next, int: (below: number) => Math.floor(next() * below) }
}

const SEED = Number(process.env.DSH_CHAOS_SEED ?? Math.floor(Math.random() * 2 ** 31))
const PROGRAMS = 30

/** Program `run`'s text, and how many tool calls it makes. */
function program(run: number, random: ReturnType<typeof prng>): { text: string; calls: number } {
  const lines = ['const acc = []']
  let calls = 0
  const steps = 3 + random.int(6)
  for (let step = 0; step < steps; step++) {
    switch (random.int(4)) {
      case 0:
        lines.push(`acc.push(await tools.echo({ run: ${run}, step: ${step}, part: 0, n: acc.length }))`)
        calls += 1
        break
      case 1: {
        const width = 2 + random.int(5)
        const parts = Array.from({ length: width }, (_, part) => `tools.echo({ run: ${run}, step: ${step}, part: ${part}, n: acc.length })`)
        lines.push(`acc.push(...(await Promise.all([${parts.join(', ')}])))`)
        calls += width
        break
      }
      case 2:
        lines.push(`console.log('run ${run} step ${step}', acc.length, acc.at(-1))`)
        break
      default:
        lines.push(`{ let x = 0; for (let i = 0; i < ${1e5 * (1 + random.int(20))}; i++) x = (x + i) % 1000003; acc.push(x) }`)
    }
  }
  lines.push('return acc')
  return { text: lines.join('\n'), calls }
}

let m: Mounted
beforeAll(async () => {
  m = await mount({ maxWallMs: 120_000 })
})
afterAll(() => m.dispose())

describe('chaos', () => {
  it(`runs whose hosts are killed on seeded events end as where no host died (seed ${SEED})`, async () => {
    console.log(`chaos seed: ${SEED} (DSH_CHAOS_SEED=${SEED} runs it again)`)
    const random = prng(SEED)
    const programs = Array.from({ length: PROGRAMS }, (_, run) => program(run, random))
    const totalCalls = programs.reduce((sum, { calls }) => sum + calls, 0)

    /** A tool that answers from its arguments and counts each call by them. */
    const counted = (onCall: (seen: number) => void) => {
      const calls = new Map<string, number>()
      let seen = 0
      const bindings = tools({
        echo: async (args: unknown) => {
          const { run, step, part, n } = args as { run: number; step: number; part: number; n: number }
          const key = `${run}/${step}/${part}`
          calls.set(key, (calls.get(key) ?? 0) + 1)
          onCall(++seen)
          return { key, answer: run * 1000 + step * 10 + part + n }
        },
      })
      return { bindings, calls }
    }

    // Where no host dies.
    const calm = counted(() => {})
    const expected = await Promise.all(programs.map(({ text }) => m.run(text, { bindings: calm.bindings })))
    for (const result of expected) expect(result).not.toHaveProperty('error')

    // Every shared host killed on two events the seed chooses: the k-th
    // call, or the first after it at which every shared host is ready (the
    // shared hosts are then the first `isolateHosts` of `hostPids`, before
    // any host of one run). A run is then on at most two hosts that died:
    // none reaches the third.
    const shared = m.runtime.config.isolateHosts
    const killAt = new Set([1 + random.int(Math.floor(totalCalls / 2)), Math.floor(totalCalls / 2) + random.int(Math.floor(totalCalls / 3))])
    const killed: number[] = []
    let kills = 0
    const before = m.runtime.stats()
    const chaos = counted((seen) => {
      if (killAt.has(seen)) kills++
      if (kills === 0) return
      const stats = m.runtime.stats()
      if (stats.hosts !== shared) return
      kills--
      for (const pid of stats.hostPids.slice(0, shared)) {
        killed.push(pid)
        try {
          process.kill(pid, 'SIGKILL')
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error
        }
      }
    })
    const results = await Promise.all(programs.map(({ text }) => m.run(text, { bindings: chaos.bindings })))

    expect(killed.length).toBeGreaterThan(0)
    expect(results).toEqual(expected)
    expect([...chaos.calls.entries()].filter(([, count]) => count !== 1)).toEqual([])
    expect(chaos.calls.size).toBe(totalCalls)
    const after = m.runtime.stats()
    expect(after.runsLostToHostExits).toBe(before.runsLostToHostExits)
    expect(after.reexecutionsDiverged).toBe(before.reexecutionsDiverged)
    expect(after.runsReexecuted).toBeGreaterThan(before.runsReexecuted)
    await until(() => !killed.some(alive) && m.runtime.stats().hosts === shared)
    expect((await m.run('return "next"')).value).toBe('next')
  })
})
