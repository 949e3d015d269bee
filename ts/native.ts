/**
 * The addon, loaded through napi's generated loader (`index.js`), which picks
 * the platform package that npm installed from the main package's
 * `optionalDependencies`. Where that fails, the error says why in terms a
 * user can act on (no binary for this platform, or the platform package was
 * not installed) instead of the loader's generic chain, which ends at a
 * WebAssembly package this project does not publish.
 * @module
 */
import type * as Loader from '../index.js'
import { PACKAGE, PLATFORM_PACKAGES, VERSION } from './package.js'

/** napi's name for this machine's platform (`linux-x64-gnu`, `darwin-arm64`). */
function currentPlatform(): string {
  const parts: string[] = [process.platform, process.arch]
  if (process.platform === 'linux') {
    // Node's report names the glibc it runs on; musl builds report none.
    const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header
    parts.push(header?.glibcVersionRuntime ? 'gnu' : 'musl')
  }
  return parts.join('-')
}

function loadFailure(cause: unknown): Error {
  const platform = currentPlatform()
  const prefix = `${PACKAGE}-`
  const supported = PLATFORM_PACKAGES.map((name) => name.slice(prefix.length))
  const platformPackage = `${prefix}${platform}`
  const message = supported.includes(platform)
    ? `${PACKAGE} could not load its binary for ${platform}: the package ${platformPackage}@${VERSION} ` +
      `should hold it. It is installed as an optional dependency: reinstall without --omit=optional / --no-optional ` +
      `(and with a lockfile made on ${platform}, or none).`
    : `${PACKAGE} has no prebuilt binary for this platform (${platform}). Supported: ${supported.join(', ')}.`
  return new Error(message, { cause })
}

async function load(): Promise<typeof Loader> {
  try {
    return await import('../index.js')
  } catch (error) {
    throw loadFailure(error)
  }
}

export const {
  NativeRuntime,
  configKeys,
  BINDING_CALL_IDS,
  REPLY_IDS,
  REPLY_REJECT,
  REPLY_JSON,
  REPLY_TEXT,
  ARGUMENTS_NOT_LOSSLESS,
  RESOLUTION_NOT_LOSSLESS,
  HOST_JOURNAL_FD,
  HOST_REGION_FD,
  HOST_LAST_HANDED_FD,
} = await load()
export type NativeRuntime = Loader.NativeRuntime
export type { NativeConfig, NativeConfigKey, NativeLogs, NativeRunReport, NativeRunResult, NativeStats } from '../index.js'
