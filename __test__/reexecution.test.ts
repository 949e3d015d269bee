/**
 * Nothing lost when a host dies: a run that was waiting on a tool when its
 * isolate host died (a bystander) is executed again from its start on a
 * live host, its calls answered from the history the harness kept (no tool
 * is called twice, a call in flight at the death is answered by the tool's
 * own answer when it comes), its logs held once. A run that was not shown
 * waiting (the one that crashed the host, one computing) is a suspect: it
 * is executed again the same way, but alone, in a host of one run; an
 * innocent one completes there, and one that ends that host too is the
 * culprit, which fails `worker-exit` with what ended it, its program
 * quarantined (submitted again, it runs alone: no shared host dies of it
 * again). A re-executed run that turns out not to be the run its history
 * records fails, and so does one on its third host to die. Every wait is
 * on an event (a tool called, a result, a process gone, a stats()
 * condition), never a sleep.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  alive,
  computingPastItsCalls,
  fromNodeWorker,
  held,
  hostsReplaced,
  killHosts,
  mount,
  onlySharedHosts,
  SIGKILLED,
  tools,
  until,
  type Mounted,
} from './helpers.js'

const CRASH = 'return "x".repeat(2 ** 27 + 8).split("").length'

/** What CRASH fails with, wherever it runs (hosts.test.ts: the fatal line names what V8 said). */
const CRASHED = {
  logs: [],
  error: { kind: 'worker-exit', message: 'the isolate host stopped: Fatal JavaScript invalid size error 134217736' },
}

const diverged = (what: string) =>
  `${SIGKILLED}; the run was re-executed on another isolate host and diverged from its history: ${what}`

const RUNS = 40

/**
 * `count` runs (40 unless told) that each make a call answered at once,
 * log a line, then wait on a gate the test opens: every tool call counted
 * per run (the run's index is in each call's argument).
 */
function waitingRuns(m: Mounted, count = RUNS) {
  const calls = { first: new Array<number>(count).fill(0), gate: new Array<number>(count).fill(0) }
  let open: () => void = () => {}
  const opened = new Promise<void>((resolve) => (open = resolve))
  let atGate = 0
  let allWaiting: () => void = () => {}
  const everyoneWaits = new Promise<void>((resolve) => (allWaiting = resolve))
  const bindings = tools({
    first: async (args) => {
      const { run } = args as { run: number }
      calls.first[run]++
      return run * 2
    },
    gate: async (args) => {
      const { run } = args as { run: number }
      calls.gate[run]++
      if (++atGate === count) allWaiting()
      await opened
      return run + 1000
    },
  })
  const results = Array.from({ length: count }, (_, run) =>
    m.run(
      `const first = await tools.first({ run: ${run} })
       console.log('run ${run}: first ' + first)
       const second = await tools.gate({ run: ${run} })
       return first + second`,
      { bindings },
    ),
  )
  return {
    results,
    everyoneWaits,
    open,
    /** Each run completed with what it computes from the tools' answers, its log line once, each tool called once per call. */
    async complete() {
      expect(await Promise.all(results)).toEqual(
        Array.from({ length: count }, (_, run) => ({ logs: [`run ${run}: first ${run * 2}`], value: run * 3 + 1000 })),
      )
      expect(calls).toEqual({ first: new Array(count).fill(1), gate: new Array(count).fill(1) })
    },
  }
}

let m: Mounted
beforeAll(async () => {
  m = await mount()
})
afterAll(() => m.dispose())

/** The runtime has all its hosts, and runs the next program. */
async function healthy(runtime = m) {
  await until(() => runtime.runtime.stats().hosts === runtime.runtime.config.isolateHosts)
  expect(await runtime.run('return [1, 2].map((x) => x * 2)')).toEqual({ logs: [], value: [2, 4] })
}

