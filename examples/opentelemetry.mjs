// Forward each run's report (the cordis event `code-runtime-v8/run-report`)
// to OpenTelemetry metrics, tagged with the run's outcome: what an operator
// running many sessions needs to see which runs burn CPU, hold memory or
// call tools without end. `node examples/opentelemetry.mjs` runs two
// programs and prints the metrics they made; a harness calls
// `forwardRunReports(ctx, metrics.getMeter('code-runtime'))` once, with the
// meter of its own OpenTelemetry setup. A listener runs in the caller's
// async context, so one could add the caller's session from its
// AsyncLocalStorage to the attributes too.
import { pathToFileURL } from 'node:url'
import V8CodeRuntime, { RUN_REPORT } from '../lib/index.js'

/**
 * Record every report of the runtime mounted in `ctx` on `meter` (an
 * OpenTelemetry `Meter`). Returns a function that stops forwarding.
 */
export function forwardRunReports(ctx, meter) {
  const runs = meter.createCounter('code_runtime.runs', { description: 'Runs settled' })
  const wall = meter.createHistogram('code_runtime.run.wall_time', { unit: 'ms', description: 'Wall time from run() to its result' })
  const cpu = meter.createHistogram('code_runtime.run.cpu_time', { unit: 'ms', description: 'CPU time charged to the program' })
  const heap = meter.createHistogram('code_runtime.run.peak_heap', { unit: 'By', description: 'The most its heap held' })
  const external = meter.createHistogram('code_runtime.run.peak_external', { unit: 'By', description: 'The most it held outside the heap' })
  const calls = meter.createCounter('code_runtime.tool_calls', { description: 'Binding calls that reached a host function' })
  const refused = meter.createCounter('code_runtime.tool_calls.refused', { description: 'Binding calls refused at maxToolCalls' })
  const bytes = meter.createCounter('code_runtime.tool_bytes', { unit: 'By', description: 'Bytes of binding arguments and results' })
  const logs = meter.createCounter('code_runtime.log_bytes', { unit: 'By', description: 'Bytes of logs, as maxOutputBytes counts them' })
  const reexecutions = meter.createCounter('code_runtime.reexecutions', { description: 'Runs executed again after their host died' })
  return ctx.on(RUN_REPORT, (report) => {
    const attributes = { outcome: report.outcome }
    runs.add(1, attributes)
    wall.record(report.wallMs, attributes)
    // Figures a run never had (it did not finish on a host) are absent.
    if (report.computeMs !== undefined) cpu.record(report.computeMs, attributes)
    if (report.peakHeapBytes !== undefined) heap.record(report.peakHeapBytes, attributes)
    if (report.peakExternalBytes !== undefined) external.record(report.peakExternalBytes, attributes)
    calls.add(report.calls, attributes)
    refused.add(report.refusedCalls, attributes)
    bytes.add(report.argumentBytes, { ...attributes, direction: 'argument' })
    bytes.add(report.resultBytes, { ...attributes, direction: 'result' })
    logs.add(report.logBytes, attributes)
    reexecutions.add(report.reexecutions, attributes)
  })
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { Context } = await import('@deepseek-ai/cordis')
  const { ConsoleMetricExporter, MeterProvider, PeriodicExportingMetricReader } = await import('@opentelemetry/sdk-metrics')
  const reader = new PeriodicExportingMetricReader({ exporter: new ConsoleMetricExporter(), exportIntervalMillis: 60_000 })
  const provider = new MeterProvider({ readers: [reader] })
  const ctx = new Context()
  const fiber = await ctx.plugin(V8CodeRuntime, {})
  forwardRunReports(ctx, provider.getMeter('code-runtime'))
  const bindings = [{ global: 'tools', functions: { echo: async (args) => args } }]
  await ctx.codeRuntime.run({ program: 'return await tools.echo({ hello: "world" })', bindings })
  await ctx.codeRuntime.run({ program: 'throw new Error("a failed run")', bindings })
  await provider.shutdown()
  await fiber.dispose()
}
