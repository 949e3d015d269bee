/**
 * `dsh-code-runtime-v8`: a `ctx.codeRuntime` backend that runs each
 * model-written TypeScript program in a fresh V8 isolate owned by a Rust
 * thread while it is in flight, in a supervised isolate-host process: a
 * program that makes V8 end its process ends its host, never the harness.
 *
 * Contract (see `@deepseek-ai/dsh-code-runtime`): `run()` resolves for every
 * program outcome and rejects only for misuse of the seam (after disposal,
 * invalid bindings, a full queue). Unlike the worker-thread backend this is
 * a capability boundary: the program sees a clean JavaScript world plus the
 * bindings it was given, and nothing of Node, the file system, the network
 * or the host environment. Budgets are enforced from outside the isolate;
 * disposal terminates live runs and awaits every isolate host's exit.
 * @module
 */
import type { Context } from '@deepseek-ai/cordis'
import { CodeRuntime, type CodeRunRequest, type CodeRunResult } from '@deepseek-ai/dsh-code-runtime'
import type { NativeStats } from './native.js'
import { Config, validateConfig, type V8CodeRuntimeConfig } from './config.js'
import { Runs } from './runs.js'

export type { V8CodeRuntimeConfig } from './config.js'
export { RUN_REPORT, type V8CodeRunReport } from './run-report.js'
/** What `stats()` reports: the addon's `NativeStats` (documented there). */
export type V8CodeRuntimeStats = NativeStats

/**
 * The V8-isolate code runtime (`ctx.codeRuntime`). Register it with
 * `ctx.plugin(V8CodeRuntime, config)`; every cap comes from the validated
 * {@link V8CodeRuntimeConfig}.
 */
export class V8CodeRuntime extends CodeRuntime {
  static Config = Config
  readonly language = 'typescript'
  readonly isolation = 'v8-isolate'
  readonly config: V8CodeRuntimeConfig
  private readonly runs: Runs

  constructor(ctx: Context, config: V8CodeRuntimeConfig) {
    super(ctx)
    validateConfig(config)
    this.config = config
    this.runs = new Runs(ctx, config)
    const runs = this.runs
    ctx.effect(() => () => runs.dispose(), 'v8 code-runtime teardown')
  }

  /**
   * What the runtime is doing now (runs queued, in flight, computing,
   * waiting, waiting on the host; threads; prepared isolates) and what it
   * has done (finished runs by outcome, refused runs, CPU charged to
   * programs). The run counts are one snapshot:
   * `inFlight === starting + computing + waiting`.
   */
  stats(): V8CodeRuntimeStats {
    return this.runs.stats()
  }

  /**
   * Execute one program in a fresh isolate. Program outcomes resolve with
   * `result.error`; this rejects only for misuse of the seam.
   */
  run(request: CodeRunRequest): Promise<CodeRunResult> {
    return this.runs.run(request)
  }
}

export default V8CodeRuntime
