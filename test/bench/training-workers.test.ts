/**
 * bench/training-workers.ts independentJobsTokensPerSec: independent 1-worker training jobs run at
 * the same time as child processes (the smallest settings: 2 steps of 2 samples), its argument
 * checks, and a failing child.
 */
import { describe, expect, it } from 'vitest';
import { withBenchCheckpoint } from '../../bench/cli.js';
import { independentJobsTokensPerSec } from '../../bench/training-workers.js';

describe('independentJobsTokensPerSec', () => {
  it('runs two copies at once and returns each copy\'s tokens/s, their sum and the overlap of their timed steps', async () => {
    const r = await withBenchCheckpoint((dir) => independentJobsTokensPerSec({ backend: 'wasm', checkpointDir: dir, steps: 2, minibatch: 2, seq: 100 }, 2));
    expect(r.copies).toBe(2);
    expect(r.each).toHaveLength(2);
    for (const x of r.each) expect(x).toBeGreaterThan(0);
    expect(r.sum).toBe(r.each[0] + r.each[1]);
    expect(r.timedOverlap).toBeGreaterThanOrEqual(0);
    expect(r.timedOverlap).toBeLessThanOrEqual(1);
  }, 120_000);

  it('refuses a copy count below 1 or not whole, and fewer than 2 steps, before starting any child', async () => {
    const o = { backend: 'wasm' as const, checkpointDir: '/nonexistent-ckpt' };
    await expect(independentJobsTokensPerSec(o, 0)).rejects.toThrow(new RangeError('copies must be an integer >= 1, got 0'));
    await expect(independentJobsTokensPerSec(o, 1.5)).rejects.toThrow(new RangeError('copies must be an integer >= 1, got 1.5'));
    await expect(independentJobsTokensPerSec({ ...o, steps: 1 }, 2)).rejects.toThrow(new RangeError('steps must be an integer >= 2 (the first is warm-up), got 1'));
  });

  it('throws with a failing child\'s exit status and stderr tail', async () => {
    const err = await independentJobsTokensPerSec({ backend: 'wasm', checkpointDir: '/nonexistent-ckpt', steps: 2, minibatch: 2, seq: 100 }, 2).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    const msg = (err as Error).message;
    expect(msg).toMatch(/^independent training copy \(pid \d+\) failed: exit 1; stderr tail:\n/);
    expect(msg).toContain("ENOENT: no such file or directory, open '/nonexistent-ckpt/model.json'");
  }, 120_000);
});
