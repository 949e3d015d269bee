/**
 * The release, as a user meets it: a private registry (verdaccio) on the
 * loopback, `npm publish` from this built checkout against it (the main
 * package's prepublishOnly publishes the platform package first), then, in
 * a fresh folder, `npm install dsh-code-runtime-v8` BY NAME beside the
 * harness's own packages (proxied from the registry npm is configured for),
 * ToolRuntime mounted in code mode with this runtime in one cordis Context,
 * and programs run through the real `run_code` tool. The registry is
 * stopped and its files removed whatever the outcome.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative, resolve } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const root = resolve(fileURLToPath(new URL('..', import.meta.url)))
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))
const PLATFORM_PACKAGE = `${manifest.name}-linux-x64-gnu`
const BINARY = `${manifest.napi.binaryName}.linux-x64-gnu.node`
const HOST = manifest.napi.isolateHost as string
const HARNESS = '0.1.0-rc.8'
const HARNESS_PACKAGES = [
  ...['dsh-tools', 'dsh-system-prompt', 'dsh-agent', 'dsh-code-runtime', 'dsh-invariants', 'dsh-llm', 'dsh-scope', 'dsh-session', 'dsh-user-approval']
    .map((name) => `@deepseek-ai/${name}@${HARNESS}`),
  '@deepseek-ai/cordis@^4.0.1',
]

let folder: string
let registry: ChildProcess | undefined
let env: NodeJS.ProcessEnv
let checkoutBefore: string
let checkoutAfter: string
let outcome: Record<string, any>

const npm = (args: string[], cwd: string) =>
  execFileSync('npm', args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8', timeout: 300_000 })

/** Every file under `dir`, relative to it, sorted. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)))
    .sort()
}

/** What importing the package prints, in `cwd`, with `preload` required first. */
function importFailure(cwd: string, preload?: string): string {
  try {
    execFileSync(process.execPath, [...(preload ? ['--require', preload] : []), '--input-type=module', '-e', `await import('${manifest.name}')`], {
      cwd, env, stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8',
    })
  } catch (error) {
    return String((error as { stderr: string }).stderr)
  }
  return 'the import succeeded'
}

/**
 * `git status` of what publishing could write (the manifests, the lockfile,
 * the loader, the built layers, the platform package): it must leave them as
 * it found them. Other paths are left out, so that a bench writing its
 * results beside the suite does not count as the publish's doing.
 */
const checkoutStatus = () =>
  execFileSync('git', ['status', '--porcelain', '--untracked-files=all', '--', 'package.json', 'package-lock.json', 'index.js', 'index.d.ts', 'npm', 'lib', 'ts', 'src', 'crates', 'scripts'], {
    cwd: root,
    encoding: 'utf8',
  })

beforeAll(async () => {
  folder = mkdtempSync(join(tmpdir(), 'dsh-v8-registry-'))
  mkdirSync(join(folder, 'registry'))
  const uplink = execFileSync('npm', ['config', 'get', 'registry'], { encoding: 'utf8' }).trim()
  registry = spawn(process.execPath, [join(root, '__test__', 'fixtures', 'registry.mjs'), join(folder, 'registry'), uplink], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let port: string | undefined
  for await (const line of createInterface({ input: registry.stdout! })) {
    port = /^listening (\d+)$/.exec(line)?.[1]
    if (port) break
  }
  if (!port) throw new Error('the registry exited before listening')
  const url = `http://127.0.0.1:${port}/`
  const signup = await fetch(`${url}-/user/org.couchdb.user:release`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'release', password: 'release-password' }),
  })
  const { token } = (await signup.json()) as { token: string }
  writeFileSync(join(folder, 'npmrc'), `registry=${url}\n//127.0.0.1:${port}/:_authToken=${token}\n`)
  env = { ...process.env, npm_config_userconfig: join(folder, 'npmrc'), npm_config_registry: url }

  checkoutBefore = checkoutStatus()
  npm(['publish'], root)
  checkoutAfter = checkoutStatus()

  const consumer = join(folder, 'consumer')
  mkdirSync(join(consumer, 'scenarios'), { recursive: true })
  writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }))
  npm(['install', '--no-audit', '--no-fund', manifest.name, ...HARNESS_PACKAGES], consumer)
  copyFileSync(join(root, '__test__', 'fixtures', 'dropin-scenarios.mjs'), join(consumer, 'scenarios', 'run.mjs'))
  const stdout = execFileSync(process.execPath, [join(consumer, 'scenarios', 'run.mjs')], { cwd: consumer, env, encoding: 'utf8', timeout: 120_000 })
  outcome = JSON.parse(stdout.trim().split('\n').at(-1) as string)
}, 600_000)

afterAll(async () => {
  if (registry && registry.exitCode === null) {
    const exited = once(registry, 'exit')
    registry.kill()
    await exited
  }
  if (folder) rmSync(folder, { recursive: true, force: true })
  // prepublishOnly's copy of the binary (ignored by git, never committed).
  rmSync(join(root, 'npm', 'linux-x64-gnu', BINARY), { force: true })
})

