/**
 * The code's shape: within each crate, modules depend on each other
 * without a cycle, so each can be read (and changed) after the ones it
 * uses. A module is a top-level file or folder of the crate's `src/`; it
 * depends on another when its code (not its comments, not its `mod
 * tests`) names `crate::<other>`.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const root = resolve(fileURLToPath(new URL('..', import.meta.url)))

/** Every .rs file under `dir`. */
function rustFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return rustFiles(path)
    return name.endsWith('.rs') ? [path] : []
  })
}

/** Each top-level module of the crate at `src` and the modules it names. */
function dependencies(src: string): Map<string, Set<string>> {
  const graph = new Map<string, Set<string>>()
  for (const file of rustFiles(src)) {
    const module = relative(src, file).split('/')[0]!.replace(/\.rs$/, '')
    if (module === 'lib' || module === 'main') continue
    const code = readFileSync(file, 'utf8')
      .split(/#\[cfg\(test\)\]\s*mod tests\b/)[0]!
      .split('\n')
      .filter((line) => !line.trim().startsWith('//'))
      .join('\n')
    const named = graph.get(module) ?? new Set<string>()
    for (const [, other] of code.matchAll(/\bcrate::(\w+)/g)) if (other !== module) named.add(other!)
    graph.set(module, named)
  }
  return graph
}

/** The cycles of `graph`, each as the modules along it. */
function cycles(graph: Map<string, Set<string>>): string[][] {
  const found: string[][] = []
  const state = new Map<string, 'open' | 'done'>()
  const path: string[] = []
  const visit = (module: string) => {
    state.set(module, 'open')
    path.push(module)
    for (const next of graph.get(module) ?? []) {
      if (!graph.has(next)) continue
      if (state.get(next) === 'open') found.push([...path.slice(path.indexOf(next)), next])
      else if (!state.has(next)) visit(next)
    }
    path.pop()
    state.set(module, 'done')
  }
  for (const module of graph.keys()) if (!state.has(module)) visit(module)
  return found
}

describe("each crate's modules", () => {
  it.each(['src', 'crates/protocol/src', 'crates/isolate-host/src', 'crates/sandbox-ext/src'])('in %s depend on each other without a cycle', (src) => {
    const graph = dependencies(join(root, src))
    expect(graph.size).toBeGreaterThan(3)
    expect(cycles(graph).map((cycle) => cycle.join(' -> '))).toEqual([])
  })

  it('a cycle is found where there is one', () => {
    const graph = new Map([
      ['a', new Set(['b'])],
      ['b', new Set(['c'])],
      ['c', new Set(['a'])],
      ['d', new Set(['a'])],
    ])
    expect(cycles(graph)).toEqual([['a', 'b', 'c', 'a']])
  })
})
