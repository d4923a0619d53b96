/**
 * The migrations of both dialects (migrations/, migrations-pg/) on real databases: a fresh one gets
 * every migration and the tables of the schema; a database a build before the job cancel request
 * left (its last migration the statistics aggregates: SQLite 0005, PostgreSQL 0002) upgrades at
 * open, keeping its rows, and the server's writes of the new column, and on PostgreSQL its
 * creates under the open-session cap, work on it. The PostgreSQL cases run against a real server
 * on loopback (test/helpers/postgres.ts; skipped, saying why, where none can start).
 */
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { drizzle as sqliteDrizzle } from 'drizzle-orm/better-sqlite3';
import { migrate as sqliteMigrate } from 'drizzle-orm/better-sqlite3/migrator';
import { drizzle as pgDrizzle } from 'drizzle-orm/node-postgres';
import { migrate as pgMigrate } from 'drizzle-orm/node-postgres/migrator';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { migrationsFolder, openDatabase } from '../../src/db/index.js';
import { createRepositories } from '../../src/db/repositories.js';
import { openPgDatabase, pgMigrationsFolder, type PgConnection } from '../../src/db/pg/connection.js';
import { pgRepositories } from '../../src/db/pg/repositories.js';
import { tmpDir } from '../helpers/index.js';
import { migrationsUpTo } from '../helpers/migrations.js';
import { postgresForTests } from '../helpers/postgres.js';

const server = await postgresForTests();
const T0 = 1_800_000_000_000;

const journalOf = (folder: string) =>
  (JSON.parse(fs.readFileSync(path.join(folder, 'meta', '_journal.json'), 'utf8')) as { entries: Array<{ tag: string; when: number }> }).entries;

const STATS_TABLES = ['stats_completions', 'stats_groups', 'stats_retries', 'stats_tenants'];

/** Rows an earlier build wrote: a running job, an active session, and a session completed before the aggregates counted it. */
const SESSION_COLUMNS = `id, tenant, task_id, env, mode, status, instructions, max_attempts, max_steps, memory, sampling, model_version,
  metadata, next_attempt, next_step, attempts, created_at, updated_at`;
const sessionValues = (id: string, status: string) => [
  id, 'default', 'task-a', 'alfworld', 'train', status, 'x', 1, 10, 'reflection_only', '{}', 'base', '{}', status === 'completed' ? 1 : 0, 0,
  status === 'completed' ? JSON.stringify([{ attempt: 0, status: 'succeeded', steps: 1, return: 1, success: true, endReason: 'success' }]) : '[]',
  T0, T0 + 1,
];
const JOB = `INSERT INTO training_jobs (id, algorithm, status, config, progress, metrics, created_at, started_at)
  VALUES ('job_old', 'lamer', 'running', '{}', 0.5, '{}', ${T0}, ${T0})`;

describe('the migrations of both dialects', () => {
  it('are journalled in order, each after the one before it, and the last ones come after the statistics aggregates', () => {
    const dialects = [
      [migrationsFolder, '0005_stats_aggregates', ['job_cancel_request']],
      [pgMigrationsFolder, '0002_stats_aggregates', ['job_cancel_request', 'open_sessions_lock']],
    ] as const;
    for (const [folder, stats, after] of dialects) {
      const entries = journalOf(folder);
      for (const [i, e] of entries.entries()) {
        expect(e.tag.startsWith(String(i).padStart(4, '0'))).toBe(true);
        expect(fs.existsSync(path.join(folder, `${e.tag}.sql`))).toBe(true);
        if (i > 0) expect(e.when).toBeGreaterThan(entries[i - 1]!.when);
      }
      const at = entries.findIndex((e) => e.tag === stats);
      expect(at).toBeGreaterThanOrEqual(0);
      expect(entries.slice(at + 1).map((e) => e.tag.slice(5))).toEqual(after);
    }
  });
});

