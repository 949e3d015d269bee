/**
 * The report of each run, emitted on the cordis event {@link RUN_REPORT}
 * before `run()` resolves: what the run cost, per run, for an operator's
 * telemetry (`examples/opentelemetry.ts` forwards it to OpenTelemetry
 * metrics). The addon gathers the figures (`src/run_report.rs`); this
 * adds the outcome and the wall time.
 * @module
 */
import type { CodeRunFailure, CodeRunResult } from '@deepseek-ai/dsh-code-runtime'
import type { NativeRunReport } from './native.js'

/** The cordis event each run's report is emitted on. */
export const RUN_REPORT = 'code-runtime-v8/run-report'

/**
 * What one run cost. Figures the run never had are absent: `computeMs`,
 * `peakHeapBytes` and `peakExternalBytes` come from the isolate host that
 * finished the run, so a run stopped before it started (aborted while
 * queued, or before `run()`), or whose last host died under it, has none.
 */
export interface V8CodeRunReport {
  /** `ok`, or the failure kind the run ended with. */
  outcome: 'ok' | CodeRunFailure['kind']
  /** Wall time from `run()` to its result, in ms (queueing included). */
  wallMs: number
  /** CPU time charged to the program, in ms, as `computeMs` counts it. */
  computeMs?: number
  /** The most its isolate's heap held, in bytes. */
  peakHeapBytes?: number
  /** The most it held outside the heap at once, in bytes, as `maxExternalMemoryMb` counts it. */
  peakExternalBytes?: number
  /** Binding calls that reached a host function, each once however often the run was re-executed. */
  calls: number
  /** Binding calls refused at `maxToolCalls`. */
  refusedCalls: number
  /** Bytes of the calls' arguments as they crossed: their JSON (UTF-8) and long strings out of band. */
  argumentBytes: number
  /** Bytes of the host functions' results as they crossed. */
  resultBytes: number
  /** Bytes of its logs as `maxOutputBytes` counts them: the JSON array of them (`[]` alone is 2). */
  logBytes: number
  /** The pids of the isolate hosts it started on, in order (none for a run that never started). */
  hostPids: number[]
  /** Times it was executed again after its host died. */
  reexecutions: number
}

declare module '@deepseek-ai/cordis' {
  interface Events {
    /** A run settled: what it cost (`V8CodeRunReport`), emitted before its `run()` resolves. */
    'code-runtime-v8/run-report'(report: V8CodeRunReport): void
  }
}

/** The report of a run that settled as `result`, `wallMs` after its `run()`. */
export function runReport(native: NativeRunReport, result: CodeRunResult, wallMs: number): V8CodeRunReport {
  const report: V8CodeRunReport = {
    outcome: result.error?.kind ?? 'ok',
    wallMs,
    calls: native.calls,
    refusedCalls: native.refusedCalls,
    argumentBytes: native.argumentBytes,
    resultBytes: native.resultBytes,
    logBytes: native.logBytes,
    hostPids: native.hostPids,
    reexecutions: native.reexecutions,
  }
  if (native.computeMs != null) report.computeMs = native.computeMs
  if (native.peakHeapBytes != null) report.peakHeapBytes = native.peakHeapBytes
  if (native.peakExternalBytes != null) report.peakExternalBytes = native.peakExternalBytes
  return report
}
