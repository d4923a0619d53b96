/**
 * ActiveSessions: the state of active sessions kept between steps. It is read from its source once,
 * updated by committed steps (an attempt's end moves its steps to `previous`), dropped when the
 * session leaves `active` or on request, and evicted least recently used first over its bounds,
 * after which it is read again from the source.
 */
import { describe, expect, it } from 'vitest';
import { ActiveSessions, type SessionStateSource } from '../../src/agent/active-sessions.js';
import type { StepCommit, StepInsert } from '../../src/db/queries.js';
import type { SessionRow } from '../../src/db/schema.js';

function row(id: string, over: Partial<SessionRow> = {}): SessionRow {
  return {
    id, tenant: 't', taskId: 'task', env: null, mode: 'train', status: 'active', instructions: 'x', maxAttempts: 3, maxSteps: 10,
    memory: 'history_and_reflection', sampling: {}, modelVersion: 'v', metadata: {}, nextAttempt: 0, nextStep: 0, attempts: [],
    createdAt: 0, updatedAt: 0, ...over,
  } as SessionRow;
}

/** A source over fixed rows that counts its reads. */
function source(rows: Record<string, SessionRow>, steps: Record<string, Array<{ observation: string; action: string | null }>> = {}) {
  const reads = { session: 0, steps: 0, reflections: 0 };
  const src: SessionStateSource = {
    session: async (id) => (reads.session++, rows[id]),
    stepsOfAttempt: async (id, a) => (reads.steps++, steps[`${id}/${a}`] ?? []),
    reflections: async () => (reads.reflections++, []),
  };
  return { src, reads };
}

function commit(id: string, attempt: number, step: number, observation: string, action: string | null, next: { attempt: number; step: number }, status = 'active', reflection: string | null = null): StepCommit {
  const rec = { sessionId: id, attempt, step, kind: 'action', observation, action } as StepInsert;
  return {
    rows: [rec],
    reflection: reflection === null ? null : { sessionId: id, attempt, text: reflection, updatedAt: 1 },
    session: { id, status, attempts: [], nextAttempt: next.attempt, nextStep: next.step, updatedAt: 1 },
  };
}

describe('ActiveSessions', async () => {
  it('reads a session once, then follows its committed steps across an attempt end', async () => {
    const { src, reads } = source(
      { a: row('a', { nextAttempt: 1, nextStep: 1 }) },
      { 'a/0': [{ observation: 'o0', action: 'x' }, { observation: 'end', action: null }], 'a/1': [{ observation: 'p0', action: 'y' }] },
    );
    const cache = new ActiveSessions(src);
    const s = (await cache.get('a'))!;
    expect(s.current).toEqual([{ observation: 'p0', action: 'y' }]);
    expect(s.previous).toEqual({ steps: [{ observation: 'o0', action: 'x' }], finalObservation: 'end' });
    cache.committed(s, commit('a', 1, 1, 'p1', 'z', { attempt: 1, step: 2 }));
    cache.committed(s, commit('a', 1, 2, 'fin', null, { attempt: 2, step: 0 }, 'active', 'try left'));
    const again = (await cache.get('a'))!;
    expect(again.row).toMatchObject({ nextAttempt: 2, nextStep: 0 });
    expect(again.current).toEqual([]);
    expect(again.previous).toEqual({ steps: [{ observation: 'p0', action: 'y' }, { observation: 'p1', action: 'z' }], finalObservation: 'fin' });
    expect(again.reflections.get(1)).toBe('try left');
    expect(reads).toEqual({ session: 1, steps: 2, reflections: 1 });
    // the session completes: dropped, read again next time
    cache.committed(again, commit('a', 2, 0, 'q', null, { attempt: 2, step: 0 }, 'completed'));
    expect(cache.size).toBe(0);
  });

  it('does not keep sessions that are not active, and drops on request', async () => {
    const { src, reads } = source({ done: row('done', { status: 'completed' }), b: row('b') });
    const cache = new ActiveSessions(src);
    expect((await cache.get('done'))!.row.status).toBe('completed');
    expect((await cache.get('missing'))).toBeUndefined();
    await cache.get('b');
    expect(cache.size).toBe(1);
    cache.drop('b');
    await cache.get('b');
    expect(reads.session).toBe(4);
  });

  it('evicts the least recently used sessions over its bounds, then reads them again', async () => {
    const rows = Object.fromEntries(['a', 'b', 'c'].map((id) => [id, row(id, { nextStep: 1 })]));
    const steps = Object.fromEntries(['a', 'b', 'c'].map((id) => [`${id}/0`, [{ observation: 'x'.repeat(10), action: 'up' }]]));
    const { src, reads } = source(rows, steps);
    const cache = new ActiveSessions(src, { maxEntries: 2, maxChars: 1000 });
    await cache.get('a');
    await cache.get('b');
    await cache.get('a'); // a is now the most recent
    await cache.get('c'); // evicts b
    expect(cache.size).toBe(2);
    expect(reads.session).toBe(3);
    await cache.get('a');
    expect(reads.session).toBe(3);
    expect((await cache.get('b'))!.current).toEqual([{ observation: 'x'.repeat(10), action: 'up' }]);
    expect(reads.session).toBe(4);
    // the character bound: each session holds 12 characters; 20 leave room for one
    const small = new ActiveSessions(source(rows, steps).src, { maxEntries: 10, maxChars: 20 });
    await small.get('a');
    await small.get('b');
    expect(small.size).toBe(1);
  });

  it('load reads a held session again (another server may have moved it on)', async () => {
    const rows: Record<string, SessionRow> = { a: row('a') };
    const { src, reads } = source(rows);
    const cache = new ActiveSessions(src);
    expect(cache.has('a')).toBe(false);
    await cache.get('a');
    expect(cache.has('a')).toBe(true);
    rows.a = row('a', { nextStep: 3 });
    expect((await cache.get('a'))!.row.nextStep).toBe(0);
    expect((await cache.load('a'))!.row.nextStep).toBe(3);
    expect((await cache.get('a'))!.row.nextStep).toBe(3);
    expect(reads.session).toBe(2);
    // a session that ended elsewhere is no longer held
    rows.a = row('a', { status: 'abandoned' });
    expect((await cache.load('a'))!.row.status).toBe('abandoned');
    expect(cache.has('a')).toBe(false);
  });
});
