/**
 * experiments/lamer-vs-gigpo.sh stops at once when one of its eval servers exits before it is
 * ready: exit 1, the server's exit status and the last lines of its log, instead of polling
 * /readyz until its timeout. Run as a user runs it, with a base model that does not exist, so
 * that the first eval server exits at start.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { tmpDir } from '../helpers/index.js';
import { freePort, runFor } from '../helpers/cli.js';

describe('experiments/lamer-vs-gigpo.sh and a server that exits before it is ready', () => {
  it('an eval server without its base model stops the run at once with its status and log tail', async () => {
    const out = path.join(tmpDir('lamer-bench-lvg-'), 'out');
    // the script's first eval server listens on PORT0 + 1: a free port, never another run's server
    const port0 = (await freePort()) - 1;
    const env = { GAMES: 'minesweeper-6x6-3', SEEDS: '', ARMS: '', BASE: '/nonexistent-base', RESULTS: '', PORT0: String(port0) };
    const r = await runFor('bash', ['experiments/lamer-vs-gigpo.sh', out], env, 90_000);
    expect(r.killed).toBe(false);
    expect(r.code).toBe(1);
    const log = path.join(out, 'minesweeper-6x6-3', 'server-sft-lamer-mode.log');
    const head = `eval sft-lamer-mode: its server exited (status 1) before it was ready; last lines of ${log}:`;
    expect(r.stdout).toContain(head);
    const noModel =
      "cannot load model version base from /nonexistent-base: ENOENT: no such file or directory, open '/nonexistent-base/model.json'";
    expect(r.stderr).toContain(noModel);
    const progress = readFileSync(path.join(out, 'progress.log'), 'utf8');
    expect(progress).toContain(head);
    expect(progress.slice(progress.indexOf(head))).toContain("\nlamer serve: cannot start: model version 'base' cannot be loaded");
    expect(existsSync(path.join(out, 'minesweeper-6x6-3', 'eval-sft-lamer-mode.json'))).toBe(false);
  }, 120_000);
});
