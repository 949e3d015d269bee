// One backend in its own process, for the scenarios whose memory must not
// mix with the other backend's: throughput of N runs submitted at once (runs
// per second, peak RSS), and RSS of an idle runtime and after N runs.
//   node --expose-gc bench/child.mjs <v8|worker> <throughput|memory> <runs>
import { readFileSync } from 'node:fs'
import { Context } from '@deepseek-ai/cordis'
import WorkerThreadCodeRuntime from '@deepseek-ai/dsh-code-runtime-worker-thread'
import V8CodeRuntime from '../lib/index.js'
import { TRIVIAL } from './scenarios.mjs'

const [backend, scenario, runsArg] = process.argv.slice(2)
const runs = Number(runsArg)
const Plugin = backend === 'v8' ? V8CodeRuntime : WorkerThreadCodeRuntime

/** Peak resident set of this process so far (kernel's high-water mark), MiB. */
function peakRssMb() {
  const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))
  return match ? Number(match[1]) / 1024 : Number.NaN
}
function rssMb() {
  globalThis.gc?.()
  return process.memoryUsage().rss / 1048576
}

const ctx = new Context()
await ctx.plugin(Plugin, backend === 'v8' ? { maxQueuedRuns: runs + 10 } : {})
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
