/**
 * A real PostgreSQL server for tests: initdb in a temporary folder, started on a free loopback
 * port with its socket in that folder, stopped and removed by `stop()`. The binaries are those in
 * LAMER_PG_BIN when it is set, else Debian's in /usr/lib/postgresql/15/bin, else the newest
 * /usr/lib/postgresql/<n>/bin. initdb refuses to run as root, so as root the cluster is made and
 * run as the `postgres` user (`runuser -u postgres --`), with the folder handed to it.
 *
 * Where PostgreSQL is missing or cannot start, {@link startPostgres} returns `{ skip }`: one line
 * saying why, for `describe.skipIf` (the tests skip and say so instead of failing).
 *
 * Connections use password authentication (scram-sha-256) over TCP as the superuser `lamer`, so
 * the tests can present a wrong password.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, vi } from 'vitest';

const run = promisify(execFile);

export const PG_USER = 'lamer';
export const PG_PASSWORD = 'lamer-test-password';

export interface TestPostgres {
  host: string;
  port: number;
  /** `postgres://lamer:...@127.0.0.1:<port>/<database>`. */
  url(database: string): string;
  /** Create an empty database with a fresh name and return its URL. */
  freshDatabase(): Promise<string>;
  /** Run SQL as the superuser on `database` (default `postgres`). */
  query<T extends pg.QueryResultRow = any>(sql: string, params?: unknown[], database?: string): Promise<T[]>;
  /** Stop the server (immediate shutdown) and remove its folder. Idempotent. */
  stop(): Promise<void>;
}

/** The folder with initdb and pg_ctl, or null. LAMER_PG_BIN, when set, is the only folder tried. */
export function postgresBinDir(): string | null {
  const usable = (d: string) => fs.existsSync(path.join(d, 'initdb')) && fs.existsSync(path.join(d, 'pg_ctl'));
  if (process.env.LAMER_PG_BIN) return usable(process.env.LAMER_PG_BIN) ? process.env.LAMER_PG_BIN : null;
  const candidates = ['/usr/lib/postgresql/15/bin'];
  try {
    const versions = fs.readdirSync('/usr/lib/postgresql').filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a));
    candidates.push(...versions.map((v) => `/usr/lib/postgresql/${v}/bin`));
  } catch {
    /* no Debian PostgreSQL */
  }
  return candidates.find(usable) ?? null;
}

/** A TCP port free on 127.0.0.1 right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

const isRoot = () => process.getuid?.() === 0;

/** Run a PostgreSQL binary, as the `postgres` user when we are root. */
async function pgRun(bin: string, args: string[]): Promise<void> {
  if (isRoot()) await run('runuser', ['-u', 'postgres', '--', bin, ...args], { timeout: 60_000 });
  else await run(bin, args, { timeout: 60_000 });
}

/**
 * Start a throw-away PostgreSQL server, or say why not.
 * @returns the server, or `{ skip }` with a one-line reason.
 */
