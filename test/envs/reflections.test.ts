import { describe, expect, it } from 'vitest';
import { deliberateFailures, generateDemos, sokobanReflection } from '../../src/envs/demos.js';
import { parseTaskId } from '../../src/envs/index.js';
import { MineSweeperEnv, parseMineSweeperObservation } from '../../src/envs/minesweeper.js';
import { isCornered, parseSokoban, renderSokoban, SokobanEnv, type SokobanState } from '../../src/envs/sokoban.js';

/** Play `moves` (one per turn) from a hand-made board; returns the reflection of the attempt. */
function sokobanCase(rows: string[], moves: string[]): { text: string; env: SokobanEnv } {
  const env = new SokobanEnv();
  const start = parseSokoban(rows);
  env.setState(start);
  const steps = [{ observation: renderSokoban(start), action: null as string | null, reward: 0, done: false, success: false, invalidAction: false }];
  for (const m of moves) {
    steps[steps.length - 1].action = m;
    const r = env.step(m);
    steps.push({ observation: r.observation, action: null, reward: r.reward, done: r.done, success: r.success, invalidAction: r.invalidAction });
    if (r.done) break;
  }
  const played = { steps, return: 0, success: false, endReason: 'done' as const, actions: moves.length, invalidActions: 0 };
  return { text: sokobanReflection(env, played), env };
}

/** Independent check of "against a wall with no target on its line" for the box at (r, c). */
function wallNoTarget(s: SokobanState, r: number, c: number): boolean {
  const wall = (rr: number, cc: number) => rr < 0 || cc < 0 || rr >= s.rows || cc >= s.cols || s.wall[rr * s.cols + cc];
  const rowTargets = s.target.filter((t, i) => t && Math.floor(i / s.cols) === r).length;
  const colTargets = s.target.filter((t, i) => t && i % s.cols === c).length;
  return ((wall(r - 1, c) || wall(r + 1, c)) && rowTargets === 0) || ((wall(r, c - 1) || wall(r, c + 1)) && colTargets === 0);
}

/** Check every claim of a Sokoban failure reflection against the final board. */
function checkSokobanClaim(text: string, end: SokobanState): void {
  const first = /^([^.]*)\./.exec(text);
  expect(first, text).not.toBeNull();
  const m = /row (\d+), column (\d+)/.exec(first![1]);
  const cause = /corner|no target on its line|could no longer all reach targets/.exec(first![1]);
  expect(m, text).not.toBeNull();
  expect(cause, text).not.toBeNull();
  const r = Number(m![1]);
  const c = Number(m![2]);
  const b = r * end.cols + c;
  expect(end.boxes).toContain(b);
  if (cause![0] === 'corner') expect(isCornered(end, b)).toBe(true);
  else if (cause![0] === 'no target on its line') expect(wallNoTarget(end, r, c)).toBe(true);
  else {
    expect(isCornered(end, b)).toBe(false);
    expect(wallNoTarget(end, r, c)).toBe(false);
  }
}

