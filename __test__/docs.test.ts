/**
 * The repository stands alone: the documents its code and tests cite are
 * its own (docs/), every cited section exists, and nothing refers to a
 * document outside the repository.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const root = resolve(fileURLToPath(new URL('..', import.meta.url)))
/** Tracked text files of our own (not the vendored bundle, not lockfiles). */
const files = execFileSync('git', ['ls-files'], { cwd: root, encoding: 'utf8' })
  .split('\n')
  .filter((path) => /\.(rs|js|mjs|ts|md|toml|json)$/.test(path) && !path.startsWith('crates/sandbox-ext/js/vendor/') && !path.endsWith('package-lock.json'))

describe('the repository stands alone', () => {
  it('cites no document outside it', () => {
    const outside = /ENGINE-NOTES|API-MAP|shared\/spec|shared\/seeds|src-ts\/|CONTRACT section|CONTRACT §/
    const hits = files.flatMap((path) =>
      readFileSync(join(root, path), 'utf8')
        .split('\n')
        .flatMap((line, i) => (outside.test(line) && path !== '__test__/docs.test.ts' ? [`${path}:${i + 1}: ${line.trim()}`] : [])),
    )
    expect(hits).toEqual([])
  })

  it('every docs/<file>.md §<n> cited exists', () => {
    const cited = files.flatMap((path) =>
      [...readFileSync(join(root, path), 'utf8').matchAll(/docs\/([A-Z]+)\.md §(\d+)/g)].map((match) => [path, match[1], match[2]]),
    )
    expect(cited.length).toBeGreaterThan(3)
    const missing = cited.filter(([, file, section]) => !readFileSync(join(root, 'docs', `${file}.md`), 'utf8').includes(`## §${section} `))
    expect(missing).toEqual([])
  })
})

describe("the README's configuration table", () => {
  it('is what `npm run config-table` writes from the addon\'s keys', async () => {
    const { configKeys } = await import('../lib/native.js')
    const { configTable, withConfigTable } = await import('../scripts/config-table.mjs')
    const readme = readFileSync(join(root, 'README.md'), 'utf8')
    expect(readme, "the README's config table is stale: run npm run config-table").toBe(withConfigTable(readme, configTable(configKeys())))
  })

  it("is the schema's: its keys, in its order, with its defaults", async () => {
    const { configKeys } = await import('../lib/native.js')
    const { Config } = await import('../lib/config.js')
    const schema = Object.entries((Config as unknown as { dict: Record<string, { meta: { default: unknown } }> }).dict)
    expect(schema.map(([key, entry]) => [key, entry.meta.default])).toEqual(configKeys().map((key) => [key.name, key.defaultValue]))
  })

  it('is where docs/CONTRACT.md §2 sends for defaults and bounds: §2 names keys the addon defines, and no number', async () => {
    const { configKeys } = await import('../lib/native.js')
    const contract = readFileSync(join(root, 'docs', 'CONTRACT.md'), 'utf8')
    const section = contract.slice(contract.indexOf('## §2 '), contract.indexOf('## §3 '))
    const names = new Set(configKeys().map((key) => key.name))
    const named = [...section.matchAll(/`([a-z][A-Za-z]*(?:Ms|Mb|Bytes|Runs|Isolates|Hosts|Sandbox))`/g)].map((match) => match[1])
    expect(named.filter((name) => !names.has(name))).toEqual([])
    expect(named).toContain('computeMs')
    // A default or a bound restated here would go stale unchecked: the only
    // numbers §2 holds are section references.
    expect(section.replace(/§\d+/g, '').match(/\d+/g)).toEqual(null)
  })
})

describe("the README's run report table", () => {
  it('names every field of V8CodeRunReport (lib/run-report.d.ts), in its order', () => {
    const typings = readFileSync(join(root, 'lib', 'run-report.d.ts'), 'utf8')
    const body = typings.slice(typings.indexOf('export interface V8CodeRunReport {'))
    const typed = [...body.slice(0, body.indexOf('\n}')).matchAll(/^    (\w+)\??: /gm)].map((field) => field[1])
    const readme = readFileSync(join(root, 'README.md'), 'utf8')
    const from = readme.indexOf('### Run reports')
    const table = readme.slice(from, readme.indexOf('\n#', from + 1))
    // First column of each row: one figure, or several joined by ", ".
    const named = [...table.matchAll(/^\| ((?:`\w+`(?:, )?)+) \|/gm)].flatMap((row) => [...row[1].matchAll(/`(\w+)`/g)].map((name) => name[1]))
    expect(typed).toContain('outcome')
    expect(named).toEqual(typed)
  })
})

describe("the README's stats() table", () => {
  it("names every field of NativeStats (index.d.ts), in its order, and a real runtime reports no other", async () => {
    const typings = readFileSync(join(root, 'index.d.ts'), 'utf8')
    const body = typings.slice(typings.indexOf('export interface NativeStats {'))
    const typed = [...body.slice(0, body.indexOf('\n}')).matchAll(/^  (\w+)\??: /gm)].map((field) => field[1])
    const readme = readFileSync(join(root, 'README.md'), 'utf8')
    const from = readme.indexOf('`runtime.stats()`')
    const table = readme.slice(from, readme.indexOf('\n#', from))
    // First column of each row: one field, or several joined by " / ".
    const named = [...table.matchAll(/^\| ((?:`\w+`(?: \/ )?)+) \|/gm)].flatMap((row) => [...row[1].matchAll(/`(\w+)`/g)].map((name) => name[1]))
    expect(named).toEqual(typed)
    const { mount } = await import('./helpers.js')
    const m = await mount({ isolateHosts: 1 })
    const reported = Object.keys(m.runtime.stats())
    await m.dispose()
    expect(reported.filter((field) => !typed.includes(field))).toEqual([])
  })
})
