/**
 * What a run reads that could differ between two executions goes through
 * its history, so that a run executed again after its host died reads
 * the same: each test has a program read a source, tell a tool what it
 * read, wait on a second tool, have its hosts killed, and return what it
 * read; the value returned must be what the tool was told, and no tool is
 * called twice. Random numbers are a stream the harness seeds per run.
 * Every wait is on an event (a tool called, a stats() condition).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { fromNodeWorker, held, hostsReplaced, killHosts, mount, tools, until, type Mounted } from './helpers.js'

let m: Mounted
beforeAll(async () => {
  m = await mount({ maxWallMs: 120_000 })
})
afterAll(() => m.dispose())

/**
 * Run `read` (an expression) in a program that tells the tool `tell` its
 * value, then waits on `hold` while every host is killed; returns what the
 * run returned, what `tell` was told, and how often each tool was called.
 */
async function readAcrossAHostDeath(read: string) {
  const told: unknown[] = []
  const hold = held()
  const bindings = tools({
    tell: async (value: unknown) => {
      told.push(value)
      return 'noted'
    },
    hold: hold.fn,
  })
  const before = m.runtime.stats()
  const result = m.run(`const read = ${read}; await tools.tell({ read }); await tools.hold({}); return read`, {
    bindings,
  })
  await hold.called
  const old = killHosts(m)
  await hostsReplaced(m, old)
  await until(() => m.runtime.stats().runsReexecuted === before.runsReexecuted + 1)
  hold.answer('go')
  const settled = await result
  const after = m.runtime.stats()
  expect(after.reexecutionsDiverged).toBe(before.reexecutionsDiverged)
  return { settled, told, holdCalls: hold.calls }
}

describe('random numbers are the same in a re-execution', () => {
  it.each([
    ['Math.random', '[Math.random(), Math.random(), Math.random()]'],
    ['crypto.getRandomValues', 'Array.from(crypto.getRandomValues(new Uint32Array(4)))'],
    ['crypto.randomUUID', 'crypto.randomUUID()'],
    ['Math.random and crypto, interleaved', '[Math.random(), crypto.randomUUID(), Math.random()]'],
  ])('%s', async (_, read) => {
    const { settled, told, holdCalls } = await readAcrossAHostDeath(read)
    expect(told).toHaveLength(1)
    expect(holdCalls).toBe(1)
    expect(settled).toEqual({ logs: [], value: (told[0] as { read: unknown }).read })
  })

  it('each run draws its own numbers', async () => {
    const first = await m.run('return [Math.random(), crypto.randomUUID()]')
    const second = await m.run('return [Math.random(), crypto.randomUUID()]')
    expect(first.value).not.toEqual(second.value)
  })

  it('Math.random is uniform over [0, 1) and looks like Node\'s', async () => {
    const program = `
      const numbers = Array.from({ length: 20000 }, () => Math.random())
      const buckets = new Array(10).fill(0)
      for (const n of numbers) buckets[Math.floor(n * 10)]++
      const d = Object.getOwnPropertyDescriptor(Math, 'random')
      return {
        inRange: numbers.every((n) => typeof n === 'number' && n >= 0 && n < 1),
        distinct: new Set(numbers).size,
        bucketsWithin20Percent: buckets.every((count) => count > 1600 && count < 2400),
        shape: [Math.random.name, Math.random.length, String(Math.random), d.writable, d.enumerable, d.configurable,
          'prototype' in Math.random, (() => { try { new Math.random(); return 'constructed' } catch (e) { return e.constructor.name } })()],
      }`
    const ours = (await m.run(program)).value as { shape: unknown[] }
    const node = await fromNodeWorker<{ shape: unknown[] }>(
      `parentPort.postMessage((() => {${program}})())`,
    )
    expect(ours).toEqual({ ...node, distinct: 20000 })
    expect(ours.shape).toEqual(node.shape)
  })
})
