// The previous design, built beside this checkout for the side-by-side
// benchmark: a git worktree of `rev` in the system's temporary folder
// (outside this workspace, whose Cargo.toml would claim it), built as
// that revision builds itself (its addon in release mode, its TypeScript
// layer), sharing this checkout's node_modules. Built once per revision.
//   node bench/previous.mjs [rev]     prints the path of its lib/index.js
import { execFileSync } from 'node:child_process'
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')

/**
 * The last revision that ran programs inside the harness's own process
 * (one V8 in the addon, no isolate hosts): what the host design is
 * measured against.
 */
export const IN_PROCESS_REV = 'dbf208a'

/**
 * The last revision whose isolate hosts ran without the lockdown (no
 * seccomp, Landlock, namespaces, dump or OOM settings): what the
 * lockdown's cost is measured against (bench/lockdown.mjs).
 */
export const UNHARDENED_REV = 'a9646de'

/** Build `rev` (once) and return the path of its lib/index.js. */
export function buildPrevious(rev = IN_PROCESS_REV) {
  const sha = execFileSync('git', ['rev-parse', '--short=12', `${rev}^{commit}`], { cwd: root, encoding: 'utf8' }).trim()
  const tree = join(tmpdir(), 'dsh-v8-bench-previous', sha)
  const lib = join(tree, 'lib', 'index.js')
  if (existsSync(lib)) return lib
  mkdirSync(dirname(tree), { recursive: true })
  if (!existsSync(tree)) execFileSync('git', ['worktree', 'add', '--detach', tree, sha], { cwd: root, stdio: 'inherit' })
  if (!existsSync(join(tree, 'node_modules'))) symlinkSync(join(root, 'node_modules'), join(tree, 'node_modules'))
  // Its V8 archive comes from the same place as this checkout's
  // (scripts/setup.mjs's offline archive, by absolute path from there).
  const sharedV8 = resolve(root, '..', 'shared', 'v8')
  const archive = join(sharedV8, 'librusty_v8_simdutf_release_x86_64-unknown-linux-gnu.a.gz')
  if (existsSync(archive)) {
    writeFileSync(
      join(tree, '.cargo', 'offline-v8.toml'),
      `[env]\nRUSTY_V8_ARCHIVE = "${archive}"\n` +
        `RUSTY_V8_SRC_BINDING_PATH = "${join(sharedV8, 'src_binding_simdutf_release_x86_64-unknown-linux-gnu.rs')}"\n`,
    )
  }
  const env = { ...process.env, CARGO_TARGET_DIR: join(root, 'target', 'bench-previous-target') }
  // A revision with isolate hosts builds its workspace, and its host
  // executable ships beside its addon.
  const host = existsSync(join(tree, 'crates', 'isolate-host'))
  execFileSync('cargo', ['build', '--release', host ? '--workspace' : '--lib'], { cwd: tree, stdio: 'inherit', env })
  copyFileSync(join(env.CARGO_TARGET_DIR, 'release', 'libdsh_code_runtime_v8.so'), join(tree, 'dsh-code-runtime-v8.linux-x64-gnu.node'))
  if (host) {
    const { napi } = JSON.parse(readFileSync(join(tree, 'package.json'), 'utf8'))
    copyFileSync(join(env.CARGO_TARGET_DIR, 'release', napi.isolateHost), join(tree, napi.isolateHost))
    chmodSync(join(tree, napi.isolateHost), 0o755)
  }
  execFileSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', '.'], { cwd: tree, stdio: 'inherit' })
  return lib
}

if (process.argv[1] === fileURLToPath(import.meta.url)) console.log(buildPrevious(process.argv[2]))
