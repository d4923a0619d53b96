/** `lamer demos` (src/cli/demos.ts): one env or a curriculum, written as JSONL, with a summary line. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { run } from '../../src/cli/demos.js';
import { parseDemoJsonl } from '../../src/training/data/data.js';
import { parseTaskId } from '../../src/envs/index.js';
import { tmpDir } from '../helpers/index.js';

afterEach(() => vi.restoreAllMocks());

function capture(): { out: string[]; err: string[] } {
  const out: string[] = [];
  const err: string[] = [];
  vi.spyOn(console, 'log').mockImplementation((...a: unknown[]) => void out.push(a.join(' ')));
  vi.spyOn(console, 'error').mockImplementation((...a: unknown[]) => void err.push(a.join(' ')));
  vi.spyOn(process.stderr, 'write').mockImplementation((s: string | Uint8Array) => (err.push(String(s)), true));
  return { out, err };
}

describe('lamer demos', () => {
  it('--curriculum writes each item\'s share of sessions on distinct training seeds and prints sessions, steps and bytes', async () => {
    const file = join(tmpDir('demos-cli-'), 'c.jsonl');
    const { out } = capture();
    const code = await run(['--curriculum', 'minesweeper:4x4/2,sokoban:5x5/1@2,sokoban:6x6/2=1', '--tasks', '7', '--seed', '5', '--fail-rate', '0.5', '--out', file]);
    expect(code).toBe(0);
    const text = readFileSync(file, 'utf8');
    const sessions = parseDemoJsonl(text);
    expect(sessions.map((s) => parseTaskId(s.taskId).envName)).toEqual(['minesweeper-4x4-2', 'minesweeper-4x4-2', 'sokoban-5x5-1', 'sokoban-5x5-1', 'sokoban-5x5-1', 'sokoban-5x5-1', 'sokoban-6x6-2']);
    expect(sessions.map((s) => parseTaskId(s.taskId).seed)).toEqual([5, 6, 7, 8, 9, 10, 11]);
    const steps = sessions.reduce((a, s) => a + s.attempts.reduce((b, x) => b + x.steps.length - 1, 0), 0);
    expect(out[0]).toMatch(new RegExp(`^wrote 7 sessions \\(\\d+ attempts, ${steps} steps, \\d+ reflections, \\d+ solved, ${Buffer.byteLength(text)} bytes\\) to `));
    expect(out.slice(1).map((l) => l.split(':')[0]!.trim())).toEqual(['minesweeper {"rows"', 'sokoban {"rows"', 'sokoban {"rows"']);
  });

  it('refuses a bad curriculum, --env with --curriculum, and weights without --tasks (exit 2, nothing written)', async () => {
    const file = join(tmpDir('demos-cli-'), 'bad.jsonl');
    const { err } = capture();
    expect(await run(['--curriculum', 'minesweeper:4x4/2,chess', '--tasks', '3', '--out', file])).toBe(2);
    expect(await run(['--curriculum', 'minesweeper', '--env', 'sokoban', '--tasks', '3', '--out', file])).toBe(2);
    expect(await run(['--curriculum', 'minesweeper', '--out', file])).toBe(2);
    expect(err.join('\n')).toMatch(/chess/);
    expect(err.join('\n')).toMatch(/not both/);
    expect(err.join('\n')).toMatch(/total number of tasks/);
    expect(() => readFileSync(file)).toThrow();
  });
});
