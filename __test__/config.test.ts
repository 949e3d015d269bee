/**
 * Every config key has bounds this machine can honour: a value outside
 * them is refused at plugin start with a message naming the key, and a
 * value inside them gives a runtime whose runs settle. Each number key
 * (every one the addon defines: `configKeys()`) is fed values at, beside
 * and far past its bounds on this machine, and the usual suspects
 * (fractions, huge, negative, NaN, infinities); each is refused exactly
 * when the key's declared bounds refuse it, the harness (this process)
 * survives every one, and every runtime that starts runs a program and is
 * disposed.
 */
import { Context } from '@deepseek-ai/cordis'
import { describe, expect, it } from 'vitest'
import { configKeys, type NativeConfigKey } from '../lib/native.js'
import { V8CodeRuntime } from './helpers.js'

const KEYS = configKeys().filter((key) => key.kind !== 'boolean')

const VALUES = [-1, 0, 0.5, 1, 1.5, 64, 65, 3071, 3072, 2 ** 31 - 1, 2 ** 31, 2 ** 32, 2 ** 53, 1e300, Infinity, -Infinity, Number.NaN]

/** The usual suspects, and values at and beside the key's own bounds. */
function valuesFor(key: NativeConfigKey): number[] {
  const beside = [
    ...(key.atLeast == null ? [] : [key.atLeast - 1, key.atLeast - 0.5, key.atLeast, key.atLeast + 0.5]),
    ...(key.atMost == null ? [] : [key.atMost - 0.5, key.atMost, key.atMost + 0.5, key.atMost + 1]),
  ]
  return [...new Set([...VALUES, ...beside])]
}

/** Whether the key's declared bounds take `value`. */
function takes(key: NativeConfigKey, value: number): boolean {
  return (
    Number.isFinite(value) &&
    value > 0 &&
    (key.kind !== 'whole number' || Number.isInteger(value)) &&
    (key.atLeast == null || value >= key.atLeast) &&
    (key.atMost == null || value <= key.atMost)
  )
}

describe('config bounds', () => {
  it('covers every number key the addon defines', () => {
    expect(KEYS.map((key) => key.name)).toContain('computeMs')
    expect(KEYS.every((key) => key.atMost != null && Number.isFinite(key.atMost))).toBe(true)
  })

  it.each(KEYS.map((key) => [key.name, key] as const))(
    '%s: every value is refused naming the key exactly when its bounds refuse it, or gives a runtime that works',
    async (name, key) => {
      for (const value of valuesFor(key)) {
        const ctx = new Context()
        let fiber
        try {
          fiber = await ctx.plugin(V8CodeRuntime, { [name]: value } as never)
        } catch (error) {
          const message = (error as Error).message
          expect(message, `${name}: ${value}`).toMatch(
            new RegExp(`^dsh-code-runtime-v8: config\\.${name} (must be |\\(${value}\\) is more than this machine allows)`),
          )
          expect(takes(key, value), `${name}: ${value} refused: ${message}`).toBe(false)
          continue
        }
        expect(takes(key, value), `${name}: ${value} taken`).toBe(true)
        const runtime = ctx.codeRuntime as V8CodeRuntime
        const result = await runtime.run({ program: 'return 1', bindings: [] })
        // A tiny budget may fail the run; it must still settle as the seam says.
        expect(Array.isArray(result.logs), `${name}: ${value}`).toBe(true)
        expect(result.value === 1 || typeof result.error?.kind === 'string', `${name}: ${value}`).toBe(true)
        await fiber.dispose()
      }
    },
  )
})
