/**
 * The runtime's configuration: the seam's four caps plus this backend's
 * own keys. Every cap is config, never a hidden default inside run().
 * @module
 */
import os from 'node:os'
import z from '@deepseek-ai/schemastery'
import type { NativeConfig } from './native.js'
import { PACKAGE } from './package.js'

/**
 * Validated configuration of one `V8CodeRuntime`: exactly the addon's
 * `NativeConfig` (its fields are documented once, on the Rust struct).
 */
export type V8CodeRuntimeConfig = NativeConfig

export const Config: z<V8CodeRuntimeConfig> = z.object({
  computeMs: z.number().default(60_000).description('CPU time a program may burn (ms)'),
  maxWallMs: z.number().default(600_000).description('wall-clock ceiling of a run (ms)'),
  maxOutputBytes: z.number().default(67_108_864).description('exact JSON byte cap over logs + value/message'),
  maxOldGenerationSizeMb: z.number().default(512).description('heap cap of a program isolate (MiB)'),
  maxExternalMemoryMb: z.number().default(512).description('memory cap outside the heap, every route (MiB)'),
  maxConcurrentRuns: z.number().default(2048).description('runs in flight at once, waiting ones included'),
  maxQueuedRuns: z.number().default(10_000).description('runs that may wait for admission'),
  preparedIsolates: z.number().default(Math.max(1, os.availableParallelism())).description('isolates kept prepared'),
  hostUnresponsiveMs: z.number().default(10_000).description('silence after which an isolate host is replaced (ms)'),
  isolateHosts: z.number().default(2).description('isolate-host processes the runs are spread over'),
  hostMaxRssMb: z.number().default(2048).description('resident memory past which an isolate host is replaced once its runs end (MiB)'),
  requireSandbox: z.boolean().default(false).description("refuse to start where the kernel refuses an isolate host's protections"),
}) as z<V8CodeRuntimeConfig>

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
 * addon's (`src/config.rs`, in the seam's order), which the constructor
 * applies.
 * @param config - the schema-filled config.
 */
export function validateConfig(config: V8CodeRuntimeConfig): void {
  refuseRetiredKeys(config)
}
