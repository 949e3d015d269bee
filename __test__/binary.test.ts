/**
 * The addon runs no engine of its own (programs run in isolate hosts), and
 * exports nothing but the napi entry point: were a V8 ever linked in
 * through a dependency, none of its symbols could bind to Node's copy, or
 * Node's to it (docs/ARCHITECTURE.md, "Engine hazards"). And it stays
 * mapped for the life of the process (-z nodelete): its threads (the
 * supervisor's, the hosts' readers) outlive any call into it.
 */
import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const addon = fileURLToPath(new URL('../dsh-code-runtime-v8.linux-x64-gnu.node', import.meta.url))

describe('the built addon', () => {
  it('exports no V8 C++ symbols, and the napi entry point', () => {
    const exported = execFileSync('nm', ['-D', '--defined-only', addon], { encoding: 'utf8', maxBuffer: 64 << 20 })
      .split('\n')
      .map((line) => line.trim().split(/\s+/).at(-1) ?? '')
      .filter(Boolean)
    expect(exported.filter((name) => name.startsWith('_ZN2v8') || name.startsWith('_ZNK2v8'))).toEqual([])
    expect(exported).toContain('napi_register_module_v1')
  })

  it('is linked -z nodelete so it is never unmapped under live threads', () => {
    const dynamic = execFileSync('readelf', ['-d', addon], { encoding: 'utf8' })
    expect(dynamic).toMatch(/NODELETE/)
  })
})
