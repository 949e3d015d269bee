/**
 * The scheduler: a run that waits holds no thread another run needs,
 * CPU-bound runs do not keep waiting runs from resuming, each run's CPU
 * budget is its own, admission and refusal follow the documented limits,
 * and stats() reports it all consistently. Every wait here is on an event
 * (a binding being called, a result, a stats() condition), never a sleep.
 */
import os from 'node:os'
import { Context } from '@deepseek-ai/cordis'
import { describe, expect, it } from 'vitest'
import { mount, mountReference, tools, until, V8CodeRuntime, type Mounted } from './helpers.js'

/** A binding whose calls the test answers when it chooses. */
function gate() {
  const held: Array<(value: unknown) => void> = []
  let arrived = 0
  const waiters: Array<{ count: number; resolve: () => void }> = []
  return {
    fn: () =>
      new Promise((resolve) => {
        held.push(resolve)
        arrived++
        for (const waiter of waiters.filter((w) => arrived >= w.count)) waiter.resolve()
      }),
    /** Resolves once `count` calls have arrived in all. */
    arrived: (count: number) =>
      new Promise<void>((resolve) => (arrived >= count ? resolve() : waiters.push({ count, resolve }))),
    /** Answer every held call with `value`. */
    open: (value: unknown) => held.splice(0).forEach((resolve) => resolve(value)),
  }
}

function addsUp(stats: ReturnType<V8CodeRuntime['stats']>) {
  expect(stats.inFlight).toBe(stats.starting + stats.computing + stats.waiting)
}

const cores = os.availableParallelism()

describe('waiting runs hold no thread', () => {
  it('runs waiting on a never-answering binding do not stop 200 other runs from completing', async () => {
    // More stuck runs than cores: with a thread per core they would hold
    // every thread.
    const m = await mount()
    const never = gate()
    const stuckCount = 2 * cores + 2
    const stuck = Array.from({ length: stuckCount }, () =>
      m.run('await tools.never({}); return "unreachable"', { bindings: tools({ never: never.fn }) }),
    )
    await never.arrived(stuckCount)
    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => m.run(`return ${i} * 2`)))
    expect(results).toEqual(Array.from({ length: 200 }, (_, i) => ({ logs: [], value: i * 2 })))
    expect(m.runtime.stats()).toMatchObject({ inFlight: stuckCount, waitingOnHost: stuckCount, queued: 0 })
    await m.dispose()
    for (const result of await Promise.all(stuck)) {
      expect(result).toEqual({ logs: [], error: { kind: 'abort', message: 'runtime disposed' } })
    }
  })

  it('many more runs than cores can all be waiting on the host at once', async () => {
    // Every run must have called before any is answered: with runs bound to
    // a thread per core this never happens.
    const m = await mount()
    const hold = gate()
    const runs = Array.from({ length: 100 }, (_, i) =>
      m.run(`const v = await tools.hold({ i: ${i} }); return v + ${i}`, { bindings: tools({ hold: hold.fn }) }),
    )
    await hold.arrived(100)
    const stats = m.runtime.stats()
    expect(stats).toMatchObject({ inFlight: 100, waitingOnHost: 100, queued: 0 })
    addsUp(stats)
    hold.open(1000)
    expect(await Promise.all(runs)).toEqual(Array.from({ length: 100 }, (_, i) => ({ logs: [], value: 1000 + i })))
    await m.dispose()
  })

  it('CPU-bound runs on every core do not stop a waiting run from resuming and completing', async () => {
    // The hogs end only by their abort, after the waiting run completed. A
    // waiting run that never started or resumed is then a hang (reported by
    // the test timeout), not a run released when the hogs' budgets ran out.
    const m = await mount({ computeMs: 3_600_000 })
    const started = gate()
    const hogs = Array.from({ length: 2 * cores }, () => {
      const controller = new AbortController()
      const result = m.run('await tools.started({}); for (;;) {}', {
        bindings: tools({ started: started.fn }),
        signal: controller.signal,
      })
      return { controller, result }
    })
    await started.arrived(hogs.length)
    started.open(null)
    // Every hog is now spinning; the waiting run starts, waits, resumes.
    await until(() => m.runtime.stats().computing >= hogs.length)
    const answer = gate()
    const waiting = m.run('const a = await tools.answer({}); let s = 0; for (let i = 0; i < 1000; i++) s += i; return [a, s]', {
      bindings: tools({ answer: answer.fn }),
    })
    await answer.arrived(1)
    answer.open('resumed')
    expect(await waiting).toEqual({ logs: [], value: ['resumed', 499500] })
    for (const hog of hogs) hog.controller.abort('done')
    for (const hog of hogs) expect(await hog.result).toEqual({ logs: [], error: { kind: 'abort', message: 'done' } })
    expect((await m.run('return "healthy"')).value).toBe('healthy')
    await m.dispose()
  })
})

