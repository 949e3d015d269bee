/**
 * A program cannot crash the harness: runs execute in an isolate-host
 * process, and whatever ends that process (a V8 fatal error, a signal, a
 * host that stops answering) is an outcome of the runs it held, never of
 * the harness. Each test attacks, then checks the harness's runtime is
 * healthy and the next run works. Every wait is on an event (a binding
 * called, a result, a process gone), never a sleep.
 */
import { spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mount, tools, until, type Mounted } from './helpers.js'

/** Programs that make V8 end its process through a fatal check, not a catchable error. */
const FATAL = [
  // V8's size check on the array it would make: no callback runs.
  ['String#split("") of 2^27+8 characters', 'return "x".repeat(2 ** 27 + 8).split("").length'],
  ['a global match of 2^27+8 characters', 'return "x".repeat(2 ** 27 + 8).match(/x/g).length'],
  // V8's out-of-memory path, before any allocation: the heap cap never comes into it.
  ['Array#sort of an array-like of length 2^27+8', 'Array.prototype.sort.call({ length: 2 ** 27 + 8 }); return 1'],
  ['Array#toSorted of an array-like of length 2^27+8', 'return Array.prototype.toSorted.call({ length: 2 ** 27 + 8 }).length'],
]

/** Is `pid` a live process (not gone, not a zombie)? */
function alive(pid: number): boolean {
  const stat = `/proc/${pid}/stat`
  if (!existsSync(stat)) return false
  try {
    const text = readFileSync(stat, 'utf8')
    return text.slice(text.lastIndexOf(')') + 2, text.lastIndexOf(')') + 3) !== 'Z'
  } catch {
    return false
  }
}

/** A tool that never answers, and a promise of its first call: a run parked on the host. */
function neverAnswers() {
  let called: () => void = () => {}
  const waiting = new Promise<void>((resolve) => (called = resolve))
  const bindings = tools({
    wait: () => {
      called()
      return new Promise(() => {})
    },
  })
  return { bindings, waiting }
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
    expect(after.hostRestarts).toBe(before.hostRestarts + 1)
    expect(after.runsLostToHostExits).toBe(before.runsLostToHostExits + 1)
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

  it('a host killed with SIGKILL mid-run: the run settles with its logs, the next run works', async () => {
    const { bindings, waiting } = neverAnswers()
    const pending = m.run('console.log("one"); console.log("two"); await tools.wait({}); return 1', { bindings })
    await waiting
    // Every host: the run is on one of them.
    for (const pid of hostPids(m)) process.kill(pid, 'SIGKILL')
    expect(await pending).toEqual({
      logs: ['one', 'two'],
      error: {
        kind: 'worker-exit',
        message: "the isolate host stopped: killed by signal 9 (SIGKILL: the kernel's out-of-memory killer, or another process)",
      },
    })
    await healthy()
  })

  it('a host killed after writing more log than its journal holds: every entry is kept, in order', async () => {
    // ~6 MiB in 3000 entries and one 2 MiB entry: many times what the
    // journal's socket buffers hold, so the run waits for the harness to
    // read the journal (JournalFull) over and over before it reaches the
    // tool; then the host dies with the run waiting.
    const { bindings, waiting } = neverAnswers()
    const program = `
      for (let i = 0; i < 3000; i++) console.log(i + ':' + 'e'.repeat(1400))
      console.log('x'.repeat(2 << 20))
      console.log('last')
      await tools.wait({})
      return 1`
    const pending = m.run(program, { bindings })
    await waiting
    for (const pid of hostPids(m)) process.kill(pid, 'SIGKILL')
    const result = await pending
    const expected = [...Array.from({ length: 3000 }, (_, i) => `${i}:${'e'.repeat(1400)}`), 'x'.repeat(2 << 20), 'last']
    expect(result.error?.kind).toBe('worker-exit')
    expect(result.logs.length).toBe(expected.length)
    expect(result.logs).toEqual(expected)
    await healthy()
  })

  it('a host that stops answering (SIGSTOP) is killed and replaced', async () => {
    const quick = await mount({ hostUnresponsiveMs: 300, isolateHosts: 1 })
    const { bindings, waiting } = neverAnswers()
    const pending = quick.run('await tools.wait({}); return 1', { bindings })
    await waiting
    const [pid] = hostPids(quick) as [number]
    process.kill(pid, 'SIGSTOP')
    const result = await pending
    expect(result.error?.kind).toBe('worker-exit')
    expect(result.error?.message).toMatch(/^the isolate host stopped answering \(nothing for \d+ ms\) and was replaced$/)
    await until(() => !alive(pid))
    await healthy(quick)
    await quick.dispose()
  })

  it('a run queued behind a run whose host dies is placed again and completes', async () => {
    const one = await mount({ maxConcurrentRuns: 1, isolateHosts: 1 })
    const { bindings, waiting } = neverAnswers()
    const first = one.run('await tools.wait({}); return 1', { bindings })
    await waiting
    const queued = one.run('console.log("queued"); return 2')
    await until(() => one.runtime.stats().queued === 1)
    process.kill(hostPids(one)[0] as number, 'SIGKILL')
    expect((await first).error?.kind).toBe('worker-exit')
    expect(await queued).toEqual({ logs: ['queued'], value: 2 })
    expect(one.runtime.stats().runsLostToHostExits).toBe(1)
    await one.dispose()
  })

  it('a crash takes the runs on its own host only', async () => {
    // Ten runs spread over two hosts, five each; the crash lands on one.
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
    expect(results.filter((result) => result.value === 1).length).toBe(5)
    expect(results.filter((result) => result.error?.kind === 'worker-exit').length).toBe(5)
    expect(two.runtime.stats().runsLostToHostExits).toBe(6)
    await healthy(two)
    await two.dispose()
  })

  it('a crash loop does not starve other runs, and starts one host per crash', async () => {
    const loop = await mount()
    for (let i = 0; i < 3; i++) {
      const crashed = await loop.run(FATAL[0]![1] as string)
      expect(crashed.error?.kind).toBe('worker-exit')
      // A model retries at once; a healthy run submitted beside it still completes.
      const [again, other] = await Promise.all([
        loop.run(FATAL[0]![1] as string),
        loop.run('await null; return "still here"'),
      ])
      expect(again.error?.kind).toBe('worker-exit')
      // Beside the crash on the same host, it may have died with it.
      if (other.error) expect(other.error.kind).toBe('worker-exit')
      else expect(other.value).toBe('still here')
      expect(await loop.run('return "after"')).toEqual({ logs: [], value: 'after' })
    }
    // Once every host is back: one host started per crash, no more.
    await healthy(loop)
    expect(loop.runtime.stats().hostRestarts).toBe(6)
    await loop.dispose()
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
