// One backend in its own process, for the scenarios whose memory must not
// mix with the other backend's:
//  - throughput: N trivial runs submitted at once (runs/s, peak RSS);
//  - memory: RSS of an idle runtime and after N runs;
//  - waiting: N runs at once, each awaiting a tool that answers after 1 s
//    (wall time, peak RSS growth over the process's RSS before them);
//  - behind-cpu: N waiting runs submitted right behind 4 CPU-bound runs
//    (latency of the waiting runs, p50 and max).
//  - crash-beside-waiting: N runs awaiting the tool, then one run that makes
//    V8 end its process: how many of the N die with it (the blast radius),
//    and whether the harness itself survives.
//  - reexecuted-after-death: N runs that made a call and now await a tool;
//    every host is killed (SIGKILL), and once the runtime has seen the
//    deaths (its runs re-executed, or lost) the tool answers: the wall time
//    from the kill until every run has its result, how many completed, and
//    the memory (harness and hosts) before the kill and at its peak after
//    (a backend without hosts: skipped).
// Memory is the harness's plus its isolate hosts' (the v8 backend's
// `stats().hostPids`): what the machine pays.
// Every backend runs with its default config except where a scenario says.
//   node --expose-gc bench/child.mjs <v8|previous|worker> <scenario> <runs>
// `previous` is the build bench/previous.mjs made (DSH_PREVIOUS_LIB).
import { readFileSync, writeFileSync } from 'node:fs'
import { Context } from '@deepseek-ai/cordis'
import WorkerThreadCodeRuntime from '@deepseek-ai/dsh-code-runtime-worker-thread'
import V8CodeRuntime from '../lib/index.js'
import { CPU_BOUND, FATAL, slowToolBindings, TRIVIAL, WAITING } from './scenarios.mjs'

const [backend, scenario, runsArg] = process.argv.slice(2)
const runs = Number(runsArg)
const Plugin =
  backend === 'v8' ? V8CodeRuntime : backend === 'previous' ? (await import(process.env.DSH_PREVIOUS_LIB)).default : WorkerThreadCodeRuntime

/** This process and its isolate hosts. */
const processes = () => ['self', ...(ctx.codeRuntime.stats?.().hostPids ?? [])]
/** A /proc/<pid>/status figure in MiB (0 for a process that is gone). */
function statusMb(pid, field) {
  try {
    const match = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
    return match ? Number(match[1]) / 1024 : 0
  } catch {
    return 0
  }
}
/** Peak resident sets so far (the kernel's high-water marks), summed, MiB. */
function peakRssMb() {
  return processes().reduce((sum, pid) => sum + statusMb(pid, 'VmHWM'), 0)
}
/** Reset the kernel's high-water marks to the current RSS. */
function resetPeakRss() {
  for (const pid of processes()) writeFileSync(`/proc/${pid}/clear_refs`, '5')
}
function rssMb() {
  globalThis.gc?.()
  return processes().reduce((sum, pid) => sum + statusMb(pid, 'VmRSS'), 0)
}

const ctx = new Context()
const throughputConfig = backend !== 'worker' && scenario === 'throughput' ? { maxQueuedRuns: runs + 10 } : {}
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
  const before = rssMb()
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
} else if (scenario === 'crash-beside-waiting') {
  // The tool answers only once the crash is over, so every waiting run is
  // still waiting when it comes.
  let called = 0
  let allCalled
  const everyoneWaits = new Promise((resolve) => (allCalled = resolve))
  let release
  const crashOver = new Promise((resolve) => (release = resolve))
  const bindings = [{ global: 'tools', functions: { wait: async () => { if (++called === runs) allCalled(); await crashOver; return 1 } } }]
  const waiting = Array.from({ length: runs }, () => ctx.codeRuntime.run({ program: WAITING, bindings }))
  await everyoneWaits
  const crash = await ctx.codeRuntime.run({ program: FATAL, bindings: [] })
  release()
  const results = await Promise.all(waiting)
  out.crashKind = crash.error?.kind
  out.lost = results.filter((r) => r.error).length
  out.ok = results.filter((r) => r.value === 1).length
  out.harnessSurvived = true
} else if (scenario === 'reexecuted-after-death') {
  const hosts = ctx.codeRuntime.stats?.().hostPids ?? []
  if (hosts.length === 0) {
    out.skipped = 'no isolate hosts'
  } else {
    let called = 0
    let allCalled
    const everyoneWaits = new Promise((resolve) => (allCalled = resolve))
    let release
    const killed = new Promise((resolve) => (release = resolve))
    const bindings = [
      {
        global: 'tools',
        functions: {
          first: async ({ i }) => i * 2,
          wait: async () => {
            if (++called === runs) allCalled()
            await killed
            return 1
          },
        },
      },
    ]
    const program = 'const a = await tools.first({ i: 21 }); console.log("got", a); return a + await tools.wait({})'
    const waiting = Array.from({ length: runs }, () => ctx.codeRuntime.run({ program, bindings }))
    await everyoneWaits
    out.beforeMb = rssMb()
    const stats = () => ctx.codeRuntime.stats()
    const seen = stats().runsReexecuted + (stats().runsLostToHostExits ?? 0)
    const settled = Promise.all(waiting)
    const started = performance.now()
    for (const pid of stats().hostPids) process.kill(pid, 'SIGKILL')
    // A reply the harness sends before it has seen its host die may reach
    // nobody: answered only then, every run is still waiting on the tool.
    let done = false
    settled.then(() => (done = true))
    while (!done && stats().runsReexecuted + (stats().runsLostToHostExits ?? 0) < seen + runs) {
      await new Promise((resolve) => setTimeout(resolve, 1))
    }
    resetPeakRss()
    release()
    const results = await settled
    out.wallMs = performance.now() - started
    out.ok = results.filter((r) => r.value === 43).length
    out.lost = results.filter((r) => r.error).length
    out.peakMb = peakRssMb()
  }
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
