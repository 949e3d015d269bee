/**
 * Every config key has bounds this machine can honour: a value outside
 * them is refused at plugin start with a message naming the key, and a
 * value inside them gives a runtime whose runs settle. Each key is fed
 * values at, beside and far past the usual bounds (fractions, huge,
 * negative, NaN, infinities); the harness (this process) survives every
 * one, and every runtime that starts runs a program and is disposed.
 */
import { Context } from '@deepseek-ai/cordis'
import { describe, expect, it } from 'vitest'
import { V8CodeRuntime } from './helpers.js'

const KEYS = [
  'computeMs',
  'maxWallMs',
  'maxOutputBytes',
  'maxOldGenerationSizeMb',
  'maxExternalMemoryMb',
  'maxConcurrentRuns',
  'maxQueuedRuns',
  'preparedIsolates',
  'hostUnresponsiveMs',
  'isolateHosts',
  'hostMaxRssMb',
] as const

const VALUES = [-1, 0, 0.5, 1, 1.5, 64, 65, 3071, 3072, 2 ** 31 - 1, 2 ** 31, 2 ** 32, 2 ** 53, 1e300, Infinity, -Infinity, Number.NaN]

describe('config bounds', () => {
  it.each(KEYS)('%s: every value is refused naming the key, or gives a runtime that works', async (key) => {
    const outcomes: string[] = []
    for (const value of VALUES) {
      const ctx = new Context()
      let fiber
      try {
        fiber = await ctx.plugin(V8CodeRuntime, { [key]: value } as never)
      } catch (error) {
        const message = (error as Error).message
        expect(message, `${key}: ${value}`).toMatch(new RegExp(`^dsh-code-runtime-v8: config\\.${key} (must be |\\(${value}\\) is more than this machine allows)`))
        outcomes.push(`${value}: refused`)
        continue
      }
      const runtime = ctx.codeRuntime as V8CodeRuntime
      const result = await runtime.run({ program: 'return 1', bindings: [] })
      // A tiny budget may fail the run; it must still settle as the seam says.
      expect(Array.isArray(result.logs), `${key}: ${value}`).toBe(true)
      expect(result.value === 1 || typeof result.error?.kind === 'string', `${key}: ${value}`).toBe(true)
      await fiber.dispose()
      outcomes.push(`${value}: ran`)
    }
    // What a key never takes: nothing below or at zero, nothing not finite.
    for (const value of [-1, 0, 1e300, Infinity, -Infinity, Number.NaN]) expect(outcomes).toContain(`${value}: refused`)
    expect(outcomes.filter((outcome) => outcome.endsWith(': ran')).length).toBeGreaterThan(0)
  })
})