describe('SQLite', () => {
  const columns = (db: Database.Database, table: string) => (db.pragma(`table_info(${table})`) as Array<{ name: string }>).map((c) => c.name);

  it('a fresh database gets every migration', () => {
    const conn = openDatabase(tmpDir('lamer-migrate-'));
    try {
      const applied = conn.sqlite.prepare('SELECT count(*) AS n FROM __drizzle_migrations').get() as { n: number };
      expect(applied.n).toBe(journalOf(migrationsFolder).length);
      for (const t of STATS_TABLES) expect(columns(conn.sqlite, t).length).toBeGreaterThan(0);
      expect(columns(conn.sqlite, 'training_jobs')).toContain('cancel_requested_at');
    } finally {
      conn.close();
    }
  });

  it('a database of the build with the statistics aggregates and without the job cancel request upgrades at open, keeping its rows', () => {
    const dir = tmpDir('lamer-migrate-old-');
    const folder = migrationsUpTo(migrationsFolder, 'stats_aggregates', true);
    const old = new Database(path.join(dir, 'lamer.db'));
    try {
      sqliteMigrate(sqliteDrizzle(old), { migrationsFolder: folder });
      expect(columns(old, 'training_jobs')).not.toContain('cancel_requested_at');
      const insert = old.prepare(`INSERT INTO sessions (${SESSION_COLUMNS}) VALUES (${SESSION_COLUMNS.split(',').map(() => '?').join(', ')})`);
      insert.run(...sessionValues('ses_active', 'active'));
      insert.run(...sessionValues('ses_done', 'completed'));
      old.exec(JOB);
    } finally {
      old.close();
      fs.rmSync(folder, { recursive: true, force: true });
    }
    const conn = openDatabase(dir);
    try {
      expect((conn.sqlite.prepare('SELECT count(*) AS n FROM __drizzle_migrations').get() as { n: number }).n).toBe(journalOf(migrationsFolder).length);
      const repos = createRepositories(conn);
      expect(repos.jobs.get('job_old')).toMatchObject({ status: 'running', progress: 0.5, cancelRequestedAt: null });
      expect(repos.jobs.requestCancel('job_old', T0 + 5)).toBe(true);
      expect(repos.jobs.get('job_old')?.cancelRequestedAt).toBe(T0 + 5);
      expect(repos.hot.session('ses_active')).toMatchObject({ status: 'active' });
      // the completed session the aggregates did not count is counted by the rebuild at open
      expect(repos.sessions.completionSeq('default')).toBe(1);
      expect(repos.sessions.statsGroups('default').map((g) => g.sessions)).toEqual([1]);
    } finally {
      conn.close();
    }
  });
});

describe.skipIf(!server)('PostgreSQL', () => {
  const opened: PgConnection[] = [];
  afterAll(async () => {
    for (const c of opened) await c.close();
  });
  const columns = async (url: string, table: string) =>
    (await server!.query<{ column_name: string }>('SELECT column_name FROM information_schema.columns WHERE table_name = $1', [table], new URL(url).pathname.slice(1)))
      .map((c) => c.column_name);

  it('a fresh database gets every migration', async () => {
    const url = await server!.freshDatabase();
    const conn = await openPgDatabase(url);
    opened.push(conn);
    expect(conn.migrated).toBe(journalOf(pgMigrationsFolder).length);
    for (const t of STATS_TABLES) expect((await columns(url, t)).length).toBeGreaterThan(0);
    expect(await columns(url, 'training_jobs')).toContain('cancel_requested_at');
  });

  it('a database of the build with the statistics aggregates and without the job cancel request upgrades at open, keeping its rows', async () => {
    const url = await server!.freshDatabase();
    const folder = migrationsUpTo(pgMigrationsFolder, 'stats_aggregates', true);
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await pgMigrate(pgDrizzle(client), { migrationsFolder: folder });
      expect(await columns(url, 'training_jobs')).not.toContain('cancel_requested_at');
      const params = SESSION_COLUMNS.split(',').map((_, i) => `$${i + 1}`).join(', ');
      await client.query(`INSERT INTO sessions (${SESSION_COLUMNS}) VALUES (${params})`, sessionValues('ses_active', 'active'));
      await client.query(`INSERT INTO sessions (${SESSION_COLUMNS}) VALUES (${params})`, sessionValues('ses_done', 'completed'));
      await client.query(JOB);
    } finally {
      await client.end();
      fs.rmSync(folder, { recursive: true, force: true });
    }
    const conn = await openPgDatabase(url);
    opened.push(conn);
    // the job cancel request, and the open-session count under the tenant's lock
    expect(conn.migrated).toBe(2);
    const repos = pgRepositories(conn);
    expect(await repos.jobs.get('job_old')).toMatchObject({ status: 'running', progress: 0.5, cancelRequestedAt: null });
    expect(await repos.jobs.requestCancel('job_old', T0 + 5)).toBe(true);
    expect((await repos.jobs.get('job_old'))?.cancelRequestedAt).toBe(T0 + 5);
    expect(await repos.hot.session('ses_active')).toMatchObject({ status: 'active' });
    expect(await repos.sessions.completionSeq('default')).toBe(1);
    expect((await repos.sessions.statsGroups('default')).map((g) => g.sessions)).toEqual([1]);
    // creates under the cap count the active session the old build left
    const row = { ...(await repos.hot.session('ses_active'))!, id: 'ses_new', createdAt: T0 + 9, updatedAt: T0 + 9 };
    expect(await repos.sessions.insertUnderCap(row, 2)).toEqual({ inserted: true, open: 1 });
    expect(await repos.sessions.insertUnderCap({ ...row, id: 'ses_new2' }, 2)).toEqual({ inserted: false, open: 2 });
  });
});
