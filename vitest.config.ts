import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['__test__/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Each file runs in its own child process: a crash in one (which a
    // sandbox must never cause) cannot hide behind another file's pass.
    pool: 'forks',
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
  },
})
