// How far past computeMs a hot loop runs before it is stopped. A spinning
// program burns CPU at wall-clock rate, so wall time of the run minus the
// budget bounds the watchdog's overshoot from above (it also contains the
// run's own start-up, ~0.3 ms).
import { Context } from '@deepseek-ai/cordis'
import V8CodeRuntime from '../lib/index.js'

const ctx = new Context()
await ctx.plugin(V8CodeRuntime, { computeMs: 200 })
const over = []
for (let i = 0; i < 30; i++) {
  const started = performance.now()
  const result = await ctx.codeRuntime.run({ program: 'for (;;) {}', bindings: [] })
  if (result.error?.kind !== 'timeout') throw new Error(`expected timeout, got ${JSON.stringify(result)}`)
  over.push(performance.now() - started - 200)
}
over.sort((a, b) => a - b)
const q = (f) => over[Math.min(over.length - 1, Math.floor(f * over.length))].toFixed(2)
console.log(`compute budget 200 ms, 30 hot loops: overshoot p50 ${q(0.5)} ms, p90 ${q(0.9)} ms, max ${q(1)} ms`)

// Loops whose body is one long built-in call: V8 checks for termination
// only at stack checks, which such a loop reaches rarely (or, optimised,
// never) unless the call itself passes one (crates/sandbox-ext/js/12_interruptible.js).
const setup = `const s = 'ab'.repeat(1e6); const u = 'e\\u0301'.repeat(2e5); const o = Array.from({ length: 3e4 }, (_, i) => ({ i, s: 'x' + i }));`
for (const call of ["s.localeCompare(s + 'x')", "u.toLocaleUpperCase('tr')", "u.normalize('NFC')", 'JSON.stringify(o)', 's.toUpperCase()']) {
  const started = performance.now()
  const result = await ctx.codeRuntime.run({ program: `${setup} for (;;) ${call}`, bindings: [] })
  if (result.error?.kind !== 'timeout') throw new Error(`expected timeout, got ${JSON.stringify(result)}`)
  console.log(`compute budget 200 ms, a loop of ${call}: stopped after ${(performance.now() - started).toFixed(0)} ms of wall time`)
}
process.exit(0)
