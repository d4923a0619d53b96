/**
 * The trainer lease of a PostgreSQL store (src/db/store.ts TrainerLease): the session-level
 * advisory lock `pg_advisory_lock(LOCK_CLASS, LOCKS.trainer)` on a connection of its own. Of the
 * replicas of one database, the one whose connection holds it runs the training jobs. PostgreSQL
 * releases it when that connection ends: the holder closing it, or its process dying (kill -9
 * closes the socket at once; a lost host is noticed by TCP keepalive, about 10 s of silence then
 * the kernel's probes). The holder learns of a broken connection as a lost lease.
 */
import pg from 'pg';
import type { TrainerLease } from '../store.js';
import { LOCK_CLASS, LOCKS } from './connection.js';

/** A trainer lease on the database at `url` (no connection is opened before `acquire`). */
export function pgTrainerLease(url: string, connectTimeoutMs: number): TrainerLease {
  let client: pg.Client | null = null;
  let held = false;
  const lost: Array<() => void> = [];
  const drop = (c: pg.Client) => {
    if (client !== c) return;
    client = null;
    const was = held;
    held = false;
    c.end().catch(() => {});
    if (was) for (const cb of lost) cb();
  };
  const connect = async (): Promise<pg.Client | null> => {
    if (client) return client;
    const c = new pg.Client({
      connectionString: url, connectionTimeoutMillis: connectTimeoutMs, application_name: 'lamer-server trainer',
      keepAlive: true, keepAliveInitialDelayMillis: 10_000,
    });
    client = c;
    c.on('error', () => drop(c));
    c.on('end', () => drop(c));
    try {
      await c.connect();
      return c;
    } catch {
      drop(c);
      return null;
    }
  };
  const tryLock = async (): Promise<boolean> => {
    const c = await connect();
    if (!c) return false;
    try {
      const r = await c.query<{ ok: boolean }>('select pg_try_advisory_lock($1, $2) as ok', [LOCK_CLASS, LOCKS.trainer]);
      held = client === c && r.rows[0]?.ok === true;
      return held;
    } catch {
      drop(c);
      return false;
    }
  };
  // one try at a time: a caller that asks while one runs (a poll that came round before a slow
  // try ended) shares it, so the connection never runs two statements at once
  let trying: Promise<boolean> | null = null;
  return {
    acquire() {
      if (held) return Promise.resolve(true);
      trying ??= tryLock().finally(() => {
        trying = null;
      });
      return trying;
    },
    held: () => held,
    onLost: (cb) => {
      lost.push(cb);
    },
    async release() {
      const c = client;
      client = null;
      held = false;
      // ending the session releases its advisory locks
      await c?.end().catch(() => {});
    },
  };
}