describe('publishing from the built checkout', () => {
  it('publishes the main package naming the platform package at the same version', () => {
    const main = JSON.parse(npm(['view', manifest.name, '--json'], folder))
    expect(main.version).toBe(manifest.version)
    expect(main.optionalDependencies).toEqual({ [PLATFORM_PACKAGE]: manifest.version })
    expect(JSON.parse(npm(['view', PLATFORM_PACKAGE, 'version', '--json'], folder))).toBe(manifest.version)
  })

  it('leaves the checkout as it found it', () => {
    expect(checkoutAfter).toBe(checkoutBefore)
  })

  it('the main package ships the loader, the TypeScript layer and the two JS files the harness evaluates, nothing else', () => {
    const installed = filesUnder(join(folder, 'consumer', 'node_modules', manifest.name))
    const compiled = readdirSync(join(root, 'ts'))
      .filter((name) => name.endsWith('.ts'))
      .flatMap((name) => [`lib/${name.replace(/\.ts$/, '.d.ts')}`, `lib/${name.replace(/\.ts$/, '.js')}`])
    expect(installed).toEqual(
      ['LICENSE', 'README.md', 'index.d.ts', 'index.js', 'crates/sandbox-ext/js/00_primordials.js', 'crates/sandbox-ext/js/01_lossless_json.js', 'package.json', ...compiled].sort(),
    )
  })

  it('the platform package ships the addon and the isolate host it starts, executable', () => {
    const installed = join(folder, 'consumer', 'node_modules', PLATFORM_PACKAGE)
    expect(filesUnder(installed)).toEqual([BINARY, HOST, 'LICENSE', 'README.md', 'package.json'].sort())
    expect(statSync(join(installed, HOST)).mode & 0o111).toBe(0o111)
  })
})

describe('installed by name, through the real run_code tool', () => {
  it('mounts as the context code runtime', () => {
    expect(outcome.isolation).toBe('v8-isolate')
  })

  it('runs sequential tool calls and returns logs and value', () => {
    expect(outcome.sequential.isError).toBe(false)
    expect(outcome.sequential.value).toEqual({ logs: ['sum 2620000'], result: 2620000 })
  })

  it('runs Promise.all tool calls', () => {
    expect(outcome.parallel.value).toEqual({ logs: [], result: { Paris: 2100000, Lyon: 520000, Nice: 340000 } })
  })

  it('a failed tool call is a catchable ToolCallError', () => {
    expect(outcome.caught.value.result).toEqual({
      isToolCallError: true,
      name: 'ToolCallError',
      toolName: 'lookup',
      message: 'unknown city Atlantis',
    })
  })

  it('a throwing program fails the run_code call with the program error', () => {
    expect(outcome.thrown.isError).toBe(true)
    expect(outcome.thrown.error).toMatch(/program failed on purpose/)
  })

  it('an abort stops the program and its tool call', () => {
    expect(outcome.aborted.isError).toBe(true)
    expect(outcome.calls).toEqual(['Paris', 'Lyon', 'Paris', 'Lyon', 'Nice', 'Atlantis'])
  })
})

describe('where the binary cannot load, the import says why', () => {
  it('names the platform package when it was not installed', () => {
    const bare = join(folder, 'without-optional')
    mkdirSync(bare)
    writeFileSync(join(bare, 'package.json'), JSON.stringify({ name: 'bare', private: true, type: 'module' }))
    npm(['install', '--no-audit', '--no-fund', '--omit=optional', manifest.name], bare)
    expect(existsSync(join(bare, 'node_modules', PLATFORM_PACKAGE))).toBe(false)
    expect(importFailure(bare)).toContain(
      `${manifest.name} could not load its binary for linux-x64-gnu: the package ${PLATFORM_PACKAGE}@${manifest.version} should hold it.`,
    )
  }, 300_000)

  it('names the platform and the supported ones on a platform without a binary', () => {
    // The loader decides by process.arch; this machine is x64, so the
    // preload makes it report arm64 before the package is imported.
    const preload = join(folder, 'arm64.cjs')
    writeFileSync(preload, "Object.defineProperty(process, 'arch', { value: 'arm64' })\n")
    expect(importFailure(join(folder, 'consumer'), preload)).toContain(
      `${manifest.name} has no prebuilt binary for this platform (linux-arm64-gnu). Supported: linux-x64-gnu.`,
    )
  })
})

describe('a version bump', () => {
  it('moves the main package, the platform package, optionalDependencies, the lockfile and the loader together', () => {
    // A copy of what `npm version` touches; the bump runs the real script.
    const copy = join(folder, 'bump')
    for (const path of ['package.json', 'package-lock.json', 'index.js', 'scripts/release.mjs', 'npm']) cpSync(join(root, path), join(copy, path), { recursive: true })
    symlinkSync(join(root, 'node_modules'), join(copy, 'node_modules'))
    npm(['version', 'minor', '--no-git-tag-version'], copy)
    const bumped = JSON.parse(readFileSync(join(copy, 'package.json'), 'utf8'))
    expect(bumped.version).not.toBe(manifest.version)
    expect(bumped.optionalDependencies).toEqual({ [PLATFORM_PACKAGE]: bumped.version })
    expect(JSON.parse(readFileSync(join(copy, 'npm', 'linux-x64-gnu', 'package.json'), 'utf8')).version).toBe(bumped.version)
    const lock = JSON.parse(readFileSync(join(copy, 'package-lock.json'), 'utf8'))
    expect(lock.packages[''].optionalDependencies).toEqual(bumped.optionalDependencies)
    expect(lock.packages['npm/linux-x64-gnu'].version).toBe(bumped.version)
    const loader = readFileSync(join(copy, 'index.js'), 'utf8')
    expect(loader).toContain(`bindingPackageVersion !== '${bumped.version}'`)
    expect(loader).not.toContain(`'${manifest.version}'`)
  })
})
