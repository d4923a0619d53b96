/** `lamer train` with an in-process server on a --data-dir that a running server owns: one line, exit 1. */
import { describe, expect, it } from 'vitest';
import { run, trainCommand } from '../../src/cli/train.js';
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

describe('lamer train --no-pack', () => {
  it("sends hyperparameters.pack false with the job; without it the server's default (packed) applies", () => {
    const base = ['--env', 'minesweeper', '--algorithm', 'lamer', '--lr', '0.001', '--quiet'];
    const packed = trainCommand(base);
    const perTurn = trainCommand([...base, '--no-pack']);
    if ('code' in packed || 'code' in perTurn) throw new Error('usage error');
    expect(packed.opts.hyperparameters).toEqual({ lr: 0.001 });
    expect(perTurn.opts.hyperparameters).toEqual({ lr: 0.001, pack: false });
  });

  it('takes no value: --no-pack=yes is one usage line, exit 2', () => {
    const c = quietConsole();
    let r;
    try {
      r = trainCommand(['--env', 'minesweeper', '--algorithm', 'lamer', '--no-pack=yes']);
    } finally {
      c.restore();
    }
    expect(r).toEqual({ code: 2 });
    expect(c.errors()).toHaveLength(1);
    expect(c.errors()[0]).toMatch(/^lamer train: .*--no-pack.*\(lamer train --help for the options\)$/);
  });
});
