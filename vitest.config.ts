import { defineConfig } from 'vitest/config';

/**
 * Two projects: `fast` (npm test: everything but load and crash) and `hardening` (npm run
 * test:hardening: fuzzing, limits, crashes, racing writers, outages). CI runs both.
 */
const shared = {
  // The suites start real servers and databases; give them room on a busy 2-core machine.
  testTimeout: 60_000,
  hookTimeout: 120_000,
  pool: 'forks' as const,
};

export default defineConfig({
  test: {
    maxWorkers: 2,
    projects: [
      { test: { ...shared, name: 'fast', include: ['test/**/*.test.ts'], exclude: ['test/hardening/**'] } },
      { test: { ...shared, name: 'hardening', include: ['test/hardening/**/*.test.ts'] } },
    ],
  },
});
