/**
 * This package's name and version, from its package.json (the one place
 * they are written): every message that names the package uses these.
 * @module
 */
import { createRequire } from 'node:module'

const manifest = createRequire(import.meta.url)('../package.json') as {
  name: string
  version: string
  optionalDependencies?: Record<string, string>
}

export const PACKAGE: string = manifest.name
export const VERSION: string = manifest.version
/** The platform packages, by npm's name, at this version. */
export const PLATFORM_PACKAGES: string[] = Object.keys(manifest.optionalDependencies ?? {})