describe('budgets stay per run', () => {
  it("a run's CPU budget is not charged for other runs' work on the same cores", async () => {
    // The runtime's computeMs is 400. Hogs burn their whole 400 ms each (and
    // end as timeouts); meanwhile the subject computes a little between
    // ticks, and each tick is answered only once the others have burned
    // another 100 ms: 20 ticks, so at least 2000 ms of others' CPU (five
    // budgets) passes while the subject is in flight and computing.
    const computeMs = 400
    const m = await mount({ computeMs })
    let subjectDone = false
    const hogResults: Array<Promise<unknown>> = []
    const hogLoop = async () => {
      while (!subjectDone) {
        const result = m.run('for (;;) {}')
        hogResults.push(result)
        await result
      }
    }
    const hogLoops = Array.from({ length: cores + 1 }, hogLoop)
    const tick = async () => {
      const from = m.runtime.stats().cpuMs
      await until(() => m.runtime.stats().cpuMs >= from + computeMs / 4)
      return null
    }
    const subject = await m.run(
      `let s = 0
       for (let t = 0; t < 20; t++) {
         for (let i = 0; i < 100000; i++) s = (s + i * 7) % 1000003
         await tools.tick({})
       }
       return s`,
      { bindings: tools({ tick }) },
    )
    subjectDone = true
    await Promise.all(hogLoops)
    let s = 0
    for (let t = 0; t < 20; t++) for (let i = 0; i < 100000; i++) s = (s + i * 7) % 1000003
    expect(subject).toEqual({ logs: [], value: s })
    const timeout = { logs: [], error: { kind: 'timeout', message: `compute budget exhausted (${computeMs}ms busy)` } }
    for (const result of await Promise.all(hogResults)) expect(result).toEqual(timeout)
    expect(m.runtime.stats().cpuMs).toBeGreaterThanOrEqual(20 * (computeMs / 4))
    await m.dispose()
  })

  it('a CPU-bound run still ends at its own budget among other CPU-bound runs', async () => {
    const m = await mount({ computeMs: 300 })
    const results = await Promise.all(Array.from({ length: 3 * cores }, () => m.run("console.log('go'); for (;;) {}")))
    for (const result of results) {
      expect(result).toEqual({ logs: ['go'], error: { kind: 'timeout', message: 'compute budget exhausted (300ms busy)' } })
    }
    await m.dispose()
  })
})

describe('caps hold with many runs at once', () => {
  it('heap and buffer bombs running together each end at their own cap, beside a waiting run that completes', async () => {
    const m = await mount({ maxOldGenerationSizeMb: 32, maxExternalMemoryMb: 16, computeMs: 20_000 })
    const answer = gate()
    const waiting = m.run('return await tools.answer({})', { bindings: tools({ answer: answer.fn }) })
    await answer.arrived(1)
    const heap = Array.from({ length: cores + 1 }, () => m.run('const a = []; for (;;) a.push([1, 2, 3, 4, 5, 6, 7, 8])'))
    const buffers = Array.from({ length: cores + 1 }, () => m.run('const keep = []; for (;;) keep.push(new Uint8Array(1024 * 1024))'))
    for (const result of await Promise.all(heap)) {
      expect(result.error?.kind).toBe('worker-exit')
      expect(result.error?.message).toBe('heap limit reached: the program exceeded maxOldGenerationSizeMb (32 MiB)')
    }
    for (const result of await Promise.all(buffers)) {
      expect(result.error?.kind).toBe('worker-exit')
      expect(result.error?.message).toBe(
        "external memory limit reached: the program's memory outside the heap exceeded maxExternalMemoryMb (16 MiB)",
      )
    }
    answer.open('still here')
    expect(await waiting).toEqual({ logs: [], value: 'still here' })
    expect((await m.run('return "next"')).value).toBe('next')
    await m.dispose()
  })
})

