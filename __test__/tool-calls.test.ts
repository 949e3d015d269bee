/**
 * `maxToolCalls`: the most binding calls one run may make, counted by the
 * harness. The call past it reaches no host function and rejects in the
 * program as a failed binding call does, with the cap's message; each call
 * counts once, however often the run is executed again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { held, hostsReplaced, killHosts, mount, tools, until, type Mounted } from './helpers.js'

const CAP = 3
const OVER = `tool call limit reached: the run already made maxToolCalls (${CAP}) binding calls; this call was not made`

let m: Mounted
beforeAll(async () => {
  m = await mount({ maxToolCalls: CAP })
})
afterAll(() => m.dispose())

/** A tool that counts its calls and answers with the count. */
function counted() {
  let calls = 0
  return {
    fn: async () => ++calls,
    get calls() {
      return calls
    },
  }
}

describe('maxToolCalls', () => {
  it('the call past the cap rejects in the program with the cap\'s message, and no host function sees it', async () => {
    const count = counted()
    const result = await m.run(
      `for (let i = 0; i < ${CAP + 1}; i++) await tools.count({ i }); return 'not reached'`,
      { bindings: tools({ count: count.fn }) },
    )
    expect(count.calls).toBe(CAP)
    expect(result.error?.kind).toBe('exception')
    expect(result.error?.message).toMatch(new RegExp(`^Error: ${OVER.replace(/[()]/g, '\\$&')}\\n    at `))
  })

  it('a program that catches it returns normally, and its later calls are refused alike', async () => {
    const count = counted()
    const program = `
      const answers = []
      for (let i = 0; i < ${CAP}; i++) answers.push(await tools.count({ i }))
      const refused = []
      for (const call of [() => tools.count({}), () => tools.other({})]) {
        try { await call() } catch (e) { refused.push(e.message) }
      }
      return { answers, refused }`
    const result = await m.run(program, { bindings: tools({ count: count.fn, other: count.fn }) })
    expect(result).toEqual({ logs: [], value: { answers: [1, 2, 3], refused: [OVER, OVER] } })
    expect(count.calls).toBe(CAP)
  })

  it('is refused as a failed binding call is: the same error, its class and member name included', async () => {
    const failing = async () => {
      throw new Error(OVER)
    }
    const errorClass = { name: 'ToolError', memberNameProperty: 'tool' }
    const shape = `(e) => ({ name: e.name, tool: e.tool, message: e.message, isToolError: e instanceof ToolError,
      isError: e instanceof Error, keys: Object.keys(e), stack: e.stack.split('\\n').slice(0, 2) })`
    // The failing call at the same place in both programs: their stacks name it.
    const failingCall = `try { await tools.failing({}) } catch (e) { return (${shape})(e) }`
    const ofFailure = await m.run(`\n${failingCall}`, { bindings: tools({ failing }, errorClass) })
    const count = counted()
    const ofCap = await m.run(
      `for (let i = 0; i < ${CAP}; i++) await tools.failing({})\n${failingCall}`,
      { bindings: tools({ failing: count.fn }, errorClass) },
    )
    expect(ofFailure.value).toMatchObject({ name: 'ToolError', tool: 'failing', isToolError: true })
    expect(ofCap).toEqual(ofFailure)
    expect(count.calls).toBe(CAP)
  })

  it('counts each call once across a host death: the re-executed run is refused the same call', async () => {
    const count = counted()
    const hold = held()
    const before = m.runtime.stats()
    const result = m.run(
      `const a = await tools.count({}); const b = await tools.hold({}); const c = await tools.count({}); let refused
       try { await tools.count({}) } catch (e) { refused = e.message }
       return { a, b, c, refused }`,
      { bindings: tools({ count: count.fn, hold: hold.fn }) },
    )
    await hold.called
    const old = killHosts(m)
    await hostsReplaced(m, old)
    await until(() => m.runtime.stats().runsReexecuted === before.runsReexecuted + 1)
    hold.answer('held')
    expect(await result).toEqual({ logs: [], value: { a: 1, b: 'held', c: 2, refused: OVER } })
    expect([count.calls, hold.calls]).toEqual([2, 1])
  })
})
