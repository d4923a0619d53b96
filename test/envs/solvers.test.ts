import { describe, expect, it } from 'vitest';
import { MineSweeperEnv, parseMineSweeperObservation } from '../../src/envs/minesweeper.js';
import { analyseMines, mineSweeperSolverMove, rememberMines, type MineMemory } from '../../src/envs/solvers/minesweeper-solver.js';
import { makePolicy } from '../../src/envs/policies.js';
import { Rng } from '../../src/envs/rng.js';
import { applyMove, MOVES, parseSokoban, pushKey, solveSokoban, type Move, type SokobanState } from '../../src/envs/sokoban.js';
import { solveSokobanAvoiding } from '../../src/envs/solvers/sokoban-solver.js';
import type { SokobanPush } from '../../src/envs/sokoban-pushes.js';

const LAYOUT_A = ['*.....', '......', '......', '......', '....**', '......'];

describe('MineSweeper solver', () => {
  it('deduces certain mines and safe cells', () => {
    const env = new MineSweeperEnv();
    const { observation } = env.setBoard(LAYOUT_A, [[3, 3]]);
    const a = analyseMines(parseMineSweeperObservation(observation), 3);
    expect(a.exact).toBe(true);
    // 0-based indices: (1,1)->0, (5,5)->28, (5,6)->29, (6,5)->34, (6,6)->35
    expect(a.mines).toEqual([0, 28, 29]);
    expect(a.safe).toEqual([34, 35]);
    expect(mineSweeperSolverMove(observation, 3)).toBe('(6, 5)');
  });

  it('computes exact probabilities: pairs of equally likely cells and one deduced safe cell', () => {
    const cells = [
      ['?', '?', '?'],
      ['1', '2', '?'],
      ['.', '1', '?'],
    ];
    // 2 mines. Constraints: (2,1)=1 over {(1,1),(1,2)}; (2,2)=2 over {(1,1),(1,2),(1,3),(2,3),(3,3)};
    // (3,2)=1 over {(2,3),(3,3)}. Exactly one mine in {(1,1),(1,2)}, one in {(2,3),(3,3)}, so (1,3) is safe.
    const a = analyseMines(cells, 2);
    expect(a.probability[0]).toBeCloseTo(0.5, 12);
    expect(a.probability[1]).toBeCloseTo(0.5, 12);
    expect(a.probability[2]).toBe(0);
    expect(a.probability[5]).toBeCloseTo(0.5, 12);
    expect(a.probability[8]).toBeCloseTo(0.5, 12);
    expect(a.safe).toEqual([2]);
  });

  it('probabilities over hidden cells sum to the number of mines on seeded boards', () => {
    const env = new MineSweeperEnv();
    for (let seed = 0; seed < 50; seed++) {
      const cells = parseMineSweeperObservation(env.reset(seed).observation);
      const a = analyseMines(cells, 3);
      const sum = cells.flat().reduce((acc, s, i) => acc + (s === '?' ? a.probability[i] : 0), 0);
      expect(sum).toBeCloseTo(3, 9);
    }
  });

  it('never clicks a mine remembered from an earlier attempt', () => {
    const env = new MineSweeperEnv();
    env.setBoard(LAYOUT_A);
    const memory: MineMemory = new Map();
    const hit = env.step('(1, 1)');
    rememberMines(memory, hit.observation);
    expect(memory.get(0)).toBe('*');
    const obs = env.setBoard(LAYOUT_A).observation;
    for (let k = 0; k < 5; k++) expect(mineSweeperSolverMove(obs, 3, memory)).not.toBe('(1, 1)');
  });

  it('solver policy wins most seeded boards; random policy picks hidden cells only', () => {
    const env = new MineSweeperEnv();
    let wins = 0;
    for (let seed = 0; seed < 40; seed++) {
      const p = makePolicy('solver', 'minesweeper', seed);
      let obs = env.reset(seed).observation;
      for (let t = 0; t < 50; t++) {
        const r = env.step(p.act(obs));
        expect(r.invalidAction).toBe(false);
        obs = r.observation;
        if (r.done) {
          wins += r.success ? 1 : 0;
          break;
        }
      }
    }
    // Without a turn cap the solver only loses on forced guesses.
    expect(wins).toBeGreaterThanOrEqual(34);
    const rnd = makePolicy('random', 'minesweeper', 1);
    const obs = env.reset(5).observation;
    for (let k = 0; k < 20; k++) expect(env.legalActions()).toContain(rnd.act(obs));
  });

  it('Rng is deterministic and in range', () => {
    const a = new Rng(7);
    const b = new Rng(7);
    const xs = Array.from({ length: 100 }, () => a.int(10));
    expect(Array.from({ length: 100 }, () => b.int(10))).toEqual(xs);
    expect(Math.min(...xs)).toBe(0);
    expect(Math.max(...xs)).toBe(9);
    expect(new Rng(8).nextUint32()).not.toBe(new Rng(7).nextUint32());
    expect(() => new Rng(1.5)).toThrow(RangeError);
  });
});

