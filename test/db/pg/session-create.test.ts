/**
 * The session inserts of the PostgreSQL store (src/db/pg/session-create.ts) against a real server
 * on loopback (test/helpers/postgres.ts; skipped, saying why, where none can start): a create under
 * the open-session cap is one statement that counts under the tenant's lock, on a snapshot that
 * shows the creates that held the lock before it; it refuses at the cap and writes nothing; a
 * duplicate id fails and writes nothing; replicas racing creates of one tenant never pass the cap;
 * a session inserted completed is counted in the statistics, or not inserted at all.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPgDatabase, type PgConnection } from '../../../src/db/pg/connection.js';
import { pgDatabaseErrorOf } from '../../../src/db/pg/errors.js';
import { pgRepositories } from '../../../src/db/pg/repositories.js';
import { insertSessionUnderCap } from '../../../src/db/pg/session-create.js';
import type { AsyncRepositories } from '../../../src/db/async-repositories.js';
import type { SessionRow } from '../../../src/db/schema.js';
import { postgresForTests, recordStatements, untilWaitingOnLock } from '../../helpers/postgres.js';

const server = await postgresForTests();
const T0 = 1_800_000_000_000;

function session(id: string, over: Partial<SessionRow> = {}): SessionRow {
  return {
    id, tenant: 't', taskId: 'task \u0000 a', env: 'alfworld', mode: 'train', status: 'active', instructions: 'Find the key.', maxAttempts: 3,
    maxSteps: 10, memory: 'reflection_only', memoryPlacement: 'user_prefix', sampling: { temperature: 0.7 }, modelVersion: 'v1',
    metadata: { n: 1.5 }, nextAttempt: 0, nextStep: 0, attempts: [], createdAt: T0, updatedAt: T0, ...over,
  };
}

describe.skipIf(!server)('session inserts on PostgreSQL', () => {
  let url = '';
  let conn: PgConnection;
  let r: AsyncRepositories;
  const opened: PgConnection[] = [];
  const clients: pg.Client[] = [];
  beforeAll(async () => {
    url = await server!.freshDatabase();
    conn = await openPgDatabase(url);
    opened.push(conn);
    r = pgRepositories(conn);
  });
  afterAll(async () => {
    for (const c of clients) await c.end();
    for (const c of opened) await c.close();
  });
  const client = async () => {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    clients.push(c);
    return c;
  };

  it('a create under the cap is one statement, a plain insert one; both store the row as given, defaults for fields left out', async () => {
    const rec = recordStatements();
    try {
      expect(await r.sessions.insertUnderCap(session('ses_a1', { tenant: 'a' }), 5)).toEqual({ inserted: true, open: 0 });
      expect(rec.sent()).toEqual(['[lamer_session_insert_capped_1]']);
      const { memoryPlacement: _left, ...noPlacement } = session('ses_a2', { tenant: 'a' });
      await r.sessions.insert(noPlacement as SessionRow);
      expect(rec.sent()).toEqual(['[lamer_session_insert_capped_1]', '[lamer_session_insert_1]']);
    } finally {
      rec.stop();
    }
    expect(await r.hot.session('ses_a1')).toEqual(session('ses_a1', { tenant: 'a' }));
    expect(await r.hot.session('ses_a2')).toEqual(session('ses_a2', { tenant: 'a', memoryPlacement: 'system' }));
    expect(await r.sessions.insertUnderCap(session('ses_a3', { tenant: 'a' }), 5)).toEqual({ inserted: true, open: 2 });
  });

  it('refuses at the cap and writes nothing; ended sessions do not count; a duplicate id fails (500: not a database condition) and writes nothing', async () => {
    for (const id of ['ses_b1', 'ses_b2']) expect((await r.sessions.insertUnderCap(session(id, { tenant: 'b' }), 2)).inserted).toBe(true);
    expect(await r.sessions.insertUnderCap(session('ses_b3', { tenant: 'b' }), 2)).toEqual({ inserted: false, open: 2 });
    expect(await r.hot.session('ses_b3')).toBeUndefined();
    await r.sessions.abandon('ses_b1', [], T0 + 1);
    expect(await r.sessions.insertUnderCap(session('ses_b3', { tenant: 'b' }), 2)).toEqual({ inserted: true, open: 1 });
    const dup = await r.sessions.insertUnderCap(session('ses_b2', { tenant: 'b', taskId: 'other' }), 5).then(() => null, (e: unknown) => e);
    expect(dup).toMatchObject({ code: '23505' });
    expect(pgDatabaseErrorOf(dup)).toBeNull();
    expect(await r.sessions.insert(session('ses_b2', { tenant: 'b', taskId: 'other' })).then(() => null, (e: unknown) => e)).toMatchObject({ code: '23505' });
    expect((await r.hot.session('ses_b2'))?.taskId).toBe(session('x').taskId);
    expect(await r.sessions.activeCount('b')).toBe(2);
  });

  it('the count sees a create that held the tenant\'s lock while this one waited; other tenants do not wait', async () => {
    expect((await r.sessions.insertUnderCap(session('ses_c1', { tenant: 'c' }), 3)).inserted).toBe(true);
    const holder = await client();
    const poller = await client();
    await holder.query('BEGIN');
    // a create of the same tenant in flight: counted (1) and inserted, its lock held until it commits
    expect(await insertSessionUnderCap(holder as pg.PoolClient, session('ses_c2', { tenant: 'c' }), 3)).toEqual({ inserted: true, open: 1 });
    const rec = recordStatements([holder, poller]);
    try {
      const pending = r.sessions.insertUnderCap(session('ses_c3', { tenant: 'c' }), 2);
      await untilWaitingOnLock(poller);
      expect(await r.sessions.insertUnderCap(session('ses_d1', { tenant: 'd' }), 1)).toEqual({ inserted: true, open: 0 });
      await holder.query('COMMIT');
      // in the waiting statement's own snapshot ses_c2 is missing: the count would be 1, and it would insert
      expect(await pending).toEqual({ inserted: false, open: 2 });
      expect(rec.sent()).toEqual(['[lamer_session_insert_capped_1]', '[lamer_session_insert_capped_1]']);
    } finally {
      rec.stop();
    }
    expect(await r.hot.session('ses_c3')).toBeUndefined();
    expect(await r.sessions.activeCount('c')).toBe(2);
  });

  it('two replicas racing creates of one tenant never pass the cap', async () => {
    const other = await openPgDatabase(url);
    opened.push(other);
    const replicas = [r, pgRepositories(other)];
    const results = await Promise.all(
      Array.from({ length: 16 }, (_, i) => replicas[i % 2]!.sessions.insertUnderCap(session(`ses_e${String(i).padStart(2, '0')}`, { tenant: 'e' }), 6)),
    );
    expect(results.filter((x) => x.inserted)).toHaveLength(6);
    expect(results.filter((x) => !x.inserted).every((x) => x.open === 6)).toBe(true);
    expect(await r.sessions.activeCount('e')).toBe(6);
  });

  it('a session inserted completed is counted in its statistics in the same transaction, or not inserted when they fail', async () => {
    const done = (id: string) =>
      session(id, { tenant: 'f', status: 'completed', attempts: [{ attempt: 0, status: 'succeeded', steps: 1, return: 1, success: true, endReason: 'done' }] });
    await r.sessions.insert(done('ses_f1'));
    expect(await r.sessions.insertUnderCap(done('ses_f2'), 1)).toEqual({ inserted: true, open: 0 });
    expect(await r.sessions.completionsBetween('f', 0, 10)).toEqual(['ses_f1', 'ses_f2']);
    expect((await r.sessions.statsGroups('f')).map((g) => [g.env, g.sessions])).toEqual([['alfworld', 2]]);
    await conn.pool.query(`CREATE FUNCTION refuse_completion() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'stats_completions refused'; END $$`);
    await conn.pool.query('CREATE TRIGGER broken_completion BEFORE INSERT ON stats_completions FOR EACH ROW EXECUTE FUNCTION refuse_completion()');
    try {
      for (const insert of [() => r.sessions.insert(done('ses_f3')), () => r.sessions.insertUnderCap(done('ses_f3'), 5)]) {
        await expect(insert()).rejects.toThrow(/stats_completions refused/);
        expect(await r.hot.session('ses_f3')).toBeUndefined();
      }
    } finally {
      await conn.pool.query('DROP TRIGGER broken_completion ON stats_completions');
      await conn.pool.query('DROP FUNCTION refuse_completion()');
    }
    expect(await r.sessions.completionSeq('f')).toBe(2);
  });
});
