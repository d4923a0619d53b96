import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { curriculumCounts, demoStats, generateCurriculum, generateDemos, parseCurriculum, writeDemos } from '../../src/envs/demos.js';
import type { DemoSession } from '../../src/training/data/data.js';
import { EVAL_SEED_START, evalSeed, makeEnv, parseTaskId, trainSeed } from '../../src/envs/index.js';
import { MineSweeperEnv } from '../../src/envs/minesweeper.js';
import { tmpDir } from '../helpers/index.js';

/** Replays every attempt of a session in a fresh env and checks the recorded steps. */
function replay(s: DemoSession): void {
  const { envName, seed } = parseTaskId(s.taskId);
  const env = makeEnv(envName);
  expect(s.instructions).toBe(env.instructions);
  for (const [n, a] of s.attempts.entries()) {
    expect(a.steps[0].observation).toBe(env.reset(seed).observation);
    expect(a.steps[0].reward).toBe(0);
    for (let i = 0; i + 1 < a.steps.length; i++) {
      expect(a.steps[i].action).not.toBeNull();
      expect(a.steps[i].done).toBe(false);
      const r = env.step(a.steps[i].action!);
      expect(a.steps[i + 1]).toEqual({ observation: r.observation, action: a.steps[i + 1].action, reward: r.reward, done: r.done, success: r.success });
    }
    const last = a.steps[a.steps.length - 1];
    expect(last.action).toBeNull();
    expect(a.steps.length).toBeLessThanOrEqual(8);
    if (!last.done) expect(a.steps.length).toBe(8); // ran out of 7 turns
    const isLast = n === s.attempts.length - 1;
    if (!isLast) {
      expect(last.success).toBe(false);
      expect(typeof a.reflection).toBe('string');
    } else {
      expect(a.reflection).toBeNull();
    }
  }
}