describe('admission limits', () => {
  const full = 'dsh-code-runtime-v8: the run queue is full (config.maxQueuedRuns); wait for runs to finish or raise the limit'

  it('maxConcurrentRuns runs are in flight, maxQueuedRuns wait, the next run() rejects', async () => {
    const m = await mount({ maxConcurrentRuns: 2, maxQueuedRuns: 3 })
    const hold = gate()
    const bindings = tools({ hold: hold.fn })
    const inFlight = [0, 1].map((i) => m.run(`return (await tools.hold({})) + ${i}`, { bindings }))
    await hold.arrived(2)
    const queued = [2, 3, 4].map((i) => m.run(`return ${i}`))
    // Both threads park once their pump stops spinning for a reply.
    await until(() => m.runtime.stats().waiting === 2)
    let stats = m.runtime.stats()
    expect(stats).toMatchObject({ inFlight: 2, waiting: 2, waitingOnHost: 2, queued: 3, refused: 0 })
    addsUp(stats)
    await expect(m.run('return 5')).rejects.toThrow(full)
    expect(m.runtime.stats()).toMatchObject({ queued: 3, refused: 1 })
    hold.open(10)
    expect(await Promise.all([...inFlight, ...queued])).toEqual([10, 11, 2, 3, 4].map((value) => ({ logs: [], value })))
    stats = m.runtime.stats()
    expect(stats).toMatchObject({ inFlight: 0, queued: 0, waitingOnHost: 0, refused: 1 })
    expect(stats.outcomes.ok).toBe(5)
    // The queue has room again.
    expect((await m.run('return 6')).value).toBe(6)
    await m.dispose()
  })

  it('a queued run that is aborted finishes at once, without starting', async () => {
    const m = await mount({ maxConcurrentRuns: 1 })
    const hold = gate()
    const blocker = m.run('return await tools.hold({})', { bindings: tools({ hold: hold.fn }) })
    await hold.arrived(1)
    const controller = new AbortController()
    const queued = m.run("console.log('started'); return 1", { signal: controller.signal })
    expect(m.runtime.stats()).toMatchObject({ inFlight: 1, queued: 1 })
    controller.abort(new Error('not needed'))
    expect(await queued).toEqual({ logs: [], error: { kind: 'abort', message: 'Error: not needed' } })
    expect(m.runtime.stats()).toMatchObject({ inFlight: 1, queued: 0 })
    hold.open('done')
    expect(await blocker).toEqual({ logs: [], value: 'done' })
    await m.dispose()
  })

  it('disposal finishes queued and in-flight runs alike and joins every thread', async () => {
    // Repeated: disposal stops runs in no set order, and a queued run that
    // was admitted as the blocker stopped used to complete (~1 in 60).
    for (let round = 0; round < 20; round++) {
      const m = await mount({ maxConcurrentRuns: 1 })
      const hold = gate()
      const blocker = m.run("console.log('in flight'); await tools.hold({})", { bindings: tools({ hold: hold.fn }) })
      await hold.arrived(1)
      const queued = [m.run('return 1'), m.run('return 2')]
      await m.dispose()
      const disposed = { kind: 'abort', message: 'runtime disposed' }
      expect(await blocker).toEqual({ logs: ['in flight'], error: disposed })
      for (const result of await Promise.all(queued)) expect(result).toEqual({ logs: [], error: disposed })
      expect(m.runtime.stats()).toMatchObject({ threads: 0, preparedIsolates: 0, inFlight: 0, queued: 0 })
    }
  })

  it.each([
    [{ maxConcurrentRuns: 0 }, /^dsh-code-runtime-v8: config\.maxConcurrentRuns must be a positive number, got 0$/],
    [{ maxConcurrentRuns: 2.5 }, /^dsh-code-runtime-v8: config\.maxConcurrentRuns must be a whole number, got 2\.5$/],
    [{ preparedIsolates: -1 }, /^dsh-code-runtime-v8: config\.preparedIsolates must be a positive number, got -1$/],
    [{ maxConcurrentRuns: 1_000_000 }, /^dsh-code-runtime-v8: config\.maxConcurrentRuns \(1000000\) is more than this machine allows \(\d+\): .*vm\.max_map_count is \d+$/],
    [{ poolSize: 2 }, /^dsh-code-runtime-v8: config\.poolSize is retired: runs no longer hold a fixed pool of threads \(a run waiting on a tool holds no CPU\); use config\.maxConcurrentRuns for runs in flight and config\.preparedIsolates for isolates kept ready$/],
    [{ isolateHosts: 65 }, /^dsh-code-runtime-v8: config\.isolateHosts must be at most 64, got 65$/],
    [{ isolateHosts: 1.5 }, /^dsh-code-runtime-v8: config\.isolateHosts must be a whole number, got 1\.5$/],
    [{ preparedIsolates: 100_000 }, /^dsh-code-runtime-v8: config\.preparedIsolates must be at most \d+ \(64 per core\), got 100000$/],
    [{ computeMs: 1e300 }, /^dsh-code-runtime-v8: config\.computeMs must be at most 2147483647, got 1e\+300$/],
    [{ maxOldGenerationSizeMb: 1e9 }, /^dsh-code-runtime-v8: config\.maxOldGenerationSizeMb must be at most \d+ \(this machine's memory\), got 1000000000$/],
    [{ hostUnresponsiveMs: 50 }, /^dsh-code-runtime-v8: config\.hostUnresponsiveMs must be at least 100, got 50$/],
    [{ hostUnresponsiveMs: 0 }, /^dsh-code-runtime-v8: config\.hostUnresponsiveMs must be a positive number, got 0$/],
    [{ hostMaxRssMb: 0 }, /^dsh-code-runtime-v8: config\.hostMaxRssMb must be a positive number, got 0$/],
    [{ requireSandbox: 'yes' }, /^invalid config:\n  - \$\.requireSandbox expected boolean but got yes \(at requireSandbox\)$/],
  ])('refuses config %o, naming the key', async (config, message) => {
    await expect(new Context().plugin(V8CodeRuntime, config as never)).rejects.toThrow(message)
  })
})

describe('stats()', () => {
  it('counts every outcome, refused runs and CPU, and its run counts add up', async () => {
    const m: Mounted = await mount({ computeMs: 200, maxOutputBytes: 64 })
    // The reserve: one prepared isolate per core by default, on idle threads.
    await until(() => m.runtime.stats().preparedIsolates === cores)
    expect(m.runtime.stats()).toMatchObject({
      inFlight: 0, queued: 0, starting: 0, computing: 0, waiting: 0, waitingOnHost: 0, threads: cores,
    })
    const controller = new AbortController()
    controller.abort('early')
    const results = await Promise.all([
      m.run('return 1'),
      m.run('console.log(1)'),
      m.run('throw new Error("x")'),
      m.run('for (;;) {}'),
      m.runtime.run({ program: 'return 1', bindings: [], signal: controller.signal }),
      m.run('process.exit(3)'),
      m.run('return () => 1'),
      m.run("console.log('x'.repeat(100))"),
    ])
    expect(results.map((result) => result.error?.kind ?? 'ok')).toEqual([
      'ok', 'ok', 'exception', 'timeout', 'abort', 'worker-exit', 'invalid-output', 'output-limit',
    ])
    const stats = m.runtime.stats()
    expect(stats.outcomes).toEqual({
      ok: 2, exception: 1, timeout: 1, abort: 1, workerExit: 1, invalidOutput: 1, outputLimit: 1,
    })
    expect(stats).toMatchObject({ inFlight: 0, queued: 0, refused: 0 })
    // The timed-out run alone was charged its whole budget.
    expect(stats.cpuMs).toBeGreaterThanOrEqual(200)
    await m.dispose()
  })

  it('warms the prepared isolates once the runtime is quiet; a run takes one as it would a fresh one', async () => {
    const m: Mounted = await mount()
    const reference = await mountReference()
    try {
      await until(() => m.runtime.stats().preparedIsolates === cores && m.runtime.stats().isolatesWarmed >= cores)
      const { isolatesWarmed: warmed, hostRestarts } = m.runtime.stats()
      // What warming ran (the bridge's encoder and decoder, the console's
      // rendering), in a run on a warmed isolate, as the reference runs it;
      // and the realm's last match as a run starts, which warming's own
      // matches must not leave behind.
      const program =
        "const last = [RegExp.input, RegExp.lastMatch, RegExp.leftContext, RegExp.rightContext, RegExp.lastParen, RegExp.$1]\n" +
        "const r = await tools.echo({ query: 'q', n: [1, -0.5, 'x'], nested: { a: null, b: true } })\n" +
        "console.log('got', r, [r.n], 0.25)\n" +
        'return { last, r }'
      const bindings = () => tools({ echo: async (value: unknown) => value })
      const expected = await reference.run(program, { bindings: bindings() })
      expect(expected.value).toMatchObject({ last: ['', '', '', '', '', ''] })
      expect(await m.run(program, { bindings: bindings() })).toEqual(expected)
      // The isolate made after the run is warmed in turn.
      await until(() => m.runtime.stats().isolatesWarmed > warmed)
      expect(m.runtime.stats().hostRestarts).toBe(hostRestarts)
    } finally {
      await reference.dispose()
      await m.dispose()
    }
  })
})
