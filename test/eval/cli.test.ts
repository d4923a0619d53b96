import { describe, expect, it, vi } from 'vitest';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run as evalRun } from '../../src/cli/eval.js';
import { run as demosRun } from '../../src/cli/demos.js';

function quietConsole() {
  const err = vi.spyOn(console, 'error').mockImplementation(() => {});
  const log = vi.spyOn(console, 'log').mockImplementation(() => {});
  return { err, log, restore: () => (err.mockRestore(), log.mockRestore()) };
}

describe('lamer eval / lamer demos command lines', () => {
  it('bad values are exit code 2 with a message naming the option', async () => {
    const c = quietConsole();
    try {
      expect(await evalRun(['--env', 'chess'])).toBe(2);
      expect(c.err.mock.calls.at(-1)![0]).toMatch(/--env must be one of minesweeper, sokoban/);
      expect(await evalRun(['--env', 'sokoban', '--tasks', 'ten'])).toBe(2);
      expect(c.err.mock.calls.at(-1)![0]).toMatch(/--tasks must be an integer >= 1/);
      expect(await evalRun(['--env', 'sokoban', '--policy', 'oracle'])).toBe(2);
      expect(await evalRun(['--env', 'sokoban', '--top-p', '2'])).toBe(2);
      expect(c.err.mock.calls.at(-1)![0]).toMatch(/--top-p must be a number in/);
      expect(await evalRun(['--env', 'sokoban', '--server', 'localhost:1'])).toBe(2);
      expect(await evalRun(['--bogus'])).toBe(2);
      expect(await demosRun(['--env', 'sokoban', '--tasks', '2'])).toBe(2);
      expect(c.err.mock.calls.at(-1)![0]).toMatch(/--out is required/);
    } finally {
      c.restore();
    }
  });

  it('a solver run prints pass@k and writes the JSON report', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'eval-cli-'));
    const out = join(dir, 'r.json');
    const c = quietConsole();
    try {
      expect(await evalRun(['--env', 'sokoban', '--policy', 'solver', '--tasks', '3', '--attempts', '2', '--out', out, '--quiet'])).toBe(0);
      expect(c.log.mock.calls.map((x) => String(x[0])).join('\n')).toContain('pass@1 100.0%  pass@2 100.0%');
    } finally {
      c.restore();
    }
    const report = JSON.parse(readFileSync(out, 'utf8'));
    expect(report).toMatchObject({ env: 'sokoban-6x6-2', policy: 'solver', tasks: 3, attempts: 2, metrics: { passAtK: { '1': 1, '2': 1 }, errors: 0 } });
    expect(report.sessions).toHaveLength(3);
  });

  it('lamer demos writes JSONL sessions', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'demos-cli-'));
    const out = join(dir, 'd.jsonl');
    const c = quietConsole();
    try {
      expect(await demosRun(['--env', 'minesweeper', '--tasks', '4', '--seed', '10', '--out', out])).toBe(0);
    } finally {
      c.restore();
    }
    const lines = readFileSync(out, 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l));
    expect(lines.map((s) => s.taskId)).toEqual([10, 11, 12, 13].map((i) => `minesweeper-6x6-3:seed=${i}`));
  });
});
