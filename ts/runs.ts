/**
 * What `run()` does: the runtime's runs, from a request to the seam's
 * result and its report.
 *
 * A plain object behind the cordis service (`V8CodeRuntime`) on purpose:
 * cordis hands a service's methods a `this` wrapped in two proxies, whose
 * traps walk property descriptors on every field read, and reading a mixin
 * such as `ctx.parallel` through a context builds an `Error` (with its
 * stack) for the message it would throw. Per run, that cost Node's main
 * thread ~30 µs (a sixth of a trivial run's share); here each is crossed
 * once (the service's `this.runs`, and `ctx.parallel` when the runtime is
 * made).
 * @module
 */
import type { Context } from '@deepseek-ai/cordis'
import type { CodeRunFailure, CodeRunRequest, CodeRunResult } from '@deepseek-ai/dsh-code-runtime'
import { NativeRuntime, type NativeLogs, type NativeRunResult, type NativeStats } from './native.js'
import { RUN_REPORT, runReport, type V8CodeRunReport } from './run-report.js'
import { resolveBindings } from './bindings.js'
import type { V8CodeRuntimeConfig } from './config.js'
import { BindingCalls } from './binding-calls.js'
import { PACKAGE } from './package.js'

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

/** The runs of one runtime (one mounted `V8CodeRuntime`). */
export class Runs {
  private readonly native: NativeRuntime
  private readonly calls = new BindingCalls()
  private nextRunId = 1
  private disposed = false
  /** Emits a run's report on the app's events (`ctx.parallel`, bound once). */
  private readonly emitReport: (report: V8CodeRunReport) => Promise<void>
  /** Cordis's logger for a report listener's error (read only when one fails). */
  private readonly logError: (error: unknown) => void

  constructor(ctx: Context, config: V8CodeRuntimeConfig) {
    try {
      this.native = new NativeRuntime(config, this.calls.receive)
    } catch (error) {
      // The limits only the addon can check (this machine's).
      throw new Error(`${PACKAGE}: ${error instanceof Error ? error.message : String(error)}`)
    }
    this.calls.attach(this.native)
    const parallel = ctx.parallel
    this.emitReport = (report) => parallel(RUN_REPORT, report)
    this.logError = (error) => ctx.logger.error(error)
  }

  /** Dispose to quiescence: abort live runs, await every isolate host's exit. */
  async dispose(): Promise<void> {
    this.disposed = true
    await this.native.dispose()
  }

  stats(): NativeStats {
    return this.native.stats()
  }

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
    this.emitReport(report).catch(this.logError)
    return result
  }
}
