/**
 * `lamer serve` start-up errors are one clear line naming the variable, exit 1 (not a stack trace):
 * LAMER_DATA_DIR is a file, is below a file or cannot be created, the port is already in use.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { tmpDir } from '../helpers/index.js';

function serve(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/serve.ts'], {
      env: { ...process.env, LAMER_ENGINE: 'test', LAMER_HOST: '127.0.0.1', LAMER_PORT: '0', LAMER_LOG_LEVEL: 'silent', LAMER_API_KEYS: '', ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
      // A start-up that blocks its event loop ignores SIGTERM: killed, the exit code is null.
      timeout: 25_000,
      killSignal: 'SIGKILL',
    });
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
  }, 30_000);

  it('LAMER_DATA_DIR below a file -> one line, exit 1', async () => {
    const file = path.join(tmp(), 'f');
    fs.writeFileSync(file, 'x');
    const r = await serve({ LAMER_DATA_DIR: path.join(file, 'data') });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^lamer serve: cannot start: LAMER_DATA_DIR=\S+ cannot be used: a file is in the way \(it must be a directory\) \((ENOTDIR|EEXIST)\)\n$/);
  }, 30_000);

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
    30_000,
  );

  it('the port already in use -> one line naming the port and LAMER_PORT, exit 1', async () => {
    const blocker = net.createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', () => r()));
    const port = (blocker.address() as net.AddressInfo).port;
    try {
      const r = await serve({ LAMER_DATA_DIR: tmp(), LAMER_PORT: String(port) });
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(`lamer serve: cannot start: port ${port} on 127.0.0.1 is already in use (LAMER_PORT, LAMER_HOST)\n`);
    } finally {
      blocker.close();
    }
  }, 30_000);
});

describe('lamer serve with the builtin engine', () => {
  it('logs the tfjs backend choice at the default info level (docs/operations.md "Native tfjs")', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/serve.ts'], {
      env: { ...process.env, LAMER_ENGINE: 'builtin', LAMER_TFJS_BACKEND: 'auto', LAMER_HOST: '127.0.0.1', LAMER_PORT: '0', LAMER_LOG_LEVEL: 'info', LAMER_API_KEYS: '', LAMER_DATA_DIR: tmp() },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
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
