/**
 * `npm run demo:gate-loop` (experiments/gate-loop.ts): its options (defaults, and a bad one named) and
 * the version history it prints, one row per version with its gate in one line. The loop itself
 * runs the server's schedule and gate, which test/training/gate-routes.test.ts covers over HTTP.
 */
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/cli/args.js';
import { gateLine, historyTable, loopOptions, type VersionRow } from '../../experiments/gate-loop.js';

describe('loopOptions', () => {
  it('has short defaults: 5 minutes, a job every 24 sessions, gates of 16 tasks', () => {
    expect(loopOptions([])).toMatchObject({ server: null, minutes: 5, every: 24, round: 24, gateTasks: 16, gateAttempts: 3, margin: 0, algorithm: 'lamer', keep: false });
    expect(loopOptions(['--every', '8', '--margin', '-1', '--keep'])).toMatchObject({ every: 8, round: 8, margin: -1, keep: true });
  });
  it.each([
    [['--every', '0'], /--every must be an integer in \[1, 100000\]/],
    [['--margin', '2'], /--margin/],
    [['--algorithm', 'sft'], /--algorithm/],
    [['--gate-attempts', '11'], /--gate-attempts/],
    [['--bogus'], /bogus/],
  ])('%j is a usage error naming the option', (argv, message) => {
    expect(() => loopOptions(argv)).toThrow(UsageError);
    expect(() => loopOptions(argv)).toThrow(message);
  });
});

describe('historyTable', () => {
  const gate = { status: 'passed', metric: 'pass@3', promoted: true, reason: 'r', incumbent: 'base', progress: 1, tasks: 16, candidatePassAtK: { '1': 0.25, '3': 0.4375 }, incumbentPassAtK: { '1': 0.25, '3': 0.375 }, difference: { mean: 0.0625, lo: -0.0625, hi: 0.1875 } };
  const rows: VersionRow[] = [
    { version: 'lamer-2', parent: 'lamer-1', status: 'candidate', jobId: 'job_2', createdAt: '2025-01-03T00:00:00Z', gate: { ...gate, status: 'running', promoted: false, progress: 0.5, candidatePassAtK: null, incumbentPassAtK: null, difference: null } },
    { version: 'base', parent: null, status: 'retired', jobId: null, createdAt: '2025-01-01T00:00:00Z', gate: null },
    { version: 'lamer-1', parent: 'base', status: 'active', jobId: 'job_1', createdAt: '2025-01-02T00:00:00Z', gate },
  ];
  it('lists the versions oldest first with their gate in one line', () => {
    expect(historyTable(rows).split('\n')).toEqual([
      '| version | parent | status | job | gate |',
      '|---|---|---|---|---|',
      '| base | - | retired | - | no gate |',
      '| lamer-1 | base | active | job_1 | pass@3 new 43.8% vs active 37.5% (base): +6.3 [-6.3, +18.8] pts, passed, promoted |',
      '| lamer-2 | lamer-1 | candidate | job_2 | gate running 50.0% (pass@3, 16 tasks) |',
    ]);
    expect(gateLine({ ...gate, status: 'failed', promoted: false })).toMatch(/, failed, not promoted$/);
  });
});
