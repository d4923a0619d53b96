import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 2,
    // Tests of the training maths use tfjs's pure-JS cpu backend directly, without the server's
    // backend module (src/model/backend.ts quietCpuBanner); the native backend is absent on
    // purpose, so its "install our node backend" banner is dropped from the test output.
    onConsoleLog: (log) => !log.includes('To speed things up dramatically, install our node backend'),
  },
});