describe('demonstration sessions', () => {
  it('MineSweeper: deliberate failures hit a real mine and the reflection names it', () => {
    const sessions = generateDemos({ env: 'minesweeper', tasks: 12, seed: 0, failRate: 1 });
    expect(sessions).toHaveLength(12);
    for (const s of sessions) {
      expect(s).toMatchObject({ env: 'minesweeper', memory: 'reflection_only' });
      expect(s.taskId).toMatch(/^minesweeper-6x6-3:seed=\d+$/);
      replay(s);
      const first = s.attempts[0];
      const last = first.steps[first.steps.length - 1];
      expect(last).toMatchObject({ done: true, success: false, reward: -0.1 });
      const hit = first.steps[first.steps.length - 2].action!;
      // the first sentence names the clicked mine; the attempt is labelled by the prompt, not here
      const opening = /^(?:I clicked )?(\(\d+, \d+\))(?: and it)? (?:was a mine|hid a mine)[.;]/.exec(first.reflection!);
      expect(opening, first.reflection!).not.toBeNull();
      expect(opening![1]).toBe(hit);
      const env = new MineSweeperEnv();
      env.reset(parseTaskId(s.taskId).seed);
      expect(env.mineCells().map((c) => `(${c.row + 1}, ${c.col + 1})`)).toContain(hit);
    }
    // the attempt after the failure never clicks the mine again
    for (const s of sessions.filter((x) => x.attempts.length > 1)) {
      const hit = s.attempts[0].steps[s.attempts[0].steps.length - 2].action;
      expect(s.attempts[1].steps.map((x) => x.action)).not.toContain(hit);
    }
  });

  it('Sokoban: deliberate failures get a box stuck and the reflection says where', () => {
    const sessions = generateDemos({ env: 'sokoban', tasks: 8, seed: 0, failRate: 1 });
    for (const s of sessions) {
      replay(s);
      expect(s.attempts).toHaveLength(2);
      expect(s.attempts[0].steps.at(-1)).toMatchObject({ done: true, success: false });
      expect(s.attempts[0].reflection).not.toMatch(/attempt \d/i);
      expect(s.attempts[0].reflection).toMatch(/^(?=[^.]*row \d, column \d)(?=[^.]*(corner|no target on its line|could no longer all reach targets))/);
      expect(s.attempts[1].steps.at(-1)).toMatchObject({ done: true, success: true });
    }
  });

  it('fail rate 0 gives plain solver play; output is deterministic and written as JSONL', () => {
    const a = generateDemos({ env: 'sokoban', tasks: 5, seed: 7, failRate: 0 });
    expect(a.every((s) => s.attempts.length === 1 && s.attempts[0].steps.at(-1)!.success)).toBe(true);
    a.forEach(replay);
    const b = generateDemos({ env: 'sokoban', tasks: 5, seed: 7, failRate: 0 });
    expect(b).toEqual(a);
    const dir = tmpDir('demos-');
    const file = join(dir, 'd.jsonl');
    writeDemos(file, a);
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
    expect(lines).toHaveLength(5);
    expect(JSON.parse(lines[0])).toEqual(a[0]);
    expect(() => generateDemos({ env: 'sokoban', tasks: 1, seed: 0, failRate: 2 })).toThrow(/failRate/);
  });

  it("seedRange 'eval' plays the held-out eval tasks (evalSeed(seed, i)); the default stays on training seeds", () => {
    const held = generateDemos({ env: 'minesweeper', tasks: 4, seed: 5, failRate: 1, seedRange: 'eval' });
    expect(held.map((s) => s.taskId)).toEqual([0, 1, 2, 3].map((i) => `minesweeper-6x6-3:seed=${evalSeed(5, i)}`));
    expect(held.map((s) => parseTaskId(s.taskId).seed)).toEqual([1_000_000_005, 1_000_000_006, 1_000_000_007, 1_000_000_008]);
    held.forEach(replay);
    // the first board is cleared before its sabotage step comes; the others fail first and reflect
    expect(held.map((s) => s.attempts.length)).toEqual([1, 2, 2, 2]);
    expect(held.slice(1).every((s) => /was a mine|hid a mine/.test(s.attempts[0].reflection!))).toBe(true);
    const plain = generateDemos({ env: 'sokoban', tasks: 3, seed: 5, failRate: 0.5 });
    expect(plain.map((s) => s.taskId)).toEqual([0, 1, 2].map((i) => `sokoban-6x6-2:seed=${trainSeed(5, i)}`));
    expect(generateDemos({ env: 'sokoban', tasks: 3, seed: 5, failRate: 0.5, seedRange: 'train' })).toEqual(plain);
    const cur = generateCurriculum(parseCurriculum('minesweeper=2,sokoban=2'), { seed: 0, failRate: 1, seedRange: 'eval' });
    expect(cur.sessions.map((s) => s.taskId)).toEqual([
      `minesweeper-6x6-3:seed=${EVAL_SEED_START}`, `minesweeper-6x6-3:seed=${EVAL_SEED_START + 1}`,
      `sokoban-6x6-2:seed=${EVAL_SEED_START + 2}`, `sokoban-6x6-2:seed=${EVAL_SEED_START + 3}`,
    ]);
    expect(() => generateDemos({ env: 'sokoban', tasks: 1, seed: 0, seedRange: 'test' as 'eval' })).toThrow("seedRange must be 'train' or 'eval', got \"test\"");
  });
});

