/**
 * Opening the PostgreSQL store (src/db/pg/connection.ts) against a real server on loopback
 * (test/helpers/postgres.ts): migrations applied once under the advisory lock however many
 * replicas open at once, the pool settings, the readiness probe, and the one-line start-up errors
 * (bad URL or setting, unreachable, wrong password, missing database, a schema newer than this
 * build, the migration lock held too long).
 */
import net from 'node:net';
import pg from 'pg';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import { afterAll, describe, expect, it } from 'vitest';
import {
  LOCK_CLASS,
  LOCKS,
  openPgDatabase,
  parseDatabaseUrl,
  pgMigrationsFolder,
  pgPoolSettings,
  pingPg,
  type PgConnection,
} from '../../../src/db/pg/connection.js';
import { PgStartupError, pgDatabaseErrorOf } from '../../../src/db/pg/errors.js';
import { DatabaseError } from '../../../src/db/errors.js';
import { PG_PASSWORD, PG_USER, freePort, postgresForTests } from '../../helpers/postgres.js';

const server = await postgresForTests();
const localMigrations = readMigrationFiles({ migrationsFolder: pgMigrationsFolder });

const opened: PgConnection[] = [];
afterAll(async () => {
  for (const c of opened.splice(0)) await c.close();
});
async function open(url: string, opts: Parameters<typeof openPgDatabase>[1] = {}): Promise<PgConnection> {
  const c = await openPgDatabase(url, opts);
  opened.push(c);
  return c;
}

/** The start-up error of `p`, checked to be one line without the password. */
async function startupError(p: Promise<unknown>): Promise<PgStartupError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(PgStartupError);
  const e = err as PgStartupError;
  expect(e.message).not.toMatch(/\n/);
  expect(e.message).not.toContain(PG_PASSWORD);
  return e;
}

/** A TCP server on loopback that accepts connections and never answers. */
async function silentServer(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const s = net.createServer((sock) => void sockets.add(sock));
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  return {
    port: (s.address() as net.AddressInfo).port,
    close: () =>
      new Promise((resolve) => {
        for (const sock of sockets) sock.destroy();
        s.close(() => resolve());
      }),
  };
}

