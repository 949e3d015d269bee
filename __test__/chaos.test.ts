/**
 * Chaos, deterministically: programs from a seeded generator (calls,
 * Promise.all of calls, CPU loops, console output, and timers: sleeps,
 * timers racing calls, timer and setImmediate callbacks that log or call
 * while the program awaits other calls, a setInterval cleared after a few
 * firings), run once where no host dies, then all at once while the shared
 * hosts are killed on events the same seed chooses (the k-th tool call the
 * harness hands the tools). The seed is printed; DSH_CHAOS_SEED runs one
 * again.
 *
 * With timers, what a program shows the world depends on real time (a
 * timer falls due while a tool thinks), and the run where no host died is
 * another first execution, which may legitimately have seen its events in
 * another order. So a run killed under is held to what its own first
 * execution showed the world before the kill, not to the calm run. Each
 * program keeps a trace of what reached it, in order (each call made, each
 * reply, each timer, immediate and interval firing, each race's winner,
 * each log line), sends the trace so far with every call, writes a digest
 * of it in every log line, and returns it. Executed again after its host
 * died, a run is not the one the world saw unless its trace at each
 * recorded call and log line is the one sent and written then: the
 * runtime fails it as diverged (`reexecutionsDiverged`), and whatever it
 * let through shows here as a call whose trace is not a prefix of the
 * run's final trace, or logs that are not the log lines the trace wrote.
 * Every run, calm or not, must so be consistent with what its tools saw,
 * no re-execution may diverge, and every tool call must happen once. What
 * cannot depend on timing must still equal the calm run's: the values the
 * program's own flow computes, and which calls, replies and firings
 * happened (in whatever order).
 *
 * Half the races are decided by events, not time: the tool answers the
 * call only once the racing timer's callback has made a call of its own,
 * so the timer wins in every first execution. Executed again, the reply is
 * in the history and would come at once, long before the timer: only the
 * recorded order of events (crates/sandbox-ext/js/17_event_order.js) makes the timer win
 * again. The other races, and every interleaving of timers with replies,
 * are left to real time.
 *
 * Still left out: clocks (determinism.test.ts), Atomics.waitAsync
 * (reexecution.test.ts), and what no history holds (garbage collection,
 * the stack a callback runs on: reexecution.test.ts).
 */
import { isDeepStrictEqual } from 'node:util'
import type { CodeRunResult } from '@deepseek-ai/dsh-code-runtime'
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

/**
 * What every program starts with. `seen` is its trace; `pending` what must
 * settle before it returns (a run's completion drops its pending timers and
 * calls, and the trace would miss them). A log line carries the trace's
 * length and digest, so that a re-execution whose trace differs before it
 * writes another line; a call carries the trace itself, its own entry last.
 */
const prelude = (run: number) => `const acc = []
const seen = []
const pending = []
const note = (what) => { seen.push(what) }
const digest = () => {
  const text = seen.join('\\n')
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619)
  return (h >>> 0).toString(16)
}
const log = (text) => {
  const line = text + ' #' + seen.length + ' ' + digest()
  note('log ' + line)
  console.log(line)
}
const call = (step, part, more) => {
  const key = step + '/' + part
  note('call ' + key)
  return tools.echo({ run: ${run}, step, part, n: acc.length, seen: seen.slice(), ...more }).then((answer) => {
    note('reply ' + key)
    return answer
  })
}`

/**
 * What a program notes of a timer that fires after it cleared it, which
 * no execution may do (in Node's the timer is gone).
 */
const AFTER_CLEAR = 'fired after it was cleared'

