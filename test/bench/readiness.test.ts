/**
 * The bench scripts that start a server (bench/lamer-vs-gigpo.sh, bench/http.ts) stop at once when
 * that server exits before it is ready: exit 1, the server's exit status and the last lines of its
 * output, instead of polling /readyz until their timeout. Each is run as a user runs it, with a
 * setting that makes its server exit at start.
 */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { tmpDir } from '../helpers/index.js';
import { root } from '../helpers/cli.js';

/** Run `cmd args` from the repository root in its own process group, killed (the whole group) after `limitMs`. */
function runFor(cmd: string, args: string[], env: Record<string, string>, limitMs: number): Promise<{ code: number | null; stdout: string; stderr: string; ms: number; killed: boolean }> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
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
      resolve({ code, stdout, stderr, ms: performance.now() - t0, killed });
    });
  });
}

/** A loopback port nothing listens on (bound, then closed). */
async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

describe('bench scripts and a server that exits before it is ready', () => {
  it('bench/lamer-vs-gigpo.sh: an eval server without its base model stops the run at once with its status and log tail', async () => {
    const out = path.join(tmpDir('lamer-bench-lvg-'), 'out');
    // the script's first eval server listens on PORT0 + 1: a free port, never another run's server
    const port0 = (await freePort()) - 1;
    const r = await runFor('bash', ['bench/lamer-vs-gigpo.sh', out], { GAMES: 'minesweeper-6x6-3', SEEDS: '', ARMS: '', BASE: '/nonexistent-base', RESULTS: '', PORT0: String(port0) }, 90_000);
    expect(r.killed).toBe(false);
    expect(r.code).toBe(1);
    const log = path.join(out, 'minesweeper-6x6-3', 'server-sft-lamer-mode.log');
    const head = `eval sft-lamer-mode: its server exited (status 1) before it was ready; last lines of ${log}:`;
    expect(r.stdout).toContain(head);
    expect(r.stderr).toContain("cannot load model version base from /nonexistent-base: ENOENT: no such file or directory, open '/nonexistent-base/model.json'");
    const progress = readFileSync(path.join(out, 'progress.log'), 'utf8');
    expect(progress).toContain(head);
    expect(progress.slice(progress.indexOf(head))).toContain("\nlamer serve: cannot start: model version 'base' cannot be loaded");
    expect(existsSync(path.join(out, 'minesweeper-6x6-3', 'eval-sft-lamer-mode.json'))).toBe(false);
  }, 120_000);

  it('bench/http.ts: a server refusing its configuration stops the bench at once with its status and last output; its data directory is removed', async () => {
    const tmp = tmpDir('lamer-bench-http-');
    const r = await runFor(process.execPath, ['--import', 'tsx', 'bench/http.ts'], { LAMER_BODY_LIMIT_BYTES: 'abc', TMPDIR: tmp }, 90_000);
    expect(r.killed).toBe(false);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      'bench:http: the server exited (status 2) before it was ready; its last output:\nlamer serve: invalid configuration: LAMER_BODY_LIMIT_BYTES="abc": expected an integer in [1024, 1073741824]\n',
    );
    expect(readdirSync(tmp).filter((f) => f.startsWith('lamer-bench-'))).toEqual([]);
  }, 120_000);
});