describe('reflections state only facts', () => {
  it('MineSweeper: suggested cells are hidden at the start of every attempt and are not mines', () => {
    let suggestions = 0;
    for (const [rows, cols, mines, seed] of [[6, 6, 3, 0], [4, 4, 2, 500], [5, 5, 4, 900]] as const) {
      const sessions = generateDemos({ env: 'minesweeper', params: { rows, cols, mines }, tasks: 30, seed, failRate: 1 });
      for (const s of sessions) {
        const env = new MineSweeperEnv({ rows, cols, mines });
        const initial = parseMineSweeperObservation(env.reset(parseTaskId(s.taskId).seed).observation).flat();
        const mineSet = new Set(env.mineCells().map((c) => `(${c.row + 1}, ${c.col + 1})`));
        for (const a of s.attempts) {
          if (!a.reflection) continue;
          // the acting prompt labels the attempt; the reflection itself does not name it
          expect(a.reflection, a.reflection).not.toMatch(/attempt \d/i);
          // a sentence that names cells says "mine" exactly when they are mines; other named cells
          // are safe and hidden at the start of every attempt
          for (const sentence of a.reflection.split(/[.;] /)) {
            const cells = sentence.match(/\(\d+, \d+\)/g) ?? [];
            for (const cell of cells) {
              if (/mine/i.test(sentence)) {
                expect(mineSet.has(cell), `${cell} in "${a.reflection}"`).toBe(true);
                continue;
              }
              suggestions++;
              const [r, c] = cell.slice(1, -1).split(', ').map(Number);
              expect(initial[(r - 1) * cols + (c - 1)], `${s.taskId}: ${cell} in "${a.reflection}"`).toBe('?');
              expect(mineSet.has(cell)).toBe(false);
            }
          }
        }
      }
    }
    expect(suggestions).toBeGreaterThan(20);
  });

  it('Sokoban: a frozen pair against a wall whose row has a target is not called "no target on its line"', () => {
    // boxes (1,2) and (1,3) end side by side against the top wall; target (1,1) is on that row
    const { text, env } = sokobanCase(['######', '#O_X_#', '#_X__#', '#_P_O#', '#____#', '######'], ['up']);
    expect(env.lastDead).not.toBeNull();
    expect(text.split('. ')[0]).toBe('After I pushed a box to row 1, column 2, the boxes could no longer all reach targets');
    checkSokobanClaim(text, env.state);
  });

  it('Sokoban: against a wall with no target on its line, and in a corner, when true', () => {
    const wall = sokobanCase(['######', '#____#', '#_X__#', '#_P_O#', '#____#', '######'], ['up']);
    expect(wall.text.split('. ')[0]).toBe('I pushed a box to row 1, column 2, against a wall with no target on its line, so it can never reach a target');
    checkSokobanClaim(wall.text, wall.env.state);
    const corner = sokobanCase(['######', '#____#', '#X___#', '#P__O#', '#____#', '######'], ['up']);
    expect(corner.text.split('. ')[0]).toBe('I pushed a box to row 1, column 1, in a corner, where it is stuck');
    checkSokobanClaim(corner.text, corner.env.state);
  });

  it('Sokoban: across seeds every dead-end explanation holds on the final board', () => {
    const sessions = generateDemos({ env: 'sokoban', tasks: 16, seed: 100, failRate: 1 });
    let checked = 0;
    for (const s of sessions) {
      const first = s.attempts[0];
      const last = first.steps.at(-1)!;
      if (!(last.done && !last.success)) continue;
      checkSokobanClaim(first.reflection!, parseSokoban(last.observation));
      checked++;
    }
    expect(checked).toBeGreaterThanOrEqual(12);
  });
});

describe('deliberate failures', () => {
  it('exactly round(failRate * tasks) sessions fail on purpose, spread over the tasks', () => {
    expect(deliberateFailures(6, 0.5)).toEqual([false, true, false, true, false, true]);
    expect(deliberateFailures(4, 0.25)).toEqual([false, false, false, true]);
    expect(deliberateFailures(5, 0)).toEqual([false, false, false, false, false]);
    expect(deliberateFailures(3, 1)).toEqual([true, true, true]);
    for (const [n, p] of [[7, 0.3], [10, 0.3], [128, 0.3], [1, 0.5]] as const) {
      expect(deliberateFailures(n, p).filter(Boolean)).toHaveLength(Math.round(p * n));
    }
  });

  it('demos --tasks 6 --fail-rate 0.5: 3 sessions per game start with a deliberate failure and a reflection', () => {
    for (const env of ['minesweeper', 'sokoban'] as const) {
      const sessions = generateDemos({ env, tasks: 6, seed: 0, failRate: 0.5 });
      const withReflection = sessions.filter((s) => s.attempts[0].reflection !== null);
      expect(withReflection.length, env).toBeGreaterThanOrEqual(3);
      // the deliberate ones are sessions 1, 3, 5: their first attempt fails
      for (const i of [1, 3, 5]) expect(sessions[i].attempts[0].steps.at(-1)!.success, `${env} ${i}`).toBe(false);
    }
  });
});
