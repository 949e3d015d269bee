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
import type { NativeHostCalls, NativeRuntime } from '../index.js'
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

  /** Replies waiting to cross back, flushed once per microtask drain. */
  private replyRunIds: number[] = []
  private replyCallIds: number[] = []
  private replyOks: number[] = []
  private replyTexts: string[] = []
  private flushQueued = false

  private readonly flush = (): void => {
    this.flushQueued = false
    const native = this.native
    if (!native || this.replyTexts.length === 0) return
    const runIds = Uint32Array.from(this.replyRunIds)
    const callIds = Uint32Array.from(this.replyCallIds)
    const oks = Uint8Array.from(this.replyOks)
    const texts = this.replyTexts
    this.replyRunIds = []
    this.replyCallIds = []
    this.replyOks = []
    this.replyTexts = []
    native.reply(runIds, callIds, oks, texts)
  }

  /** Queue one reply; all replies settled in the same turn cross together. */
  private reply(runId: number, callId: number, ok: boolean, text: string): void {
    this.replyRunIds.push(runId)
    this.replyCallIds.push(callId)
    this.replyOks.push(ok ? 1 : 0)
    this.replyTexts.push(text)
    if (!this.flushQueued) {
      this.flushQueued = true
      queueMicrotask(this.flush)
    }
  }

  /** The addon's wake-up: take every waiting call and dispatch it. */
  readonly drain = (): void => {
    const native = this.native
    if (!native) return
    let calls: NativeHostCalls
    try {
      calls = native.drainCalls()
    } catch {
      return
    }
    const { runIds, callIds, namespaces, functions, args } = calls
    for (let i = 0; i < args.length; i++) {
      this.dispatch(runIds[i] as number, callIds[i] as number, namespaces[i] as number, functions[i] as number, args[i] as string)
    }
  }

  private dispatch(runId: number, callId: number, namespace: number, fnIndex: number, argsText: string): void {
    const fn = this.runs.get(runId)?.[namespace]?.[fnIndex]
    if (typeof fn !== 'function') {
      // Unknown runs (already settled) are not answered at all.
      if (this.runs.has(runId)) this.reply(runId, callId, false, 'unknown binding')
      return
    }
    const args = losslessJson.decode(argsText)
    if (args === undefined) {
      this.reply(runId, callId, false, 'binding arguments must be lossless JSON')
      return
    }
    let pending: unknown
    try {
      pending = fn(args)
    } catch (error) {
      this.reply(runId, callId, false, messageOf(error))
      return
    }
    Promise.resolve(pending).then(
      (value) => {
        const text = encodeLossless(value)
        if (text === undefined) this.reply(runId, callId, false, 'binding resolution must be lossless JSON')
        else this.reply(runId, callId, true, text)
      },
      (error: unknown) => this.reply(runId, callId, false, messageOf(error)),
    )
  }
}
