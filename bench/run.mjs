// The side-by-side benchmark: dsh-code-runtime-v8 against the reference
// backend (@deepseek-ai/dsh-code-runtime-worker-thread), same machine, same
// run, same programs. Latency scenarios alternate the two backends round by
// round inside one process; throughput and memory run each backend in its
// own child process so their memory never mixes. Prints a table of medians,
// p99 and ratios; writes bench/results.json and bench/chart.svg.
//   npm run bench                 (all scenarios, full sizes)
//   npm run bench -- --quick      (smaller sizes, for a quick look)
import { execFileSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import { fileURLToPath } from 'node:url'
import { Context } from '@deepseek-ai/cordis'
import WorkerThreadCodeRuntime from '@deepseek-ai/dsh-code-runtime-worker-thread'
import V8CodeRuntime from '../lib/index.js'
import { benchBindings, CODE_MODE, COMPUTE, PARALLEL_CALLS, SEQUENTIAL_CALLS, TRIVIAL } from './scenarios.mjs'

const quick = process.argv.includes('--quick')
const sizes = quick
  ? { rounds: 4, perRound: 10, bindingRepeats: 2, computeRepeats: 2, throughput: 300, memory: 1000, waiting: [10, 100], behindCpu: 20, concurrencyRepeats: 1 }
  : { rounds: 10, perRound: 20, bindingRepeats: 5, computeRepeats: 5, throughput: 2000, memory: 10000, waiting: [10, 100, 1000], behindCpu: 50, concurrencyRepeats: 3 }

const ctx = new Context()
await ctx.plugin(V8CodeRuntime, { computeMs: 120_000 })
const v8 = ctx.codeRuntime
const refCtx = new Context()
await refCtx.plugin(WorkerThreadCodeRuntime, { computeMs: 120_000 })
const ref = refCtx.codeRuntime
const backends = { v8, worker: ref }

function quantile(values, q) {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]
}
const median = (values) => quantile(values, 0.5)

async function timed(runtime, program) {
  const started = performance.now()
  const result = await runtime.run({ program, bindings: benchBindings() })
  if (result.error) throw new Error(`${runtime.isolation}: ${result.error.kind}: ${result.error.message}`)
  return { ms: performance.now() - started, value: result.value }
}

/**
 * Alternate the backends round by round; collect per-run wall times. With
 * `gapMs`, each run starts that long after the previous one settled (an
 * agent's runs are separated by model turns); without, back to back.
 */
async function alternate(program, rounds, perRound, gapMs = 0) {
  const samples = { v8: [], worker: [] }
  for (let round = 0; round < rounds; round++) {
    for (const name of round % 2 === 0 ? ['v8', 'worker'] : ['worker', 'v8']) {
      for (let i = 0; i < perRound; i++) {
        if (gapMs > 0) await new Promise((resolve) => setTimeout(resolve, gapMs))
        samples[name].push((await timed(backends[name], program)).ms)
      }
    }
  }
  return samples
}

/** Alternate the backends; collect the value the program measured itself. */
async function alternateValue(program, repeats) {
  const samples = { v8: [], worker: [] }
  for (let round = 0; round < repeats; round++) {
    for (const name of round % 2 === 0 ? ['v8', 'worker'] : ['worker', 'v8']) {
      samples[name].push((await timed(backends[name], program)).value)
    }
  }
  return samples
}

/**
 * One backend/scenario in its own process. A backend that cannot survive
 * the scenario (the reference spawns one worker per run: 2000 at once can
 * exhaust the machine and abort) is reported as failed, not retried.
 */
function child(backend, scenario, runs) {
  const script = fileURLToPath(new URL('./child.mjs', import.meta.url))
  try {
    const stdout = execFileSync(process.execPath, ['--expose-gc', script, backend, scenario, String(runs)], {
      encoding: 'utf8',
      maxBuffer: 1 << 20,
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 1_800_000,
    })
    return JSON.parse(stdout.trim().split('\n').at(-1))
  } catch (error) {
    return { backend, scenario, runs, failed: error.signal ?? `exit ${error.status}` }
  }
}

const rows = []
const failures = []
/** lowerIsBetter: the ratio is reference / v8 (how many times faster). */
function row(scenario, metric, unit, v8Value, workerValue, lowerIsBetter, target) {
  const ratio = lowerIsBetter ? workerValue / v8Value : v8Value / workerValue
  rows.push({ scenario, metric, unit, v8: v8Value, worker: workerValue, ratio, target })
  const f = (x) => (Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(3))
  console.log(`${scenario.padEnd(34)} ${metric.padEnd(12)} ${f(v8Value).padStart(10)} ${f(workerValue).padStart(10)} ${unit.padEnd(7)} ${ratio.toFixed(1).padStart(7)}x ${target ?? ''}`)
}

