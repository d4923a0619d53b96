/**
 * `lamer serve` start-up order and options, with real processes: one data directory has one owner
 * (a second server is refused with one line naming the directory and the owner pid, and touches
 * nothing; a kill -9'd owner does not block the next start; `lamer export` still reads); a busy
 * port or an owned directory is reported before the model is loaded; --port / --host / --data-dir
 * override the environment; unknown options are one line, exit 2; a model that does not load is
 * exit 1, with nothing left running.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { run } from '../../src/cli/serve.js';
import { freePort, occupiedPort, root, serveOnce, startDetached, tmpDataDir, type Started } from '../helpers/cli.js';
import { quietConsole } from '../helpers/index.js';
import { track } from '../helpers/children.js';

/**
 * `lamer serve` in its own process group; killed when the test ends (test/helpers/children.ts). A
 * start may take up to 60 s to be ready (test/helpers/cli.ts): the tests that start one have 120 s or more.
 */
const start = (env: Record<string, string> = {}, args: string[] = []): Promise<Started> => startDetached('node', env, args);

describe('one data directory, one server', () => {
  it('a second server on the same LAMER_DATA_DIR is refused before it loads its model (one line: directory and owner pid, exit 1) and touches nothing; lamer export still reads', async () => {
    const a = await start();
    const created = await fetch(`${a.url}/v1/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ taskId: 't', instructions: 'x', maxAttempts: 1, maxSteps: 2 }),
    });
    expect(created.status).toBe(201);
    const id = ((await created.json()) as { id: string }).id;
    const step = await fetch(`${a.url}/v1/sessions/${id}/steps`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ attempt: 0, step: 0, observation: 'o', availableActions: ['a', 'b'] }),
    });
    expect(step.status).toBe(200);
    const files = () => ['lamer.db', 'lamer.db-wal'].map((f) => fs.readFileSync(path.join(a.dataDir, f)).toString('base64')).join();
    const before = files();
    const b = await serveOnce({ LAMER_DATA_DIR: a.dataDir, LAMER_ENGINE: 'builtin', LAMER_TFJS_BACKEND: 'wasm' });
    expect(b.code).toBe(1);
    expect(b.stderr).toBe(
      `lamer serve: cannot start: LAMER_DATA_DIR=${a.dataDir} is in use by another lamer server (pid ${a.child.pid}); stop it first, or use another directory\n`,
    );
    expect(b.stdout).toBe(''); // no engine log line: the model was not loaded
    // The refused server did not open the database (no migration, no job recovery).
    expect(files() === before).toBe(true);
    expect((await fetch(`${a.url}/readyz`)).status).toBe(200);
    // Reading is fine: lamer export takes no lock.
    const out = await new Promise<{ code: number | null; stdout: string }>((resolve) => {
      const args = ['--import', 'tsx', 'src/cli/index.ts', 'export', '--data-dir', a.dataDir];
      const child = track(spawn(process.execPath, args, { cwd: root, stdio: ['ignore', 'pipe', 'ignore'] }));
      let stdout = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.once('exit', (code) => resolve({ code, stdout }));
    });
    expect(out.code).toBe(0);
    expect(out.stdout.trim().split('\n').map((l) => (JSON.parse(l) as { sessionId: string }).sessionId)).toEqual([id]);
  }, 150_000);

  it('after kill -9 of the owner the next server starts at once (the OS released the lock)', async () => {
    const a = await start();
    process.kill(-a.child.pid!, 'SIGKILL');
    await a.exited;
    expect(fs.readFileSync(path.join(a.dataDir, 'lamer.pid'), 'utf8')).toBe(`${a.child.pid}\n`); // stale
    const c = await start({ LAMER_DATA_DIR: a.dataDir });
    expect((await fetch(`${c.url}/readyz`)).status).toBe(200);
    expect(fs.readFileSync(path.join(a.dataDir, 'lamer.pid'), 'utf8')).toBe(`${c.child.pid}\n`);
  }, 150_000);
});

describe('start-up checks come before the model is loaded', () => {
  it('a busy port is reported without loading the builtin model', async () => {
    const { server: blocker, port } = await occupiedPort();
    try {
      const r = await serveOnce({ LAMER_ENGINE: 'builtin', LAMER_TFJS_BACKEND: 'wasm', LAMER_DATA_DIR: tmpDataDir(), LAMER_PORT: String(port) });
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(`lamer serve: cannot start: port ${port} on 127.0.0.1 is already in use (LAMER_PORT, LAMER_HOST)\n`);
      // The engine logs its backend choice when it loads: it never did.
      expect(r.stdout).not.toContain('tfjs');
      expect(r.stdout).not.toContain('"component":"engine"');
    } finally {
      blocker.close();
    }
  }, 60_000);

  it('a base model that does not load ends the process with exit 1 and its reason (nothing started is left running)', async () => {
    const missing = path.join(tmpDataDir(), 'no-such-model');
    const r = await serveOnce({ LAMER_ENGINE: 'builtin', LAMER_TFJS_BACKEND: 'wasm', LAMER_DATA_DIR: tmpDataDir(), LAMER_BASE_MODEL_DIR: missing });
    expect(r.code).toBe(1);
    // The client-facing message has no folder; the operator starting the server sees it as the cause.
    expect(r.stderr).toMatch(/^lamer serve: cannot start: model version 'base' cannot be loaded \(its checkpoint is missing or damaged\); an operator must check the server log\ncause: cannot load model version base from .*no-such-model: .*ENOENT.*\n\(LAMER_ENGINE=test serves without a model\)\n$/s);
  }, 90_000);
});

describe('lamer serve options', () => {
  it('--port and --host override LAMER_PORT and LAMER_HOST; --data-dir overrides LAMER_DATA_DIR', async () => {
    const port = await freePort();
    const dir = tmpDataDir();
    const envDir = tmpDataDir();
    const s = await start(
      { LAMER_PORT: '1', LAMER_HOST: '::1', LAMER_API_KEYS: 'k-0123456789:team:admin', LAMER_DATA_DIR: envDir },
      ['--port', String(port), '--host', '0.0.0.0', '--data-dir', dir],
    );
    expect(s.url).toBe(`http://0.0.0.0:${port}`);
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
    expect(fs.existsSync(path.join(dir, 'lamer.db'))).toBe(true);
    expect(fs.existsSync(path.join(envDir, 'lamer.db'))).toBe(false);
  }, 120_000);

  it.each([
    [['--bogus'], /^lamer serve: Unknown option '--bogus'.*\(lamer serve --help for the options\)$/],
    [['--port', 'x'], /^lamer serve: --port must be an integer in \[0, 65535\] written in digits, got 'x'$/],
    [['--port', '70000'], /^lamer serve: --port must be an integer in \[0, 65535\] written in digits, got '70000'$/],
    [['--host', ''], /^lamer serve: --host must not be empty$/],
    [['extra'], /^lamer serve: Unexpected argument 'extra'.*$/],
  ])('%j -> one line, exit 2, nothing started', async (args, message) => {
    const c = quietConsole();
    try {
      expect(await run(args)).toBe(2);
    } finally {
      c.restore();
    }
    const errors = c.errors();
    expect(errors).toHaveLength(1);
    expect(errors[0]).not.toContain('\n');
    expect(errors[0]).toMatch(message);
  });
});
