// The benchmark's programs and host bindings, shared by every scenario and
// both backends so the two always run exactly the same work.

/** Host tools for the Code Mode shaped run and the binding scenarios. */
export function benchBindings() {
  return [
    {
      global: 'tools',
      errorClass: { name: 'ToolCallError', memberNameProperty: 'tool' },
      functions: {
        search: async ({ query, limit }) => ({
          query,
          results: Array.from({ length: limit }, (_, i) => ({ id: `${query}-${i}`, title: `Result ${i} for ${query}`, score: 1 - i / 100 })),
        }),
        echo: async (args) => args,
      },
    },
  ]
}

export const TRIVIAL = 'return 1'

/** 5 awaited tool calls with JSON args, 20 log lines, a 10 KB result. */
export const CODE_MODE = `
interface Hit { id: string; title: string; score: number }
const hits: Hit[] = []
for (let i = 0; i < 5; i++) {
  const page = await tools.search({ query: 'topic ' + i, limit: 8, filters: { lang: 'en', tags: ['a', 'b'], since: '2026-01-01' } })
  hits.push(...page.results)
}
for (let i = 0; i < 20; i++) console.log('step', i, { seen: hits.length, best: hits[i % hits.length].title })
const summary = hits.map((h) => h.id + ':' + h.score.toFixed(2)).join(',')
return { count: hits.length, summary, padding: 'x'.repeat(10240 - summary.length) }
`

/** 1000 sequential awaited calls, each timed inside the program (ms). */
export const SEQUENTIAL_CALLS = `
const times: number[] = []
for (let i = 0; i < 1000; i++) {
  const t = performance.now()
  await tools.echo({ i })
  times.push(performance.now() - t)
}
times.sort((a, b) => a - b)
return times[500]
`

/** One Promise.all over 10000 calls, timed inside the program (ms). */
export const PARALLEL_CALLS = `
const t = performance.now()
const out = await Promise.all(Array.from({ length: 10000 }, (_, i) => tools.echo({ i })))
const ms = performance.now() - t
if (out.length !== 10000 || out[9999].i !== 9999) throw new Error('wrong replies')
return ms
`

/** CPU-bound work: JSON of ~1 MB, a 5e7 loop, regex. Returns a checksum. */
export const COMPUTE = `
const rows = Array.from({ length: 12000 }, (_, i) => ({ id: i, name: 'row ' + i, tags: ['alpha', 'beta', 'gamma'], score: i * 0.5 }))
let text = ''
for (let k = 0; k < 3; k++) text = JSON.stringify(JSON.parse(JSON.stringify(rows)))
let acc = 0
for (let i = 0; i < 5e7; i++) acc = (acc + i * 31) % 1000003
const re = /row (\\d+)[^"]*"tags":\\["(\\w+)"/g
let matches = 0
for (const m of text.matchAll(re)) matches += Number(m[1]) % 7
const words = text.replace(/[^a-z]+/g, ' ').split(' ').filter((w) => /^(alpha|gamma)$/.test(w)).length
return [text.length, acc, matches, words]
`

/** How long the concurrency scenarios' tool takes to answer (ms). */
export const TOOL_MS = 1000

/** One tool that answers after TOOL_MS: what a slow search or sub-agent is to a run. */
export function slowToolBindings() {
  return [{ global: 'tools', functions: { wait: () => new Promise((resolve) => setTimeout(() => resolve(1), TOOL_MS)) } }]
}

/** A run that spends its life waiting on the slow tool. */
export const WAITING = 'return await tools.wait({})'

/** Most of a second of CPU on this project's 2-core VM: a run that only computes. */
export const CPU_BOUND = 'let a = 0; for (let i = 0; i < 1e8; i++) a = (a + i * 31) % 1000003; return a'

/** A program that makes V8 end its process (a size check no callback can catch). */
export const FATAL = 'return "x".repeat(2 ** 27 + 8).split("").length'

/** Strings and objects a tool returns or takes, for the payload rows. */
const MIB = 1 << 20
const SMALL_OBJECTS = Array.from({ length: Math.round(MIB / 43) }, (_, i) => ({ id: i, name: `n${i}`, ok: true }))
export function payloadBindings() {
  return [
    {
      global: 'tools',
      functions: {
        string1: async () => 'x'.repeat(MIB),
        string4: async () => 'x'.repeat(4 * MIB),
        // read_file's shape, and a search's list of long matches.
        file1: async () => ({ path: 'notes.txt', text: 'x'.repeat(MIB) }),
        strings50: async () => Array.from({ length: 50 }, (_, i) => String.fromCharCode(97 + (i % 26)).repeat(20 * 1024)),
        objects1: async () => SMALL_OBJECTS,
        take: async ({ text }) => text.length,
      },
    },
  ]
}

/** Calls to a payload tool (named by their row), the total size checked. */
export const PAYLOADS = {
  '10 calls with a 1 MB string result': 'let n = 0; for (let i = 0; i < 10; i++) n += (await tools.string1({})).length; return n',
  '10 calls with a 4 MB string result': 'let n = 0; for (let i = 0; i < 10; i++) n += (await tools.string4({})).length; return n',
  '20 calls with a { path, text } result of 1 MB': 'let n = 0; for (let i = 0; i < 20; i++) n += (await tools.file1({})).text.length; return n',
  '10 calls with a result of 50 strings of 20 KB':
    'let n = 0; for (let i = 0; i < 10; i++) for (const s of await tools.strings50({})) n += s.length; return n',
  '10 calls with a 1 MB string argument': 'const text = "y".repeat(1 << 20); let n = 0; for (let i = 0; i < 10; i++) n += await tools.take({ text }); return n',
  '10 calls with a 4 MB string argument': 'const text = "y".repeat(4 << 20); let n = 0; for (let i = 0; i < 10; i++) n += await tools.take({ text }); return n',
  '10 calls with a 1 MB result of small objects': 'let n = 0; for (let i = 0; i < 10; i++) n += (await tools.objects1({})).length; return n',
}
