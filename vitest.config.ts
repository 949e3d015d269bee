import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['__test__/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Each file runs in its own child process: a crash in one (which a
    // sandbox must never cause) cannot hide behind another file's pass.
    pool: 'forks',
    // --expose-gc: the memory suite collects the host's own garbage before
    // it judges what the addon gave back (memory.test.ts).
    poolOptions: { forks: { maxForks: 2, minForks: 1, execArgv: ['--expose-gc'] } },
  },
})
