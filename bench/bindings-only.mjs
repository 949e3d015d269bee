// Quick look at the two binding scenarios on this backend only (the full
// comparison is bench/run.mjs): median sequential round trip and the wall
// time of Promise.all over 10000 calls, both measured inside the program.
import { Context } from '@deepseek-ai/cordis'
import V8CodeRuntime from '../lib/index.js'
import { benchBindings, PARALLEL_CALLS, SEQUENTIAL_CALLS } from './scenarios.mjs'

const ctx = new Context()
await ctx.plugin(V8CodeRuntime, { computeMs: 120_000 })
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const measure = async (program) => {
  const values = []
  for (let i = 0; i < 5; i++) {
    const result = await ctx.codeRuntime.run({ program, bindings: benchBindings() })
    if (result.error) throw new Error(result.error.message)
    values.push(result.value)
  }
  return median(values)
}
console.log(`sequential round trip median: ${((await measure(SEQUENTIAL_CALLS)) * 1000).toFixed(1)} us`)
console.log(`Promise.all of 10000 calls: ${(await measure(PARALLEL_CALLS)).toFixed(1)} ms`)
process.exit(0)