describe('a run waiting on a tool when its host dies is executed again', () => {
  it('40 waiting runs on hosts killed with SIGKILL all complete, each tool called once per call, each log line once', async () => {
    const before = m.runtime.stats()
    const forty = waitingRuns(m)
    await forty.everyoneWaits
    const old = killHosts(m)
    await hostsReplaced(m, old)
    forty.open()
    await forty.complete()
    const after = m.runtime.stats()
    expect(after.runsReexecuted).toBe(before.runsReexecuted + RUNS)
    expect(after.reexecutionsDiverged).toBe(before.reexecutionsDiverged)
    expect(after.runsLostToHostExits).toBe(before.runsLostToHostExits)
    expect(after.hostRestarts).toBe(before.hostRestarts + old.length)
    expect(after.lastHostExit).toBe(SIGKILLED)
    await healthy()
  })

  it('beside them, the program that crashes its host alone fails; the 40 complete', async () => {
    await healthy()
    const before = m.runtime.stats()
    const forty = waitingRuns(m)
    await forty.everyoneWaits
    const crash = await m.run(CRASH)
    expect(crash.logs).toEqual([])
    expect(crash.error?.kind).toBe('worker-exit')
    expect(crash.error?.message).toMatch(/^the isolate host stopped: Fatal /)
    expect(crash).not.toHaveProperty('value')
    forty.open()
    await forty.complete()
    const after = m.runtime.stats()
    // The 40 were spread over the two hosts, 20 each; the crash took one
    // of them, and the runs on the other went on where they were. The
    // crash, executed again alone (a suspect), ended its host of one run
    // too: the culprit, lost, its program quarantined.
    expect(m.runtime.config.isolateHosts).toBe(2)
    expect(after.runsReexecuted).toBe(before.runsReexecuted + RUNS / 2 + 1)
    expect(after.runsLostToHostExits).toBe(before.runsLostToHostExits + 1)
    expect(after.quarantinedPrograms).toBe(before.quarantinedPrograms + 1)
    expect(after.lastHostExit).toBe(crash.error?.message)
    await healthy()
    expect(m.runtime.stats()).toMatchObject({ hostRestarts: before.hostRestarts + 1, hostsOfOneRun: 0 })
  })

  it.each([
    ['once its host is replaced', true],
    ['as soon as the harness has seen its host die', false],
  ])('a tool call in flight at the death is not made again: its answer, given %s, answers the run executed again', async (_, wait) => {
    const before = m.runtime.stats()
    const hold = held()
    const pending = m.run('console.log("before"); const got = await tools.hold({}); console.log("after"); return got + "!"', {
      bindings: tools({ hold: hold.fn }),
    })
    await hold.called
    const old = killHosts(m)
    // Not before the harness has seen the death: a reply it sends before
    // then may have reached the run, which would then have been computing
    // when its host died (a suspect), as far as the harness can show.
    if (wait) await hostsReplaced(m, old)
    else await until(() => m.runtime.stats().runsReexecuted === before.runsReexecuted + 1)
    hold.answer('answered')
    expect(await pending).toEqual({ logs: ['before', 'after'], value: 'answered!' })
    expect(hold.calls).toBe(1)
    expect(m.runtime.stats().runsReexecuted).toBe(before.runsReexecuted + 1)
    await hostsReplaced(m, old)
    await healthy()
  })

  it('from the end of its history on, the run goes on live: new calls call the tools', async () => {
    const before = m.runtime.stats()
    let answeredAtOnce = 0
    let after = 0
    const hold = held()
    const pending = m.run(
      `const a = await tools.now({})
       const b = await tools.hold({})
       const c = await tools.later({ b })
       return [a, b, c]`,
      {
        bindings: tools({
          now: async () => ++answeredAtOnce,
          hold: hold.fn,
          later: async (args) => {
            after++
            return (args as { b: string }).b + ' and later'
          },
        }),
      },
    )
    await hold.called
    const old = killHosts(m)
    await hostsReplaced(m, old)
    hold.answer('held')
    expect(await pending).toEqual({ logs: [], value: [1, 'held', 'held and later'] })
    expect([answeredAtOnce, hold.calls, after]).toEqual([1, 1, 1])
    // Once per host death it saw: every host was killed at once, and the
    // harness may place the re-execution on one whose death it has not
    // read yet (then it is executed once more, its tools still called once).
    const reexecuted = m.runtime.stats().runsReexecuted - before.runsReexecuted
    expect(reexecuted).toBeGreaterThanOrEqual(1)
    expect(reexecuted).toBeLessThanOrEqual(old.length)
    await healthy()
  })

  it('a result whose long strings crossed beside its JSON is answered again from the history, whole', async () => {
    // read_file's shape, and a list of long matches: their strings cross
    // beside the JSON, and the history holds them with it.
    const text = 'line\n'.repeat(20_000) + '\u00e9\u{1F600}'
    const matches = Array.from({ length: 3 }, (_, i) => String(i).repeat(30_000))
    let reads = 0
    const hold = held()
    const pending = m.run(
      `const file = await tools.read({})
       const found = await tools.hold({})
       return [file.path, file.text === ${JSON.stringify(text)}, file.matches.map((s) => s.length + s[0]), found]`,
      { bindings: tools({ read: async () => (reads++, { path: 'a.txt', text, matches }), hold: hold.fn }) },
    )
    await hold.called
    await hostsReplaced(m, killHosts(m))
    hold.answer('held')
    expect(await pending).toEqual({ logs: [], value: ['a.txt', true, ['300000', '300001', '300002'], 'held'] })
    expect([reads, hold.calls]).toEqual([1, 1])
    await healthy()
  })

  it('calls whose long string arguments crossed beside their JSON are known again by them: answered from the history, tools called once', async () => {
    // Past the out-of-band length: the harness digests such strings after
    // their tool has the call (history.rs, `Identity::Deferred`), and the
    // re-execution's calls are compared with those digests.
    const long = 'x'.repeat(100_000)
    const wide = '\u00e9'.repeat(100_000)
    const seen: unknown[] = []
    const hold = held()
    const pending = m.run(
      `const a = await tools.take({ long: ${JSON.stringify(long)}, wide: ${JSON.stringify(wide)} })
       const b = await tools.hold({ again: ${JSON.stringify(long)} + "y" })
       return [a, b]`,
      {
        bindings: tools({
          take: async (args) => (seen.push(args), 'taken'),
          hold: (args) => (seen.push(args), hold.fn()),
        }),
      },
    )
    await hold.called
    await hostsReplaced(m, killHosts(m))
    hold.answer('held')
    expect(await pending).toEqual({ logs: [], value: ['taken', 'held'] })
    expect(seen).toEqual([{ long, wide }, { again: long + 'y' }])
    expect(hold.calls).toBe(1)
    await healthy()
  })

  it('a host that stops answering (SIGSTOP) is replaced, and its waiting run executed again', async () => {
    const quick = await mount({ hostUnresponsiveMs: 300, isolateHosts: 1 })
    try {
      const hold = held()
      const pending = quick.run('console.log("here"); return await tools.hold({})', { bindings: tools({ hold: hold.fn }) })
      await hold.called
      const [pid] = quick.runtime.stats().hostPids as [number]
      process.kill(pid, 'SIGSTOP')
      await hostsReplaced(quick, [pid])
      hold.answer(7)
      expect(await pending).toEqual({ logs: ['here'], value: 7 })
      expect(hold.calls).toBe(1)
      const stats = quick.runtime.stats()
      expect(stats).toMatchObject({ runsReexecuted: 1, runsLostToHostExits: 0, hostRestarts: 1 })
      expect(stats.lastHostExit).toMatch(/^the isolate host stopped answering \(nothing for \d+ ms\) and was replaced$/)
      expect(alive(pid)).toBe(false)
      await healthy(quick)
    } finally {
      await quick.dispose()
    }
  })

  it('a run executed again and a run queued behind it both complete', async () => {
    const one = await mount({ maxConcurrentRuns: 1, isolateHosts: 1 })
    try {
      const hold = held()
      const first = one.run('console.log("first"); return await tools.hold({})', { bindings: tools({ hold: hold.fn }) })
      await hold.called
      const queued = one.run('console.log("queued"); return 2')
      await until(() => one.runtime.stats().queued === 1)
      await hostsReplaced(one, killHosts(one))
      hold.answer(1)
      expect(await first).toEqual({ logs: ['first'], value: 1 })
      expect(await queued).toEqual({ logs: ['queued'], value: 2 })
      expect(hold.calls).toBe(1)
      expect(one.runtime.stats()).toMatchObject({ runsReexecuted: 1, runsLostToHostExits: 0 })
      await healthy(one)
    } finally {
      await one.dispose()
    }
  })
})

