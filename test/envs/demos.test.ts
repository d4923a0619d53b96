import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateDemos, writeDemos } from '../../src/envs/demos.js';
import type { DemoSession } from '../../src/training/data.js';
import { makeEnv, parseTaskId } from '../../src/envs/index.js';
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
      expect(first.reflection).toContain(`${hit} was a mine`);
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
      expect(s.attempts[0].reflection).toMatch(/^Attempt 1 failed: (I pushed a box to row \d, column \d, (in a corner, where it is stuck|against a wall with no target on its line, so it can never reach a target)|after I pushed a box to row \d, column \d, the boxes could no longer all reach targets)\./);
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
});
