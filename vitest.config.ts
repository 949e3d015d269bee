import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['__test__/**/*.test.ts'],
    // A net for a hang, not a measure: no test asserts a duration. Generous
    // because the suite must pass beside a running bench, whose reference
    // children put 1000+ threads on the machine's two cores for a minute at
    // a time (a test that needs a few scheduler turns of half a dozen
    // threads then takes tens of seconds).
    testTimeout: 180_000,
    hookTimeout: 240_000,
    // Each file runs in its own child process: a crash in one (which a
    // sandbox must never cause) cannot hide behind another file's pass.
    pool: 'forks',
    // --expose-gc: the memory suite collects the host's own garbage before
    // it judges what the addon gave back (memory.test.ts).
    poolOptions: { forks: { maxForks: 2, minForks: 1, execArgv: ['--expose-gc'] } },
  },
})
