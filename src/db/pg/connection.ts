/**
 * PostgreSQL connection: a node-postgres pool opened from a `postgres://` URL, drizzle over it, and
 * the migrations of `migrations-pg/` applied at open under a PostgreSQL advisory lock, so that of
 * several replicas starting together exactly one migrates and the others wait for it, then find
 * nothing left to do.
 *
 * Start-up refuses, with one line naming host:port (src/db/pg/errors.ts PgStartupError): a URL
 * that is not `postgres://`, a database that cannot be reached, an authentication failure, a
 * database that does not exist, and a schema newer than this build (the database holds migrations
 * this build does not know: a newer build migrated it, and this one must not serve on it).
 */
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { migrate } from 'drizzle-orm/node-postgres/migrator';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import * as pgSchema from './schema.js';
import { PgStartupError, oneLine, startupErrorOf } from './errors.js';
import { rebuildStatsIfStale } from './stats-aggregates.js';

export type PgDb = NodePgDatabase<typeof pgSchema>;

/** Pool settings of a PostgreSQL store. */
export interface PgPoolSettings {
  /** Most connections the pool opens (each replica holds at most this many), >= 1. */
  maxConnections: number;
  /** Longest wait for a new connection, or for a free one from a full pool, ms (> 0). */
  connectTimeoutMs: number;
  /** Server-side limit of one statement, ms (`statement_timeout`; 0: none). Migrations run without it. */
  statementTimeoutMs: number;
  /** An idle connection is closed after this long, ms (0: never). */
  idleTimeoutMs: number;
  /** Longest wait for the migration lock held by another replica that is migrating, ms (> 0). */
  migrationLockTimeoutMs: number;
}

export const defaultPgPoolSettings: PgPoolSettings = {
  maxConnections: 10,
  connectTimeoutMs: 5_000,
  statementTimeoutMs: 30_000,
  idleTimeoutMs: 30_000,
  migrationLockTimeoutMs: 60_000,
};

/**
 * Keys of the advisory locks this server takes, `pg_advisory_lock(LOCK_CLASS, key)`: the class is
 * the ASCII bytes of 'lame' as an int4, so they do not collide with other applications' locks on
 * the same database.
 */
export const LOCK_CLASS = 0x6c616d65;
export const LOCKS = { migrations: 1, modelActivation: 2, trainer: 3 } as const;
/**
 * Class of the per-tenant locks, `pg_advisory_xact_lock(TENANT_LOCK_CLASS, hashtext(tenant))`
 * (the ASCII bytes of 'lamt'): session creates of one tenant under the open-session cap take turns.
 */
export const TENANT_LOCK_CLASS = 0x6c616d74;

export const pgMigrationsFolder = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'migrations-pg');

/** Where a URL points: `host:port` for messages, the user and database names. */
export interface PgTarget {
  where: string;
  user: string;
  database: string;
}

/**
 * Check a database URL and say where it points (the password never appears in the result).
 * @throws PgStartupError `config` when it is not a `postgres://` or `postgresql://` URL.
 */