/**
 * The delay, in ms, of what races a held tool's reply in the tests below.
 * In the first execution the racer wins whatever the delay (the test
 * answers the tool only after the program went on past the race). Executed
 * again, the reply is answered from the history as soon as the call reaches
 * the harness: a round trip that a tool answered at once took 0.1 ms
 * (median) and 13 ms at worst of 50 on a two-core machine, idle or beside
 * two busy loops. 2 s is over a hundred times that worst; the price is 2 s
 * of waiting in each first execution. Where the racer is outside the
 * history, this is a race by design (no event can order it for the test):
 * only the margin makes its outcome sure, and on a machine so loaded that a
 * round trip takes seconds the test fails on what the run settled with, not
 * by hanging.
 */
const RACE_MS = 2000

/**
 * Run `program` (which races `hold` against something, shows the world the
 * winner, then calls `park`) with `hold` and `park` as its tools; once it
 * has called `park`, answer `hold`, wait until the reply is in the run's
 * history, and kill every host; answer `park` once the run is executed
 * again. Checks that it was executed again, and diverged (and was lost) or
 * not, as `diverges` says; returns what it settled with, how often `hold`
 * was called, and what `park` was called with. `more`: tools of the test's
 * own beside them.
 */
async function raceAcrossAHostDeath(
  program: string,
  diverges: boolean,
  more: Record<string, (args: unknown) => Promise<unknown>> = {},
) {
  const before = m.runtime.stats()
  const hold = held()
  const park = held()
  const parkedWith: unknown[] = []
  const pending = m.run(program, {
    bindings: tools({
      ...more,
      hold: hold.fn,
      park: (args) => {
        parkedWith.push(args)
        return park.fn()
      },
    }),
  })
  // `park` is called after the race: the racer has won it.
  await park.called
  // The history holds the run's calls (`park`'s too, by now: a call is
  // taken into it before its tool is called); the reply is the next thing
  // it takes. Killed before then, the run would still be re-executed, its
  // `hold` answered by this answer when it came.
  const parked = m.runtime.stats().historyBytes
  hold.answer('answered')
  await until(() => m.runtime.stats().historyBytes > parked)
  const old = killHosts(m)
  await until(() => m.runtime.stats().runsReexecuted === before.runsReexecuted + 1)
  // A re-execution that diverges does so before it calls `park` again: the
  // answer waits in the history, unused. One that does not is answered by
  // it (the call was in flight at the death) and completes.
  park.answer('parked')
  const settled = await pending
  await hostsReplaced(m, old)
  const after = m.runtime.stats()
  const moved = diverges ? 1 : 0
  expect(after.runsReexecuted).toBe(before.runsReexecuted + 1)
  expect(after.reexecutionsDiverged).toBe(before.reexecutionsDiverged + moved)
  expect(after.runsLostToHostExits).toBe(before.runsLostToHostExits + moved)
  return { settled, holdCalls: hold.calls, parkedWith }
}