describe('database URL and pool settings', () => {
  it('says where a URL points, without its password, with PostgreSQL defaults', () => {
    expect(parseDatabaseUrl('postgres://u:secret@db.example:6543/lamer')).toEqual({ where: 'db.example:6543', user: 'u', database: 'lamer' });
    expect(parseDatabaseUrl('postgresql://u@db.example/lamer')).toMatchObject({ where: 'db.example:5432', database: 'lamer' });
    expect(parseDatabaseUrl('postgres:///lamer?host=/var/run/postgresql')).toMatchObject({ where: '/var/run/postgresql port 5432', database: 'lamer' });
    expect(parseDatabaseUrl('postgres://u@%2Fvar%2Frun%2Fpostgresql/lamer')).toMatchObject({ where: '/var/run/postgresql port 5432' });
    expect(parseDatabaseUrl('postgres://u@h')).toMatchObject({ database: 'u' });
  });

  it('refuses what is not a postgres:// URL, in one line', () => {
    expect(() => parseDatabaseUrl('mysql://u@h/db')).toThrow(/must start with postgres:\/\/ or postgresql:\/\/, not mysql:\/\//);
    expect(() => parseDatabaseUrl('db.example:5432')).toThrow(PgStartupError);
    expect(() => parseDatabaseUrl('not a url')).toThrow(/is not a URL/);
    try {
      parseDatabaseUrl('http://u:secret@h/db');
    } catch (err) {
      expect((err as PgStartupError).reason).toBe('config');
      expect((err as Error).message).not.toContain('secret');
    }
  });

  it('fills the defaults and refuses settings out of range', () => {
    expect(pgPoolSettings()).toEqual({ maxConnections: 10, connectTimeoutMs: 5000, statementTimeoutMs: 30000, idleTimeoutMs: 30000, migrationLockTimeoutMs: 60000 });
    expect(pgPoolSettings({ maxConnections: 3, statementTimeoutMs: 0 })).toMatchObject({ maxConnections: 3, statementTimeoutMs: 0 });
    expect(() => pgPoolSettings({ maxConnections: 0 })).toThrow(/maxConnections must be an integer >= 1, got 0/);
    expect(() => pgPoolSettings({ connectTimeoutMs: 1.5 })).toThrow(/connectTimeoutMs/);
    expect(() => pgPoolSettings({ statementTimeoutMs: -1 })).toThrow(/statementTimeoutMs/);
  });
});

describe('start-up against nothing that answers', () => {
  it('a refused connection is "database unreachable at host:port", one line', async () => {
    const port = await freePort();
    const e = await startupError(openPgDatabase(`postgres://u:${PG_PASSWORD}@127.0.0.1:${port}/lamer`));
    expect(e.reason).toBe('unreachable');
    expect(e.message).toBe(`database unreachable at 127.0.0.1:${port} (ECONNREFUSED)`);
  });

  it('a server that never answers is unreachable once the connect timeout passes', async () => {
    const silent = await silentServer();
    try {
      const e = await startupError(openPgDatabase(`postgres://u:${PG_PASSWORD}@127.0.0.1:${silent.port}/lamer`, { connectTimeoutMs: 200 }));
      expect(e.reason).toBe('unreachable');
      expect(e.message).toBe(`database unreachable at 127.0.0.1:${silent.port} (no answer within the connect timeout)`);
    } finally {
      await silent.close();
    }
  });

  it('the readiness probe of a pool whose server never answers is false within its timeout', async () => {
    const silent = await silentServer();
    const pool = new pg.Pool({ connectionString: `postgres://u@127.0.0.1:${silent.port}/lamer`, connectionTimeoutMillis: 5000 });
    pool.on('error', () => {});
    try {
      expect(await pingPg(pool, 150)).toBe(false);
    } finally {
      await silent.close();
      await pool.end().catch(() => {});
    }
  });
});

describe.skipIf(!server)('opening a PostgreSQL store', () => {
  const pgs = server!;

  it('two concurrent opens on an empty database both succeed and the migrations run once', async () => {
    const url = await pgs.freshDatabase();
    const [a, b, c] = await Promise.all([open(url), open(url), open(url)]);
    expect([a.migrated, b.migrated, c.migrated].sort()).toEqual([0, 0, localMigrations.length]);
    const dbName = new URL(url).pathname.slice(1);
    const applied = await pgs.query<{ created_at: string }>('select created_at from drizzle.__drizzle_migrations order by id', [], dbName);
    expect(applied.map((r) => Number(r.created_at))).toEqual(localMigrations.map((m) => m.folderMillis));
    const tables = await pgs.query<{ t: string }>("select tablename as t from pg_tables where schemaname = 'public' order by 1", [], dbName);
    expect(tables.map((r) => r.t)).toEqual(['models', 'reflections', 'replays', 'sessions', 'stats_completions', 'stats_groups', 'stats_retries', 'stats_tenants', 'steps', 'training_jobs']);
    // and a later open finds nothing to do
    expect((await open(url)).migrated).toBe(0);
    expect(await a.ping()).toBe(true);
  });

  it('applies the pool settings: max connections, statement timeout, application name', async () => {
    const url = await pgs.freshDatabase();
    const c = await open(url, { maxConnections: 3, statementTimeoutMs: 1500, applicationName: 'lamer-test' });
    expect(c.pool.options.max).toBe(3);
    expect(c.settings).toMatchObject({ maxConnections: 3, statementTimeoutMs: 1500, connectTimeoutMs: 5000 });
    expect(c.target).toEqual({ where: `127.0.0.1:${pgs.port}`, user: PG_USER, database: new URL(url).pathname.slice(1) });
    const r = await c.pool.query<{ st: string; app: string }>("select current_setting('statement_timeout') as st, current_setting('application_name') as app");
    expect(r.rows[0]).toEqual({ st: '1500ms', app: 'lamer-test' });
  });

  it('a statement over the statement timeout fails as a `busy` DatabaseError (57014)', async () => {
    const c = await open(await pgs.freshDatabase(), { statementTimeoutMs: 50 });
    const err = await c.pool.query('select pg_sleep(10)').then(() => null, (e: unknown) => e);
    const de = pgDatabaseErrorOf(err);
    expect(de).toBeInstanceOf(DatabaseError);
    expect([de!.kind, de!.code]).toEqual(['busy', '57014']);
  });

  it('readiness is false once the pool is closed; close is idempotent', async () => {
    const c = await openPgDatabase(await pgs.freshDatabase());
    expect(await c.ping(2000)).toBe(true);
    await Promise.all([c.close(), c.close()]);
    expect(await c.ping(2000)).toBe(false);
  });

  it('an idle connection killed by the server reaches onError and the pool goes on', async () => {
    const errors: Error[] = [];
    const c = await open(await pgs.freshDatabase(), { applicationName: 'lamer-victim', onError: (e) => errors.push(e) });
    await c.pool.query('select 1');
    await pgs.query("select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'lamer-victim'");
    for (let i = 0; i < 100 && errors.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(errors.length).toBeGreaterThan(0);
    expect((await c.pool.query<{ ok: number }>('select 1 as ok')).rows).toEqual([{ ok: 1 }]);
  });

  it('a wrong password is an authentication failure naming the user and host:port', async () => {
    const e = await startupError(openPgDatabase(`postgres://${PG_USER}:wrong@127.0.0.1:${pgs.port}/postgres`));
    expect(e.reason).toBe('auth');
    expect(e.message).toMatch(new RegExp(`^database authentication failed for user "${PG_USER}" at 127\\.0\\.0\\.1:${pgs.port}: `));
  });

  it('a database that does not exist is named', async () => {
    const e = await startupError(openPgDatabase(pgs.url('no_such_db')));
    expect(e.reason).toBe('no-database');
    expect(e.message).toBe(`database "no_such_db" does not exist at 127.0.0.1:${pgs.port}`);
  });

  it('refuses a database whose schema is newer than this build, and changes nothing', async () => {
    const url = await pgs.freshDatabase();
    const dbName = new URL(url).pathname.slice(1);
    await (await open(url)).close();
    const future = localMigrations.at(-1)!.folderMillis + 86_400_000;
    await pgs.query('insert into drizzle.__drizzle_migrations (hash, created_at) values ($1, $2)', ['from-a-newer-build', future], dbName);
    const e = await startupError(openPgDatabase(url));
    expect(e.reason).toBe('schema-too-new');
    expect(e.message).toMatch(/has 1 migration\(s\) this build does not know \(newest from [0-9T:.-]+Z\): its schema is newer than this build; refusing to start/);
    const applied = await pgs.query('select hash from drizzle.__drizzle_migrations', [], dbName);
    expect(applied).toHaveLength(localMigrations.length + 1);
  });

  it('waits for a replica that holds the migration lock, and refuses after migrationLockTimeoutMs', async () => {
    const url = await pgs.freshDatabase();
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    try {
      await holder.query('select pg_advisory_lock($1, $2)', [LOCK_CLASS, LOCKS.migrations]);
      const e = await startupError(openPgDatabase(url, { migrationLockTimeoutMs: 100 }));
      expect(e.reason).toBe('migration');
      expect(e.message).toBe(`database at 127.0.0.1:${pgs.port}: another server held the migration lock for over 100 ms`);
      // Once the holder lets go, a waiting open proceeds and migrates.
      const waiting = open(url);
      await holder.query('select pg_advisory_unlock($1, $2)', [LOCK_CLASS, LOCKS.migrations]);
      expect((await waiting).migrated).toBe(localMigrations.length);
    } finally {
      await holder.end();
    }
  });
});
