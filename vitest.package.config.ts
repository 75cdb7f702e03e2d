import { defineConfig } from 'vitest/config'

// `npm run test:package`: the packed tarball in fresh consumer projects (test/package/consumers.test.ts). A step of
// its own in .ci/run, after the suite: it builds, packs and installs, minutes of CPU the suite's budget need not carry.
export default defineConfig({
  test: {
    include: ['test/package/consumers.test.ts'],
    testTimeout: 360_000,
    hookTimeout: 600_000,
  },
})
