/**
 * The serving pool's bookkeeping without threads: sticky session assignment to the least-loaded
 * live worker (sessions, then calls in flight, then index), moving off a dead worker, release, and
 * the version recency that each worker's LRU follows.
 */
import { describe, expect, it } from 'vitest';
import { EngineError } from '../../../src/policy/engine.js';
import { SessionAssignments, VersionRecency, type WorkerLoad } from '../../../src/policy/serving/bookkeeping.js';

const workers = (n: number): WorkerLoad[] => Array.from({ length: n }, (_, index) => ({ index, sessions: 0, inFlight: 0, dead: null }));

describe('SessionAssignments', () => {
  it('spreads new sessions by fewest sessions, then fewest calls in flight, then lowest index, and keeps each on its worker', () => {
    const ws = workers(3);
    const a = new SessionAssignments(ws);
    ws[0]!.inFlight = 2;
    expect(['s1', 's2', 's3', 's4'].map((s) => a.workerFor(s).index)).toEqual([1, 2, 0, 1]);
    expect(a.workerFor('s1').index).toBe(1);
    expect(ws.map((w) => w.sessions)).toEqual([1, 2, 1]);
    expect(a.workerOf('s4')?.index).toBe(1);
    expect(a.workerOf('nope')).toBeUndefined();
  });

  it('picks sessionless calls by fewest calls in flight, then fewest sessions', () => {
    const ws = workers(3);
    const a = new SessionAssignments(ws);
    ws[0]!.inFlight = 1;
    ws[1]!.sessions = 2;
    expect(a.leastLoaded(false).index).toBe(2);
    ws[2]!.inFlight = 1;
    expect(a.leastLoaded(false).index).toBe(1);
    expect(a.leastLoaded(true).index).toBe(0);
  });

  it('moves a session off a dead worker, frees it on release, and throws EngineError when no worker is live', () => {
    const ws = workers(2);
    const a = new SessionAssignments(ws);
    expect(a.workerFor('s1').index).toBe(0);
    (ws[0] as { dead: string | null }).dead = 'exited with code 3';
    expect(a.workerFor('s1').index).toBe(1);
    expect(ws.map((w) => w.sessions)).toEqual([0, 1]);
    expect(a.release('s1')?.index).toBe(1);
    expect(a.release('s1')).toBeUndefined();
    expect(ws[1]!.sessions).toBe(0);
    (ws[1] as { dead: string | null }).dead = 'exited with code 3';
    expect(() => a.workerFor('s2')).toThrow(new EngineError('every serving worker stopped; the server restarts'));
  });
});

describe('VersionRecency', () => {
  it('moves a used version last, adds an unseen one only when asked, and returns copies', () => {
    const r = new VersionRecency();
    expect(r.use('v1')).toEqual([]);
    expect(r.use('v1', true)).toEqual(['v1']);
    r.use('v2', true);
    r.use('v3', true);
    const order = r.use('v1');
    expect(order).toEqual(['v2', 'v3', 'v1']);
    order.pop();
    expect(r.use('v9')).toEqual(['v2', 'v3', 'v1']);
  });
});
