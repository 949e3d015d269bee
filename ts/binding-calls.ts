/**
 * Node's end of the binding bridge: takes the calls the isolates queued,
 * runs the caller's functions on this (Node's main) thread, and answers.
 * Every program-side value that arrives here is re-checked; every answer is
 * checked before it crosses back. Nothing a host function or a program does
 * can make this throw into the addon.
 * @module
 */
import { types } from 'node:util'
import type { HostNamespace } from './bindings.js'
import {
  ARGUMENTS_NOT_LOSSLESS,
  BINDING_CALL_IDS,
  REPLY_JSON,
  REPLY_REJECT,
  REPLY_TEXT,
  RESOLUTION_NOT_LOSSLESS,
  type NativeRuntime,
} from './native.js'
import { encodeLossless, losslessJson, type OutOfBand } from './lossless-json.js'

const JSONStringify = JSON.stringify
/** Captured: the harness's own code may replace the globals later. */
const NativePromise = Promise
const PromiseThen = Function.prototype.call.bind(Promise.prototype.then) as <T>(
  promise: Promise<T>,
  onValue: (value: T) => void,
  onError: (error: unknown) => void,
) => Promise<void>
/** Captured: a tool's result must not change how its answer is checked. */
const StringIsWellFormed = Function.prototype.call.bind(
  (String.prototype as unknown as { isWellFormed(this: string): boolean }).isWellFormed,
) as (text: string) => boolean

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
export class BindingCalls {
  private readonly runs = new Map<number, HostNamespace[]>()
  private native: NativeRuntime | undefined

  /** Attach the addon once it exists (it needs `receive` as its callback). */
  attach(native: NativeRuntime): void {
    this.native = native
  }

  open(runId: number, namespaces: HostNamespace[]): void {
    this.runs.set(runId, namespaces)
  }

  close(runId: number): void {
    this.runs.delete(runId)
  }

  /** Replies waiting to cross back, flushed once per microtask drain:
   *  REPLY_IDS numbers per reply (run id, call id, how the text answers
   *  it, how many strings cross beside it) and its texts (the text; then,
   *  with strings beside it, their paths and the strings). */
  private replyIds: number[] = []
  private replyTexts: string[] = []
  private flushQueued = false

  private readonly flush = (): void => {
    this.flushQueued = false
    const native = this.native
    if (!native || this.replyTexts.length === 0) return
    const ids = Uint32Array.from(this.replyIds)
    const texts = this.replyTexts
    this.replyIds = []
    this.replyTexts = []
    if (native.reply(ids, texts) && !this.lingerQueued) {
      this.lingerQueued = true
      setImmediate(this.linger)
    }
  }

  /**
   * A live run was answered: its next call is likely microseconds away.
   * Waiting for it briefly, awake, after this turn (not inside it, so each
   * call still gets a turn of its own) spares the wake-up of a sleeping
   * event loop, the larger part of a quick binding's round trip.
   */
  private lingerQueued = false
  private readonly linger = (): void => {
    this.lingerQueued = false
    // The calls it found are this turn's: handed over here, not woken for.
    const calls = this.native?.linger()
    if (calls) this.receive(calls[0], calls[1])
  }

  /**
   * Queue a rejection with `message`. It crosses as a JSON string literal,
   * which keeps a lone surrogate (the crossing is UTF-8, which would
   * replace it).
   */
  private reject(runId: number, callId: number, message: string): void {
    this.answer(runId, callId, REPLY_REJECT, JSONStringify(message))
  }

  /** Queue one reply; all replies settled in the same turn cross together. */
  private answer(runId: number, callId: number, kind: number, text: string, beside?: OutOfBand): void {
    // The addon's REPLY_IDS numbers per reply, in its order (it refuses
    // a batch of any other shape, so a disagreement fails every call).
    const strings = beside?.strings
    if (strings) {
      this.replyIds.push(runId, callId, kind, strings.length)
      this.replyTexts.push(text, beside.paths, ...strings)
    } else {
      this.replyIds.push(runId, callId, kind, 0)
      this.replyTexts.push(text)
    }
    if (!this.flushQueued) {
      this.flushQueued = true
      queueMicrotask(this.flush)
    }
  }

