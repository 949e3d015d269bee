// A log flood at the default output cap (64 MiB): a program that logs empty
// strings until output-limit, which admits ~22 million entries. Prints the
// run's time, the peak RSS of the harness (which holds every admitted entry
// until the result is delivered) and of the isolate host, and the longest
// gap of a 10 ms timer in the harness meanwhile (its event loop must keep
// turning).
//   node bench/flood.mjs ['<program>']
import { readFileSync } from 'node:fs'
import { Context } from '@deepseek-ai/cordis'
import V8CodeRuntime from '../lib/index.js'

const program = process.argv[2] ?? 'for (;;) console.log("")'
const ctx = new Context()
await ctx.plugin(V8CodeRuntime, {})
let maxGap = 0
let last = performance.now()
const timer = setInterval(() => {
  const now = performance.now()
  maxGap = Math.max(maxGap, now - last)
  last = now
}, 10)
const [host] = ctx.codeRuntime.stats().hostPids
const started = performance.now()
const result = await ctx.codeRuntime.run({ program, bindings: [] })
const seconds = (performance.now() - started) / 1000
// The result is made on this thread just before the await resumes: that
// last stretch counts as a gap too.
maxGap = Math.max(maxGap, performance.now() - last)
clearInterval(timer)
const peakOf = (pid) => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) / 1024
console.log(`program: ${program}`)
console.log(`outcome: ${result.error?.kind ?? 'ok'}, ${result.logs.length} log entries, ${seconds.toFixed(1)} s`)
console.log(`peak RSS: harness ${peakOf('self').toFixed(0)} MiB, isolate host ${peakOf(host).toFixed(0)} MiB; longest gap of a 10 ms harness timer ${maxGap.toFixed(0)} ms`)
process.exit(0)
