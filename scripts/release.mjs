#!/usr/bin/env node
// The release steps npm runs around `npm version` and `npm publish`, in
// napi-rs's shape: one main package (the loader, the TypeScript layer) and
// one package per platform holding the binary, named in the main package's
// `optionalDependencies` at the same version, so npm installs the one that
// fits the machine.
//
//   node scripts/release.mjs version     (npm's `version` script)
//     After `npm version <bump>` has set package.json's version: moves every
//     platform package (`napi version`), the optionalDependencies and the
//     version napi's generated loader (index.js) expects and the lockfile's
//     record of them to the same one, and stages them for the commit npm
//     makes.
//   node scripts/release.mjs prepublish  (npm's `prepublishOnly` script)
//     Checks that the checkout is built (`npm run build`) and no older than
//     its sources, puts the built binaries (the addon and the isolate host)
//     into npm/<platform>/ and publishes
//     each platform package (`napi prepublish`) to the registry npm is
//     configured for, before npm packs and publishes the main package. It
//     writes nothing else in the checkout.
import { execFileSync, spawnSync } from 'node:child_process'
import { copyFileSync, existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const manifestPath = join(root, 'package.json')
const manifest = JSON.parse(readFileSync(manifestPath, 'utf8'))
const { binaryName, isolateHost, targets } = manifest.napi
const napi = join(root, 'node_modules', '@napi-rs', 'cli', 'dist', 'cli.js')

/** napi's name for a target triple's platform (`linux-x64-gnu`). */
export function platformOf(triple) {
  const [arch, , os, abi] = triple.split('-')
  const cpu = { x86_64: 'x64', aarch64: 'arm64' }[arch] ?? arch
  return [os, cpu, abi].filter(Boolean).join('-')
}

function writeJson(path, value) {
  writeFileSync(path, `${JSON.stringify(value, null, 2)}\n`)
}

function napiCli(args) {
  execFileSync(process.execPath, [napi, ...args], { cwd: root, stdio: 'inherit' })
}

function version() {
  napiCli(['version'])
  const optional = {}
  for (const triple of targets) optional[`${manifest.name}-${platformOf(triple)}`] = manifest.version
  manifest.optionalDependencies = optional
  writeJson(manifestPath, manifest)
  // The platform packages are workspaces (so `npm ci` resolves them from the
  // checkout, not from a registry that may not have this version yet): the
  // lockfile records their versions and the root's optionalDependencies.
  const lockPath = join(root, 'package-lock.json')
  const lock = JSON.parse(readFileSync(lockPath, 'utf8'))
  lock.packages[''].optionalDependencies = optional
  for (const triple of targets) lock.packages[`npm/${platformOf(triple)}`].version = manifest.version
  writeJson(lockPath, lock)
  // The generated loader compares the platform package's version with the
  // one it was generated for.
  const loaderPath = join(root, 'index.js')
  const loader = readFileSync(loaderPath, 'utf8').replace(
    /(bindingPackageVersion !== ')[^']*(')|(expected )\S+( but got)/g,
    (_, a, b, c, d) => (a ? `${a}${manifest.version}${b}` : `${c}${manifest.version}${d}`),
  )
  writeFileSync(loaderPath, loader)
  // npm commits the bump in a git checkout, unless --no-git-tag-version
  // (which npm passes on as an empty value): stage what moved.
  const committing = [undefined, 'true'].includes(process.env.npm_config_git_tag_version)
  if (committing && spawnSync('git', ['rev-parse', '--is-inside-work-tree'], { cwd: root, stdio: 'ignore' }).status === 0) {
    execFileSync('git', ['add', 'package.json', 'package-lock.json', 'npm', 'index.js'], { cwd: root, stdio: 'inherit' })
  }
}

/** The newest modification time among `paths` (files or folders, recursively). */
function newest(paths) {
  let latest = 0
  for (const path of paths) {
    const stat = statSync(join(root, path))
    if (stat.isDirectory()) latest = Math.max(latest, newest(readdirSync(join(root, path)).map((name) => join(path, name))))
    else latest = Math.max(latest, stat.mtimeMs)
  }
  return latest
}

/** Refuse to publish a build older than its sources: `npm publish` ships what was built. */
function checkBuilt(output, sources) {
  if (!existsSync(join(root, output)) || statSync(join(root, output)).mtimeMs < newest(sources)) {
    throw new Error(`${output} is missing or older than ${sources.join(', ')}: run \`npm run build\` before \`npm publish\``)
  }
}

function prepublish() {
  checkBuilt(join('lib', 'index.js'), ['ts'])
  for (const triple of targets) {
    const platform = platformOf(triple)
    const target = join(root, 'npm', platform)
    const platformManifest = JSON.parse(readFileSync(join(target, 'package.json'), 'utf8'))
    if (platformManifest.version !== manifest.version || manifest.optionalDependencies?.[platformManifest.name] !== manifest.version) {
      throw new Error(`${platformManifest.name} is not at ${manifest.version}: run \`npm version\` (or node scripts/release.mjs version)`)
    }
    // The addon and the isolate host it starts, side by side.
    for (const file of [`${binaryName}.${platform}.node`, isolateHost]) {
      checkBuilt(file, ['src', 'crates', 'build.rs', 'Cargo.toml', 'Cargo.lock'])
      copyFileSync(join(root, file), join(target, file))
      console.error(`[release] ${file} (${(statSync(join(root, file)).size / 2 ** 20).toFixed(1)} MiB) -> npm/${platform}/`)
    }
  }
  napiCli(['prepublish', '--tag-style', 'npm', '--no-gh-release'])
}

const task = process.argv[2]
if (task === 'version') version()
else if (task === 'prepublish') prepublish()
else if (task !== undefined) {
  console.error(`unknown task ${task}: version | prepublish`)
  process.exit(2)
}
