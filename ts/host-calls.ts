/**
 * The host end of the binding bridge: takes the calls the isolates queued,
 * runs the caller's functions on this (Node's main) thread, and answers.
 * Every program-side value that arrives here is re-checked; every answer is
 * checked before it crosses back. Nothing a host function or a program does
 * can make this throw into the addon.
 * @module
 */
import { types } from 'node:util'
import type { CodeBindingFunction } from '@deepseek-ai/dsh-code-runtime'
import type { NativeHostCall, NativeRuntime } from '../index.js'
import { encodeLossless, losslessJson } from './lossless-json.js'

/** Render an unknown rejection as the message the program sees. */
export function messageOf(thrown: unknown): string {
  try {
    if (thrown instanceof Error || types.isNativeError(thrown)) return String((thrown as Error).message)
    return String(thrown)
  } catch {
    return 'binding call failed with an unrenderable value'
  }
}

/** Routes calls to the functions of the runs that are live. */
export class HostCalls {
  private readonly runs = new Map<number, CodeBindingFunction[][]>()
  private native: NativeRuntime | undefined

  /** Attach the addon once it exists (it needs `drain` as its callback). */
  attach(native: NativeRuntime): void {
    this.native = native
  }

  open(runId: number, functions: CodeBindingFunction[][]): void {
    this.runs.set(runId, functions)
  }

  close(runId: number): void {
    this.runs.delete(runId)
  }

  /** The addon's wake-up: take every waiting call and dispatch it. */
  readonly drain = (): void => {
    const native = this.native
    if (!native) return
    let calls: NativeHostCall[]
    try {
      calls = native.drainCalls()
    } catch {
      return
    }
    for (const call of calls) this.dispatch(native, call)
  }

  private dispatch(native: NativeRuntime, call: NativeHostCall): void {
    const reply = (ok: boolean, text: string) => {
      // A run that settled has closed its mailbox: the addon drops this.
      native.reply(call.runId, call.callId, ok, text)
    }
    const fn = this.runs.get(call.runId)?.[call.namespace]?.[call.function]
    if (typeof fn !== 'function') {
      // Unknown runs (already settled) are not answered at all.
      if (this.runs.has(call.runId)) reply(false, 'unknown binding')
      return
    }
    const args = losslessJson.decode(call.args)
    if (args === undefined) {
      reply(false, 'binding arguments must be lossless JSON')
      return
    }
    let pending: unknown
    try {
      pending = fn(args)
    } catch (error) {
      reply(false, messageOf(error))
      return
    }
    Promise.resolve(pending).then(
      (value) => {
        const text = encodeLossless(value)
        if (text === undefined) reply(false, 'binding resolution must be lossless JSON')
        else reply(true, text)
      },
      (error: unknown) => reply(false, messageOf(error)),
    )
  }
}
