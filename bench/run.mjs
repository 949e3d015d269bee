// The side-by-side benchmark: dsh-code-runtime-v8 (programs in isolate-host
// processes) against its previous, in-process design (built by
// bench/previous.mjs) and the reference backend
// (@deepseek-ai/dsh-code-runtime-worker-thread), same machine, same run,
// same programs. Latency scenarios alternate the three backends round by
// round inside one process; throughput and memory run each backend in its
// own child process so their memory never mixes. Prints a table of medians,
// p99 and ratios; writes bench/results.json and bench/chart.svg.
//   npm run bench                 (all scenarios, full sizes)
//   npm run bench -- --quick      (smaller sizes, for a quick look)
//   npm run bench -- --previous <rev>   (another in-process revision)
import { execFileSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import { fileURLToPath } from 'node:url'
import { Context } from '@deepseek-ai/cordis'
import WorkerThreadCodeRuntime from '@deepseek-ai/dsh-code-runtime-worker-thread'
import V8CodeRuntime, { RUN_REPORT } from '../lib/index.js'
import { buildPrevious, IN_PROCESS_REV } from './previous.mjs'
import { benchBindings, CODE_MODE, COMPUTE, PARALLEL_CALLS, PAYLOADS, payloadBindings, SEQUENTIAL_CALLS, TRIVIAL } from './scenarios.mjs'

const quick = process.argv.includes('--quick')
const sizes = quick
  ? { rounds: 6, perRound: 10, bindingRepeats: 2, computeRepeats: 2, throughput: 300, memory: 1000, waiting: [10, 100], behindCpu: 20, concurrencyRepeats: 1 }
  : { rounds: 12, perRound: 20, bindingRepeats: 6, computeRepeats: 6, throughput: 2000, memory: 10000, waiting: [10, 100, 1000], behindCpu: 50, concurrencyRepeats: 3 }

const previousAt = process.argv.indexOf('--previous')
const previousRev = previousAt > 0 ? process.argv[previousAt + 1] : IN_PROCESS_REV
const previousLib = buildPrevious(previousRev)
process.env.DSH_PREVIOUS_LIB = previousLib
const PreviousRuntime = (await import(previousLib)).default

/** A cordis Context with `Plugin` mounted as its `codeRuntime`. */
async function mountedIn(Plugin) {
  const ctx = new Context()
  await ctx.plugin(Plugin, { computeMs: 120_000 })
  return ctx
}
const mounted = async (Plugin) => (await mountedIn(Plugin)).codeRuntime
const v8Context = await mountedIn(V8CodeRuntime)
const v8 = v8Context.codeRuntime
const previous = await mounted(PreviousRuntime)
const ref = await mounted(WorkerThreadCodeRuntime)
const backends = { v8, previous, worker: ref }
const NAMES = Object.keys(backends)
/**
 * Every order of the backends, rotations of the list and then of its
 * reverse: over six rounds each backend runs first and last equally often,
 * and right after each other backend equally often. A run's latency depends
 * on what ran just before it (a worker thread being torn down, a reserve
 * refilling), so rotations alone, which always run one backend right after
 * the same other one, bias the rows that compare them.
 */
const ORDERS = [NAMES, [...NAMES].reverse()].flatMap((names) =>
  names.map((_, shift) => names.map((_, i) => names[(i + shift) % names.length])),
)
/** The order of round `round`. */
const order = (round) => ORDERS[round % ORDERS.length]

function quantile(values, q) {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]
}
const median = (values) => quantile(values, 0.5)

async function timed(runtime, program, bindings = benchBindings()) {
  const started = performance.now()
  const result = await runtime.run({ program, bindings })
  if (result.error) throw new Error(`${runtime.isolation}: ${result.error.kind}: ${result.error.message}`)
  return { ms: performance.now() - started, value: result.value }
}

/**
 * Alternate the backends round by round; collect per-run wall times. With
 * `gapMs`, each run starts that long after the previous one settled (an
 * agent's runs are separated by model turns); without, back to back.
 */
