/** KeyedMutex (src/agent/mutex.ts): one key at a time, other keys in parallel, failures isolated. */
import { describe, expect, it } from 'vitest';
import { KeyedMutex } from '../../src/agent/mutex.js';

describe('KeyedMutex', () => {
  it('serialises one key and lets other keys run', async () => {
    const m = new KeyedMutex();
    const log: string[] = [];
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    const p1 = m.run('a', async () => {
      log.push('a1 start');
      await sleep(30);
      log.push('a1 end');
    });
    const p2 = m.run('a', async () => {
      log.push('a2 start');
    });
    const p3 = m.run('b', async () => {
      log.push('b1 start');
    });
    await Promise.all([p1, p2, p3]);
    expect(log).toEqual(['a1 start', 'b1 start', 'a1 end', 'a2 start']);
  });
  it('a failing task does not block the next; drain waits for all', async () => {
    const m = new KeyedMutex();
    await expect(m.run('k', async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    let done = false;
    void m.run('k', async () => {
      await new Promise((r) => setTimeout(r, 20));
      done = true;
    });
    await m.drain();
    expect(done).toBe(true);
  });
});