describe('curriculum', () => {
  it('parses the compact list and the JSON list; bad items are refused with their name', () => {
    expect(parseCurriculum('minesweeper:4x4/2, sokoban:6x6/2=5,minesweeper@2.5,sokoban')).toEqual([
      { env: 'minesweeper', params: { rows: 4, cols: 4, mines: 2 }, count: null, weight: 1 },
      { env: 'sokoban', params: { rows: 6, cols: 6, boxes: 2 }, count: 5, weight: 1 },
      { env: 'minesweeper', params: {}, count: null, weight: 2.5 },
      { env: 'sokoban', params: {}, count: null, weight: 1 },
    ]);
    expect(parseCurriculum('[{"env":"minesweeper-5x5-2","weight":3},{"env":"sokoban","params":{"rows":5,"cols":5,"boxes":1},"count":4}]')).toEqual([
      { env: 'minesweeper', params: { rows: 5, cols: 5, mines: 2 }, count: null, weight: 3 },
      { env: 'sokoban', params: { rows: 5, cols: 5, boxes: 1, minMoves: 5, maxMoves: 21 }, count: 4, weight: 1 },
    ]);
    expect(() => parseCurriculum('chess:8x8/2')).toThrow(/chess/);
    expect(() => parseCurriculum('minesweeper:2x2/9')).toThrow(/mines/);
    expect(() => parseCurriculum('minesweeper@0')).toThrow(/weight/);
    expect(() => parseCurriculum('')).toThrow(/no items/);
    expect(() => parseCurriculum('chess:4x4/2')).toThrow("unknown env 'chess' (minesweeper or sokoban)");
    expect(() => parseCurriculum('sokoban:6x6/2=0')).toThrow(/count must be a positive integer/);
    expect(() => parseCurriculum('minesweeper:4x4/2,,sokoban')).toThrow('curriculum item 1: empty');
    expect(() => parseCurriculum('minesweeper:4x4/2,')).toThrow('curriculum item 1: empty');
  });

  it('counts: exact counts first, the rest of the tasks by weight (largest remainder)', () => {
    const items = parseCurriculum('minesweeper:4x4/2,minesweeper:6x6/3@2,sokoban:6x6/2=3');
    expect(curriculumCounts(items, 10)).toEqual([2, 5, 3]);
    expect(curriculumCounts(items, 11)).toEqual([3, 5, 3]);
    expect(curriculumCounts(parseCurriculum('minesweeper=2,sokoban=4'))).toEqual([2, 4]);
    expect(() => curriculumCounts(items)).toThrow(/total/);
    expect(() => curriculumCounts(items, 2)).toThrow(/exceed/);
  });

  it('every session is a valid replay on its own training seed; wording varies; stats count steps and bytes', () => {
    const items = parseCurriculum('minesweeper:4x4/2,minesweeper:5x5/2,minesweeper:6x6/3,sokoban:5x5/1,sokoban:6x6/1,sokoban:6x6/2');
    const { sessions, counts } = generateCurriculum(items, { tasks: 36, seed: 100, failRate: 1 });
    expect(counts).toEqual([6, 6, 6, 6, 6, 6]);
    expect(sessions.map((s) => parseTaskId(s.taskId).envName)).toEqual(
      ['minesweeper-4x4-2', 'minesweeper-5x5-2', 'minesweeper-6x6-3', 'sokoban-5x5-1', 'sokoban-6x6-1', 'sokoban-6x6-2'].flatMap((n) => Array(6).fill(n)),
    );
    const seeds = sessions.map((s) => parseTaskId(s.taskId).seed);
    expect(new Set(seeds).size).toBe(36);
    expect(seeds.every((x) => x >= 100 && x < EVAL_SEED_START)).toBe(true);
    sessions.forEach(replay);
    const reflections = sessions.map((s) => s.attempts[0].reflection).filter((r): r is string => r !== null);
    expect(reflections.length).toBeGreaterThanOrEqual(30);
    const openings = new Set(reflections.map((r) => r.split('. ')[0]!.replace(/\d+/g, 'N')));
    expect(openings.size).toBeGreaterThanOrEqual(4);
    const st = demoStats(sessions);
    expect(st.sessions).toBe(36);
    expect(st.steps).toBe(sessions.reduce((a, s) => a + s.attempts.reduce((b, x) => b + x.steps.length - 1, 0), 0));
    expect(st.bytes).toBe(sessions.reduce((a, s) => a + Buffer.byteLength(JSON.stringify(s)) + 1, 0));
  });
});