async function alternate(program, rounds, perRound, gapMs = 0, bindings = benchBindings) {
  const samples = { v8: [], previous: [], worker: [] }
  for (let round = 0; round < rounds; round++) {
    for (const name of order(round)) {
      for (let i = 0; i < perRound; i++) {
        if (gapMs > 0) await new Promise((resolve) => setTimeout(resolve, gapMs))
        samples[name].push((await timed(backends[name], program, bindings())).ms)
      }
    }
  }
  return samples
}

/**
 * The harness main thread's busy time per run (ms): event-loop
 * utilization over `runs` runs of `program`, `concurrency` at a time.
 */
async function mainThreadBusy(program, runs, concurrency) {
  const samples = { v8: [], previous: [], worker: [] }
  for (let round = 0; round < 3; round++) {
    for (const name of order(round)) {
      const before = performance.eventLoopUtilization()
      let next = 0
      await Promise.all(Array.from({ length: concurrency }, async () => {
        while (next++ < runs) await timed(backends[name], program)
      }))
      const used = performance.eventLoopUtilization(before)
      samples[name].push(used.active / runs)
    }
  }
  return samples
}

/** Alternate the backends; collect the value the program measured itself. */
async function alternateValue(program, repeats) {
  const samples = { v8: [], previous: [], worker: [] }
  for (let round = 0; round < repeats; round++) {
    for (const name of order(round)) {
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
/**
 * One row: this design, the previous one, the reference. `ratio` is how
 * many times better than the reference; `vsPrevious` how this design
 * compares with the previous one (previous / this for lower-is-better:
 * above 1 is better, below 1 worse).
 */
function row(scenario, metric, unit, values, lowerIsBetter, target) {
  const { v8: v8Value, previous: previousValue, worker: workerValue } = values
  const better = (a, b) => (lowerIsBetter ? b / a : a / b)
  const ratio = better(v8Value, workerValue)
  const vsPrevious = better(v8Value, previousValue)
  rows.push({ scenario, metric, unit, v8: v8Value, previous: previousValue, worker: workerValue, ratio, vsPrevious, target })
  const f = (x) => (x === undefined || Number.isNaN(x) ? '-' : Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(3))
  console.log(`${scenario.padEnd(38)} ${metric.padEnd(12)} ${f(v8Value).padStart(10)} ${f(previousValue).padStart(10)} ${f(workerValue).padStart(10)} ${unit.padEnd(7)} ${ratio.toFixed(1).padStart(7)}x ${vsPrevious.toFixed(2).padStart(6)}x ${target ?? ''}`)
}
/** The medians of three sample sets. */
const medians = (samples) => Object.fromEntries(Object.entries(samples).map(([name, values]) => [name, median(values)]))
const p99s = (samples) => Object.fromEntries(Object.entries(samples).map(([name, values]) => [name, quantile(values, 0.99)]))

console.log(`machine: ${os.cpus().length} cores, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}${quick ? ' (quick sizes)' : ''}; previous = ${previousRev}`)
console.log(`${'scenario'.padEnd(38)} ${'metric'.padEnd(12)} ${'v8'.padStart(10)} ${'previous'.padStart(10)} ${'worker'.padStart(10)} ${'unit'.padEnd(7)} ${'vs ref'.padStart(8)} ${'vs prev'.padStart(7)} target`)

// Warm all three (first isolate, first worker, JIT of the harness side).
for (let i = 0; i < 5; i++) await Promise.all([timed(v8, TRIVIAL), timed(previous, TRIVIAL), timed(ref, TRIVIAL)])

// One at a time: each run is submitted when the previous one settled.
const trivial = await alternate(TRIVIAL, sizes.rounds, sizes.perRound)
row('1. trivial run, one at a time', 'p50', 'ms', medians(trivial), true, 'prev within 1.25x')
row('1. trivial run, one at a time', 'p99', 'ms', p99s(trivial), true)
// The same with 20 ms of idle between runs: the isolate is ready, but the
// parked run thread must be woken, which on a VM with halted vCPUs costs
// 0.5-1 ms per wake-up (measured: spinning instead of parking removes it).
const idle = await alternate(TRIVIAL, sizes.rounds, sizes.perRound, 20)
row('1b. trivial run, 20 ms idle between', 'p50', 'ms', medians(idle), true)
row('1b. trivial run, 20 ms idle between', 'p99', 'ms', p99s(idle), true)

const codeMode = await alternate(CODE_MODE, sizes.rounds, Math.max(2, sizes.perRound / 2))
row('3. code-mode shaped run, one at a time', 'p50', 'ms', medians(codeMode), true, 'prev within 1.25x')
row('3. code-mode shaped run, one at a time', 'p99', 'ms', p99s(codeMode), true)
// The same with a listener of each run's report (what a telemetry
// forwarder does with it: read every figure), for this design against row 3.
let reported = 0
const stopReports = v8Context.on(RUN_REPORT, (report) => {
  reported += report.calls + report.argumentBytes + report.resultBytes + report.logBytes + (report.computeMs ?? 0)
})
const codeModeReported = await alternate(CODE_MODE, sizes.rounds, Math.max(2, sizes.perRound / 2))
stopReports()
if (!(reported > 0)) throw new Error('no run report reached the listener')
row('3c. code-mode run, run-report listener', 'p50', 'ms', medians(codeModeReported), true, 'v8 within noise of row 3')
// The same with 20 ms of idle between runs, as an agent's runs come
// between model turns: here the host is quiet before each run, and warms
// the isolate the run will take (`isolatesWarmed`).
const codeModeIdle = await alternate(CODE_MODE, sizes.rounds, Math.max(2, sizes.perRound / 2), 20)
row('3d. code-mode shaped run, 20 ms idle between', 'p50', 'ms', medians(codeModeIdle), true)

const busy = await mainThreadBusy(CODE_MODE, quick ? 100 : 400, 4)
row('3b. harness main thread busy per run', 'median', 'ms', medians(busy), true, 'prev within 1.2x')

const sequential = await alternateValue(SEQUENTIAL_CALLS, sizes.bindingRepeats)
row('4. binding round trip (sequential)', 'median', 'ms', medians(sequential), true, 'ref >= 2x')
const parallel = await alternateValue(PARALLEL_CALLS, sizes.bindingRepeats)
row('4. Promise.all of 10000 calls', 'wall', 'ms', medians(parallel), true, '>= 5x')

for (const [name, program] of Object.entries(PAYLOADS)) {
  const payload = await alternate(program, sizes.bindingRepeats, 2, 0, payloadBindings)
  row(`4b. ${name}`, 'p50', 'ms', medians(payload), true, 'ref >= 1x')
}

const compute = await alternate(COMPUTE, sizes.computeRepeats, 1)
row('5. compute (JSON, 5e7 loop, regex)', 'p50', 'ms', medians(compute), true, '>= 0.95x')

// Throughput: N runs submitted at once. If a backend cannot survive N, the
// failure is recorded and both are measured again at N/2, so the table
// always has a like-for-like row.
let tpRuns = sizes.throughput
let tp
for (;;) {
  tp = { v8: child('v8', 'throughput', tpRuns), previous: child('previous', 'throughput', tpRuns), worker: child('worker', 'throughput', tpRuns) }
  const failed = Object.values(tp).filter((result) => result.failed)
  for (const result of failed) {
    failures.push(`${result.backend} ${result.scenario} (${result.runs} at once) failed: ${result.failed}`)
    console.log(`2. throughput (${tpRuns} at once)  ${result.backend}: FAILED (${result.failed})`)
  }
  if (failed.length === 0 || tpRuns <= 250) break
  tpRuns = Math.floor(tpRuns / 2)
}
if (!Object.values(tp).some((result) => result.failed)) {
  const of = (key) => Object.fromEntries(Object.entries(tp).map(([name, result]) => [name, result[key]]))
  row(`2. throughput (${tpRuns} at once)`, 'runs/s', 'runs/s', of('runsPerSecond'), false, '>= 20x')
  row(`2. throughput (${tpRuns} at once)`, 'peak RSS', 'MiB', of('peakRssMb'), true, 'lower')
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
  const samples = { v8: [], previous: [], worker: [] }
  for (let i = 0; i < sizes.concurrencyRepeats; i++) {
    for (const backend of order(i)) samples[backend].push(child(backend, scenario, runs))
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
  const of = (key) => Object.fromEntries(Object.entries(w).map(([name, result]) => [name, result[key]]))
  row(label, 'wall', 'ms', of('wallMs'), true, 'prev within 1.2x')
  row(label, 'peak growth', 'MiB', of('peakGrowthMb'), true, 'prev within 1.2x')
}
const behind = medianChildren('behind-cpu', sizes.behindCpu, ['p50Ms', 'maxMs'])
concurrency.behindCpu = behind
const behindLabel = `8. ${sizes.behindCpu} waiting behind 4 CPU-bound`
if (bothOrFailure(behind, behindLabel)) {
  const of = (key) => Object.fromEntries(Object.entries(behind).map(([name, result]) => [name, result[key]]))
  row(behindLabel, 'p50', 'ms', of('p50Ms'), true)
  row(behindLabel, 'max', 'ms', of('maxMs'), true)
}

const mem = { v8: child('v8', 'memory', sizes.memory), previous: child('previous', 'memory', sizes.memory), worker: child('worker', 'memory', sizes.memory) }
const memOf = (key) => Object.fromEntries(Object.entries(mem).map(([name, result]) => [name, result[key]]))
row('6. memory: idle runtime (harness + hosts)', 'RSS', 'MiB', memOf('idleRssMb'), true, 'prev within 2x')
row(`6. memory: after ${sizes.memory} runs`, 'RSS', 'MiB', memOf('afterRssMb'), true, 'flat')

// One run that makes V8 end its process, beside 100 runs awaiting a tool:
// how many of them die with it, and whether the harness survives.
const crash = Object.fromEntries(NAMES.map((name) => [name, child(name, 'crash-beside-waiting', 100)]))
const crashText = (result) => (result.failed ? `the harness died (${result.failed})` : `${result.lost} of ${result.runs} lost, harness alive, crash run: ${result.crashKind}`)
for (const [name, result] of Object.entries(crash)) console.log(`9. a V8 fatal beside 100 waiting runs  ${name}: ${crashText(result)}`)

// 100 runs awaiting a tool when every host is killed: how long until all
// have their results, and what re-executing them costs in memory.
const reexecuted = Object.fromEntries(NAMES.map((name) => [name, child(name, 'reexecuted-after-death', 100)]))
const reexecutedText = (result) =>
  result.failed
    ? `failed (${result.failed})`
    : result.skipped
      ? `n/a (${result.skipped})`
      : `${result.ok} of ${result.runs} completed, ${result.lost} lost, ${result.wallMs.toFixed(0)} ms from the kill, RSS ${result.beforeMb.toFixed(0)} MiB before it, peak ${result.peakMb.toFixed(0)} MiB after (harness + hosts)`
for (const [name, result] of Object.entries(reexecuted)) console.log(`10. 100 waiting runs, every host killed  ${name}: ${reexecutedText(result)}`)

const results = {
  date: new Date().toISOString(),
  machine: { cores: os.cpus().length, memoryGiB: os.totalmem() / 2 ** 30, node: process.version },
  sizes,
  rows,
  failures,
  previous: previousRev,
  crash: Object.fromEntries(Object.entries(crash).map(([name, result]) => [name, crashText(result)])),
  reexecuted: Object.fromEntries(Object.entries(reexecuted).map(([name, result]) => [name, reexecutedText(result)])),
  raw: { tp, mem, concurrency, crash, reexecuted },
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
