/**
 * `dsh-code-runtime-v8`: a `ctx.codeRuntime` backend that runs each
 * model-written TypeScript program in a fresh V8 isolate owned by a Rust
 * thread while it is in flight, in a supervised isolate-host process: a
 * program that makes V8 end its process ends its host, never the harness.
 *
 * Contract (see `@deepseek-ai/dsh-code-runtime`): `run()` resolves for every
 * program outcome and rejects only for misuse of the seam (after disposal,
 * invalid bindings, a full queue). Unlike the worker-thread backend this is
 * a capability boundary: the program sees a clean JavaScript world plus the
 * bindings it was given, and nothing of Node, the file system, the network
 * or the host environment. Budgets are enforced from outside the isolate;
 * disposal terminates live runs and awaits every isolate host's exit.
 * @module
 */
import type { Context } from '@deepseek-ai/cordis'
import { CodeRuntime, type CodeRunFailure, type CodeRunRequest, type CodeRunResult } from '@deepseek-ai/dsh-code-runtime'
import { NativeRuntime, type NativeLogs, type NativeRunResult, type NativeStats } from './native.js'
import { RUN_REPORT, runReport, type V8CodeRunReport } from './run-report.js'
import { resolveBindings } from './bindings.js'
import { Config, validateConfig, type V8CodeRuntimeConfig } from './config.js'
import { BindingCalls } from './binding-calls.js'
import { PACKAGE } from './package.js'

export type { V8CodeRuntimeConfig } from './config.js'
export { RUN_REPORT, type V8CodeRunReport } from './run-report.js'
/** What `stats()` reports: the addon's `NativeStats` (documented there). */
export type V8CodeRuntimeStats = NativeStats


/**
 * Log entries made into JS strings per event-loop turn: a chunk costs a few
 * milliseconds, so even a flood of millions of entries (all the default cap
 * admits) never holds Node's event loop for long.
 */
const LOG_CHUNK = 65_536

/** Take a result's logs, a chunk per turn (one turn for ordinary runs). */
async function collectLogs(logs: NativeLogs): Promise<string[]> {
  const out: string[] = new Array(logs.remaining)
  logs.fill(out, LOG_CHUNK)
  while (logs.remaining > 0) {
    await new Promise((resolve) => setImmediate(resolve))
    logs.fill(out, LOG_CHUNK)
  }
  return out
}

/** Turn the addon's flat result into the seam's `CodeRunResult`. */
async function toRunResult(native: NativeRunResult): Promise<CodeRunResult> {
  const result: CodeRunResult = { logs: await collectLogs(native.logs) }
  if (native.valueJson !== undefined && native.valueJson !== null) result.value = JSON.parse(native.valueJson)
  if (native.errorKind) {
    result.error = { kind: native.errorKind as CodeRunFailure['kind'], message: native.errorMessage ?? '' }
  }
  return result
}

/** `String(signal.reason)`, even for a reason whose toString throws. */
function reasonText(signal: AbortSignal): string {
  try {
    return String(signal.reason)
  } catch {
    return 'AbortError: the run was aborted'
  }
}

/**
 * The V8-isolate code runtime (`ctx.codeRuntime`). Register it with
 * `ctx.plugin(V8CodeRuntime, config)`; every cap comes from the validated
 * {@link V8CodeRuntimeConfig}.
 */
export class V8CodeRuntime extends CodeRuntime {
  static Config = Config
  readonly language = 'typescript'
  readonly isolation = 'v8-isolate'
  readonly config: V8CodeRuntimeConfig
  private readonly native: NativeRuntime
  private readonly calls = new BindingCalls()
  private nextRunId = 1
  private disposed = false

  constructor(ctx: Context, config: V8CodeRuntimeConfig) {
    super(ctx)
    validateConfig(config)
    this.config = config
    try {
      this.native = new NativeRuntime(config, this.calls.receive)
    } catch (error) {
      // The limits only the addon can check (this machine's).
      throw new Error(`${PACKAGE}: ${error instanceof Error ? error.message : String(error)}`)
    }
    this.calls.attach(this.native)
    ctx.effect(() => () => this.teardown(), 'v8 code-runtime teardown')
  }

  /** Dispose to quiescence: abort live runs, await every isolate host's exit. */
  private async teardown(): Promise<void> {
    this.disposed = true
    await this.native.dispose()
  }

  /**
   * What the runtime is doing now (runs queued, in flight, computing,
   * waiting, waiting on the host; threads; prepared isolates) and what it
   * has done (finished runs by outcome, refused runs, CPU charged to
   * programs). The run counts are one snapshot:
   * `inFlight === starting + computing + waiting`.
   */
  stats(): V8CodeRuntimeStats {
    return this.native.stats()
  }

  /**
   * Execute one program in a fresh isolate. Program outcomes resolve with
   * `result.error`; this rejects only for misuse of the seam.
   */
  async run(request: CodeRunRequest): Promise<CodeRunResult> {
    if (this.disposed) throw new Error(`${PACKAGE}: run() after disposal`)
    const startedAt = performance.now()
    const bindings = resolveBindings(request.bindings)
    const signal = request.signal
    if (signal?.aborted) return await this.settle(this.native.failBeforeStart('abort', reasonText(signal)), startedAt)
    if (typeof request.program !== 'string') throw new Error(`${PACKAGE}: request.program must be a string`)

    const runId = this.nextRunId
    this.nextRunId = this.nextRunId >= 0xffff_ffff ? 1 : this.nextRunId + 1
    this.calls.open(runId, bindings.namespaces)
    const onAbort = () => this.native.abort(runId, reasonText(signal as AbortSignal))
    signal?.addEventListener('abort', onAbort, { once: true })
    let native: NativeRunResult
    try {
      native = await this.native.run(runId, request.program, bindings.descriptorJson)
    } catch (error) {
      if (this.disposed) throw new Error(`${PACKAGE}: run() after disposal`)
      throw new Error(`${PACKAGE}: ${error instanceof Error ? error.message : String(error)}`)
    } finally {
      signal?.removeEventListener('abort', onAbort)
      this.calls.close(runId)
    }
    return await this.settle(native, startedAt)
  }

  /**
   * The seam's result of a finished run, its report emitted first (in the
   * caller's async context: a listener sees the caller's
   * `AsyncLocalStorage`). A listener that throws, or whose promise
   * rejects, changes nothing of the run: cordis's logger gets the error.
   */
  private async settle(native: NativeRunResult, startedAt: number): Promise<CodeRunResult> {
    const result = await toRunResult(native)
    const report = runReport(native.report, result, performance.now() - startedAt)
    this.ctx.parallel(RUN_REPORT, report).catch((error: unknown) => this.ctx.logger.error(error))
    return result
  }
}

export default V8CodeRuntime
