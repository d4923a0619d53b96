/** LAMER_TRAIN_* configuration (the promotion gate's LAMER_TRAIN_GATE_* too): defaults, parsing, and errors naming the variable. */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

describe('loadConfig training schedule', () => {
  it('is off by default', () => {
    expect(loadConfig({}).training).toEqual({ everySessions: 0, cron: null, algorithm: 'lamer', activate: false, env: null, workers: 0, maxQueuedJobs: 16, queueRetryAfterSeconds: 60, gate: null });
  });

  it('reads every variable', () => {
    const t = loadConfig({ LAMER_TRAIN_EVERY_SESSIONS: '64', LAMER_TRAIN_CRON: ' 0 */2 * * * ', LAMER_TRAIN_ALGORITHM: 'gigpo', LAMER_TRAIN_ACTIVATE: 'true', LAMER_TRAIN_ENV: 'minesweeper', LAMER_TRAIN_WORKERS: '4' }).training;
    expect(t).toEqual({ everySessions: 64, cron: '0 */2 * * *', algorithm: 'gigpo', activate: true, env: 'minesweeper', workers: 4, maxQueuedJobs: 16, queueRetryAfterSeconds: 60, gate: null });
  });

  it('reads the gate of scheduled jobs, with the defaults of the job API', () => {
    expect(loadConfig({ LAMER_TRAIN_GATE_TASKS: '64' }).training.gate).toEqual({
      env: 'minesweeper-6x6-3', tasks: 64, attempts: 3, seedStart: 1_000_000_000, metric: 'pass@3', margin: 0, decision: 'mean', concurrency: 4,
      availableActions: true, sampling: { temperature: 0.7, topP: 0.8, topK: 20 },
    });
    const g = loadConfig({
      LAMER_TRAIN_GATE_TASKS: '256', LAMER_TRAIN_GATE_ENV: 'sokoban', LAMER_TRAIN_GATE_ATTEMPTS: '2', LAMER_TRAIN_GATE_SEED_START: '2000000000',
      LAMER_TRAIN_GATE_METRIC: 'pass@1', LAMER_TRAIN_GATE_MARGIN: '0.05', LAMER_TRAIN_GATE_DECISION: 'lower-bound', LAMER_TRAIN_GATE_CONCURRENCY: '8',
    }).training.gate;
    expect(g).toMatchObject({ env: 'sokoban-6x6-2', tasks: 256, attempts: 2, seedStart: 2_000_000_000, metric: 'pass@1', margin: 0.05, decision: 'lower-bound', concurrency: 8 });
  });

  it.each([
    [{ LAMER_TRAIN_GATE_TASKS: '10001' }, 'LAMER_TRAIN_GATE_TASKS=10001: expected an integer in [0, 10000]'],
    [{ LAMER_TRAIN_GATE_TASKS: '8', LAMER_TRAIN_GATE_ENV: 'chess' }, "LAMER_TRAIN_GATE_ENV: unknown env 'chess'"],
    [{ LAMER_TRAIN_GATE_TASKS: '8', LAMER_TRAIN_GATE_SEED_START: '5' }, 'LAMER_TRAIN_GATE_SEED_START=5: expected an integer in [1000000000, 4294967295]'],
    [{ LAMER_TRAIN_GATE_TASKS: '8', LAMER_TRAIN_GATE_SEED_START: '4294967290' }, 'LAMER_TRAIN_GATE_SEED_START: seedStart + tasks = 4294967298 runs past'],
    [{ LAMER_TRAIN_GATE_TASKS: '8', LAMER_TRAIN_GATE_ATTEMPTS: '2', LAMER_TRAIN_GATE_METRIC: 'pass@3' }, 'LAMER_TRAIN_GATE_METRIC: pass@3 needs at least 3 attempts'],
    [{ LAMER_TRAIN_GATE_TASKS: '8', LAMER_TRAIN_GATE_MARGIN: '5 points' }, 'LAMER_TRAIN_GATE_MARGIN="5 points": expected a number in [-1, 1]'],
    [{ LAMER_TRAIN_GATE_TASKS: '8', LAMER_TRAIN_GATE_DECISION: 'median' }, 'LAMER_TRAIN_GATE_DECISION="median": expected one of mean, lower-bound'],
    [{ LAMER_TRAIN_GATE_MARGIN: '0.1' }, 'LAMER_TRAIN_GATE_MARGIN is set but LAMER_TRAIN_GATE_TASKS is not'],
    [{ LAMER_TRAIN_GATE_TASKS: '8', LAMER_TRAIN_ACTIVATE: 'true' }, 'LAMER_TRAIN_ACTIVATE=true activates every scheduled version'],
  ])('%j is a ConfigError naming the variable', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
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
