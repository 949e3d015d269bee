/** Real cordis contexts around the real addon: the way users mount it. */
import { existsSync, readFileSync } from 'node:fs'
import { Worker } from 'node:worker_threads'
import { Context } from '@deepseek-ai/cordis'
import type { CodeRunRequest, CodeRunResult } from '@deepseek-ai/dsh-code-runtime'
import { WorkerThreadCodeRuntime } from '@deepseek-ai/dsh-code-runtime-worker-thread'
import { expect } from 'vitest'
import V8CodeRuntime, { type V8CodeRuntimeConfig } from '../lib/index.js'

export { V8CodeRuntime }

export interface Mounted {
  ctx: Context
  runtime: V8CodeRuntime
  run(program: string, request?: Partial<CodeRunRequest>): Promise<CodeRunResult>
  dispose(): Promise<void>
}

/** Mount the runtime in a fresh cordis Context with `config`. */
export async function mount(config: Partial<V8CodeRuntimeConfig> = {}): Promise<Mounted> {
  const ctx = new Context()
  const fiber = await ctx.plugin(V8CodeRuntime, config as V8CodeRuntimeConfig)
  const runtime = ctx.codeRuntime as V8CodeRuntime
  return {
    ctx,
    runtime,
    run: (program, request = {}) => runtime.run({ program, bindings: [], ...request }),
    dispose: () => fiber.dispose(),
  }
}

/**
 * The reference backend (a Node worker thread per run) in a fresh cordis
 * Context: the oracle for what a program sees of Node.
 */
export async function mountReference(): Promise<Omit<Mounted, 'runtime'>> {
  const ctx = new Context()
  const fiber = await ctx.plugin(WorkerThreadCodeRuntime, {} as never)
  const runtime = ctx.codeRuntime as WorkerThreadCodeRuntime
  return {
    ctx,
    run: (program, request = {}) => runtime.run({ program, bindings: [], ...request }),
    dispose: () => fiber.dispose(),
  }
}

/**
 * What a fresh Node worker thread posts back from `source` (CommonJS, with
 * `parentPort` in scope): a realm of Node's own, which a test may spoil.
 */
export async function fromNodeWorker<T>(source: string): Promise<T> {
  const worker = new Worker(`const { parentPort } = require('node:worker_threads');\n${source}`, { eval: true })
  const [value] = (await new Promise((resolve, reject) => {
    worker.once('message', (message) => resolve([message]))
    worker.once('error', reject)
  })) as [T]
  await worker.terminate()
  return value
}

/**
 * A program's completion (a string) in a fresh Node worker thread, as the
 * body of an async function: the oracle for programs that spoil built-ins
 * the reference backend's own completion path needs.
 */
export const inNodeWorker = (program: string) =>
  fromNodeWorker<string>(
    `const AsyncFunction = (async () => {}).constructor;
     new AsyncFunction(${JSON.stringify(program)})().then((value) => parentPort.postMessage(value), (error) => parentPort.postMessage('threw: ' + error.message))`,
  )

/** A namespace of host functions under `tools`. */
export function tools(
  functions: Record<string, (args: unknown) => Promise<unknown>>,
  errorClass?: { name: string; memberNameProperty: string },
) {
  return [{ global: 'tools', functions: functions as never, ...(errorClass ? { errorClass } : {}) }]
}

/** A tool whose calls the test answers when it chooses; it counts them. */
export function held() {
  let calls = 0
  let called: () => void = () => {}
  const firstCall = new Promise<void>((resolve) => (called = resolve))
  let answer: (value: unknown) => void = () => {}
  const answered = new Promise<unknown>((resolve) => (answer = resolve))
  return {
    fn: async () => {
      calls++
      called()
      return answered
    },
    /** Resolves at the first call. */
    called: firstCall,
    get calls() {
      return calls
    },
    /** Answer every call, made or to come, with `value`. */
    answer: (value: unknown) => answer(value),
  }
}

/** Resolves once `condition()` holds, checked once per event-loop turn. */
export async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setImmediate(resolve))
}

/** Is `pid` a live process (not gone, not a zombie)? */
export function alive(pid: number): boolean {
  const stat = `/proc/${pid}/stat`
  if (!existsSync(stat)) return false
  try {
    const text = readFileSync(stat, 'utf8')
    return text.slice(text.lastIndexOf(')') + 2, text.lastIndexOf(')') + 3) !== 'Z'
  } catch {
    return false
  }
}

/** What a run on a host killed with SIGKILL is told the host died of. */
export const SIGKILLED = "the isolate host stopped: killed by signal 9 (SIGKILL: the kernel's out-of-memory killer, or another process)"

/**
 * SIGKILL every isolate host of `m` (a run on any of them is on one of
 * these); returns their pids. A host that is already gone is passed over.
 */
export function killHosts(m: Mounted): number[] {
  const pids = m.runtime.stats().hostPids
  if (pids.length === 0) throw new Error('the runtime has no host to kill')
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error
    }
  }
  return pids
}

/**
 * Resolves once every host in `old` is gone and `m` has all its hosts
 * again, none of them one of `old`.
 */
export async function hostsReplaced(m: Mounted, old: number[]): Promise<void> {
  await until(() => {
    if (old.some(alive)) return false
    const stats = m.runtime.stats()
    return stats.hosts === m.runtime.config.isolateHosts && stats.hostPids.every((pid) => !old.includes(pid))
  })
}