console.log(`machine: ${os.cpus().length} cores, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}${quick ? ' (quick sizes)' : ''}`)
console.log(`${'scenario'.padEnd(34)} ${'metric'.padEnd(12)} ${'v8'.padStart(10)} ${'worker'.padStart(10)} ${'unit'.padEnd(7)} ${'ratio'.padStart(8)} target`)

// Warm both (first isolate, first worker, JIT of the host side).
for (let i = 0; i < 5; i++) await Promise.all([timed(v8, TRIVIAL), timed(ref, TRIVIAL)])

// One at a time: each run is submitted when the previous one settled.
const trivial = await alternate(TRIVIAL, sizes.rounds, sizes.perRound)
row('1. trivial run, one at a time', 'p50', 'ms', median(trivial.v8), median(trivial.worker), true, '>= 30x')
row('1. trivial run, one at a time', 'p99', 'ms', quantile(trivial.v8, 0.99), quantile(trivial.worker, 0.99), true)
// The same with 20 ms of idle between runs: the isolate is ready, but the
// parked run thread must be woken, which on a VM with halted vCPUs costs
// 0.5-1 ms per wake-up (measured: spinning instead of parking removes it).
const idle = await alternate(TRIVIAL, sizes.rounds, sizes.perRound, 20)
row('1b. trivial run, 20 ms idle between', 'p50', 'ms', median(idle.v8), median(idle.worker), true)
row('1b. trivial run, 20 ms idle between', 'p99', 'ms', quantile(idle.v8, 0.99), quantile(idle.worker, 0.99), true)

const codeMode = await alternate(CODE_MODE, sizes.rounds, Math.max(2, sizes.perRound / 2))
row('3. code-mode shaped run, one at a time', 'p50', 'ms', median(codeMode.v8), median(codeMode.worker), true, '>= 10x')
row('3. code-mode shaped run, one at a time', 'p99', 'ms', quantile(codeMode.v8, 0.99), quantile(codeMode.worker, 0.99), true)

const sequential = await alternateValue(SEQUENTIAL_CALLS, sizes.bindingRepeats)
row('4. binding round trip (sequential)', 'median', 'ms', median(sequential.v8), median(sequential.worker), true, '>= 4x')
const parallel = await alternateValue(PARALLEL_CALLS, sizes.bindingRepeats)
row('4. Promise.all of 10000 calls', 'wall', 'ms', median(parallel.v8), median(parallel.worker), true, '>= 5x')

const compute = await alternate(COMPUTE, sizes.computeRepeats, 1)
row('5. compute (JSON, 5e7 loop, regex)', 'p50', 'ms', median(compute.v8), median(compute.worker), true, '>= 0.95x')

// Throughput: N runs submitted at once. If a backend cannot survive N, the
// failure is recorded and both are measured again at N/2, so the table
// always has a like-for-like row.
let tpRuns = sizes.throughput
let tp
for (;;) {
  tp = { v8: child('v8', 'throughput', tpRuns), worker: child('worker', 'throughput', tpRuns) }
  const failed = Object.values(tp).filter((result) => result.failed)
  for (const result of failed) {
    failures.push(`${result.backend} ${result.scenario} (${result.runs} at once) failed: ${result.failed}`)
    console.log(`2. throughput (${tpRuns} at once)  ${result.backend}: FAILED (${result.failed})`)
  }
  if (failed.length === 0 || tpRuns <= 250) break
  tpRuns = Math.floor(tpRuns / 2)
}
if (!tp.v8.failed && !tp.worker.failed) {
  row(`2. throughput (${tpRuns} at once)`, 'runs/s', 'runs/s', tp.v8.runsPerSecond, tp.worker.runsPerSecond, false, '>= 20x')
  row(`2. throughput (${tpRuns} at once)`, 'peak RSS', 'MiB', tp.v8.peakRssMb, tp.worker.peakRssMb, true, 'lower')
}

// Concurrency, defaults on both backends: N runs at once, each awaiting a
// tool that answers after 1 s; then waiting runs submitted right behind 4
// CPU-bound runs (~1 s of CPU each).
const concurrency = {}
function bothOrFailure(results, label) {
  const failed = Object.values(results).filter((result) => result.failed)
  for (const result of failed) {
    failures.push(`${result.backend} ${result.scenario} (${result.runs}) failed: ${result.failed}`)
    console.log(`${label}  ${result.backend}: FAILED (${result.failed})`)
  }
  return failed.length === 0
}
/**
 * A one-shot child scenario `sizes.concurrencyRepeats` times per backend,
 * alternating the backends; each of `keys` is the median over the repeats
 * (one shot moves by a few hundred ms with what the machine did just
 * before, such as freeing the previous child's gigabytes), every sample
 * kept. A backend whose child fails once is reported as failed.
 */