export function parseDatabaseUrl(url: string): PgTarget {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new PgStartupError('config', 'database URL is not a URL (expected postgres://user:password@host:port/database)');
  }
  if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:') {
    throw new PgStartupError('config', `database URL must start with postgres:// or postgresql://, not ${u.protocol}//`);
  }
  const host = u.searchParams.get('host') ?? (decodeURIComponent(u.hostname) || 'localhost');
  const port = u.searchParams.get('port') ?? (u.port || '5432');
  const user = decodeURIComponent(u.username) || process.env.PGUSER || os.userInfo().username;
  const database = decodeURIComponent(u.pathname.replace(/^\//, '')) || user;
  return { where: host.startsWith('/') ? `${host} port ${port}` : `${host}:${port}`, user, database };
}

/** The settings with defaults filled in. @throws PgStartupError `config` for a value out of range. */
export function pgPoolSettings(s: Partial<PgPoolSettings> = {}): PgPoolSettings {
  const out = { ...defaultPgPoolSettings, ...Object.fromEntries(Object.entries(s).filter(([, v]) => v !== undefined)) };
  const check = (name: keyof PgPoolSettings, min: number) => {
    const v = out[name];
    if (!Number.isSafeInteger(v) || v < min) {
      throw new PgStartupError('config', `database pool setting ${name} must be an integer >= ${min}, got ${v}`);
    }
  };
  check('maxConnections', 1);
  check('connectTimeoutMs', 1);
  check('statementTimeoutMs', 0);
  check('idleTimeoutMs', 0);
  check('migrationLockTimeoutMs', 1);
  return out;
}

/** One open PostgreSQL store: the pool, drizzle over it, and its readiness probe. */
export interface PgConnection {
  db: PgDb;
  pool: pg.Pool;
  /** Where it is, for logs: `host:port`, user and database (no password). */
  target: PgTarget;
  settings: PgPoolSettings;
  /** Migrations this open applied (0 when another replica had applied them, or none were new). */
  migrated: number;
  /** Readiness: true when `select 1` answers within `timeoutMs` (default 1000); never throws. */
  ping(timeoutMs?: number): Promise<boolean>;
  /** End the pool (waits for checked-out connections to be released). Idempotent. */
  close(): Promise<void>;
}

export interface OpenPgOptions extends Partial<PgPoolSettings> {
  /** `application_name` of the connections (pg_stat_activity); default 'lamer-server'. */
  applicationName?: string;
  /**
   * Errors of idle pooled connections (the server restarted, the network dropped): the pool drops
   * such a connection and opens another on the next query; without this handler they are ignored.
   */
  onError?: (err: Error) => void;
}

/**
 * Open the PostgreSQL store at `url`: apply the pending migrations under the migration advisory
 * lock on a connection of its own, then open the pool, and rebuild the statistics aggregates when
 * they do not count every completed session (./stats-aggregates.ts).
 * @throws PgStartupError: `config` (URL or setting), `unreachable`, `auth`, `no-database`,
 *   `schema-too-new`, `migration` (a migration failed, or the lock was not granted within
 *   `migrationLockTimeoutMs`).
 */
export async function openPgDatabase(url: string, opts: OpenPgOptions = {}): Promise<PgConnection> {
  const target = parseDatabaseUrl(url);
  const settings = pgPoolSettings(opts);
  const applicationName = opts.applicationName ?? 'lamer-server';
  const migrated = await migrateUnderLock(url, target, settings, applicationName);
  const pool = new pg.Pool({
    connectionString: url,
    max: settings.maxConnections,
    connectionTimeoutMillis: settings.connectTimeoutMs,
    idleTimeoutMillis: settings.idleTimeoutMs,
    statement_timeout: settings.statementTimeoutMs,
    application_name: applicationName,
  });
  pool.on('error', (err) => opts.onError?.(err));
  const db = drizzle(pool, { schema: pgSchema });
  try {
    // sessions completed before the aggregates existed, or written by other means than the server's
    await rebuildStatsIfStale(db);
  } catch (err) {
    await pool.end().catch(() => {});
    throw startupErrorOf(err, target.where, target.user, target.database);
  }
  let closing: Promise<void> | null = null;
  return {
    db,
    pool,
    target,
    settings,
    migrated,
    ping: (timeoutMs) => pingPg(pool, timeoutMs),
    close: () => (closing ??= pool.end()),
  };
}

/**
 * Readiness of a pool: true when `select 1` answers within `timeoutMs` (a full pool's wait for a
 * connection counts); never throws. A probe that times out is left to finish in the background.
 */
export async function pingPg(pool: pg.Pool, timeoutMs = 1000): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  try {
    const probe = pool.query<{ ok: number }>('select 1 as ok').then(
      (r) => r.rows[0]?.ok === 1,
      () => false,
    );
    return await Promise.race([probe, late]);
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * On a connection of its own (no statement timeout): take the migration lock (waiting at most
 * `migrationLockTimeoutMs` for a replica that holds it), refuse a database with migrations this
 * build does not know, apply the pending ones, release the lock.
 * @returns the number of migrations applied.
 * @throws PgStartupError as openPgDatabase.
 */
async function migrateUnderLock(url: string, target: PgTarget, s: PgPoolSettings, applicationName: string): Promise<number> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: s.connectTimeoutMs, application_name: applicationName });
  // An error after connect (server gone) is reported by the query that meets it.
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('select 1');
  } catch (err) {
    await client.end().catch(() => {});
    throw startupErrorOf(err, target.where, target.user, target.database);
  }
  try {
    await lockForMigration(client, target, s.migrationLockTimeoutMs);
    const local = readMigrationFiles({ migrationsFolder: pgMigrationsFolder });
    const before = await appliedMigrations(client);
    const known = new Set(local.map((m) => m.folderMillis));
    const unknown = before.filter((m) => !known.has(m));
    if (unknown.length > 0) {
      const newest = new Date(Math.max(...unknown)).toISOString();
      throw new PgStartupError(
        'schema-too-new',
        `database at ${target.where} has ${unknown.length} migration(s) this build does not know (newest from ${newest}): ` +
          'its schema is newer than this build; refusing to start (run the newer build, or restore the database from before it)',
      );
    }
    try {
      await migrate(drizzle(client), { migrationsFolder: pgMigrationsFolder });
    } catch (err) {
      const why = oneLine(String((err as Error).message ?? err));
      throw new PgStartupError('migration', `database at ${target.where}: a migration failed: ${why}`, { cause: err });
    }
    return (await appliedMigrations(client)).length - before.length;
  } catch (err) {
    throw startupErrorOf(err, target.where, target.user, target.database);
  } finally {
    // Ending the session releases the advisory lock too.
    await client.end().catch(() => {});
  }
}

/** `pg_advisory_lock` on the migration key, waiting at most `timeoutMs` (lock_timeout applies to advisory locks). */
async function lockForMigration(client: pg.Client, target: PgTarget, timeoutMs: number): Promise<void> {
  await client.query(`set lock_timeout = ${timeoutMs}`);
  try {
    await client.query('select pg_advisory_lock($1, $2)', [LOCK_CLASS, LOCKS.migrations]);
  } catch (err) {
    if ((err as { code?: string }).code === '55P03') {
      const why = `database at ${target.where}: another server held the migration lock for over ${timeoutMs} ms`;
      throw new PgStartupError('migration', why, { cause: err });
    }
    throw err;
  }
  await client.query('set lock_timeout = 0');
}

/** `created_at` (the migration's folderMillis) of each migration drizzle recorded as applied; [] before the first. */
async function appliedMigrations(client: pg.Client): Promise<number[]> {
  const exists = await client.query<{ t: string | null }>(`select to_regclass('drizzle.__drizzle_migrations')::text as t`);
  if (!exists.rows[0]?.t) return [];
  const r = await client.query<{ created_at: string }>('select created_at from drizzle.__drizzle_migrations order by created_at');
  return r.rows.map((row) => Number(row.created_at));
}
