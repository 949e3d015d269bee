/**
 * A run's history is bounded: past `maxRunHistoryMb`, or past what all
 * runs' histories may hold together (`maxHistoryMb`), the run goes on
 * live, but its history is dropped, and its host's death then fails it,
 * saying which cap it passed. `stats().historyBytes` is what the
 * histories hold. Every wait is on an event (a tool called, a process
 * gone), never a sleep.
 */
import { describe, expect, it } from 'vitest'
import { held, hostsReplaced, killHosts, mount, SIGKILLED, tools, until } from './helpers.js'

const MIB = 1024 * 1024
/** Two of these pass 1 MiB; one does not. */
const PART = Math.floor(0.6 * MIB)

/** A tool answering `bytes` of text at once, and one the test holds open. */
function bigThenHeld(bytes: number) {
  const hold = held()
  let bigCalls = 0
  const bindings = tools({
    big: async () => {
      bigCalls++
      return 'x'.repeat(bytes)
    },
    hold: hold.fn,
  })
  return { bindings, holding: hold.called, release: hold.answer, bigCalls: () => bigCalls }
}

const PROGRAM = 'const big = await tools.big({}); console.log(big.length); await tools.hold({}); return big.length'

describe('histories are bounded', () => {
  it('a run past maxRunHistoryMb goes on, and fails when its host dies, naming the cap', async () => {
    const m = await mount({ maxRunHistoryMb: 1 })
    try {
      // Within the cap: executed again, the long reply answered from the history.
      const within = bigThenHeld(MIB / 2)
      const kept = m.run(PROGRAM, { bindings: within.bindings })
      await within.holding
      expect(m.runtime.stats().historyBytes).toBeGreaterThanOrEqual(MIB / 2)
      await hostsReplaced(m, killHosts(m))
      within.release(1)
      expect(await kept).toEqual({ logs: [String(MIB / 2)], value: MIB / 2 })
      expect(within.bigCalls()).toBe(1)

      // Past it: dropped (historyBytes holds nothing of it), then lost.
      const past = bigThenHeld(2 * MIB)
      const dropped = m.run(PROGRAM, { bindings: past.bindings })
      await past.holding
      expect(m.runtime.stats().historyBytes).toBeLessThan(MIB)
      const before = m.runtime.stats()
      await hostsReplaced(m, killHosts(m))
      expect(await dropped).toEqual({
        logs: [String(2 * MIB)],
        error: {
          kind: 'worker-exit',
          message: `${SIGKILLED}; the run's history passed maxRunHistoryMb (1 MiB), so it could not be re-executed`,
        },
      })
      past.release(1)
      expect(past.bigCalls()).toBe(1)
      expect(m.runtime.stats().runsLostToHostExits).toBe(before.runsLostToHostExits + 1)
      await until(() => m.runtime.stats().historyBytes === 0)
    } finally {
      await m.dispose()
    }
  })

  it('a run whose history would take all runs\' past maxHistoryMb has its history dropped', async () => {
    const m = await mount({ maxRunHistoryMb: 1, maxHistoryMb: 1 })
    try {
      const first = bigThenHeld(PART)
      const second = bigThenHeld(PART)
      const kept = m.run(PROGRAM, { bindings: first.bindings })
      await first.holding
      const dropped = m.run(PROGRAM, { bindings: second.bindings })
      await second.holding
      await hostsReplaced(m, killHosts(m))
      first.release(1)
      expect(await kept).toEqual({ logs: [String(PART)], value: PART })
      expect(await dropped).toEqual({
        logs: [String(PART)],
        error: {
          kind: 'worker-exit',
          message: `${SIGKILLED}; the run's history passed maxHistoryMb (1 MiB), so it could not be re-executed`,
        },
      })
      second.release(1)
      expect([first.bigCalls(), second.bigCalls()]).toEqual([1, 1])
    } finally {
      await m.dispose()
    }
  })
})
