import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { MineSweeperEnv, parseCellAction, parseMineSweeperObservation } from '../../src/envs/minesweeper.js';

// Mines at (1,1), (5,5), (5,6) (1-indexed).
const LAYOUT_A = ['*.....', '......', '......', '......', '....**', '......'];

describe('MineSweeper rules on a hand-made board', () => {
  it('a click on an empty cell cascades (+2) and shows counts', () => {
    const env = new MineSweeperEnv();
    const r0 = env.setBoard(LAYOUT_A);
    expect(r0.observation.split('\n').slice(0, 2)).toEqual(['  123456', '1 ??????']);
    const r = env.step('(3, 3)');
    expect(r).toMatchObject({ reward: 2, done: false, success: false, invalidAction: false });
    expect(r.observation).toBe(
      ['  123456', '1 ?1....', '2 11....', '3 ......', '4 ...122', '5 ...1??', '6 ...1??'].join('\n'),
    );
    expect(env.legalActions()).toEqual(['(1, 1)', '(5, 5)', '(5, 6)', '(6, 5)', '(6, 6)']);
  });

  it('one numbered cell is +0.5; revealing the last safe cell wins (+10, done, success)', () => {
    const env = new MineSweeperEnv();
    env.setBoard(LAYOUT_A, [[3, 3]]);
    expect(env.step('(6, 5)')).toMatchObject({ reward: 0.5, done: false, success: false });
    const win = env.step('(6,6)');
    expect(win).toMatchObject({ reward: 10, done: true, success: true, invalidAction: false });
    expect(() => env.step('(1, 1)')).toThrow(/after done/);
  });

  it('a single numbered cell from a fresh board is +0.5 and reveals only itself', () => {
    const env = new MineSweeperEnv();
    env.setBoard(LAYOUT_A);
    const r = env.step('(1, 2)');
    expect(r.reward).toBe(0.5);
    expect(r.observation.split('\n')[1]).toBe('1 ?1????');
    expect(env.legalActions()).toHaveLength(35);
  });

  it('a mine ends the attempt with -0.1 and shows * only at the clicked mine', () => {
    const env = new MineSweeperEnv();
    env.setBoard(LAYOUT_A, [[3, 3]]);
    const r = env.step('I choose (1, 1)');
    expect(r).toMatchObject({ reward: -0.1, done: true, success: false, invalidAction: false });
    expect(r.observation.split('\n')[1]).toBe('1 *1....');
    expect(r.observation.split('\n')[5]).toBe('5 ...1??');
    expect(env.legalActions()).toEqual([]);
  });

  it('invalid, out-of-range and useless clicks cost -1 and the game goes on', () => {
    const env = new MineSweeperEnv();
    env.setBoard(LAYOUT_A, [[3, 3]]);
    const before = env.render();
    for (const a of ['hello', '(7, 1)', '(0, 2)', '(3, 3)', '(1, 2)', '']) {
      expect(env.step(a)).toEqual({ observation: before, reward: -1, done: false, success: false, invalidAction: true });
    }
    expect(env.step('(6, 6)').reward).toBe(0.5);
  });

  it('setBoard rejects a wrong mine count or an opened mine', () => {
    const env = new MineSweeperEnv();
    expect(() => env.setBoard(['*.....', '......', '......', '......', '......', '......'])).toThrow(/3 mines/);
    expect(() => env.setBoard(LAYOUT_A, [[1, 1]])).toThrow(/is a mine/);
  });
});

describe('MineSweeper action parsing', () => {
  it.each([
    ['(2, 3)', { row: 2, col: 3 }],
    ['(2,3)', { row: 2, col: 3 }],
    ['( 2 ,  3 )', { row: 2, col: 3 }],
    ['Answer: (4, 1).', { row: 4, col: 1 }],
    ['not (1, 1) but (5, 6)', { row: 5, col: 6 }],
    ['2, 3', null],
    ['(a, b)', null],
  ])('%j -> %j', (text, want) => {
    expect(parseCellAction(text)).toEqual(want);
  });
});

describe('MineSweeper seeded boards', () => {
  it('first click is always safe and applied at reset; never already won', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 32 - 1 }), (seed) => {
        const env = new MineSweeperEnv();
        const { observation, availableActions } = env.reset(seed);
        const cells = parseMineSweeperObservation(observation).flat();
        expect(cells).not.toContain('*');
        const opened = cells.filter((c) => c !== '?').length;
        expect(opened).toBeGreaterThan(0);
        expect(cells.length - opened).toBeGreaterThan(3); // some safe cell still hidden
        expect(availableActions).toHaveLength(cells.length - opened);
        expect(env.mineCells()).toHaveLength(3);
        for (const m of env.mineCells()) expect(cells[m.row * 6 + m.col]).toBe('?');
      }),
      { numRuns: 300 },
    );
  });

  it('one seed gives one board across calls and instances; seeds differ', () => {
    const a = new MineSweeperEnv();
    const b = new MineSweeperEnv();
    const o1 = a.reset(42).observation;
    a.step('(1, 1)');
    expect(a.reset(42).observation).toBe(o1);
    expect(b.reset(42).observation).toBe(o1);
    expect(a.mineCells()).toEqual(b.mineCells());
    const boards = new Set([0, 1, 2, 3, 4, 5, 6, 7].map((s) => JSON.stringify(a.reset(s) && a.mineCells())));
    expect(boards.size).toBeGreaterThan(6);
  });

  it('size and mines are parameters', () => {
    const env = new MineSweeperEnv({ rows: 8, cols: 9, mines: 10 });
    expect(env.name).toBe('minesweeper-8x9-10');
    const rows = parseMineSweeperObservation(env.reset(7).observation);
    expect(rows).toHaveLength(8);
    expect(rows[0]).toHaveLength(9);
    expect(env.mineCells()).toHaveLength(10);
    expect(() => new MineSweeperEnv({ mines: 35 })).toThrow(/at most/);
    expect(() => new MineSweeperEnv({ rows: 0 })).toThrow(/rows/);
  });

  it('instructions are short and state the answer format', () => {
    const env = new MineSweeperEnv();
    expect(env.instructions.length).toBeLessThanOrEqual(210);
    expect(env.instructions).toContain('(row, col), e.g. (2, 3)');
  });

  it('the compact observation puts each cell at its column; wide boards get a tens header line', () => {
    const env = new MineSweeperEnv({ rows: 10, cols: 12, mines: 1 });
    const layout = Array.from({ length: 10 }, () => '.'.repeat(12));
    layout[0] = '*' + '.'.repeat(11);
    const obs = env.setBoard(layout, [[10, 12]]).observation.split('\n');
    expect(obs.slice(0, 3)).toEqual(['            111', '   123456789012', ' 1 ?1..........']);
    expect(obs[11]).toBe('10 ............');
    const cells = parseMineSweeperObservation(obs.join('\n'));
    expect(cells).toHaveLength(10);
    expect(cells[0]!.slice(0, 3)).toEqual(['?', '1', '.']);
    // the older spaced form is still read
    expect(parseMineSweeperObservation('Row 1: ? 1\nRow 2: . *')).toEqual([['?', '1'], ['.', '*']]);
  });
});