  /**
   * The addon's wake-up with a batch of calls: call `i` is (run id
   * `ids[4i]`, call id `ids[4i+1]`, namespace `ids[4i+2]`, function
   * `ids[4i+3]`, argument `args[i]`), 4 being BINDING_CALL_IDS. The argument
   * is its JSON text, or `[json, paths, ...strings]` when its long strings
   * crossed beside the JSON (`crates/sandbox-ext/js/01_lossless_json.js`). Dispatch each.
   */
  readonly receive = (ids: Uint32Array, args: Array<string | string[]>): void => {
    for (let i = 0; i < args.length; i++) {
      const at = i * BINDING_CALL_IDS
      const runId = ids[at] as number
      const callId = ids[at + 1] as number
      try {
        this.dispatch(runId, callId, ids[at + 2] as number, ids[at + 3] as number, args[i] as string | string[])
      } catch (error) {
        // dispatch is meant to be total; should it ever throw, the call is
        // still answered and nothing escapes into the addon's callback
        // (where it would be an uncaught exception of the host process).
        if (this.runs.has(runId)) this.reject(runId, callId, `binding dispatch failed: ${messageOf(error)}`)
      }
    }
  }

  private dispatch(runId: number, callId: number, namespace: number, fnIndex: number, argument: string | string[]): void {
    const host = this.runs.get(runId)?.[namespace]
    // Unknown runs (already settled) are not answered at all.
    if (host === undefined) return
    const name = host.names[fnIndex] as string
    const fn = Object.hasOwn(host.record, name) ? host.record[name] : undefined
    if (typeof fn !== 'function') {
      this.reject(runId, callId, `unknown binding ${JSONStringify(`${host.global}.${name}`)}`)
      return
    }
    const args =
      typeof argument === 'string'
        ? losslessJson.decode(argument)
        : losslessJson.decodeWithStrings(argument[0] as string, argument[1] as string, argument.slice(2))
    if (args === undefined) {
      this.reject(runId, callId, ARGUMENTS_NOT_LOSSLESS)
      return
    }
    let pending: unknown
    try {
      pending = fn(args)
    } catch (error) {
      this.reject(runId, callId, messageOf(error))
      return
    }
    const onValue = (value: unknown): void => {
      // A string crosses as it is (no JSON pass over megabytes on either
      // side); one with a lone surrogate, which UTF-8 cannot carry, as JSON.
      if (typeof value === 'string' && StringIsWellFormed(value)) {
        this.answer(runId, callId, REPLY_TEXT, value)
        return
      }
      // Its long strings cross beside its JSON, as the bare string does.
      const beside: OutOfBand = { paths: '', strings: null, wellFormed: true }
      const text = encodeLossless(value, beside)
      if (text === undefined) this.reject(runId, callId, RESOLUTION_NOT_LOSSLESS)
      else this.answer(runId, callId, REPLY_JSON, text, beside)
    }
    const onError = (error: unknown): void => this.reject(runId, callId, messageOf(error))
    // What the reference's `await fn(args)` does: a native promise made by
    // Promise itself (an async tool's) is followed as it is, with no
    // thenable job between it and its reaction (two microtask turns a
    // call fewer: ~15% of this side's work for many quick calls); anything
    // else goes through a resolve function, whose thenable job calls its
    // `then`. Reading `constructor` runs a getter it may have, and making
    // the reaction reads it again, so both are inside the try: what they
    // throw rejects the call, as it would reject the reference's await.
    try {
      if (types.isPromise(pending) && (pending as Promise<unknown>).constructor === NativePromise) {
        PromiseThen(pending as Promise<unknown>, onValue, onError)
        return
      }
    } catch (error) {
      onError(error)
      return
    }
    // A resolve function never throws; whatever the thenable does (a
    // throwing `then` getter or call) becomes a rejection.
    PromiseThen(new NativePromise((resolve) => resolve(pending)), onValue, onError)
  }
}
