// What the hosts' lockdown (crates/isolate-host/src/lockdown.rs) costs:
// this checkout against the last revision without it (UNHARDENED_REV,
// built by bench/previous.mjs), same machine, same run, alternating round
// by round. Host start is a mount with one host until the plugin is ready
// (spawn, V8 start, lockdown, Ready) then its disposal; a trivial run and a
// Code Mode shaped run are one run on a mounted runtime. Prints medians
// and the ratio; writes bench/results/lockdown.json.
//   npm run bench:lockdown [-- --quick]
import { mkdirSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { Context } from '@deepseek-ai/cordis'
import V8CodeRuntime from '../lib/index.js'
import { buildPrevious, UNHARDENED_REV } from './previous.mjs'
import { benchBindings, CODE_MODE, TRIVIAL } from './scenarios.mjs'

const quick = process.argv.includes('--quick')
const rounds = quick ? 4 : 12
const perRound = quick ? 5 : 10
const Unhardened = (await import(buildPrevious(UNHARDENED_REV))).default
const plugins = { locked: V8CodeRuntime, unhardened: Unhardened }
const NAMES = Object.keys(plugins)

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]

async function mount(Plugin, config = {}) {
  const ctx = new Context()
  const fiber = await ctx.plugin(Plugin, config)
  return { runtime: ctx.codeRuntime, dispose: () => fiber.dispose() }
}

async function hostStart(Plugin) {
  const started = performance.now()
  const mounted = await mount(Plugin, { isolateHosts: 1, preparedIsolates: 1 })
  const ms = performance.now() - started
  await mounted.dispose()
  return ms
}

async function runMs(runtime, program) {
  const started = performance.now()
  const result = await runtime.run({ program, bindings: benchBindings() })
  if (result.error) throw new Error(`${result.error.kind}: ${result.error.message}`)
  return performance.now() - started
}

const samples = { start: {}, trivial: {}, codeMode: {} }
for (const name of NAMES) for (const key of Object.keys(samples)) samples[key][name] = []
const mounted = Object.fromEntries(await Promise.all(NAMES.map(async (name) => [name, await mount(plugins[name])])))
for (const name of NAMES) for (let i = 0; i < 20; i++) await runMs(mounted[name].runtime, CODE_MODE)
for (let round = 0; round < rounds; round++) {
  const order = round % 2 ? [...NAMES].reverse() : NAMES
  for (const name of order) {
    samples.start[name].push(await hostStart(plugins[name]))
    for (let i = 0; i < perRound; i++) samples.trivial[name].push(await runMs(mounted[name].runtime, TRIVIAL))
    for (let i = 0; i < perRound; i++) samples.codeMode[name].push(await runMs(mounted[name].runtime, CODE_MODE))
  }
}
for (const name of NAMES) await mounted[name].dispose()

const rows = Object.entries({ 'host start (mount to ready, 1 host)': 'start', 'trivial run p50': 'trivial', 'Code Mode run p50': 'codeMode' }).map(
  ([scenario, key]) => {
    const locked = median(samples[key].locked)
    const unhardened = median(samples[key].unhardened)
    return { scenario, lockedMs: locked, unhardenedMs: unhardened, ratio: locked / unhardened }
  },
)
console.log(`${'scenario'.padEnd(38)} ${'locked'.padStart(9)} ${'unhardened'.padStart(11)} ratio (target <= 1.10x)`)
for (const row of rows) {
  console.log(`${row.scenario.padEnd(38)} ${row.lockedMs.toFixed(2).padStart(7)}ms ${row.unhardenedMs.toFixed(2).padStart(9)}ms ${row.ratio.toFixed(3)}x`)
}
const dir = fileURLToPath(new URL('./results', import.meta.url))
mkdirSync(dir, { recursive: true })
writeFileSync(`${dir}/lockdown.json`, JSON.stringify({ date: new Date().toISOString(), unhardened: UNHARDENED_REV, rounds, perRound, rows, samples }, null, 2))
process.exit(0)