function medianChildren(scenario, runs, keys) {
  const samples = { v8: [], worker: [] }
  for (let i = 0; i < sizes.concurrencyRepeats; i++) {
    for (const backend of ['v8', 'worker']) samples[backend].push(child(backend, scenario, runs))
  }
  const summary = {}
  for (const [backend, results] of Object.entries(samples)) {
    const failed = results.find((result) => result.failed)
    summary[backend] = failed ?? {
      ...results[0],
      ...Object.fromEntries(keys.map((key) => [key, median(results.map((result) => result[key]))])),
      ok: Math.min(...results.map((result) => result.ok ?? runs)),
      samples: results,
    }
  }
  return summary
}

for (const runs of sizes.waiting) {
  const w = medianChildren('waiting', runs, ['wallMs', 'peakGrowthMb'])
  concurrency[`waiting${runs}`] = w
  const label = `7. ${runs} runs awaiting a 1 s tool`
  if (!bothOrFailure(w, label)) continue
  for (const result of Object.values(w)) {
    if (result.ok !== runs) failures.push(`${result.backend} waiting (${runs}): only ${result.ok} right results`)
  }
  row(label, 'wall', 'ms', w.v8.wallMs, w.worker.wallMs, true)
  row(label, 'peak growth', 'MiB', w.v8.peakGrowthMb, w.worker.peakGrowthMb, true)
}
const behind = medianChildren('behind-cpu', sizes.behindCpu, ['p50Ms', 'maxMs'])
concurrency.behindCpu = behind
const behindLabel = `8. ${sizes.behindCpu} waiting behind 4 CPU-bound`
if (bothOrFailure(behind, behindLabel)) {
  row(behindLabel, 'p50', 'ms', behind.v8.p50Ms, behind.worker.p50Ms, true)
  row(behindLabel, 'max', 'ms', behind.v8.maxMs, behind.worker.maxMs, true)
}

const mem = { v8: child('v8', 'memory', sizes.memory), worker: child('worker', 'memory', sizes.memory) }
row('6. memory: idle runtime', 'RSS', 'MiB', mem.v8.idleRssMb, mem.worker.idleRssMb, true)
row(`6. memory: after ${sizes.memory} runs`, 'RSS', 'MiB', mem.v8.afterRssMb, mem.worker.afterRssMb, true, 'flat')

const results = {
  date: new Date().toISOString(),
  machine: { cores: os.cpus().length, memoryGiB: os.totalmem() / 2 ** 30, node: process.version },
  sizes,
  rows,
  failures,
  raw: { tp, mem, concurrency },
}
const here = (name) => fileURLToPath(new URL(name, import.meta.url))
if (quick) mkdirSync(here('./results'), { recursive: true })
writeFileSync(here(quick ? './results/quick.json' : './results.json'), JSON.stringify(results, null, 2))
writeFileSync(here(quick ? './results/quick.svg' : './chart.svg'), chart(rows))
console.log(`wrote bench/${quick ? 'results/quick.json' : 'results.json'} and the chart`)
process.exit(0)

/** A horizontal bar chart of speed-up ratios (log scale), as SVG. */
function chart(data) {
  const width = 760
  const barHeight = 22
  const left = 300
  const top = 40
  const height = top + data.length * (barHeight + 8) + 30
  const maxLog = Math.log10(Math.max(10, ...data.map((d) => d.ratio)) * 1.5)
  const x = (ratio) => left + (Math.max(0, Math.log10(Math.max(ratio, 1))) / maxLog) * (width - left - 80)
  const esc = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;')
  const bars = data.map((d, i) => {
    const y = top + i * (barHeight + 8)
    const w = Math.max(2, x(d.ratio) - left)
    const color = d.ratio >= 1 ? '#2b7bb9' : '#c0392b'
    return `<text x="${left - 8}" y="${y + 15}" text-anchor="end" font-size="12">${esc(`${d.scenario} — ${d.metric}`)}</text>` +
      `<rect x="${left}" y="${y}" width="${w.toFixed(1)}" height="${barHeight}" fill="${color}"/>` +
      `<text x="${left + w + 6}" y="${y + 15}" font-size="12">${d.ratio.toFixed(1)}x</text>`
  })
  const ticks = [1, 10, 100, 1000].filter((t) => Math.log10(t) <= maxLog).map((t) =>
    `<line x1="${x(t)}" y1="${top - 6}" x2="${x(t)}" y2="${height - 24}" stroke="#ccc"/><text x="${x(t)}" y="${height - 10}" font-size="11" text-anchor="middle">${t}x</text>`)
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif">` +
    `<rect width="100%" height="100%" fill="white"/>` +
    `<text x="${width / 2}" y="22" font-size="14" text-anchor="middle">dsh-code-runtime-v8 vs worker-thread backend: how many times better (log scale)</text>` +
    ticks.join('') + bars.join('') + '</svg>\n'
}