describe('a run executed again sees its timers and replies in the recorded order', () => {
  // A timer races a tool's reply. In the first execution the timer wins
  // (the tool is answered after the program went on); executed again, the
  // reply is answered from the history at once, long before the timer falls
  // due, and would win, but the history holds the order in which the two
  // reached the program (crates/sandbox-ext/js/17_event_order.js): the reply waits for the
  // timer, and the program sees 'timer' again.
  const RACE = `const winner = await Promise.race([
       tools.hold({}).then(() => 'reply'),
       new Promise((resolve) => setTimeout(() => resolve('timer'), ${RACE_MS})),
     ])`

  it('in a log line, a call and a branch', async () => {
    const { settled, holdCalls, parkedWith } = await raceAcrossAHostDeath(
      `${RACE}
       console.log(winner)
       if (winner === 'reply') return 'executed again'
       await tools.park({ winner })
       return winner`,
      false,
    )
    expect(settled).toEqual({ logs: ['timer'], value: 'timer' })
    expect([holdCalls, parkedWith]).toEqual([1, [{ winner: 'timer' }]])
    await healthy()
  })

  it('a timer and a reply that a re-execution would see the other way round', async () => {
    // `a` (20 ms) is made before a call to `slow`, which the test answers
    // only once `a` has fired (its callback tells `tell`); `b` (0 ms) is made
    // after the reply. So `a` fires first. Executed again, `slow` is
    // answered from the history at once, and `b` would fall due long before
    // `a`; the recorded order holds the reply back until `a` has fired.
    const slow = held()
    let told = 0
    const { settled, holdCalls } = await raceAcrossAHostDeath(
      `const order = []
       setTimeout(() => { order.push('a'); tools.tell({}) }, 20)
       await tools.slow({})
       setTimeout(() => order.push('b'), 0)
       await new Promise((resolve) => setTimeout(resolve, 40))
       ${RACE}
       console.log(order.join(), winner)
       await tools.park({ order })
       return order`,
      false,
      {
        slow: slow.fn,
        tell: async () => {
          told++
          slow.answer('slow')
          return 'told'
        },
      },
    )
    expect(settled).toEqual({ logs: ['a,b timer'], value: ['a', 'b'] })
    expect([holdCalls, slow.calls, told]).toEqual([1, 1, 1])
    await healthy()
  })

  it("the first turn's timers and immediates, which run immediates first however long the synchronous part computed", async () => {
    // The synchronous part computes past both timers' delays, so the loop's
    // first turn finds them due before it reaches the immediates; they run
    // immediates first (as in the reference), and the history must record
    // that order: recorded as the loop fired them, a re-execution would run
    // 't' first and diverge at its first log line.
    const { settled, holdCalls, parkedWith } = await raceAcrossAHostDeath(
      `const out = []
       setTimeout(() => { out.push('t'); console.log('t') }, 0)
       setImmediate(() => { out.push('i'); console.log('i') })
       setTimeout(() => out.push('t1'), 1)
       setImmediate(() => out.push('i2'))
       const start = performance.now()
       while (performance.now() - start < 5);
       ${RACE}
       console.log(out.join(), winner)
       await tools.park({ out })
       return out`,
      false,
    )
    expect(settled).toEqual({ logs: ['i', 't', 'i,i2,t,t1 timer'], value: ['i', 'i2', 't', 't1'] })
    expect([holdCalls, parkedWith]).toEqual([1, [{ out: ['i', 'i2', 't', 't1'] }]])
    await healthy()
  })

  it.each([
    ['setInterval', `new Promise((resolve) => { let n = 0; const i = setInterval(() => { if (++n === 20) { clearInterval(i); resolve('timer') } }, ${RACE_MS / 20}) })`],
    ['setImmediate', `new Promise((resolve) => setTimeout(() => setImmediate(() => resolve('timer')), ${RACE_MS}))`],
    ['AbortSignal.timeout', `new Promise((resolve) => AbortSignal.timeout(${RACE_MS}).addEventListener('abort', () => resolve('timer')))`],
  ])('%s racing a reply, an interval ticking meanwhile: the winner and the ticks are the recorded ones', async (_, racer) => {
    const { settled, holdCalls, parkedWith } = await raceAcrossAHostDeath(
      `let ticks = 0
       const ticking = setInterval(() => ticks++, 10)
       const winner = await Promise.race([tools.hold({}).then(() => 'reply'), ${racer}])
       clearInterval(ticking)
       console.log(winner + ' ' + ticks)
       await tools.park({ winner, ticks })
       return ticks`,
      false,
    )
    const ticks = settled.value as number
    expect(ticks).toBeGreaterThan(0)
    expect(settled).toEqual({ logs: [`timer ${ticks}`], value: ticks })
    expect([holdCalls, parkedWith]).toEqual([1, [{ winner: 'timer', ticks }]])
    await healthy()
  })

  it("Atomics.waitAsync's timeout racing a reply, and the waiters notify then finds", async () => {
    // The wait times out first; executed again, its timeout (a timer of the
    // run: crates/sandbox-ext/js/18_atomics_wait.js) keeps its recorded place, so `notify`
    // finds the same waiters: none on the element that timed out, one on
    // the other.
    const { settled, holdCalls, parkedWith } = await raceAcrossAHostDeath(
      `const i = new Int32Array(new SharedArrayBuffer(8))
       const other = Atomics.waitAsync(i, 1, 0)
       const winner = await Promise.race([
         tools.hold({}).then(() => 'reply'),
         Atomics.waitAsync(i, 0, 0, ${RACE_MS}).value,
       ])
       const woken = [Atomics.notify(i, 0), Atomics.notify(i, 1)]
       console.log(winner, woken.join())
       await tools.park({ winner, woken })
       return [winner, woken, await other.value]`,
      false,
    )
    expect(settled).toEqual({ logs: ['timed-out 0,1'], value: ['timed-out', [0, 1], 'ok'] })
    expect([holdCalls, parkedWith]).toEqual([1, [{ winner: 'timed-out', woken: [0, 1] }]])
    await healthy()
  })
})