export async function startPostgres(): Promise<TestPostgres | { skip: string }> {
  const bin = postgresBinDir();
  if (!bin) {
    const where = process.env.LAMER_PG_BIN ? `LAMER_PG_BIN=${process.env.LAMER_PG_BIN}` : '/usr/lib/postgresql/*/bin; set LAMER_PG_BIN';
    return { skip: `PostgreSQL is not installed (no initdb and pg_ctl in ${where})` };
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lamer-pg-'));
  const data = path.join(dir, 'data');
  try {
    fs.writeFileSync(path.join(dir, 'pwfile'), `${PG_PASSWORD}\n`);
    if (isRoot()) await run('chown', ['-R', 'postgres:postgres', dir]);
    await pgRun(path.join(bin, 'initdb'), [
      '-D', data, '-U', PG_USER, `--pwfile=${path.join(dir, 'pwfile')}`, '--auth-local=trust', '--auth-host=scram-sha-256',
      '--encoding=UTF8', '--locale=C', '--no-sync',
    ]);
  } catch (err) {
    fs.rmSync(dir, { recursive: true, force: true });
    return { skip: `PostgreSQL could not be initialised (${firstLine(err)})` };
  }
  let port = 0;
  let started = false;
  let lastErr: unknown;
  // A free port can be taken between the probe and the start: try a few.
  for (let tries = 0; tries < 3 && !started; tries++) {
    port = await freePort();
    const opts = `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${dir} -c fsync=off -c max_connections=100`;
    try {
      await pgRun(path.join(bin, 'pg_ctl'), ['-D', data, '-o', opts, '-l', path.join(dir, 'log'), '-w', '-t', '60', 'start']);
      started = true;
    } catch (err) {
      lastErr = err;
    }
  }
  if (!started) {
    const log = fs.existsSync(path.join(dir, 'log')) ? fs.readFileSync(path.join(dir, 'log'), 'utf8').trim().split('\n').pop() : '';
    fs.rmSync(dir, { recursive: true, force: true });
    return { skip: `PostgreSQL could not be started (${log || firstLine(lastErr)})` };
  }
  return server(bin, dir, data, port);
}

function server(bin: string, dir: string, data: string, port: number): TestPostgres {
  const host = '127.0.0.1';
  const url = (database: string) => `postgres://${PG_USER}:${encodeURIComponent(PG_PASSWORD)}@${host}:${port}/${database}`;
  let n = 0;
  let stopped: Promise<void> | null = null;
  const query = async <T extends pg.QueryResultRow>(sql: string, params: unknown[] = [], database = 'postgres'): Promise<T[]> => {
    const c = new pg.Client({ connectionString: url(database) });
    await c.connect();
    try {
      return (await c.query<T>(sql, params)).rows;
    } finally {
      await c.end();
    }
  };
  return {
    host,
    port,
    url,
    query,
    async freshDatabase() {
      const name = `lamer_test_${process.pid}_${++n}`;
      await query(`CREATE DATABASE ${name}`);
      return url(name);
    },
    stop() {
      stopped ??= pgRun(path.join(bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop'])
        .catch(() => {})
        .finally(() => fs.rmSync(dir, { recursive: true, force: true }));
      return stopped;
    },
  };
}

function firstLine(err: unknown): string {
  const e = err as { stderr?: string; message?: string };
  const text = (e?.stderr && e.stderr.trim()) || e?.message || String(err);
  return text.split('\n').find((l) => l.trim() !== '')?.trim() ?? 'unknown error';
}

/**
 * For a test file: start a server before its tests (top-level await) and stop it after them. When
 * none can start, prints one line saying why and returns null (use `describe.skipIf(!pg)`).
 */
export async function postgresForTests(): Promise<TestPostgres | null> {
  const started = await startPostgres();
  if ('skip' in started) {
    console.warn(`PostgreSQL tests skipped: ${started.skip}`);
    return null;
  }
  afterAll(() => started.stop());
  return started;
}

/**
 * Record the statements every node-postgres client of this process sends from now on, each a
 * round trip (a pool queries through its clients): the text of each, or `[name]` for a named
 * prepared statement, leaving out those of the clients in `except` (a test's own). `stop()` ends
 * the recording.
 */
export function recordStatements(except: pg.Client[] = []): { sent(): string[]; stop(): void } {
  const spy = vi.spyOn(pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown }, 'query');
  return {
    sent: () =>
      spy.mock.calls.flatMap(([q], i) => {
        if (except.includes(spy.mock.contexts[i] as pg.Client)) return [];
        const c = q as string | { name?: string; text?: string };
        return [typeof c === 'string' ? c : c.name ? `[${c.name}]` : (c.text ?? '?')];
      }),
    stop: () => spy.mockRestore(),
  };
}

/** Resolves once a backend on `client`'s database waits on a lock (a row's, or an advisory lock). */
export async function untilWaitingOnLock(client: pg.Client): Promise<void> {
  const waiting = "select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and datname = current_database()";
  while ((await client.query<{ n: number }>(waiting)).rows[0]!.n === 0) await new Promise((resolve) => setTimeout(resolve, 20));
}