/** Program `run`'s text, and how many tool calls it makes. */
function program(run: number, random: ReturnType<typeof prng>): { text: string; calls: number } {
  const lines = [prelude(run)]
  let calls = 0
  // Small delays: long enough to fall due while a tool or a CPU loop
  // thinks, short enough for a run of many timers to stay short.
  const delay = () => random.int(12)
  // A race's winner shown to the world: in a log line, or in a later call.
  const show = (step: number, part: number) => {
    if (random.int(2) === 0) return `log('run ${run} step ${step} winner ' + winner)`
    calls += 1
    return `acc.push(await call(${step}, ${part}, { winner }))`
  }
  const steps = 4 + random.int(8)
  for (let step = 0; step < steps; step++) {
    switch (random.int(10)) {
      case 0:
        lines.push(`acc.push(await call(${step}, 0))`)
        calls += 1
        break
      case 1: {
        const width = 2 + random.int(5)
        const parts = Array.from({ length: width }, (_, part) => `call(${step}, ${part})`)
        lines.push(`acc.push(...(await Promise.all([${parts.join(', ')}])))`)
        calls += width
        break
      }
      case 2:
        lines.push(`log('run ${run} step ${step} ' + acc.length + ' ' + JSON.stringify(acc.at(-1)))`)
        break
      case 3:
        lines.push(`{ let x = 0; for (let i = 0; i < ${1e5 * (1 + random.int(20))}; i++) x = (x + i) % 1000003; acc.push(x) }`)
        break
      case 4:
        lines.push(`await new Promise((resolve) => setTimeout(resolve, ${delay()}))`, `note('slept ${step}')`)
        break
      case 5:
        // A timer races a call: either may win. The timer is cleared once
        // the race is decided: a reply that wins stops it.
        lines.push(
          `{
  const reply = call(${step}, 0)
  let cleared = false
  const timer = new Promise((resolve) => {
    const handle = setTimeout(() => { note(cleared ? 'racer ${step} ${AFTER_CLEAR}' : 'racer ${step}'); resolve('timer') }, ${delay()})
    reply.then(() => { clearTimeout(handle); cleared = true })
  })
  pending.push(reply)
  const winner = await Promise.race([reply.then(() => 'reply'), timer])
  note('raced ${step} ' + winner)
  ${show(step, 1)}
}`,
        )
        calls += 1
        break
      case 6:
        // A timer races a call the tool answers only once the timer's
        // callback has called it (`opens`): the timer wins.
        lines.push(
          `{
  const reply = call(${step}, 0, { after: true })
  const timer = new Promise((resolve) => setTimeout(() => {
    note('timer ${step}')
    pending.push(call(${step}, 1, { opens: true }))
    resolve('timer')
  }, ${delay()}))
  pending.push(reply)
  const winner = await Promise.race([reply.then(() => 'reply'), timer])
  note('won ${step} ' + winner)
  ${show(step, 2)}
}`,
        )
        calls += 2
        break
      case 7: {
        // A timer whose callback logs, calls, or both, while the program
        // goes on.
        const does = 1 + random.int(3)
        const logs = does & 1 ? `log('run ${run} timer ${step}'); ` : ''
        const settles = does & 2 ? `resolve(call(${step}, 0))` : 'resolve()'
        calls += does & 2 ? 1 : 0
        lines.push(`pending.push(new Promise((resolve) => setTimeout(() => { note('timer ${step}'); ${logs}${settles} }, ${delay()})))`)
        break
      }
      case 8: {
        const calling = random.int(2) === 0
        calls += calling ? 1 : 0
        lines.push(
          `pending.push(new Promise((resolve) => setImmediate(() => { note('immediate ${step}'); log('run ${run} immediate ${step}'); resolve(${calling ? `call(${step}, 0)` : ''}) })))`,
        )
        break
      }
      default: {
        // An interval that logs each firing, and calls and is cleared at
        // its last.
        const times = 2 + random.int(3)
        calls += 1
        lines.push(
          `pending.push(new Promise((resolve) => {
  let fired = 0
  const interval = setInterval(() => {
    fired++
    note('interval ${step} ' + fired + (fired > ${times} ? ' ${AFTER_CLEAR}' : ''))
    log('run ${run} interval ${step} ' + fired)
    if (fired === ${times}) {
      clearInterval(interval)
      resolve(call(${step}, 0, { fired }))
    }
  }, ${1 + delay()})
}))`,
        )
      }
    }
  }
  // `pending` grows while it is awaited (a timer's callback adds a call).
  lines.push('for (let i = 0; i < pending.length; i++) await pending[i]', 'return { acc, seen }')
  return { text: lines.join('\n'), calls }
}

/** What a program returns. */
interface Traced {
  acc: unknown[]
  seen: string[]
}

/**
 * Trace entries whose content real time decides (a log line carries the
 * trace's digest; a race left to time has either winner); the others,
 * taken in any order, are the same in every execution.
 */
const timed = (entry: string) => entry.startsWith('log ') || entry.startsWith('raced ') || entry.startsWith('racer ')

let m: Mounted
beforeAll(async () => {
  m = await mount({ maxWallMs: 120_000 })
})
afterAll(() => m.dispose())

