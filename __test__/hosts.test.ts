/**
 * A program cannot crash the harness: runs execute in an isolate-host
 * process, and whatever ends that process (a V8 fatal error, a signal, a
 * host that stops answering) is an outcome of the runs it held, never of
 * the harness. A run that was waiting on a tool there is executed again on
 * another host (reexecution.test.ts); a run that was not (the one that
 * crashed it, one computing) is a suspect, executed again alone in a host
 * of one run, and if that host ends too it is the culprit: it settles
 * `worker-exit` with what ended that host, and its program is quarantined
 * (submitted again, it runs alone). Each test attacks, then checks the
 * harness's runtime is healthy and the next run works. Every wait is on an
 * event (a binding called, a result, a process gone, a stats() condition),
 * never a sleep.
 */
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  alive,
  computingPastItsCalls,
  held,
  hostOfOneRun,
  hostsReplaced,
  killHosts,
  mount,
  onlySharedHosts,
  parkedPastItsCalls,
  SIGKILLED,
  tools,
  until,
  type Mounted,
} from './helpers.js'

/** Programs that make V8 end its process through a fatal check, not a catchable error. */
const FATAL = [
  // V8's size check on the array it would make: no callback runs.
  ['String#split("") of 2^27+8 characters', 'return "x".repeat(2 ** 27 + 8).split("").length'],
  ['a global match of 2^27+8 characters', 'return "x".repeat(2 ** 27 + 8).match(/x/g).length'],
  // V8's out-of-memory path, before any allocation: the heap cap never comes into it.
  ['Array#sort of an array-like of length 2^27+8', 'Array.prototype.sort.call({ length: 2 ** 27 + 8 }); return 1'],
  ['Array#toSorted of an array-like of length 2^27+8', 'return Array.prototype.toSorted.call({ length: 2 ** 27 + 8 }).length'],
]

/**
 * A run parked here waits on a timer no test outlives: not on a tool, so a
 * host that dies under it makes it a suspect, as a run computing does.
 */
const FOR_EVER = 'await new Promise((resolve) => setTimeout(resolve, 3_600_000))'

/**
 * Iterations of `x += i` that take a few seconds here (~0.9 s per 10^9 on
 * this machine unloaded): a run in this loop is still computing when the
 * test kills its host right after seeing it start the loop, and ends it far
 * within computeMs (60 s) even on a loaded machine.
 */
const LONG_LOOP = 5e9

/**
 * A tool that answers when the test says, and a promise of its first call:
 * a run parked on the host (executed again if its host dies).
 */
function answersLater() {
  const later = held()
  return { bindings: tools({ wait: later.fn }), wait: later.fn, waiting: later.called, answer: later.answer, calls: () => later.calls }
}

/**
 * A tool answered at once, a promise of its first call, and its count of
 * calls: a run that calls it, then computes, is computing there once its
 * reply is back (`computingPastItsCalls`), and a host that dies then makes
 * it a suspect, executed again alone (its call answered from its history).
 */
function reached() {
  let calls = 0
  let called: () => void = () => {}
  const waiting = new Promise<void>((resolve) => (called = resolve))
  const reached = async () => {
    calls++
    called()
    return null
  }
  return { bindings: tools({ reached }), reached, waiting, calls: () => calls }
}

/** The hosts of a runtime. */
function hostPids(m: Mounted): number[] {
  const pids = m.runtime.stats().hostPids
  expect(pids.length).toBeGreaterThan(0)
  return pids
}

let m: Mounted
beforeAll(async () => {
  m = await mount({ maxWallMs: 120_000 })
})
afterAll(() => m.dispose())

/** The runtime still runs the next program, and has all its hosts again. */
async function healthy(runtime = m) {
  expect(await runtime.run('return [1, 2].map((x) => x * 2)')).toEqual({ logs: [], value: [2, 4] })
  await until(() => runtime.runtime.stats().hosts === runtime.runtime.config.isolateHosts)
}

