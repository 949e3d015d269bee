// The main job: mount the V8 code runtime in a cordis Context, the way the
// harness does from cordis.yml, and run a real model-style program that
// calls two host tools, logs, and returns a value.
import { Context } from '@deepseek-ai/cordis'
import V8CodeRuntime from '../lib/index.js'

const ctx = new Context()
const fiber = await ctx.plugin(V8CodeRuntime, { computeMs: 5_000, maxWallMs: 30_000 })

const inventory = { apples: 12, pears: 3, plums: 0 }
const bindings = [
  {
    global: 'tools',
    errorClass: { name: 'ToolCallError', memberNameProperty: 'tool' },
    functions: {
      async search({ query }) {
        return Object.keys(inventory).filter((name) => name.includes(query))
      },
      async stock({ item }) {
        if (!(item in inventory)) throw new Error(`no such item: ${item}`)
        return { item, count: inventory[item] }
      },
    },
  },
]

const program = `
interface Stock { item: string; count: number }
const names: string[] = await tools.search({ query: 'p' })
console.log('found', names)
const stocks: Stock[] = await Promise.all(names.map((item) => tools.stock({ item })))
for (const s of stocks) console.log(\`\${s.item}: \${s.count}\`)
try {
  await tools.stock({ item: 'kiwi' })
} catch (e) {
  if (e instanceof ToolCallError) console.warn('tool', e.tool, 'failed:', e.message)
}
return { total: stocks.reduce((sum, s) => sum + s.count, 0), empty: stocks.filter((s) => s.count === 0).map((s) => s.item) }
`

const started = performance.now()
const result = await ctx.codeRuntime.run({ program, bindings })
const elapsed = performance.now() - started
console.log('--- logs')
for (const line of result.logs) console.log(line)
console.log('--- value')
console.log(JSON.stringify(result.value))
if (result.error) console.log('--- error', result.error)
console.log(`--- ran in ${elapsed.toFixed(1)} ms on ${ctx.codeRuntime.isolation}`)
await fiber.dispose()
if (result.error) process.exit(1)