describe('a run executed again that is not the run its history records fails, saying where', () => {
  // Random numbers, clock readings, the order of timers and replies and
  // Atomics.waitAsync's timeouts are the same in every execution (the
  // history holds them: determinism.test.ts and the tests above). What it
  // does not hold: when garbage collection runs a FinalizationRegistry's
  // callbacks, and the stack a timer's callback runs on. A timer that
  // fires live runs its callback straight from deno_core's timer phase;
  // one replayed, through the order of events' `advance`
  // (17_event_order.js), which a live one never passes. So the stack trace
  // of an error made in a timer's callback names other frames: the program
  // shows the world that trace (in a log line, a call's argument), and
  // executed again shows it another. Each test also calls `hold`, left
  // unanswered until `park` is called (raceAcrossAHostDeath). Should the
  // two paths come to name the same frames, these tests must take their
  // difference from another source.
  const RACE = `tools.hold({})
     Error.stackTraceLimit = Infinity
     const winner = await new Promise((resolve) => setTimeout(() => resolve(new Error().stack), 1))`

  it('a log line that is not the recorded one', async () => {
    const { settled, holdCalls, parkedWith } = await raceAcrossAHostDeath(
      `${RACE}
       console.log(winner)
       await tools.park({})
       return 1`,
      true,
    )
    expect(settled).toEqual({
      logs: [expect.stringMatching(/^Error\n/)],
      error: { kind: 'worker-exit', message: diverged('its log entry number 1 is not the recorded one') },
    })
    expect([holdCalls, parkedWith]).toEqual([1, [{}]])
    await healthy()
  })

  it('a call that is not the recorded one', async () => {
    const { settled, holdCalls, parkedWith } = await raceAcrossAHostDeath(
      `${RACE}
       await tools.park({ winner })
       return 1`,
      true,
    )
    expect(settled).toEqual({
      logs: [],
      error: { kind: 'worker-exit', message: diverged('its call number 2 is not the recorded one') },
    })
    // The call that diverged (`park` told another stack) never reached the tool.
    expect([holdCalls, parkedWith]).toEqual([1, [{ winner: expect.stringMatching(/^Error\n/) }]])
    await healthy()
  })

  it('a call whose long string argument is not the recorded one', async () => {
    // The stack crosses beside the call's JSON (past the out-of-band
    // length), its digest finished after the tool had the call.
    const { settled, holdCalls, parkedWith } = await raceAcrossAHostDeath(
      `${RACE}
       await tools.park({ winner: winner + "x".repeat(100_000) })
       return 1`,
      true,
    )
    expect(settled).toEqual({
      logs: [],
      error: { kind: 'worker-exit', message: diverged('its call number 2 is not the recorded one') },
    })
    // (Checked by its ends: a pattern of a stack then 10^5 'x's backtracks
    // for seconds.)
    const ends = (parkedWith as { winner: string }[]).map(({ winner }) => [winner.slice(0, 6), winner.slice(-100_001)])
    expect([holdCalls, ends]).toEqual([1, [['Error\n', ')' + 'x'.repeat(100_000)]]])
    await healthy()
  })

  // A run that finishes before making its recorded calls again fails too
  // (history.rs's tests): no source left here makes a branch differ.
})

