import { describe, expect, it } from 'vitest';
import {
  SokobanEnv,
  parseSokoban,
  parseMoves,
  renderSokoban,
  solveSokoban,
  isCornered,
  generateSokoban,
} from '../../src/envs/sokoban.js';
import { Rng } from '../../src/envs/rng.js';
import { sokobanSolverMove } from '../../src/envs/solvers/sokoban-solver.js';

function envFrom(rows: string[], boxes: number): SokobanEnv {
  const env = new SokobanEnv({ rows: rows.length, cols: rows[0].length, boxes });
  env.setState(parseSokoban(rows));
  return env;
}

describe('Sokoban rules on hand-made boards', () => {
  it('renders the paper observation and parses it back', () => {
    const rows = ['######', '#____#', '#PXO_#', '#__X_#', '#__O_#', '######'];
    const s = parseSokoban(rows);
    const obs = renderSokoban(s);
    expect(obs.split('\n').slice(0, 4)).toEqual(['  012345', '0 ######', '1 #____#', '2 #PXO_#']);
    expect(parseSokoban(obs)).toEqual(s);
    expect(renderSokoban(parseSokoban(['######', '#S√__#', '#_XO_#', '#____#', '#____#', '######'])).split('\n')[2]).toBe('1 #S*__#');
    // the older spaced observation is still read
    expect(parseSokoban(['0: # # # # # #', '1: # _ _ _ _ #', '2: # P X O _ #', '3: # _ _ X _ #', '4: # _ _ O _ #', '5: # # # # # #'].join('\n'))).toEqual(s);
  });

  it('a box pushed into a corner ends the attempt as dead', () => {
    const env = envFrom(['######', '#_XP_#', '#____#', '#__O_#', '#____#', '######'], 1);
    const r = env.step('left');
    expect(r).toMatchObject({ reward: -0.1, done: true, success: false, invalidAction: false });
    expect(r.observation.split('\n')[2]).toBe('1 #XP__#');
    expect(env.lastDead).toEqual({ box: 7, cornered: true, from: 8, move: 'left' });
    expect(() => env.step('up')).toThrow(/after done/);
  });

  it('a box pushed against a wall with no target on its line is dead (exact search)', () => {
    const env = envFrom(['######', '#____#', '#PXO_#', '#__X_#', '#__O_#', '######'], 2);
    expect(env.step('right')).toMatchObject({ reward: 0.9, done: false, success: false });
    const r = env.step('right');
    expect(r).toMatchObject({ reward: -1.1, done: true, success: false });
    expect(env.lastDead).toEqual({ box: 16, cornered: false, from: 15, move: 'right' });
  });

  it('box onto a target is +1, off it -1 (each move also -0.1)', () => {
    const env = envFrom(['#######', '#__P__#', '#__X__#', '#__O__#', '#_____#', '#_XO__#', '#######'], 2);
    const on = env.step('down');
    expect(on).toMatchObject({ reward: 0.9, done: false, invalidAction: false });
    expect(on.observation.split('\n')[4]).toBe('3 #__*__#');
    const off = env.step('down');
    expect(off).toMatchObject({ reward: -1.1, done: false, invalidAction: false });
    expect(off.observation.split('\n')[4]).toBe('3 #__S__#');
  });

  it('solving gives -0.1 + 1 + 10 on the last push', () => {
    const env = envFrom(['######', '#____#', '#_PXO#', '#____#', '#____#', '######'], 1);
    expect(env.step('right')).toEqual({
      observation: ['  012345', '0 ######', '1 #____#', '2 #__P*#', '3 #____#', '4 #____#', '5 ######'].join('\n'),
      reward: 10.9,
      done: true,
      success: true,
      invalidAction: false,
    });
  });

  it('walls and unpushable boxes make the move a -0.1 no-op flagged invalid', () => {
    const env = envFrom(['######', '#__P_#', '#__X_#', '#__X_#', '#_OO_#', '######'], 2);
    const before = renderSokoban(env.state);
    expect(env.step('up')).toEqual({ observation: before, reward: -0.1, done: false, success: false, invalidAction: true });
    // box below is blocked by the second box
    expect(env.step('down')).toEqual({ observation: before, reward: -0.1, done: false, success: false, invalidAction: true });
    expect(env.step('jump!')).toEqual({ observation: before, reward: -0.1, done: false, success: false, invalidAction: true });
  });

  it('a turn plays up to 3 moves; blocked ones are no-ops; extra moves are ignored', () => {
    const env = envFrom(['######', '#__P_#', '#____#', '#_X__#', '#_O__#', '######'], 1);
    const r = env.step('left, left, left');
    expect(r).toMatchObject({ reward: -0.3, done: false, invalidAction: true });
    expect(r.observation.split('\n')[2]).toBe('1 #P___#');
    const r2 = env.step('right,down,down,down');
    // right -> (1,2); down -> (2,2); down pushes the box (3,2) onto the target (4,2): 3 x -0.1 + 1 + 10; the 4th move is ignored
    expect(r2).toMatchObject({ reward: 10.7, done: true, success: true, invalidAction: false });
  });

  it('the turn stops at the move that ends the attempt', () => {
    const env = envFrom(['######', '#_XP_#', '#____#', '#__O_#', '#____#', '######'], 1);
    const r = env.step('left, down, down');
    expect(r.reward).toBe(-0.1);
    expect(r.done).toBe(true);
  });
});

