/**
 * The isolate host holds nothing worth stealing and can do nothing but
 * talk to the harness. What a host may do is attacked from inside in the
 * host crate's unit tests (`lockdown::tests`: the very functions the host
 * calls, applied in a test process that then makes each forbidden call);
 * here, from outside, that every real host is in that state: its threads
 * under the seccomp filter, no descriptor but its channel and stdio, no
 * secret of the harness's, namespaces of its own, first for the OOM
 * killer, and replaced when it holds too much memory.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs'
import { getPriority } from 'node:os'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { HOST_JOURNAL_FD, HOST_LAST_HANDED_FD, HOST_REGION_FD } from '../lib/native.js'
import { mount, tools, until, type Mounted } from './helpers.js'

/** A secret the harness holds in its environment, as an API key would be. */
const SECRET = `sk-dsh-lockdown-test-${process.pid}-${Date.now()}`

let m: Mounted
beforeAll(async () => {
  process.env.DSH_LOCKDOWN_TEST_API_KEY = SECRET
  m = await mount({ isolateHosts: 2, requireSandbox: true })
})
afterAll(async () => {
  await m.dispose()
  delete process.env.DSH_LOCKDOWN_TEST_API_KEY
})

/**
 * Every host alive, each running a program parked on a tool (so that its
 * run threads exist: a host without prepared isolates keeps none idle),
 * handed to `inspect` before the programs are let go.
 */
async function whileBusy(inspect: (pids: number[]) => void | Promise<void>): Promise<void> {
  // One run parked on a tool per host, so that both hosts have started
  // run threads: the filter must cover threads made after it, too.
  let called = 0
  let release: () => void = () => {}
  const released = new Promise<void>((resolve) => (release = resolve))
  const hosts = m.runtime.config.isolateHosts
  const parked = Array.from({ length: hosts }, () =>
    m.run('return await tools.hold({})', {
      bindings: tools({
        hold: async () => {
          called++
          await released
          return 'held'
        },
      }),
    }),
  )
  await until(() => called === hosts)
  const pids = m.runtime.stats().hostPids
  try {
    expect(pids.map((pid) => readdirSync(`/proc/${pid}/task`).length > 1)).toEqual(pids.map(() => true))
    await inspect(pids)
  } finally {
    release()
  }
  for (const result of await Promise.all(parked)) expect(result).toEqual({ logs: [], value: 'held' })
}

function status(path: string): Record<string, string> {
  const fields: Record<string, string> = {}
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    const colon = line.indexOf(':')
    if (colon > 0) fields[line.slice(0, colon)] = line.slice(colon + 1).trim()
  }
  return fields
}

