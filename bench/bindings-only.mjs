// The two binding scenarios alone, both backends alternating in one process
// (the full comparison is bench/run.mjs): median sequential round trip and
// the wall time of Promise.all over 10000 calls, both measured inside the
// program. For iterating on the bridge without the full bench's ten minutes.
//   node bench/bindings-only.mjs [repeats]
import { Context } from '@deepseek-ai/cordis'
import WorkerThreadCodeRuntime from '@deepseek-ai/dsh-code-runtime-worker-thread'
import V8CodeRuntime from '../lib/index.js'
import { benchBindings, PARALLEL_CALLS, SEQUENTIAL_CALLS } from './scenarios.mjs'

const repeats = Number(process.argv[2] ?? 5)
const backends = {}
for (const [name, Plugin] of [['v8', V8CodeRuntime], ['worker', WorkerThreadCodeRuntime]]) {
  const ctx = new Context()
  await ctx.plugin(Plugin, { computeMs: 120_000 })
  backends[name] = ctx.codeRuntime
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const measure = async (program) => {
  const values = { v8: [], worker: [] }
  for (let i = 0; i < repeats; i++) {
    for (const name of i % 2 === 0 ? ['v8', 'worker'] : ['worker', 'v8']) {
      const result = await backends[name].run({ program, bindings: benchBindings() })
      if (result.error) throw new Error(`${name}: ${result.error.message}`)
      values[name].push(result.value)
    }
  }
  return { v8: median(values.v8), worker: median(values.worker) }
}
const seq = await measure(SEQUENTIAL_CALLS)
console.log(`sequential round trip median: v8 ${(seq.v8 * 1000).toFixed(1)} us, worker ${(seq.worker * 1000).toFixed(1)} us, ${(seq.worker / seq.v8).toFixed(2)}x`)
const par = await measure(PARALLEL_CALLS)
console.log(`Promise.all of 10000 calls:   v8 ${par.v8.toFixed(1)} ms, worker ${par.worker.toFixed(1)} ms, ${(par.worker / par.v8).toFixed(2)}x`)
process.exit(0)
