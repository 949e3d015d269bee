/**
 * Drop-in proof: `npm pack` this package and its linux-x64-gnu binary
 * package, install the tarballs into a fresh folder beside the harness's
 * own packages from the registry, mount ToolRuntime in code mode with this
 * runtime in one cordis Context, and run programs through the real
 * `run_code` tool.
 */
import { execFileSync } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const root = resolve(fileURLToPath(new URL('..', import.meta.url)))
const HARNESS = '0.1.0-rc.8'
let folder: string
let outcome: Record<string, any>

beforeAll(() => {
  folder = mkdtempSync(join(tmpdir(), 'dsh-v8-dropin-'))
  const platform = join(root, 'npm', 'linux-x64-gnu')
  copyFileSync(join(root, 'dsh-code-runtime-v8.linux-x64-gnu.node'), join(platform, 'dsh-code-runtime-v8.linux-x64-gnu.node'))
  const npm = (args: string[], cwd: string) => execFileSync('npm', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' })
  npm(['pack', '--silent', '--pack-destination', folder], root)
  npm(['pack', '--silent', '--pack-destination', folder], platform)
  rmSync(join(platform, 'dsh-code-runtime-v8.linux-x64-gnu.node'))
  const tarballs = readdirSync(folder).filter((name) => name.endsWith('.tgz')).map((name) => `./${name}`)
  expect(tarballs).toHaveLength(2)
  writeFileSync(join(folder, 'package.json'), JSON.stringify({ name: 'dropin', private: true, type: 'module' }))
  npm(
    [
      'install', '--no-audit', '--no-fund', ...tarballs,
      ...['dsh-tools', 'dsh-system-prompt', 'dsh-agent', 'dsh-code-runtime', 'dsh-invariants', 'dsh-llm', 'dsh-scope', 'dsh-session', 'dsh-user-approval']
        .map((name) => `@deepseek-ai/${name}@${HARNESS}`),
      '@deepseek-ai/cordis@^4.0.1',
    ],
    folder,
  )
  mkdirSync(join(folder, 'scenarios'), { recursive: true })
  copyFileSync(join(root, '__test__', 'fixtures', 'dropin-scenarios.mjs'), join(folder, 'scenarios', 'run.mjs'))
  const stdout = execFileSync(process.execPath, [join(folder, 'scenarios', 'run.mjs')], { cwd: folder, encoding: 'utf8', timeout: 120_000 })
  outcome = JSON.parse(stdout.trim().split('\n').at(-1) as string)
}, 300_000)

afterAll(() => {
  if (folder) rmSync(folder, { recursive: true, force: true })
})

describe('drop-in through the real run_code tool', () => {
  it('mounts from the packed tarball beside the harness packages', () => {
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

  it('an abort stops the program promptly', () => {
    expect(outcome.aborted.isError).toBe(true)
    expect(outcome.abortMs).toBeLessThan(5000)
    expect(outcome.calls).toEqual(['Paris', 'Lyon', 'Paris', 'Lyon', 'Nice', 'Atlantis'])
  })
})
