/**
 * The runtime's configuration: the seam's four caps plus this backend's
 * own keys. Every cap is config, never a hidden default inside run().
 * Each key is defined once, in the addon's table (`src/config_keys.rs`):
 * the schema here is built from it (`configKeys()`), and the addon checks
 * the bounds when the runtime is constructed.
 * @module
 */
import z from '@deepseek-ai/schemastery'
import { configKeys, type NativeConfig, type NativeConfigKey } from './native.js'
import { PACKAGE } from './package.js'

/**
 * Validated configuration of one `V8CodeRuntime`: exactly the addon's
 * `NativeConfig` (its fields are documented once, in the addon's table).
 */
export type V8CodeRuntimeConfig = NativeConfig

/**
 * A key's schema: its type (its default's: a whole number is a number
 * here, and the addon refuses a fraction, naming the key) and default.
 * @param key - the key as the addon defines it.
 */
function schemaOf({ defaultValue, description }: NativeConfigKey): z {
  return typeof defaultValue === 'boolean'
    ? z.boolean().default(defaultValue).description(description)
    : z.number().default(defaultValue).description(description)
}

export const Config: z<V8CodeRuntimeConfig> = z.object(
  Object.fromEntries(configKeys().map((key) => [key.name, schemaOf(key)])),
) as unknown as z<V8CodeRuntimeConfig>

/**
 * Keys this backend no longer takes, with what replaced them. A retired key
 * is refused, not ignored: a config that relied on it must be revisited.
 */
const RETIRED: Record<string, string> = {
  poolSize:
    'runs no longer hold a fixed pool of threads (a run waiting on a tool holds no CPU); ' +
    'use config.maxConcurrentRuns for runs in flight and config.preparedIsolates for isolates kept ready',
}

/**
 * Refuse retired keys (the schema passes unknown keys through).
 * @param config - the config as the user wrote it.
 */
function refuseRetiredKeys(config: unknown): void {
  if (typeof config !== 'object' || config === null) return
  for (const [key, instead] of Object.entries(RETIRED)) {
    if (Object.hasOwn(config, key)) throw new Error(`${PACKAGE}: config.${key} is retired: ${instead}`)
  }
}

/**
 * Refuse what the schema cannot: retired keys. Every key's bounds are the
 * addon's (`src/config_keys.rs`, checked in the seam's order), which the
 * constructor applies.
 * @param config - the schema-filled config.
 */
export function validateConfig(config: V8CodeRuntimeConfig): void {
  refuseRetiredKeys(config)
}