describe('chaos', () => {
  it(`runs whose hosts are killed on seeded events end as their tools saw them, never diverging (seed ${SEED})`, async () => {
    console.log(`chaos seed: ${SEED} (DSH_CHAOS_SEED=${SEED} runs it again)`)
    const random = prng(SEED)
    const programs = Array.from({ length: PROGRAMS }, (_, run) => program(run, random))
    const totalCalls = programs.reduce((sum, { calls }) => sum + calls, 0)

    /**
     * A tool that answers from its arguments and keeps, by them, how often
     * each call came and the trace the first one sent. A call `after` is
     * answered once its step's `opens` call has come.
     */
    const counted = (onCall: (seen: number) => void) => {
      const calls = new Map<string, { count: number; seen: string[] }>()
      const gates = new Map<string, { opened: Promise<void>; open: () => void }>()
      const gate = (key: string) => {
        let entry = gates.get(key)
        if (entry === undefined) {
          let open: () => void = () => {}
          const opened = new Promise<void>((resolve) => (open = resolve))
          entry = { opened, open }
          gates.set(key, entry)
        }
        return entry
      }
      let seen = 0
      const bindings = tools({
        echo: async (args: unknown) => {
          const { run, step, part, n, seen: trace, after, opens } = args as {
            run: number
            step: number
            part: number
            n: number
            seen: string[]
            after?: true
            opens?: true
          }
          const key = `${run}/${step}/${part}`
          const entry = calls.get(key)
          if (entry) entry.count++
          else calls.set(key, { count: 1, seen: trace })
          onCall(++seen)
          if (opens) gate(`${run}/${step}`).open()
          if (after) await gate(`${run}/${step}`).opened
          return { key, answer: run * 1000 + step * 10 + part + n }
        },
      })
      return { bindings, calls }
    }

    /**
     * What is wrong with run `run`'s result against what its tool saw: a
     * failure; a timer that fired after the program cleared it (which its
     * trace notes); logs that are not the log lines its trace wrote, in order
     * (a line repeated, lost or changed); a call the trace does not hold,
     * or holds but the tool never saw, or saw twice; a call whose trace
     * (what the world saw of the run then) is not where the run's final
     * trace was then.
     */
    const inconsistencies = (run: number, result: CodeRunResult, calls: Map<string, { count: number; seen: string[] }>) => {
      const mine = [...calls.keys()].filter((key) => key.startsWith(`${run}/`))
      if (result.error) {
        // What the world saw of it: the logs it kept, and the trace of its
        // latest call (each call's trace holds the one before it).
        const latest = mine.map((key) => calls.get(key)!.seen).reduce((a, b) => (b.length > a.length ? b : a), [])
        return [`failed: ${result.error.kind}: ${result.error.message}; its logs ${JSON.stringify(result.logs)}; the trace of its latest call ${JSON.stringify(latest)}`]
      }
      const problems: string[] = []
      const { seen } = result.value as unknown as Traced
      const late = seen.filter((entry) => entry.endsWith(AFTER_CLEAR))
      if (late.length > 0) problems.push(`timers ${AFTER_CLEAR}: ${JSON.stringify(late)}`)
      const logs = seen.filter((entry) => entry.startsWith('log ')).map((entry) => entry.slice('log '.length))
      if (!isDeepStrictEqual(result.logs, logs)) problems.push(`logs ${JSON.stringify(result.logs)}, its trace wrote ${JSON.stringify(logs)}`)
      const made = seen.filter((entry) => entry.startsWith('call ')).map((entry) => `${run}/${entry.slice('call '.length)}`)
      if (!isDeepStrictEqual(made.toSorted(), mine.toSorted())) problems.push(`its trace made calls ${made}, its tool saw ${mine}`)
      for (const key of mine) {
        const { count, seen: then } = calls.get(key)!
        if (count !== 1) problems.push(`call ${key} came ${count} times`)
        if (!isDeepStrictEqual(seen.slice(0, then.length), then)) {
          problems.push(`call ${key} came with the trace ${JSON.stringify(then)}, where the run's final trace had ${JSON.stringify(seen.slice(0, then.length))}`)
        }
      }
      return problems
    }
    /** Every run's inconsistencies, each with its program. */
    const allInconsistencies = (results: CodeRunResult[], calls: Map<string, { count: number; seen: string[] }>) =>
      results.flatMap((result, run) => {
        const problems = inconsistencies(run, result, calls)
        return problems.length === 0 ? [] : [`run ${run}: ${problems.join('; ')}\n--- program ${run} ---\n${programs[run]!.text}`]
      })

    // Where no host dies.
    const calm = counted(() => {})
    const expected = await Promise.all(programs.map(({ text }) => m.run(text, { bindings: calm.bindings })))
    expect(allInconsistencies(expected, calm.calls)).toEqual([])
    expect(calm.calls.size).toBe(totalCalls)

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
    const after = m.runtime.stats()
    // Each run what its tools saw of it, before the kills and after (a run
    // that diverged fails here, with its program), every tool call once,
    // and none diverged or lost.
    expect(allInconsistencies(results, chaos.calls)).toEqual([])
    expect(after.reexecutionsDiverged - before.reexecutionsDiverged).toBe(0)
    expect(after.runsLostToHostExits - before.runsLostToHostExits).toBe(0)
    expect(chaos.calls.size).toBe(totalCalls)
    expect(after.runsReexecuted).toBeGreaterThan(before.runsReexecuted)
    // What no timing decides, as where no host died: the values the
    // program's own flow computed, and the calls, replies and firings.
    const untimed = (result: CodeRunResult) => {
      const { acc, seen } = result.value as unknown as Traced
      return { acc, happened: seen.filter((entry) => !timed(entry)).toSorted() }
    }
    expect(results.map(untimed)).toEqual(expected.map(untimed))
    await until(() => !killed.some(alive) && m.runtime.stats().hosts === shared)
    expect((await m.run('return "next"')).value).toBe('next')
  })
})
