/**
 * `lamer serve` start-up errors are one clear line naming the variable, exit 1 (not a stack trace):
 * LAMER_DATA_DIR is a file, is below a file or cannot be created, the port is already in use (found
 * before any database is created or contacted); a
 * LAMER_DATABASE_URL that is not a PostgreSQL URL (exit 2), a database that cannot be reached,
 * refuses the password, does not exist, or holds a schema newer than this build (exit 1), each
 * without the password. The PostgreSQL cases run a real server on loopback (test/helpers/postgres.ts).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { occupiedPort } from '../helpers/cli.js';
import { tmpDir } from '../helpers/index.js';
import { track } from '../helpers/children.js';
import { PG_PASSWORD, postgresForTests } from '../helpers/postgres.js';

function serve(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = track(
      spawn(process.execPath, ['--import', 'tsx', 'src/cli/serve.ts'], {
        env: { ...process.env, LAMER_ENGINE: 'test', LAMER_HOST: '127.0.0.1', LAMER_PORT: '0', LAMER_LOG_LEVEL: 'silent', LAMER_API_KEYS: '', ...env },
        stdio: ['ignore', 'ignore', 'pipe'],
        // A start-up that blocks its event loop ignores SIGTERM: killed, the exit code is null.
        // (A start-up error takes about 5 s of CPU, some 20 s on a loaded 2-core machine.)
        timeout: 50_000,
        killSignal: 'SIGKILL',
      }),
    );
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    child.once('exit', (code) => resolve({ code, stderr }));
  });
}

const tmp = () => tmpDir('lamer-startup-');

describe('lamer serve start-up errors', () => {
  it('LAMER_DATA_DIR pointing at a file -> one line naming LAMER_DATA_DIR, exit 1', async () => {
    const file = path.join(tmp(), 'not-a-dir');
    fs.writeFileSync(file, 'x');
    const r = await serve({ LAMER_DATA_DIR: file });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`lamer serve: cannot start: LAMER_DATA_DIR=${file} cannot be used: a file is in the way (it must be a directory) (EEXIST)\n`);
  }, 60_000);

  it('LAMER_DATA_DIR below a file -> one line, exit 1', async () => {
    const file = path.join(tmp(), 'f');
    fs.writeFileSync(file, 'x');
    const r = await serve({ LAMER_DATA_DIR: path.join(file, 'data') });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^lamer serve: cannot start: LAMER_DATA_DIR=\S+ cannot be used: a file is in the way \(it must be a directory\) \((ENOTDIR|EEXIST)\)\n$/);
  }, 60_000);

  // As root, procfs answers ENOENT to mkdir /proc/x, which a recursive mkdir retried forever.
  it.skipIf(process.platform !== 'linux' || process.getuid?.() !== 0 || !fs.existsSync('/proc/self'))(
    'LAMER_DATA_DIR the file system refuses (/proc/x as root) -> one line, exit 1, at once',
    async () => {
      const r = await serve({ LAMER_DATA_DIR: '/proc/lamer-serve-x' });
      expect(r).toEqual({
        code: 1,
        stderr: 'lamer serve: cannot start: LAMER_DATA_DIR=/proc/lamer-serve-x cannot be used: cannot create directory /proc/lamer-serve-x: ENOENT (ENOENT)\n',
      });
    },
    60_000,
  );

  it('the port already in use -> one line naming the port and LAMER_PORT, exit 1; no database is created', async () => {
    const { server: blocker, port } = await occupiedPort();
    try {
      const dir = path.join(tmp(), 'data');
      const r = await serve({ LAMER_DATA_DIR: dir, LAMER_PORT: String(port) });
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(`lamer serve: cannot start: port ${port} on 127.0.0.1 is already in use (LAMER_PORT, LAMER_HOST)\n`);
      // Only the owner lock was taken (its empty lock file stays); no database, no pid file.
      expect(fs.readdirSync(dir)).toEqual(['lamer.lock']);
    } finally {
      blocker.close();
    }
  }, 60_000);

  it('the port already in use with LAMER_DATABASE_URL -> the port is named before the database is contacted', async () => {
    const held = await Promise.all([occupiedPort(), occupiedPort()]);
    const [busy, db] = held.map((h) => h.port);
    let contacted = false;
    held[1]!.server.on('connection', (c) => {
      contacted = true;
      c.destroy();
    });
    try {
      const dir = path.join(tmp(), 'data');
      const r = await serve({ LAMER_DATA_DIR: dir, LAMER_PORT: String(busy), LAMER_DATABASE_URL: `postgres://lamer:secret@127.0.0.1:${db}/lamer` });
      expect(r).toEqual({ code: 1, stderr: `lamer serve: cannot start: port ${busy} on 127.0.0.1 is already in use (LAMER_PORT, LAMER_HOST)\n` });
      expect(contacted).toBe(false);
      expect(fs.existsSync(dir)).toBe(false);
    } finally {
      for (const h of held) h.server.close();
    }
  }, 60_000);
});

describe('lamer serve with the builtin engine', () => {
  it('logs the tfjs backend choice at the default info level (docs/operations.md "Native tfjs")', async () => {
    const child = track(
      spawn(process.execPath, ['--import', 'tsx', 'src/cli/serve.ts'], {
        env: { ...process.env, LAMER_ENGINE: 'builtin', LAMER_TFJS_BACKEND: 'auto', LAMER_HOST: '127.0.0.1', LAMER_PORT: '0', LAMER_LOG_LEVEL: 'info', LAMER_API_KEYS: '', LAMER_DATA_DIR: tmp() },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    let out = '';
    const exited = new Promise((r) => child.once('exit', r));
    await new Promise<void>((resolve) => {
      child.stdout.on('data', (d) => {
        out += d;
        if (out.includes('lamer-server ready')) resolve();
      });
      child.once('exit', () => resolve());
    });
    child.kill('SIGTERM');
    await exited;
    const lines = out.split('\n').filter((l) => l.includes('tfjs native backend'));
    expect(lines).toHaveLength(1);
    const line = JSON.parse(lines[0]!) as { level: number; msg: string };
    expect(line.level).toBe(30);
    expect(line.msg).toMatch(/^tfjs native backend (loaded|unavailable \(optional @tensorflow\/tfjs-node\[-gpu\] not installed or libtensorflow missing\); trying wasm)$/);
  }, 90_000);
});

const pg = await postgresForTests();

describe('lamer serve start-up errors of LAMER_DATABASE_URL', () => {
  it.each([
    ['not a URL', 'secret@db.example/lamer', 'LAMER_DATABASE_URL is not a URL (expected postgres://user:password@host:port/database)'],
    ['another scheme', 'mysql://lamer:secret@db/x', 'LAMER_DATABASE_URL must start with postgres:// or postgresql://, not mysql:// (expected postgres://user:password@host:port/database)'],
  ])('%s -> one line, exit 2, the password not shown', async (_name, url, message) => {
    const r = await serve({ LAMER_DATA_DIR: tmp(), LAMER_DATABASE_URL: url });
    expect(r).toEqual({ code: 2, stderr: `lamer serve: invalid configuration: ${message}\n` });
    expect(r.stderr).not.toContain('secret');
  }, 60_000);

  it('a pool setting out of range -> one line naming it, exit 2', async () => {
    const r = await serve({ LAMER_DATA_DIR: tmp(), LAMER_DATABASE_URL: 'postgres://lamer@127.0.0.1:1/x', LAMER_DATABASE_POOL_MAX: '0' });
    expect(r).toEqual({ code: 2, stderr: 'lamer serve: invalid configuration: LAMER_DATABASE_POOL_MAX=0: expected an integer in [1, 10000]\n' });
  }, 60_000);

  it('nothing listening at host:port -> one line naming it, exit 1', async () => {
    const { server: blocker, port } = await occupiedPort();
    await new Promise<void>((r) => blocker.close(() => r()));
    const r = await serve({ LAMER_DATA_DIR: tmp(), LAMER_DATABASE_URL: `postgres://lamer:secret@127.0.0.1:${port}/lamer` });
    expect(r).toEqual({ code: 1, stderr: `lamer serve: cannot start: LAMER_DATABASE_URL: database unreachable at 127.0.0.1:${port} (ECONNREFUSED)\n` });
  }, 60_000);

  describe.skipIf(!pg)('against a real PostgreSQL', () => {
    it('a wrong password, a missing database -> one line each, exit 1, no password', async () => {
      const wrong = await serve({ LAMER_DATA_DIR: tmp(), LAMER_DATABASE_URL: `postgres://lamer:not-the-password@127.0.0.1:${pg!.port}/postgres` });
      expect(wrong.code).toBe(1);
      expect(wrong.stderr).toMatch(new RegExp(`^lamer serve: cannot start: LAMER_DATABASE_URL: database authentication failed for user "lamer" at 127\\.0\\.0\\.1:${pg!.port}: [^\\n]+\\n$`));
      expect(wrong.stderr).not.toContain('not-the-password');
      const missing = await serve({ LAMER_DATA_DIR: tmp(), LAMER_DATABASE_URL: pg!.url('no_such_database') });
      expect(missing).toEqual({ code: 1, stderr: `lamer serve: cannot start: LAMER_DATABASE_URL: database "no_such_database" does not exist at 127.0.0.1:${pg!.port}\n` });
      expect(missing.stderr).not.toContain(PG_PASSWORD);
    }, 90_000);

    it('a schema newer than this build -> one line, exit 1, and nothing changed', async () => {
      const url = await pg!.freshDatabase();
      const db = new URL(url).pathname.slice(1);
      const first = track(
        spawn(process.execPath, ['--import', 'tsx', 'src/cli/serve.ts'], {
          env: { ...process.env, LAMER_ENGINE: 'test', LAMER_HOST: '127.0.0.1', LAMER_PORT: '0', LAMER_LOG_LEVEL: 'info', LAMER_API_KEYS: '', LAMER_DATA_DIR: tmp(), LAMER_DATABASE_URL: url },
          stdio: ['ignore', 'pipe', 'ignore'],
        }),
      );
      // a first server migrates the database, then stops (listening for its exit from the start:
      // one that exited before it was ready would otherwise be waited for until the test times out)
      const exited = new Promise((r) => first.once('exit', r));
      let out = '';
      const ready = await new Promise<boolean>((resolve) => {
        first.stdout.on('data', (d) => {
          out += d;
          if (out.includes('lamer-server ready')) resolve(true);
        });
        void exited.then(() => resolve(false));
      });
      expect(ready, out).toBe(true);
      first.kill('SIGTERM');
      await exited;
      // a newer build's migration
      await pg!.query('INSERT INTO drizzle.__drizzle_migrations (hash, created_at) VALUES ($1, $2)', ['newer', String(Date.UTC(2099, 0, 1))], db);
      const r = await serve({ LAMER_DATA_DIR: tmp(), LAMER_DATABASE_URL: url });
      expect(r).toEqual({
        code: 1,
        stderr:
          `lamer serve: cannot start: LAMER_DATABASE_URL: database at 127.0.0.1:${pg!.port} has 1 migration(s) this build does not know (newest from 2099-01-01T00:00:00.000Z): ` +
          'its schema is newer than this build; refusing to start (run the newer build, or restore the database from before it)\n',
      });
      expect((await pg!.query('SELECT count(*)::int AS n FROM drizzle.__drizzle_migrations', [], db))[0].n).toBeGreaterThan(1);
    }, 120_000);
  });
});
