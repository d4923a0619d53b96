/** ForwardBatcher's /metrics hooks: `onForward(rows, ms)` once per forward pass and `queuedRequests`. */
import { describe, expect, it } from 'vitest';
import { ForwardBatcher } from '../../src/model/batcher.js';
import type { CachedRow, CachedRowResult } from '../../src/model/gpt-cached.js';

const row = (n: number) => ({ cache: null, tokens: new Array<number>(n).fill(1), allPositions: false, keepCache: false }) as unknown as CachedRow;

describe('ForwardBatcher observer', () => {
  it('reports each forward pass with its row count; queue depth counts waiting requests', async () => {
    const seen: number[] = [];
    const b = new ForwardBatcher((rows) => rows.map(() => ({}) as CachedRowResult), {
      windowMs: 20,
      maxBatchSize: 8,
      onForward: (rows, ms) => {
        expect(ms).toBeGreaterThanOrEqual(0);
        seen.push(rows);
      },
    });
    const p = [b.submit([row(1)]), b.submit([row(1), row(1)]), b.submit([row(1)])];
    expect(b.queuedRequests).toBe(3);
    await Promise.all(p);
    expect(b.queuedRequests).toBe(0);
    expect(seen).toEqual([4]);
    expect(b.stats.forwards).toBe(1);
  });
  it('an observer that throws does not fail the forward', async () => {
    const b = new ForwardBatcher((rows) => rows.map(() => ({}) as CachedRowResult), {
      windowMs: 0,
      maxBatchSize: 8,
      onForward: () => {
        throw new Error('observer broke');
      },
    });
    await expect(b.submit([row(1)])).resolves.toHaveLength(1);
  });
});