describe('Sokoban solver with forbidden pushes', () => {
  // one box on (3, 3), its target two cells right: the plain solution pushes it right twice
  const open = parseSokoban(['#######', '#_____#', '#_____#', '#_PX_O#', '#_____#', '#_____#', '#######']);
  const rightAt33: SokobanPush = { row: 3, col: 3, move: 'right' };
  const solved = (s: SokobanState) => s.boxes.every((b) => s.target[b]);
  /** The state after `moves`, and whether one of them made a push of `forbidden`; every move must move. */
  const replay = (s: SokobanState, moves: readonly Move[], forbidden: readonly SokobanPush[]) => {
    let made = false;
    for (const m of moves) {
      const o = applyMove(s, m);
      expect(o.moved).toBe(true);
      if (o.push && forbidden.some((p) => p.row * s.cols + p.col === o.push!.from && p.move === m)) made = true;
      s = o.state;
    }
    return { end: s, made };
  };
  /** Whether some sequence of at most `depth` moves solves `s` without a push of `forbidden` (exhaustive search). */
  const solvableWithin = (s: SokobanState, depth: number, forbidden: readonly SokobanPush[]): boolean => {
    if (solved(s)) return true;
    if (depth === 0) return false;
    return MOVES.some((m) => {
      const o = applyMove(s, m);
      if (!o.moved || (o.push && forbidden.some((p) => p.row * s.cols + p.col === o.push!.from && p.move === m))) return false;
      return solvableWithin(o.state, depth - 1, forbidden);
    });
  };

  it('gives the shortest solution that never makes a forbidden push, longer than the plain one that makes it', () => {
    expect(solveSokoban(open)).toEqual(['right', 'right']);
    expect(replay(open, ['right', 'right'], [rightAt33]).made).toBe(true);
    const plan = solveSokobanAvoiding(open, [rightAt33])!;
    expect(plan).toHaveLength(10);
    const { end, made } = replay(open, plan, [rightAt33]);
    expect(solved(end)).toBe(true);
    expect(made).toBe(false);
    // shortest: no sequence of 9 moves solves it without that push (the plain one of 2 moves makes it)
    expect(solvableWithin(open, 9, [rightAt33])).toBe(false);
    expect(solvableWithin(open, 2, [])).toBe(true);
    // the same search as solveSokoban given the push's key
    expect(solveSokoban(open, 200_000, new Set([pushKey(3 * 7 + 3, 'right')]))).toEqual(plan);
  });

  it('is the plain solution when no forbidden push is on it, or none is given, or the pushes lie off the board', () => {
    const plain = solveSokoban(open);
    expect(solveSokobanAvoiding(open, [])).toEqual(plain);
    expect(solveSokobanAvoiding(open, [{ row: 3, col: 3, move: 'down' }, { row: 3, col: 4, move: 'left' }])).toEqual(plain);
    expect(solveSokobanAvoiding(open, [{ row: 9, col: 9, move: 'right' }, { row: -1, col: 3, move: 'right' }])).toEqual(plain);
    // a push of the box elsewhere is another push: the box on (3, 4) pushed right is the plain solution's second
    expect(replay(open, solveSokobanAvoiding(open, [{ row: 3, col: 2, move: 'right' }])!, [rightAt33]).made).toBe(true);
    const done = parseSokoban(['#####', '#P*_#', '#####']);
    expect(solveSokobanAvoiding(done, [{ row: 1, col: 2, move: 'right' }])).toEqual([]);
  });

  it('is null where every solution makes a forbidden push, or the search budget runs out', () => {
    // rows 1 and 3 hold no target: a box pushed up or down is dead, so the box must go right from (2, 3)
    const narrow = parseSokoban(['#######', '#_____#', '#_PX_O#', '#_____#', '#######']);
    expect(solveSokoban(narrow)).toEqual(['right', 'right']);
    expect(solveSokobanAvoiding(narrow, [{ row: 2, col: 3, move: 'right' }])).toBeNull();
    expect(solvableWithin(narrow, 8, [{ row: 2, col: 3, move: 'right' }])).toBe(false);
    const corridor = parseSokoban(['######', '#PX_O#', '######']);
    expect(solveSokobanAvoiding(corridor, [{ row: 1, col: 3, move: 'right' }])).toBeNull();
    // the avoiding solution of `open` needs more states than 20
    expect(solveSokobanAvoiding(open, [rightAt33], 20)).toBeNull();
    expect(solveSokobanAvoiding(open, [rightAt33], 2000)).toHaveLength(10);
  });
});
