/**
 * The harness's side of the lossless-JSON boundary. It is the SAME code the
 * isolate runs (`crates/sandbox-ext/js/01_lossless_json.js`, over the intrinsics captured by
 * `crates/sandbox-ext/js/00_primordials.js`), evaluated here over this realm's intrinsics, so
 * both sides of the bridge judge values by one implementation.
 * @module
 */
import { readFileSync } from 'node:fs'
import { types } from 'node:util'

/** A value the encoder refused as too large for its bound. */
export interface LosslessJson {
  /**
   * Compact JSON text of a lossless value, or `undefined` when not
   * lossless; with `outOfBand`, its long strings are left out of the text
   * and collected there (`crates/sandbox-ext/js/01_lossless_json.js`).
   */
  encode(value: unknown, maxUnits?: number, outOfBand?: OutOfBand): string | undefined | object
  /** Decode and re-check JSON text, or `undefined` when not lossless. */
  decode(text: string): unknown
  /**
   * Decode JSON text whose long strings crossed beside it, putting each at
   * its places (`pathsText`, a JSON array of places, each its string's
   * index and a path to a `null`), or `undefined` when not lossless, a
   * path leads nowhere or the places do not name each string in order.
   */
  decodeWithStrings(text: string, pathsText: string, strings: string[]): unknown
  readonly TOO_LARGE: object
  /** Strings at least this long cross beside a call argument's or a result's JSON. */
  readonly OUT_OF_BAND_LENGTH: number
}

/** Where `encode` collects the long strings it leaves out of the text. */
export interface OutOfBand {
  /** The JSON array of their places (set only when there are some). */
  paths: string
  /** The strings, each once, in the order of their first places (null when there are none). */
  strings: string[] | null
  /** Collect only well-formed strings (those UTF-8 carries exactly). */
  wellFormed: boolean
}

function load(): LosslessJson {
  const scope: Record<string, unknown> = {
    SharedArrayBuffer,
    Deno: { core: { ops: {}, isProxy: types.isProxy } },
  }
  for (const file of ['00_primordials.js', '01_lossless_json.js']) {
    const source = readFileSync(new URL(`../crates/sandbox-ext/js/${file}`, import.meta.url), 'utf8')
    // The files are the sandbox's own bootstrap, shipped with this package.
    new Function('globalThis', source)(scope)
  }
  // JSON.stringify became a SIMD copy for long strings in V8 13.8; before
  // it, scanning a long string for what it would escape is 3-4x quicker.
  const { losslessJson } = scope.__dsh as { losslessJson: { create(scanLongStrings: boolean): LosslessJson } }
  return losslessJson.create(v8Before(13, 8))
}

/** Whether this Node's V8 is older than `major.minor`. */
function v8Before(major: number, minor: number): boolean {
  const [ownMajor = 0, ownMinor = 0] = process.versions.v8.split('.').map(Number)
  return ownMajor < major || (ownMajor === major && ownMinor < minor)
}

export const losslessJson: LosslessJson = load()

/**
 * Compact JSON text of `value`, or `undefined` when it is not lossless
 * JSON; with `outOfBand`, long strings are collected there instead.
 */
export function encodeLossless(value: unknown, outOfBand?: OutOfBand): string | undefined {
  try {
    const text = losslessJson.encode(value, undefined, outOfBand)
    return typeof text === 'string' ? text : undefined
  } catch {
    // A throwing getter (or a revoked proxy) makes the value not lossless.
    return undefined
  }
}