describe('a run computing when its host dies (a suspect) is executed again alone', () => {
  // ~4.5 s of loop on this machine unloaded (~0.9 s per 10^9): long past
  // the kill, which follows the wait at once, and far within computeMs
  // (60 s) even on a loaded machine.
  const N = 5e9

  it('an innocent suspect completes in its host of one run, its tool called once; that host ends with it', async () => {
    await healthy()
    const before = m.runtime.stats()
    expect(before.hostsOfOneRun).toBe(0)
    // The loop's value, as Node computes it (the same doubles, summed in the same order).
    const expected = fromNodeWorker<number>(
      `parentPort.postMessage((() => { let x = 0; for (let i = 0; i < ${N}; i++) x += i; return x })())`,
    )
    let nows = 0
    let nowCalled: () => void = () => {}
    const calledNow = new Promise<void>((resolve) => (nowCalled = resolve))
    const done = held()
    const pending = m.run(
      `const got = await tools.now({})
       console.log('got ' + got)
       let x = 0
       for (let i = 0; i < ${N}; i++) x += i
       await tools.done({ x })
       return x`,
      {
        bindings: tools({
          now: async () => {
            nowCalled()
            return ++nows
          },
          done: done.fn,
        }),
      },
    )
    await calledNow
    await computingPastItsCalls(m)
    // No host of one run yet: these are the shared hosts, the run on one.
    const shared = m.runtime.stats().hostPids
    expect(shared.length).toBe(m.runtime.config.isolateHosts)
    killHosts(m)
    // Executed again alone: its call answered from its history, it
    // computes again, then calls done from its host of one run.
    await done.called
    await until(() => {
      const stats = m.runtime.stats()
      return stats.runsReexecuted === before.runsReexecuted + 1 && stats.hostsOfOneRun === 1 && stats.waitingOnHost === 1
    })
    done.answer('done')
    expect(await pending).toEqual({ logs: ['got 1'], value: await expected })
    expect([nows, done.calls]).toEqual([1, 1])
    // Its host of one run is shut down once its run ends.
    await until(() => {
      const stats = m.runtime.stats()
      return stats.hostsOfOneRun === 0 && stats.hostPids.length === m.runtime.config.isolateHosts
    })
    await healthy()
    const after = m.runtime.stats()
    expect(after.runsReexecuted).toBe(before.runsReexecuted + 1)
    expect(after.runsLostToHostExits).toBe(before.runsLostToHostExits)
    expect(after.reexecutionsDiverged).toBe(before.reexecutionsDiverged)
    expect(after.quarantinedPrograms).toBe(before.quarantinedPrograms)
    expect(after.hostRestarts).toBe(before.hostRestarts + shared.length)
    for (const pid of shared) expect(alive(pid)).toBe(false)
  })
})

