// One backend in its own process, for the scenarios whose memory must not
// mix with the other backend's:
//  - throughput: N trivial runs submitted at once (runs/s, peak RSS);
//  - memory: RSS of an idle runtime and after N runs;
//  - waiting: N runs at once, each awaiting a tool that answers after 1 s
//    (wall time, peak RSS growth over the process's RSS before them);
//  - behind-cpu: N waiting runs submitted right behind 4 CPU-bound runs
//    (latency of the waiting runs, p50 and max).
// Every backend runs with its default config except where a scenario says.
//   node --expose-gc bench/child.mjs <v8|worker> <scenario> <runs>
import { readFileSync, writeFileSync } from 'node:fs'
import { Context } from '@deepseek-ai/cordis'
import WorkerThreadCodeRuntime from '@deepseek-ai/dsh-code-runtime-worker-thread'
import V8CodeRuntime from '../lib/index.js'
import { CPU_BOUND, slowToolBindings, TRIVIAL, WAITING } from './scenarios.mjs'

const [backend, scenario, runsArg] = process.argv.slice(2)
const runs = Number(runsArg)
const Plugin = backend === 'v8' ? V8CodeRuntime : WorkerThreadCodeRuntime

/** Peak resident set of this process so far (kernel's high-water mark), MiB. */
function peakRssMb() {
  const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))
  return match ? Number(match[1]) / 1024 : Number.NaN
}
/** Reset the kernel's high-water mark to the current RSS. */
function resetPeakRss() {
  writeFileSync('/proc/self/clear_refs', '5')
}
function rssMb() {
  globalThis.gc?.()
  return process.memoryUsage().rss / 1048576
}

const ctx = new Context()
const throughputConfig = backend === 'v8' && scenario === 'throughput' ? { maxQueuedRuns: runs + 10 } : {}
await ctx.plugin(Plugin, throughputConfig)
const run = () => ctx.codeRuntime.run({ program: TRIVIAL, bindings: [] })
await run()

const out = { backend, scenario, runs }
if (scenario === 'throughput') {
  const started = performance.now()
  const results = await Promise.all(Array.from({ length: runs }, run))
  const seconds = (performance.now() - started) / 1000
  out.ok = results.filter((r) => r.value === 1).length
  out.runsPerSecond = runs / seconds
  out.peakRssMb = peakRssMb()
} else if (scenario === 'waiting') {
  const bindings = slowToolBindings()
  await ctx.codeRuntime.run({ program: WAITING, bindings })
  globalThis.gc?.()
  const before = process.memoryUsage().rss / 1048576
  resetPeakRss()
  const started = performance.now()
  const results = await Promise.all(Array.from({ length: runs }, () => ctx.codeRuntime.run({ program: WAITING, bindings })))
  out.wallMs = performance.now() - started
  out.ok = results.filter((r) => r.value === 1).length
  out.peakGrowthMb = peakRssMb() - before
} else if (scenario === 'behind-cpu') {
  const bindings = slowToolBindings()
  const started = performance.now()
  const cpu = Array.from({ length: 4 }, () => ctx.codeRuntime.run({ program: CPU_BOUND, bindings: [] }))
  const latencies = await Promise.all(
    Array.from({ length: runs }, async () => {
      const submitted = performance.now()
      const result = await ctx.codeRuntime.run({ program: WAITING, bindings })
      if (result.value !== 1) throw new Error(`waiting run failed: ${JSON.stringify(result.error)}`)
      return performance.now() - submitted
    }),
  )
  const cpuResults = await Promise.all(cpu)
  out.cpuOk = cpuResults.filter((r) => typeof r.value === 'number').length
  out.cpuWallMs = performance.now() - started
  latencies.sort((a, b) => a - b)
  out.p50Ms = latencies[Math.floor(latencies.length / 2)]
  out.maxMs = latencies.at(-1)
} else {
  await new Promise((r) => setTimeout(r, 200))
  out.idleRssMb = rssMb()
  const CONCURRENCY = 8
  let next = 0
  const started = performance.now()
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next++ < runs) await run()
    }),
  )
  out.seconds = (performance.now() - started) / 1000
  await new Promise((r) => setTimeout(r, 200))
  out.afterRssMb = rssMb()
}
console.log(JSON.stringify(out))
process.exit(0)