describe('Sokoban parsing', () => {
  it.each([
    ['up', ['up']],
    ['Up, LEFT,down', ['up', 'left', 'down']],
    ['up,left', ['up', 'left']],
    ['move: up then left', ['up', 'left']],
    ['right, right, right, right', ['right', 'right', 'right']],
    ['upward', []],
    ['(2, 3)', []],
  ])('%j -> %j', (text, want) => {
    expect(parseMoves(text)).toEqual(want);
  });
});

describe('Sokoban generator and solver', () => {
  it('keeps puzzles whose BFS shortest solution has 5..21 moves, no box on a target or cornered', () => {
    const env = new SokobanEnv();
    for (let seed = 0; seed < 40; seed++) {
      env.reset(seed);
      const s = env.state;
      const plan = solveSokoban(s)!;
      expect(plan.length).toBeGreaterThanOrEqual(5);
      expect(plan.length).toBeLessThanOrEqual(21);
      expect(s.boxes).toHaveLength(2);
      expect(s.target.filter(Boolean)).toHaveLength(2);
      expect(s.boxes.some((b) => s.target[b] || isCornered(s, b))).toBe(false);
    }
  });

  it('honours other bounds and sizes', () => {
    const { solution, state } = generateSokoban(new Rng(3), { rows: 7, cols: 7, boxes: 3, minMoves: 10, maxMoves: 12 });
    expect(solution.length).toBeGreaterThanOrEqual(10);
    expect(solution.length).toBeLessThanOrEqual(12);
    expect(state.boxes).toHaveLength(3);
    expect(new SokobanEnv({ rows: 7, cols: 7, boxes: 3 }).name).toBe('sokoban-7x7-3');
  });

  it('is deterministic per seed', () => {
    const a = new SokobanEnv();
    const b = new SokobanEnv();
    const o = a.reset(1_000_000_123).observation;
    a.step('up, up, up');
    expect(a.reset(1_000_000_123).observation).toBe(o);
    expect(b.reset(1_000_000_123).observation).toBe(o);
    expect(b.reset(1_000_000_124).observation).not.toBe(o);
  });

  it('the BFS solver solves generated puzzles within 7 turns of 3 moves', () => {
    const env = new SokobanEnv();
    for (let seed = 100; seed < 130; seed++) {
      let obs = env.reset(seed).observation;
      let solved = false;
      for (let turn = 0; turn < 7 && !solved; turn++) {
        const r = env.step(sokobanSolverMove(obs)!);
        expect(r.invalidAction).toBe(false);
        obs = r.observation;
        solved = r.success;
        if (r.done) break;
      }
      expect(solved).toBe(true);
    }
  });

  it('legal actions are 3-move sequences of unblocked moves', () => {
    const env = envFrom(['######', '#P___#', '#_X__#', '#__O_#', '#____#', '######'], 1);
    const acts = env.legalActions();
    expect(acts).toContain('right, right, right');
    expect(acts).not.toContain('up, up, up');
    expect(acts.every((a) => a.split(', ').length <= 3)).toBe(true);
  });
});
