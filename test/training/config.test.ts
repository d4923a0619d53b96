/** LAMER_TRAIN_* configuration: defaults, parsing, and errors naming the variable. */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

describe('loadConfig training schedule', () => {
  it('is off by default', () => {
    expect(loadConfig({}).training).toEqual({ everySessions: 0, cron: null, algorithm: 'lamer', activate: false, env: null, workers: 0, maxQueuedJobs: 16, queueRetryAfterSeconds: 60 });
  });

  it('reads every variable', () => {
    const t = loadConfig({ LAMER_TRAIN_EVERY_SESSIONS: '64', LAMER_TRAIN_CRON: ' 0 */2 * * * ', LAMER_TRAIN_ALGORITHM: 'gigpo', LAMER_TRAIN_ACTIVATE: 'true', LAMER_TRAIN_ENV: 'minesweeper', LAMER_TRAIN_WORKERS: '4' }).training;
    expect(t).toEqual({ everySessions: 64, cron: '0 */2 * * *', algorithm: 'gigpo', activate: true, env: 'minesweeper', workers: 4, maxQueuedJobs: 16, queueRetryAfterSeconds: 60 });
  });

  it.each([
    ['LAMER_TRAIN_EVERY_SESSIONS', '-1'],
    ['LAMER_TRAIN_EVERY_SESSIONS', '2.5'],
    ['LAMER_TRAIN_CRON', 'every hour'],
    ['LAMER_TRAIN_CRON', '61 * * * *'],
    ['LAMER_TRAIN_ALGORITHM', 'sft'],
    ['LAMER_TRAIN_ACTIVATE', 'yes'],
    ['LAMER_TRAIN_WORKERS', '1.5'],
    ['LAMER_TRAIN_WORKERS', '257'],
  ])('%s=%s is a ConfigError naming the variable', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(name);
  });
});