describe('a host that dies is an outcome of its runs', () => {
  it.each(FATAL)('V8 fatal error: %s', async (_, program) => {
    const before = m.runtime.stats()
    const result = await m.run(`console.log("before"); ${program}`)
    expect(result.logs).toEqual(['before'])
    expect(result.error?.kind).toBe('worker-exit')
    expect(result.error?.message).toMatch(/^the isolate host stopped: Fatal /)
    expect(result.error?.message).not.toMatch(/\//)
    expect(result).not.toHaveProperty('value')
    await healthy()
    const after = m.runtime.stats()
    // It crashed its shared host (one replacement), was executed again
    // alone as a suspect, and crashed its host of one run: the culprit,
    // counted lost once, its program quarantined.
    expect(after.hostRestarts).toBe(before.hostRestarts + 1)
    expect(after.runsReexecuted).toBe(before.runsReexecuted + 1)
    expect(after.runsLostToHostExits).toBe(before.runsLostToHostExits + 1)
    expect(after.quarantinedPrograms).toBe(before.quarantinedPrograms + 1)
    expect(after.hostsOfOneRun).toBe(0)
    expect(after.lastHostExit).toBe(result.error?.message)
  })

  it('the fatal line names what V8 said', async () => {
    const result = await m.run('return "x".repeat(2 ** 27 + 8).split("").length')
    expect(result.error).toEqual({
      kind: 'worker-exit',
      message: 'the isolate host stopped: Fatal JavaScript invalid size error 134217736',
    })
    await healthy()
  })

  it('a host killed with SIGKILL mid-run: a run computing there is executed again alone; its host of one run killed too, it settles with its logs, the next run works', async () => {
    const before = m.runtime.stats()
    const start = reached()
    const ready = answersLater()
    // Killed in its loop, the run has not called ready: executed again,
    // it calls ready from its host of one run (which shows it started
    // there: see hostOfOneRun), then computes for ever.
    const pending = m.run(
      `console.log("one"); console.log("two")
       await tools.reached({})
       let x = 0
       for (let i = 0; i < ${LONG_LOOP}; i++) x += i
       await tools.wait({ x })
       for (;;) {}`,
      { bindings: tools({ reached: start.reached, wait: ready.wait }) },
    )
    await start.waiting
    await computingPastItsCalls(m)
    // Every host: the run is on one of them. It was computing there, so
    // it is a suspect: executed again alone, in a host of one run.
    killHosts(m)
    await ready.waiting
    expect(m.runtime.stats()).toMatchObject({ hostsOfOneRun: 1, runsReexecuted: before.runsReexecuted + 1 })
    ready.answer(null)
    const { alone, shared } = await hostOfOneRun(m, before.runsReexecuted + 1, 'computing')
    // Its host of one run ends too: it is the culprit.
    process.kill(alone, 'SIGKILL')
    expect(await pending).toEqual({ logs: ['one', 'two'], error: { kind: 'worker-exit', message: SIGKILLED } })
    expect([start.calls(), ready.calls()]).toEqual([1, 1])
    await until(() => !alive(alone))
    await onlySharedHosts(m, shared)
    await healthy()
    const after = m.runtime.stats()
    expect(after.runsLostToHostExits).toBe(before.runsLostToHostExits + 1)
    expect(after.runsReexecuted).toBe(before.runsReexecuted + 1)
    expect(after.quarantinedPrograms).toBe(before.quarantinedPrograms + 1)
    // The shared hosts killed were replaced; the host of one run is none of them.
    expect(after.hostRestarts).toBe(before.hostRestarts + m.runtime.config.isolateHosts)
    expect(after.lastHostExit).toBe(SIGKILLED)
  })

  it('a host killed with SIGKILL mid-run: a run waiting on a tool there is executed again and completes, the next run works', async () => {
    const before = m.runtime.stats()
    const { bindings, waiting, answer, calls } = answersLater()
    const pending = m.run('console.log("one"); console.log("two"); return await tools.wait({})', { bindings })
    await waiting
    await hostsReplaced(m, killHosts(m))
    answer(1)
    expect(await pending).toEqual({ logs: ['one', 'two'], value: 1 })
    expect(calls()).toBe(1)
    await healthy()
    const after = m.runtime.stats()
    expect(after.runsLostToHostExits).toBe(before.runsLostToHostExits)
    expect(after.runsReexecuted).toBe(before.runsReexecuted + 1)
  })

  // ~6 MiB in 3000 entries and one 2 MiB entry: many times what the
  // journal's socket buffers hold, so the run waits for the harness to read
  // the journal (JournalFull) over and over before it reaches the tool.
  const journalFiller = `
      for (let i = 0; i < 3000; i++) console.log(i + ':' + 'e'.repeat(1400))
      console.log('x'.repeat(2 << 20))
      console.log('last')`
  const journalFilled = [...Array.from({ length: 3000 }, (_, i) => `${i}:${'e'.repeat(1400)}`), 'x'.repeat(2 << 20), 'last']

  it('a host killed after writing more log than its journal holds: every entry is kept, in order', async () => {
    // The run is parked on a timer past its tool when its host dies (not
    // waiting on a tool): a suspect, executed again alone, writing the
    // same 6 MiB again (each entry matched with the recorded one); its
    // host of one run killed too, its logs are what the first journal
    // carried, all of it, once.
    const before = m.runtime.stats()
    const { bindings, waiting, calls } = reached()
    const pending = m.run(`${journalFiller}\n      await tools.reached({})\n      ${FOR_EVER}`, { bindings })
    await waiting
    await parkedPastItsCalls(m)
    killHosts(m)
    const { alone, shared } = await hostOfOneRun(m, before.runsReexecuted + 1, 'parked')
    process.kill(alone, 'SIGKILL')
    const result = await pending
    expect(result.error).toEqual({ kind: 'worker-exit', message: SIGKILLED })
    expect(result.logs.length).toBe(journalFilled.length)
    expect(result.logs).toEqual(journalFilled)
    expect(calls()).toBe(1)
    await onlySharedHosts(m, shared)
    await healthy()
    const after = m.runtime.stats()
    expect(after.runsLostToHostExits).toBe(before.runsLostToHostExits + 1)
    expect(after.runsReexecuted).toBe(before.runsReexecuted + 1)
    expect(after.reexecutionsDiverged).toBe(before.reexecutionsDiverged)
  })

  it('a run executed again after writing more log than its journal holds: every entry once, in order', async () => {
    // The host dies with the run waiting on its tool: executed again, the
    // run writes the same 6 MiB again, each entry matched with the
    // recorded one and held once.
    const before = m.runtime.stats()
    const { bindings, waiting, answer, calls } = answersLater()
    const pending = m.run(`${journalFiller}\n      return await tools.wait({})`, { bindings })
    await waiting
    await hostsReplaced(m, killHosts(m))
    answer(1)
    const result = await pending
    expect(result).not.toHaveProperty('error')
    expect(result.value).toBe(1)
    expect(result.logs.length).toBe(journalFilled.length)
    expect(result.logs).toEqual(journalFilled)
    expect(calls()).toBe(1)
    expect(m.runtime.stats().runsReexecuted).toBe(before.runsReexecuted + 1)
    await healthy()
  })

  it('a host that stops answering (SIGSTOP) is killed and replaced', async () => {
    // The run is parked on a timer there (a run waiting on a tool is
    // executed again: reexecution.test.ts): a suspect, executed again
    // alone. Its host of one run stopped too, it is the culprit and
    // settles with what stopped that host.
    const quick = await mount({ hostUnresponsiveMs: 300, isolateHosts: 1 })
    try {
      const { bindings, waiting, calls } = reached()
      const pending = quick.run(`console.log("here"); await tools.reached({}); ${FOR_EVER}`, { bindings })
      await waiting
      await parkedPastItsCalls(quick)
      const [pid] = hostPids(quick) as [number]
      process.kill(pid, 'SIGSTOP')
      const { alone, shared } = await hostOfOneRun(quick, 1, 'parked')
      await until(() => !alive(pid))
      expect(quick.runtime.stats().lastHostExit).toMatch(
        /^the isolate host stopped answering \(nothing for \d+ ms\) and was replaced$/,
      )
      process.kill(alone, 'SIGSTOP')
      const result = await pending
      expect(result.logs).toEqual(['here'])
      expect(result.error?.kind).toBe('worker-exit')
      expect(result.error?.message).toMatch(/^the isolate host stopped answering \(nothing for \d+ ms\) and was replaced$/)
      expect(calls()).toBe(1)
      await until(() => !alive(alone))
      await onlySharedHosts(quick, shared)
      await healthy(quick)
      expect(quick.runtime.stats()).toMatchObject({
        runsLostToHostExits: 1,
        runsReexecuted: 1,
        hostRestarts: 1,
        quarantinedPrograms: 1,
        lastHostExit: result.error?.message,
      })
    } finally {
      await quick.dispose()
    }
  })

  it('a run queued behind a run whose host dies is placed and completes', async () => {
    // The first run is parked on a timer when its host dies: a suspect,
    // executed again alone (its host of one run killed too, the culprit);
    // one waiting on a tool instead is reexecution.test.ts's. The run
    // queued behind it goes to the shared host's replacement: at once if
    // that host is ready before the suspect's host of one run, else once
    // the suspect ends (still in flight, it holds the one place), so both
    // are awaited only after that.
    const one = await mount({ maxConcurrentRuns: 1, isolateHosts: 1 })
    try {
      const { bindings, waiting, calls } = reached()
      const first = one.run(`await tools.reached({}); ${FOR_EVER}`, { bindings })
      await waiting
      await parkedPastItsCalls(one)
      const queued = one.run('console.log("queued"); return 2')
      await until(() => one.runtime.stats().queued === 1)
      killHosts(one)
      const { alone, shared } = await hostOfOneRun(one, 1, 'parked')
      process.kill(alone, 'SIGKILL')
      expect(await first).toEqual({ logs: [], error: { kind: 'worker-exit', message: SIGKILLED } })
      expect(await queued).toEqual({ logs: ['queued'], value: 2 })
      expect(calls()).toBe(1)
      await onlySharedHosts(one, shared)
      expect(one.runtime.stats()).toMatchObject({ runsLostToHostExits: 1, runsReexecuted: 1, hostRestarts: 1 })
      await healthy(one)
    } finally {
      await one.dispose()
    }
  })

  it('a crash touches the runs on its own host only: they are executed again, the others go on', async () => {
    // Ten runs spread over two hosts, five each; the crash lands on one.
    // The five waiting there are executed again (each waiting on its tool
    // call in flight, which is not made again); the five on the other host
    // are not touched. The crash itself is executed again alone (a
    // suspect), crashes its host of one run, and fails.
    const two = await mount({ isolateHosts: 2 })
    let called = 0
    let everyoneWaits: () => void = () => {}
    const allCalled = new Promise<void>((resolve) => (everyoneWaits = resolve))
    let release: (value: number) => void = () => {}
    const released = new Promise<number>((resolve) => (release = resolve))
    const bindings = tools({
      wait: () => {
        if (++called === 10) everyoneWaits()
        return released
      },
    })
    const waiting = Array.from({ length: 10 }, () => two.run('return await tools.wait({})', { bindings }))
    await allCalled
    expect((await two.run(FATAL[0]![1] as string)).error?.kind).toBe('worker-exit')
    release(1)
    const results = await Promise.all(waiting)
    expect(results).toEqual(Array.from({ length: 10 }, () => ({ logs: [], value: 1 })))
    expect(called).toBe(10)
    await healthy(two)
    expect(two.runtime.stats()).toMatchObject({
      runsLostToHostExits: 1,
      runsReexecuted: 6,
      hostRestarts: 1,
      quarantinedPrograms: 1,
      hostsOfOneRun: 0,
    })
    await two.dispose()
  })

  it('a crash loop does not starve other runs, and ends one shared host only: its first crash quarantines it', async () => {
    const loop = await mount()
    try {
      const crash = {
        logs: [],
        error: { kind: 'worker-exit', message: 'the isolate host stopped: Fatal JavaScript invalid size error 134217736' },
      }
      // Its first crash ends a shared host; executed again alone, it ends
      // its host of one run too, and is quarantined.
      expect(await loop.run(FATAL[0]![1] as string)).toEqual(crash)
      await until(() => {
        const stats = loop.runtime.stats()
        return stats.hosts === 2 && stats.hostPids.length === 2 && stats.hostRestarts === 1
      })
      const shared = loop.runtime.stats().hostPids
      for (let i = 0; i < 3; i++) {
        // A model retries at once; a healthy run submitted beside it
        // completes: the crash runs alone, in a host of one run.
        const [again, other] = await Promise.all([
          loop.run(FATAL[0]![1] as string),
          loop.run('await null; return "still here"'),
        ])
        expect(again).toEqual(crash)
        expect(other).toEqual({ logs: [], value: 'still here' })
        expect(await loop.run(FATAL[0]![1] as string)).toEqual(crash)
        expect(await loop.run('return "after"')).toEqual({ logs: [], value: 'after' })
      }
      // No shared host started after the first crash's replacement.
      await onlySharedHosts(loop, shared)
      await healthy(loop)
      expect(loop.runtime.stats()).toMatchObject({
        hostRestarts: 1,
        runsReexecuted: 1,
        runsLostToHostExits: 7,
        quarantinedPrograms: 1,
        hostsOfOneRun: 0,
      })
    } finally {
      await loop.dispose()
    }
  })

  it('a quarantined program waits for room under maxConcurrentRuns as any new run does', async () => {
    const one = await mount({ maxConcurrentRuns: 1 })
    try {
      const crash = FATAL[0]![1] as string
      // Quarantined: it ended a shared host, then its host of one run.
      expect((await one.run(crash)).error?.kind).toBe('worker-exit')
      expect(one.runtime.stats().quarantinedPrograms).toBe(1)
      const { bindings, waiting, answer } = answersLater()
      const holding = one.run('return await tools.wait({})', { bindings })
      await waiting
      // The one run in flight holds the room: submitted again, the
      // quarantined program waits in the queue. A host of one run is
      // started for it; once that host is ready, the run would have been
      // sent there (in the same step), and the host's answer to the next
      // stats() would count it (frames to a host keep their order).
      const again = one.run(crash)
      await until(() => one.runtime.stats().hostsOfOneRun === 1)
      expect(one.runtime.stats()).toMatchObject({ inFlight: 1, queued: 1 })
      answer('done')
      expect(await holding).toEqual({ logs: [], value: 'done' })
      expect((await again).error?.kind).toBe('worker-exit')
      await healthy(one)
    } finally {
      await one.dispose()
    }
  })

  it('dispose during a crash settles every run and leaves no host', async () => {
    const doomed = await mount()
    const pids = hostPids(doomed)
    const runs = [
      doomed.run(FATAL[0]![1] as string),
      // Pending on a timer, so that only the disposal can end it.
      doomed.run('await new Promise((resolve) => setTimeout(resolve, 3_600_000))'),
      doomed.run('return 1'),
    ]
    const disposal = doomed.dispose()
    const results = await Promise.all(runs)
    await disposal
    for (const result of results) {
      expect(['worker-exit', 'abort', undefined]).toContain(result.error?.kind)
    }
    expect(results[1]?.error?.kind).toBeDefined()
    for (const pid of pids) expect(alive(pid)).toBe(false)
    expect(doomed.runtime.stats()).toMatchObject({ hosts: 0, hostPids: [] })
  })
})

describe('no host outlives the harness', () => {
  it('a harness killed with SIGKILL leaves no host behind', async () => {
    const script = fileURLToPath(new URL('./fixtures/hold-a-host.mjs', import.meta.url))
    const child = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.setEncoding('utf8')
    const pids = await new Promise<number[]>((resolve) => {
      child.stdout.on('data', (chunk: string) => {
        out += chunk
        if (out.includes('\n')) resolve(JSON.parse(out.split('\n')[0] as string) as number[])
      })
    })
    expect(pids.length).toBe(2)
    for (const pid of pids) expect(alive(pid)).toBe(true)
    const exited = new Promise((resolve) => child.on('exit', resolve))
    child.kill('SIGKILL')
    await exited
    await until(() => pids.every((pid) => !alive(pid)))
  })
})