describe('a locked-down host, seen from outside', () => {
  it('says every protection is in effect on this machine (requireSandbox started it)', () => {
    expect(m.runtime.stats().sandbox).toEqual({
      compilerZones: true,
      landlock: true,
      namespaces: true,
      noDumps: true,
      noNewPrivs: true,
      oomFirst: true,
      seccomp: true,
    })
  })

  it('runs every thread of every host under the seccomp filter, with no new privileges', async () => {
    await whileBusy((pids) => {
      for (const pid of pids) {
        for (const task of readdirSync(`/proc/${pid}/task`)) {
          let fields: Record<string, string>
          try {
            fields = status(`/proc/${pid}/task/${task}/status`)
          } catch (error) {
            // A thread that ended between the listing and the read.
            if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue
            throw error
          }
          expect({ task, seccomp: fields.Seccomp, noNewPrivs: fields.NoNewPrivs }).toEqual({
            task,
            seccomp: '2',
            noNewPrivs: '1',
          })
        }
      }
    })
  })

  it('runs programs below the harness\'s priority, and its own control threads at it', async () => {
    // crates/isolate-host/src/program_priority.rs: run threads lower
    // themselves once; the channel thread, scheduler and watchdog do not.
    const harness = getPriority()
    const nice = (pid: number, task: string) => {
      let stat: string
      try {
        stat = readFileSync(`/proc/${pid}/task/${task}/stat`, 'utf8')
      } catch (error) {
        // A thread that ended between the listing and the read.
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return []
        throw error
      }
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))
      // Fields after the name: state is the 3rd of stat(5), nice the 19th.
      return [{ task, name, nice: Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]) }]
    }
    const threadsOf = (pid: number) => readdirSync(`/proc/${pid}/task`).flatMap((task) => nice(pid, task))
    await whileBusy(async (pids) => {
      for (const pid of pids) {
        // A thread the scheduler is starting (a run thread, or one for the
        // reserve) shows the scheduler's name and priority until it first
        // runs, names itself and lowers itself (crates/named-thread,
        // program_priority.rs), which on a loaded machine may be a while:
        // look at a listing in which no thread is that far into its start.
        let threads = threadsOf(pid)
        await until(() => {
          threads = threadsOf(pid)
          const starting = threads.filter(({ name }) => name === 'dsh-v8-schedule').length > 1
          const unlowered = threads.some(({ name, nice }) => name.startsWith('dsh-v8-run-') && nice === harness)
          return !starting && !unlowered
        })
        const runs = threads.filter(({ name }) => name.startsWith('dsh-v8-run-'))
        expect(runs.length).toBeGreaterThan(0)
        for (const run of runs) expect(run.nice).toBeGreaterThan(harness)
        const control = threads.filter(({ task, name }) => task === String(pid) || /^dsh-v8-(watchdog|schedule)/.test(name))
        expect(control.map(({ name }) => name).sort()).toEqual(['dsh-isolate-hos', 'dsh-v8-schedule', 'dsh-v8-watchdog'])
        for (const thread of control) expect(thread).toMatchObject({ nice: harness })
      }
    })
  })

  it('holds no descriptor but its channel, its journal and stdio', async () => {
    await whileBusy((pids) => {
      for (const pid of pids) {
        const channel = readlinkSync(`/proc/${pid}/fd/0`)
        expect(channel).toMatch(/^socket:\[\d+\]$/)
        const held = readdirSync(`/proc/${pid}/fd`).map(Number).sort((a, b) => a - b)
        // stdio, the journal, then the channel's doorbells: the shared
        // region's descriptor closed once it was mapped (dsh_protocol::ring).
        const doorbells = Array.from({ length: HOST_LAST_HANDED_FD - HOST_REGION_FD }, (_, i) => HOST_REGION_FD + 1 + i)
        expect(held).toEqual([0, 1, 2, HOST_JOURNAL_FD, ...doorbells])
        const target = (fd: number) => readlinkSync(`/proc/${pid}/fd/${fd}`)
        expect(target(1)).toBe('/dev/null')
        expect(target(2)).toMatch(/^pipe:\[\d+\]$/)
        // The journal and each doorbell's end: sockets, none of them the channel.
        for (const fd of [HOST_JOURNAL_FD, ...doorbells]) {
          expect({ fd, target: target(fd) }).toEqual({ fd, target: expect.stringMatching(/^socket:\[\d+\]$/) })
          expect(target(fd)).not.toBe(channel)
        }
        // The region is mapped once, and no descriptor holds it.
        const maps = readFileSync(`/proc/${pid}/maps`, 'utf8').split('\n')
        expect(maps.filter((line) => line.includes('/memfd:dsh-channel'))).toHaveLength(1)
      }
    })
  })

  it("holds none of the harness's environment, in /proc or in any global a program reaches", async () => {
    for (const pid of m.runtime.stats().hostPids) {
      expect(readFileSync(`/proc/${pid}/environ`, 'utf8')).toBe('')
    }
    // Every string reachable from the program's globals (own properties,
    // prototypes, getters' results), searched for the secret.
    const result = await m.run(`
      const seen = new Set(), queue = [globalThis]
      let strings = 0, found = false
      while (queue.length && seen.size < 200000) {
        const value = queue.shift()
        if (value === null || (typeof value !== 'object' && typeof value !== 'function') || seen.has(value)) continue
        seen.add(value)
        for (const key of Reflect.ownKeys(value)) {
          if (typeof key === 'string' && key.includes(${JSON.stringify(SECRET)})) found = true
          let inner
          try { inner = value[key] } catch { continue }
          if (typeof inner === 'string') { strings++; if (inner.includes(${JSON.stringify(SECRET)})) found = true }
          else queue.push(inner)
        }
        queue.push(Object.getPrototypeOf(value))
      }
      return { found, searched: seen.size > 100, strings: strings > 100, env: JSON.stringify(process.env) }
    `)
    expect(result).toEqual({ logs: [], value: { found: false, searched: true, strings: true, env: '{}' } })
  })

  it('lives in a user and a network namespace of its own, first for the OOM killer, with no core dumps', () => {
    const own = (kind: string) => readlinkSync(`/proc/self/ns/${kind}`)
    const harnessOom = readFileSync('/proc/self/oom_score_adj', 'utf8').trim()
    expect(harnessOom).not.toBe('1000')
    for (const pid of m.runtime.stats().hostPids) {
      expect(readlinkSync(`/proc/${pid}/ns/net`)).not.toBe(own('net'))
      expect(readlinkSync(`/proc/${pid}/ns/user`)).not.toBe(own('user'))
      expect(readFileSync(`/proc/${pid}/oom_score_adj`, 'utf8').trim()).toBe('1000')
      expect(readFileSync(`/proc/${pid}/limits`, 'utf8')).toMatch(/^Max core file size\s+0\s+0\s/m)
    }
  })

  it('still runs programs after all of it', async () => {
    expect(await m.run('return [1, 2, 3].map((x) => x * 2)')).toEqual({ logs: [], value: [2, 4, 6] })
  })
})

describe('a host holding too much memory', () => {
  it('is replaced once its runs end, and the next run works', async () => {
    // A ceiling every host passes once it has run a program: the host that
    // ran it is retired, shut down, and replaced.
    const small = await mount({ isolateHosts: 1, hostMaxRssMb: 1 })
    const [first] = small.runtime.stats().hostPids
    expect(await small.run('return new Array(1e6).fill(1).length')).toEqual({ logs: [], value: 1e6 })
    await until(() => small.runtime.stats().hostRecycles === 1 && small.runtime.stats().hosts === 1)
    const stats = small.runtime.stats()
    expect(stats.hostPids).not.toContain(first)
    expect(stats.lastHostExit).toMatch(/^the isolate host was recycled: it held \d+ MiB, above hostMaxRssMb$/)
    expect(stats.runsLostToHostExits).toBe(0)
    expect(await small.run('return "next"')).toEqual({ logs: [], value: 'next' })
    await small.dispose()
  })
})
