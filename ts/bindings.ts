/**
 * Binding namespaces: validation (misuse rejects run()) and the descriptor
 * the isolate builds its globals from.
 * @module
 */
import {
  DUNDER_MEMBER,
  PORTABLE_RESERVED_WORDS,
  RESERVED_BINDING_GLOBALS,
  RESERVED_ERROR_MEMBERS,
  type CodeBindingFunction,
  type CodeBindingNamespace,
} from '@deepseek-ai/dsh-code-runtime'
import { PACKAGE } from './package.js'

/** The seam's language-portable identifier subset. */
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/

/** A run's bindings, resolved once at its start. */
export interface ResolvedBindings {
  /** JSON for the isolate: globals, function names, error classes. */
  descriptorJson: string
  /** The namespaces as the host answers their calls, indexed as the isolate calls them. */
  namespaces: HostNamespace[]
}

/**
 * One namespace on the host side. The function names are fixed when the run
 * starts (they are the program's globals); each function is looked up in
 * the caller's record when it is called, as the reference backend does.
 */
export interface HostNamespace {
  global: string
  /** `names[i]` is the function the isolate calls by index `i`. */
  names: string[]
  record: Record<string, CodeBindingFunction>
}

function usable(name: unknown): name is string {
  return typeof name === 'string' && IDENTIFIER.test(name) && !PORTABLE_RESERVED_WORDS.has(name)
}

/**
 * Validate the namespaces in the seam's order and resolve them.
 * @throws Error with the seam's message on misuse.
 */
export function resolveBindings(bindings: readonly CodeBindingNamespace[]): ResolvedBindings {
  if (!Array.isArray(bindings)) throw new Error(`${PACKAGE}: request.bindings must be an array`)
  const globals = new Set<string>()
  for (const namespace of bindings) {
    const global = namespace?.global
    if (!usable(global)) throw new Error(`${PACKAGE}: binding global ${JSON.stringify(global)} is not a usable identifier`)
    if (RESERVED_BINDING_GLOBALS.has(global)) throw new Error(`${PACKAGE}: reserved binding global ${JSON.stringify(global)}`)
    if (globals.has(global)) throw new Error(`${PACKAGE}: duplicate binding global ${JSON.stringify(global)}`)
    if (typeof namespace.functions !== 'object' || namespace.functions === null) {
      throw new Error(`${PACKAGE}: binding ${JSON.stringify(global)} has no functions record`)
    }
    globals.add(global)
  }
  const errorClassNames = new Set<string>()
  for (const namespace of bindings) {
    const descriptor = namespace.errorClass
    if (!descriptor) continue
    const { name, memberNameProperty: member } = descriptor
    if (!usable(name)) throw new Error(`${PACKAGE}: binding error class ${JSON.stringify(name)} is not a usable identifier`)
    if (RESERVED_BINDING_GLOBALS.has(name)) throw new Error(`${PACKAGE}: reserved binding global ${JSON.stringify(name)}`)
    if (globals.has(name) || errorClassNames.has(name)) throw new Error(`${PACKAGE}: duplicate injected global ${JSON.stringify(name)}`)
    if (typeof member !== 'string' || member.length === 0 || RESERVED_ERROR_MEMBERS.has(member) || DUNDER_MEMBER.test(member)) {
      throw new Error(`${PACKAGE}: binding error member property ${JSON.stringify(member)} is not usable`)
    }
    errorClassNames.add(name)
  }
  const hostNamespaces: HostNamespace[] = []
  const namespaces = bindings.map((namespace) => {
    const names = Object.keys(namespace.functions)
    hostNamespaces.push({ global: namespace.global, names, record: namespace.functions })
    return {
      global: namespace.global,
      functions: names,
      ...(namespace.errorClass
        ? { errorClass: { name: namespace.errorClass.name, memberNameProperty: namespace.errorClass.memberNameProperty } }
        : {}),
    }
  })
  return { descriptorJson: JSON.stringify({ namespaces }), namespaces: hostNamespaces }
}
