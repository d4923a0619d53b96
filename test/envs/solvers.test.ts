import { describe, expect, it } from 'vitest';
import { MineSweeperEnv, parseMineSweeperObservation } from '../../src/envs/minesweeper.js';
import { analyseMines, mineSweeperSolverMove, rememberMines, type MineMemory } from '../../src/envs/solvers/minesweeper-solver.js';
import { makePolicy } from '../../src/envs/policies.js';
import { Rng } from '../../src/envs/rng.js';

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
