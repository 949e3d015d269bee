#!/usr/bin/env node
// The README's configuration table, written from the addon's one table of
// keys (src/config_keys.rs, read through `configKeys()`):
// `npm run config-table` rewrites it between its markers, and
// __test__/docs.test.ts fails while the README differs from what this
// would write.
import { readFileSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

export const BEGIN = '<!-- config-table: written by `npm run config-table` from src/config_keys.rs -->'
export const END = '<!-- /config-table -->'

/** Text in a table cell, where a `|` would end the cell. */
function cell(text) {
  return text.replaceAll('|', '\\|')
}

/**
 * The table, a row per key in the addon's order.
 * @param {import('../index.js').NativeConfigKey[]} keys - `configKeys()`.
 */
export function configTable(keys) {
  return [
    '| key | default | bounds | meaning |',
    '|---|---|---|---|',
    ...keys.map((key) => `| \`${key.name}\` | ${cell(key.defaultText)} | ${cell(key.bounds)} | ${cell(key.doc)} |`),
  ].join('\n')
}

/**
 * The README with `table` between the markers.
 * @param {string} readme - the README's text.
 * @param {string} table - from {@link configTable}.
 */
export function withConfigTable(readme, table) {
  const start = readme.indexOf(BEGIN)
  const end = readme.indexOf(END)
  if (start < 0 || end < start) throw new Error(`README.md has no "${BEGIN}" ... "${END}" markers`)
  return `${readme.slice(0, start + BEGIN.length)}\n${table}\n${readme.slice(end)}`
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { configKeys } = await import('../index.js')
  const path = fileURLToPath(new URL('../README.md', import.meta.url))
  const readme = readFileSync(path, 'utf8')
  const written = withConfigTable(readme, configTable(configKeys()))
  if (written !== readme) writeFileSync(path, written)
  console.error(written === readme ? 'README.md: the config table is current' : 'README.md: config table rewritten')
}