/**
 * Resolves once the runtime's one run in flight is computing on its host
 * with none of its calls unanswered there: the harness has sent back the
 * reply to every call it made, so it is not waiting on a tool (a host that
 * dies under it makes it a suspect: it is executed again alone, in a host
 * of one run).
 */
export async function computingPastItsCalls(m: Mounted): Promise<void> {
  await until(() => {
    const stats = m.runtime.stats()
    return stats.inFlight === 1 && stats.computing === 1 && stats.waitingOnHost === 0
  })
}

/**
 * Resolves once the runtime's one run in flight is parked on its host on
 * something other than a tool (a timer), with none of its calls unanswered
 * there: not waiting on a tool, so a host that dies under it makes it a
 * suspect, as one computing.
 */
export async function parkedPastItsCalls(m: Mounted): Promise<void> {
  await until(() => {
    const stats = m.runtime.stats()
    return stats.inFlight === 1 && stats.waiting === 1 && stats.computing === 0 && stats.waitingOnHost === 0
  })
}

/**
 * Resolves once the runtime's one run in flight, a suspect, is executed
 * again alone (`runsReexecuted` at `reexecuted`) in its host of one run,
 * with none of its calls unanswered, doing what `doing` says, and every
 * shared host is ready beside it; returns that host's pid and the shared
 * hosts' pids.
 *
 * `parked` (on a timer, not a tool) shows the harness has seen the run
 * start there: a run parks only after its start is in its host's journal,
 * which the harness reads before the stats answer that says so. Not so
 * `computing`: a run counts as computing from when its thread takes it,
 * before it starts (while it is transpiled), and a host that dies before
 * the harness has seen the run start there places it again instead of
 * failing it (a placement lost, not a host lost). So `computing` only once
 * the test has seen the run start there otherwise (a tool it called from
 * there).
 *
 * `hostPids` lists the shared hosts first, in the order of their places,
 * then the hosts of one run (the supervisor's places for those come after
 * the `isolateHosts` shared ones): a test that kills the one checks that
 * the others are the shared hosts still there after it (`onlySharedHosts`).
 */
export async function hostOfOneRun(
  m: Mounted,
  reexecuted: number,
  doing: 'parked' | 'computing',
): Promise<{ alone: number; shared: number[] }> {
  const shared = m.runtime.config.isolateHosts
  let pids: number[] = []
  await until(() => {
    const stats = m.runtime.stats()
    pids = stats.hostPids
    return (
      stats.runsReexecuted === reexecuted &&
      stats.hosts === shared &&
      stats.hostsOfOneRun === 1 &&
      pids.length === shared + 1 &&
      stats.inFlight === 1 &&
      stats.waitingOnHost === 0 &&
      (doing === 'parked' ? stats.waiting === 1 && stats.computing === 0 : stats.computing === 1 && stats.waiting === 0)
    )
  })
  return { alone: pids[shared] as number, shared: pids.slice(0, shared) }
}

/**
 * Resolves once `m` has only its shared hosts (no host of one run alive,
 * its run ended) and they are `shared`, all alive: the host of one run
 * the test killed was no shared host.
 */
export async function onlySharedHosts(m: Mounted, shared: number[]): Promise<void> {
  const sorted = (pids: number[]) => [...pids].sort((a, b) => a - b)
  await until(() => {
    const stats = m.runtime.stats()
    return stats.hostsOfOneRun === 0 && stats.hostPids.length === shared.length
  })
  expect(sorted(m.runtime.stats().hostPids)).toEqual(sorted(shared))
  for (const pid of shared) expect(alive(pid)).toBe(true)
}

/**
 * The cases whose results differ between Node and the isolate (each result
 * already described as plain JSON the same way on both sides), as
 * `source / node / isolate` lines for the failure message.
 */
export function mismatches(cases: string[], node: unknown[], isolate: unknown[]): string[] {
  return cases.flatMap((source, i) => {
    const there = JSON.stringify(node[i])
    const here = JSON.stringify(isolate[i])
    return here === there ? [] : [`${source}\n  node:    ${there}\n  isolate: ${here}`]
  })
}

/**
 * A program that runs each case (an expression, awaited) and returns what
 * each gave, described as plain JSON the same way wherever it runs (the
 * isolate, this Node, a Node worker): `{ ok: value }` or `{ threw: error }`.
 * With `bigintValues: false` a bigint is described by its type only.
 */
export function casesProgram(cases: string[], { bigintValues = true } = {}): string {
  const describe = `function describe(value) {
  if (typeof value === 'bigint') return { bigint: ${bigintValues ? 'String(value)' : 'true'} }
  if (typeof value === 'number' && !Number.isFinite(value)) return { number: String(value) }
  if (value === undefined) return { undefined: true }
  if (typeof value === 'function') return { function: value.name }
  if (typeof value === 'symbol') return { symbol: String(value) }
  if (value instanceof ArrayBuffer) return { ArrayBuffer: Array.from(new Uint8Array(value), (b) => b.toString(16).padStart(2, '0')).join('') }
  if (value instanceof Error || value instanceof DOMException) return { error: { name: value.name, code: value.code ?? null, message: value.message } }
  if (Array.isArray(value)) return value.map(describe)
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, describe(v)]))
  return value
}
async function attempt(f) {
  try {
    return { ok: describe(await f()) }
  } catch (error) {
    return { threw: describe(error) }
  }
}`
  return `${describe}\nconst results = []\n${cases.map((source) => `results.push(await attempt(() => ${source}))`).join('\n')}\nreturn results`
}
