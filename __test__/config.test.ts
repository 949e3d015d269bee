/**
 * Every config key has bounds this machine can honour: a value outside
 * them is refused at plugin start with a message naming the key, and a
 * value inside them gives a runtime whose runs settle. Each number key
 * (every one the addon defines: `configKeys()`) is fed values at, beside
 * and far past its bounds on this machine, and the usual suspects
 * (fractions, huge, negative, NaN, infinities); each is refused exactly
 * when the key's declared bounds refuse it, the harness (this process)
 * survives every one, and every runtime that starts runs a program and is
 * disposed. A refusal's message is known exactly: `refusal` words it from
 * the key's bounds as `configKeys()` gives them (`src/config.rs` makes it).
 */
import { readFileSync } from 'node:fs'
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

/**
 * The message refusing `value` for `key`, every other key at its default:
 * the first check it fails, in the contract's order (docs/CONTRACT.md §2).
 */
function refusal(key: NativeConfigKey, value: number): string {
  const prefix = `dsh-code-runtime-v8: config.${key.name}`
  const got = `got ${String(value)}`
  const atMost = key.atMost as number
  if (!(Number.isFinite(value) && value > 0)) return `${prefix} must be a positive number, ${got}`
  if (key.kind === 'whole number' && key.atLeast != null) {
    return `${prefix} must be a safe integer of at least ${key.atLeast} and at most ${atMost}, ${got}`
  }
  if (key.kind === 'whole number' && !Number.isInteger(value)) return `${prefix} must be a whole number, ${got}`
  const mappings = /`vm\.max_map_count` × 3\/4 \/ (\d+)/.exec(key.bounds)
  if (mappings) {
    if (value > 2 ** 32 - 1) return `${prefix} must be at most ${2 ** 32 - 1}, ${got}`
    const count = readFileSync('/proc/sys/vm/max_map_count', 'utf8').trim()
    return (
      `${prefix} (${value}) is more than this machine allows (${atMost}): each run in flight holds about ` +
      `${mappings[1]} memory mappings and vm.max_map_count is ${count}`
    )
  }
  if (value < (key.atLeast ?? 0)) return `${prefix} must be at least ${key.atLeast}, ${got}`
  const perCore = /\d+ per core$/.exec(key.bounds)?.[0]
  const why = key.bounds.endsWith("this machine's memory") ? " (this machine's memory)" : perCore ? ` (${perCore})` : ''
  return `${prefix} must be at most ${atMost}${why}, ${got}`
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
          expect(takes(key, value), `${name}: ${value} refused: ${message}`).toBe(false)
          expect(message, `${name}: ${value}`).toBe(refusal(key, value))
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
