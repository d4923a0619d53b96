/** `lamer train` with an in-process server on a --data-dir that a running server owns: one line, exit 1. */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { run } from '../../src/cli/train.js';
import { startTestServer } from '../server/helpers.js';

describe('lamer train --data-dir', () => {
  it('a directory owned by a running server is refused with one line naming it and the owner pid, exit 1', async () => {
    const s = await startTestServer();
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'lamer-train-out-'));
    const errors: string[] = [];
    const spy = vi.spyOn(console, 'error').mockImplementation((m: unknown) => void errors.push(String(m)));
    try {
      expect(await run(['--env', 'minesweeper', '--algorithm', 'lamer', '--data-dir', s.dataDir, '--out', out, '--quiet'])).toBe(1);
    } finally {
      spy.mockRestore();
      await s.close();
    }
    expect(errors).toEqual([
      `lamer train: cannot start the in-process server: --data-dir ${s.dataDir} is in use by another lamer server (pid ${process.pid}); stop it first, or use another directory`,
    ]);
  }, 60_000);
});
