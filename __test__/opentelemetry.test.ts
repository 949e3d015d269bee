/**
 * examples/opentelemetry.mjs, as an operator would use it: each run's
 * report reaches OpenTelemetry metrics (the SDK's in-memory exporter),
 * tagged with the run's outcome.
 */
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { forwardRunReports } from '../examples/opentelemetry.mjs'
import { mount, tools, type Mounted } from './helpers.js'

let m: Mounted
beforeAll(async () => {
  m = await mount()
})
afterAll(() => m.dispose())

it('forwards each run\'s report to OpenTelemetry metrics, by outcome', async () => {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE)
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 })
  const provider = new MeterProvider({ readers: [reader] })
  const stop = forwardRunReports(m.ctx, provider.getMeter('test'))
  try {
    const echo = async (args: unknown) => args
    const ok = await m.run('await tools.echo({ a: 1 }); console.log("x"); return await tools.echo([2])', {
      bindings: tools({ echo }),
    })
    const failed = await m.run('throw new Error("no")')
    expect([ok.value, failed.error?.kind]).toEqual([[2], 'exception'])
    await reader.forceFlush()
    const metrics = new Map(
      exporter
        .getMetrics()
        .flatMap((resource) => resource.scopeMetrics.flatMap((scope) => scope.metrics))
        .map((metric) => [metric.descriptor.name, metric.dataPoints] as const),
    )
    /** A metric's value (a sum, or a histogram's count) for each outcome and direction. */
    const by = (name: string) =>
      Object.fromEntries(
        (metrics.get(name) ?? []).map((point) => [
          [point.attributes.outcome, point.attributes.direction].filter(Boolean).join(' '),
          typeof point.value === 'number' ? point.value : (point.value as { count: number }).count,
        ]),
      )
    expect(by('code_runtime.runs')).toEqual({ ok: 1, exception: 1 })
    expect(by('code_runtime.run.wall_time')).toEqual({ ok: 1, exception: 1 })
    expect(by('code_runtime.run.cpu_time')).toEqual({ ok: 1, exception: 1 })
    expect(by('code_runtime.run.peak_heap')).toEqual({ ok: 1, exception: 1 })
    expect(by('code_runtime.tool_calls')).toEqual({ ok: 2, exception: 0 })
    expect(by('code_runtime.tool_bytes')).toEqual({
      'ok argument': '{"a":1}[2]'.length,
      'ok result': '{"a":1}[2]'.length,
      'exception argument': 0,
      'exception result': 0,
    })
    expect(by('code_runtime.log_bytes')).toEqual({ ok: '["x"]'.length, exception: 2 })
    expect(by('code_runtime.reexecutions')).toEqual({ ok: 0, exception: 0 })
  } finally {
    stop()
    await provider.shutdown()
  }
})