describe('a program that crashes its host, submitted again and again, ends one shared host', () => {
  it('60 runs waiting on a tool beside a crash resubmitted 15 times: no shared host dies after the first crash; the 60 complete', async () => {
    // A runtime of its own: CRASH is quarantined in `m` already.
    const own = await mount()
    try {
      await healthy(own)
      const before = own.runtime.stats()
      expect(before.quarantinedPrograms).toBe(0)
      const sixty = waitingRuns(own, 60)
      await sixty.everyoneWaits
      const first = own.runtime.stats().hostPids
      expect(first.length).toBe(2)
      // A model retries at once, after each failure. The first crash ends
      // a shared host; executed again alone, it ends its host of one run
      // too: the culprit, quarantined.
      expect(await own.run(CRASH)).toEqual(CRASHED)
      await until(() => {
        const stats = own.runtime.stats()
        return stats.hosts === 2 && stats.hostPids.length === 2 && stats.hostRestarts === before.hostRestarts + 1
      })
      const shared = own.runtime.stats().hostPids
      expect(first.filter((pid) => shared.includes(pid)).length).toBe(1)
      expect(own.runtime.stats().quarantinedPrograms).toBe(1)
      // Each time after, alone in a host of one run: no shared host dies.
      const sorted = (pids: number[]) => [...pids].sort((a, b) => a - b)
      for (let i = 1; i < 15; i++) {
        expect(await own.run(CRASH)).toEqual(CRASHED)
        expect(sorted(own.runtime.stats().hostPids)).toEqual(sorted(shared))
      }
      await onlySharedHosts(own, shared)
      expect(own.runtime.stats()).toMatchObject({
        hosts: 2,
        hostsOfOneRun: 0,
        hostRestarts: before.hostRestarts + 1,
        quarantinedPrograms: 1,
        // The 30 waiting on the crashed shared host, and the first crash as a suspect.
        runsReexecuted: before.runsReexecuted + 30 + 1,
        reexecutionsDiverged: before.reexecutionsDiverged,
        runsLostToHostExits: before.runsLostToHostExits + 15,
        lastHostExit: CRASHED.error.message,
      })
      sixty.open()
      await sixty.complete()
      expect(own.runtime.stats()).toMatchObject({
        runsReexecuted: before.runsReexecuted + 31,
        runsLostToHostExits: before.runsLostToHostExits + 15,
      })
      await healthy(own)
      expect(sorted(own.runtime.stats().hostPids)).toEqual(sorted(shared))
    } finally {
      await own.dispose()
    }
  })
})

describe("a re-executed run's CPU counts once", () => {
  // Each program spins on its own CPU reading (what computeMs counts) for
  // `ms` before a call and again after it, and its hosts are killed while it
  // waits on the call. Executed again, it starts charged with what it had
  // spent before the death; making its history again (the first spin, once
  // more) is not charged on top; the second spin is. So 800 + 800 ms fits a
  // 2000 ms budget (charged twice for the first spin, it would not), and
  // 1200 + 1200 does not (starting again from nothing, it would: the first
  // spin made again reads its recorded CPU readings, not the clock, and
  // takes a fraction of its first time; this case failed so before the
  // budget was told what the run carried ahead of the watchdog's first
  // look at it).
  const program = (ms: number) => `
    const spin = () => { const start = process.cpuUsage().user; while (process.cpuUsage().user - start < ${ms * 1000}); }
    spin()
    const answer = await tools.hold({})
    spin()
    return answer`

  let capped: Mounted
  beforeAll(async () => {
    capped = await mount({ computeMs: 2000 })
  })
  afterAll(() => capped.dispose())

  async function spinAcrossAHostDeath(ms: number) {
    const before = capped.runtime.stats()
    const hold = held()
    const pending = capped.run(program(ms), { bindings: tools({ hold: hold.fn }) })
    await hold.called
    await hostsReplaced(capped, killHosts(capped))
    await until(() => capped.runtime.stats().runsReexecuted === before.runsReexecuted + 1)
    hold.answer('held')
    const settled = await pending
    expect(hold.calls).toBe(1)
    expect(capped.runtime.stats().reexecutionsDiverged).toBe(before.reexecutionsDiverged)
    return settled
  }

  it('what it spent before the death is not charged twice', async () => {
    expect(await spinAcrossAHostDeath(800)).toEqual({ logs: [], value: 'held' })
    await healthy(capped)
  })

  it('nor forgotten', async () => {
    expect(await spinAcrossAHostDeath(1200)).toEqual({
      logs: [],
      error: { kind: 'timeout', message: 'compute budget exhausted (2000ms busy)' },
    })
    await healthy(capped)
  })
})

