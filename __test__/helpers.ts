/** Real cordis contexts around the real addon: the way users mount it. */
import { Worker } from 'node:worker_threads'
import { Context } from '@deepseek-ai/cordis'
import type { CodeRunRequest, CodeRunResult } from '@deepseek-ai/dsh-code-runtime'
import { WorkerThreadCodeRuntime } from '@deepseek-ai/dsh-code-runtime-worker-thread'
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

/** Resolves once `condition()` holds, checked once per event-loop turn. */
export async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setImmediate(resolve))
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
