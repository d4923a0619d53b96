/**
 * Helpers of the CLI and script tests: `lamer serve` as a real child process in its own process
 * group, a command run to its end or to a time limit, and a free loopback port. Every process
 * started here is tracked (./children.ts): killed when its test ends, even by a timeout.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { tmpDir } from './index.js';
import { track } from './children.js';

export const root = path.resolve(import.meta.dirname, '..', '..');

export type How = 'npm' | 'bin' | 'node';

const COMMANDS: Record<How, [string, string[]]> = {
  npm: ['npm', ['start']],
  bin: [process.execPath, ['bin/lamer.js', 'serve']],
  node: [process.execPath, ['--import', 'tsx', 'src/cli/index.ts', 'serve']],
};

export interface Started {
  child: ChildProcess;
  url: string;
  dataDir: string;
  out: () => string;
  exited: Promise<number | null>;
}

/**
 * Start the server `how` in its own process group (detached) on a fresh data directory; rejects
 * when it exits first or has not logged that it is ready within `readyMs` (default 60 s: a start
 * takes about 6 s of CPU, some 20 s on a loaded 2-core machine).
 */
export function startDetached(how: How, env: Record<string, string> = {}, args: string[] = [], readyMs = 60_000): Promise<Started> {
  const dataDir = env.LAMER_DATA_DIR ?? tmpDir('lamer-signal-');
  const [cmd, base] = COMMANDS[how];
  const child = track(
    spawn(cmd, [...base, ...args], {
      cwd: root,
      detached: true,
      env: { ...process.env, LAMER_ENGINE: 'test', LAMER_PORT: '0', LAMER_HOST: '127.0.0.1', LAMER_DATA_DIR: dataDir, LAMER_LOG_LEVEL: 'info', LAMER_API_KEYS: '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
    { group: true },
  );
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code, sig) => r(code ?? (sig ? -1 : null))));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      // not left running when the test gives up on it
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* already gone */
      }
      reject(new Error(`server did not start within ${readyMs} ms:\n${out}`));
    }, readyMs);
    const check = () => {
      const m = /"url":"(http:\/\/[^"]+)".*"msg":"lamer-server ready"/.exec(out);
      if (m) {
        clearTimeout(timer);
        child.stdout!.off('data', check);
        resolve({ child, url: m[1]!, dataDir, out: () => out, exited });
      }
    };
    child.stdout!.on('data', check);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`server exited early (${code}):\n${out}`));
    });
  });
}


/** Run `lamer serve` (node --import tsx src/cli/index.ts serve) to its end: exit code and output. */
export function serveOnce(env: Record<string, string>, args: string[] = []): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = track(
      spawn(process.execPath, ['--import', 'tsx', 'src/cli/index.ts', 'serve', ...args], {
        cwd: root,
        env: { ...process.env, LAMER_ENGINE: 'test', LAMER_HOST: '127.0.0.1', LAMER_PORT: '0', LAMER_LOG_LEVEL: 'info', LAMER_API_KEYS: '', ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/** A fresh data directory, removed after the test file. */
export const tmpDataDir = (): string => tmpDir('lamer-cli-');

/** What `runFor` saw: exit code, output, and whether the limit killed it. */
export interface RunForResult {
  code: number | null;
  stdout: string;
  stderr: string;
  killed: boolean;
}

/** Run `cmd args` from the repository root in its own process group, killed (the whole group) after `limitMs`. */
export function runFor(cmd: string, args: string[], env: Record<string, string>, limitMs: number): Promise<RunForResult> {
  return new Promise((resolve) => {
    const child = track(
      spawn(cmd, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true }),
      { group: true },
    );
    let stdout = '';
    let stderr = '';
    let killed = false;
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      killed = true;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }, limitMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, killed });
    });
  });
}

/** A loopback port nothing listens on (bound, then closed). */
export async function freePort(): Promise<number> {
  const { server, port } = await occupiedPort();
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

/** A free loopback port, held by a listening TCP server (tests of a port in use): close `server` when done. */
export async function occupiedPort(): Promise<{ server: net.Server; port: number }> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { server, port: (server.address() as net.AddressInfo).port };
}