describe('the limits of re-execution', () => {
  it('a run on the third host to die under it is not executed again', async () => {
    // One host, so that each death is of the host the run is on: with two
    // killed at once, a run executed again may be placed on the other one
    // before the harness has seen it die, and that host counts too.
    const one = await mount({ isolateHosts: 1 })
    try {
      await thirdHost(one)
    } finally {
      await one.dispose()
    }
  })

  /** The run of the third-host test, on a runtime of one host. */
  async function thirdHost(one: Mounted) {
    const before = one.runtime.stats()
    const [a, b, c] = [held(), held(), held()]
    const pending = one.run(
      `const a = await tools.a({}); console.log('a ' + a)
       const b = await tools.b({}); console.log('b ' + b)
       const c = await tools.c({})
       return a + b + c`,
      { bindings: tools({ a: a.fn, b: b.fn, c: c.fn }) },
    )
    // First host: the run waits on a; executed again, it waits on a again.
    await a.called
    await hostsReplaced(one, killHosts(one))
    await until(() => one.runtime.stats().runsReexecuted === before.runsReexecuted + 1)
    a.answer('A')
    // Second host: a answered from the history, then b, called live.
    await b.called
    await hostsReplaced(one, killHosts(one))
    await until(() => one.runtime.stats().runsReexecuted === before.runsReexecuted + 2)
    b.answer('B')
    // Third host: on its second host to die, the run went alone, in a
    // host of one run; c, called live; its host dies too.
    await c.called
    expect(one.runtime.stats()).toMatchObject({ hosts: 1, hostsOfOneRun: 1 })
    killHosts(one)
    expect(await pending).toEqual({
      logs: ['a A', 'b B'],
      error: { kind: 'worker-exit', message: `${SIGKILLED}; the run was on 3 isolate hosts that ended, and is not re-executed again` },
    })
    c.answer('C')
    expect([a.calls, b.calls, c.calls]).toEqual([1, 1, 1])
    const after = one.runtime.stats()
    expect(after.runsReexecuted).toBe(before.runsReexecuted + 2)
    expect(after.reexecutionsDiverged).toBe(before.reexecutionsDiverged)
    expect(after.runsLostToHostExits).toBe(before.runsLostToHostExits + 1)
    await healthy(one)
  }

  it("the caller's abort of a run being executed again settles abort with the signal's reason", async () => {
    const before = m.runtime.stats()
    const controller = new AbortController()
    const hold = held()
    const pending = m.run('console.log("waiting"); return await tools.hold({})', {
      bindings: tools({ hold: hold.fn }),
      signal: controller.signal,
    })
    await hold.called
    killHosts(m)
    await until(() => m.runtime.stats().runsReexecuted === before.runsReexecuted + 1)
    controller.abort('the caller gave up')
    // docs/CONTRACT.md §8: abort's message is exactly String(signal.reason).
    expect(await pending).toEqual({ logs: ['waiting'], error: { kind: 'abort', message: 'the caller gave up' } })
    hold.answer(1)
    expect(hold.calls).toBe(1)
    const after = m.runtime.stats()
    expect(after.outcomes.abort).toBe(before.outcomes.abort + 1)
    expect(after.runsLostToHostExits).toBe(before.runsLostToHostExits)
    await healthy()
  })

  it('after all of it, the runtime runs the next program', async () => {
    await healthy()
    const stats = m.runtime.stats()
    expect(stats).toMatchObject({ inFlight: 0, queued: 0, hosts: 2 })
    expect(await m.run('console.log("next"); return "next"')).toEqual({ logs: ['next'], value: 'next' })
  })
})
