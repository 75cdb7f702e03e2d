import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The packed tarball's consumer projects run as their own step (vitest.package.config.ts, npm run test:package).
    exclude: ['**/node_modules/**', 'test/package/consumers.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
})
