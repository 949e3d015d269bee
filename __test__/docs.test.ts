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
  .filter((path) => /\.(rs|js|mjs|ts|md|toml|json)$/.test(path) && !path.startsWith('js/vendor/') && !path.endsWith('package-lock.json'))

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
  it('lists exactly the schema\'s keys, each with the schema\'s default', async () => {
    const { Config } = await import('../lib/config.js')
    const readme = readFileSync(join(root, 'README.md'), 'utf8')
    const section = readme.slice(readme.indexOf('## Configuration'), readme.indexOf('\n## ', readme.indexOf('## Configuration') + 1))
    const rows = [...section.matchAll(/^\| `(\w+)` \| ([^|]+) \|/gm)].map(([, key, value]) => [key, value.trim()])
    const schema = Object.entries((Config as unknown as { dict: Record<string, { meta: { default: unknown } }> }).dict)
    // A default the README words (preparedIsolates: the machine's cores) is checked by its key only.
    const expected = schema.map(([key, entry]) => [key, key === 'preparedIsolates' ? 'available cores' : String(entry.meta.default)])
    expect(rows).toEqual(expected)
  })
})
