/** `lamer train` with an in-process server on a --data-dir that a running server owns: one line, exit 1. */
import { describe, expect, it } from 'vitest';
import { run } from '../../src/cli/train.js';
import { quietConsole, startTestServer, tmpDir } from '../helpers/index.js';

describe('lamer train --data-dir', () => {
  it('a directory owned by a running server is refused with one line naming it and the owner pid, exit 1', async () => {
    const s = await startTestServer();
    const out = tmpDir('lamer-train-out-');
    const c = quietConsole();
    try {
      expect(await run(['--env', 'minesweeper', '--algorithm', 'lamer', '--data-dir', s.dataDir, '--out', out, '--quiet'])).toBe(1);
    } finally {
      c.restore();
      await s.close();
    }
    expect(c.errors()).toEqual([
      `lamer train: cannot start the in-process server: --data-dir ${s.dataDir} is in use by another lamer server (pid ${process.pid}); stop it first, or use another directory`,
    ]);
  }, 60_000);
});

describe('lamer train --algorithm', () => {
  it('an algorithm outside lamer, gigpo, grpo, rloo is one usage line naming them, exit 2', async () => {
    const c = quietConsole();
    try {
      expect(await run(['--env', 'minesweeper', '--algorithm', 'sft', '--quiet'])).toBe(2);
    } finally {
      c.restore();
    }
    expect(c.errors()).toEqual(["lamer train: --algorithm must be lamer, gigpo, grpo or rloo, got 'sft'"]);
  });
});
