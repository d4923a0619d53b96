/**
 * The solver's soft targets of one decision (src/envs/compact-targets.ts): the safest MineSweeper
 * cells, the revealed and the provable-mine cells, and the Sokoban moves that start a shortest
 * solution along one drawn path.
 */
import { describe, expect, it } from 'vitest';
import { mineSweeperChoices, provableMineCells, revealedCells, sokobanChoices } from '../../src/envs/compact-targets.js';
import { gridText } from '../../src/envs/grid.js';
import { Rng } from '../../src/envs/rng.js';
import { applyMove, parseMoves, parseSokoban, solveSokoban } from '../../src/envs/sokoban.js';

const ms = (rows: string[]) => gridText(rows, 1);
const sk = (rows: string[]) => gridText(rows, 0);

describe('mineSweeperChoices', () => {
  it('is exactly the hidden cells of lowest mine probability', () => {
    // every '1' in column 2 sees (2, 3); one mine: it is there, (1, 3) and (3, 3) are safe
    expect(mineSweeperChoices(ms(['.1?', '.1?', '.1?']), 1, new Set())).toEqual(['(1, 3)', '(3, 3)']);
    // no information: every hidden cell equally likely
    expect(mineSweeperChoices(ms(['1?', '??']), 1, new Set())).toEqual(['(1, 2)', '(2, 1)', '(2, 2)']);
    // the '1' at (1, 2) sees (1, 1) and (2, 1) but not (1, 3): P = 1/2, 1/2, 0
    expect(mineSweeperChoices(ms(['?1.', '?1.']), 1, new Set())).toEqual(['(1, 1)', '(2, 1)']);
  });

  it('excludes cells that memory names as mines and counts them as mines', () => {
    // knowing (1, 2) (index 1) is the mine leaves the others certainly safe
    expect(mineSweeperChoices(ms(['1?', '??']), 1, new Set([1]))).toEqual(['(2, 1)', '(2, 2)']);
    expect(mineSweeperChoices(ms(['.1?', '.1?', '.1?']), 1, new Set([5]))).toEqual(['(1, 3)', '(3, 3)']);
    expect(() => mineSweeperChoices(ms(['1?']), 1, new Set([1]))).toThrow(/no hidden cell/);
  });
});

describe('revealedCells', () => {
  it('is every cell that is not hidden, in reading order', () => {
    expect(revealedCells(ms(['.1?', '?1?', '??*']))).toEqual(['(1, 1)', '(1, 2)', '(2, 2)', '(3, 3)']);
    expect(revealedCells(ms(['??', '??']))).toEqual([]);
  });
});

describe('provableMineCells', () => {
  it('is exactly the hidden cells the revealed numbers prove to be mines, in reading order', () => {
    const cases: Array<[string[], number, string[]]> = [
      // every '1' in column 2 sees (2, 3), and the middle one sees all three: (2, 3) is the mine
      [['.1?', '.1?', '.1?'], 1, ['(2, 3)']],
      // 1-2-1 under three hidden cells: the outer two are mines, the middle one is safe
      [['???', '121', '...'], 2, ['(1, 1)', '(1, 3)']],
      // a 1 that sees a single hidden cell; two 1s that see the same two
      [['?1.', '11.'], 1, ['(1, 1)']],
      [['1?', '1?'], 1, []],
      // the same as the first on its side, and with the known mine shown: only hidden cells count
      [['...', '111', '?*?'], 1, []],
      [['...', '111', '???'], 1, ['(3, 2)']],
      // nothing proved: a 1 that sees two hidden cells, a fresh board
      [['?1.', '?1.'], 1, []],
      [['??', '??'], 1, []],
    ];
    for (const [rows, mines, proved] of cases) expect(provableMineCells(ms(rows), mines), rows.join('/')).toEqual(proved);
  });
});

describe('sokobanChoices', () => {
  it('gives every move that starts a shortest solution, along one drawn optimal path', () => {
    const obs = sk(['#####', '#P__#', '#_X_#', '#__O#', '#####']);
    // push right then down, or down then right: 5 moves either way
    expect(solveSokoban(parseSokoban(obs))!.length).toBe(5);
    for (let seed = 0; seed < 8; seed++) {
      const c = sokobanChoices(obs, new Rng(seed))!;
      expect(c.choices[0]).toEqual(['down', 'right']);
      expect(c.choices[1]).toEqual([', ']);
      expect(c.choices[3]).toEqual([', ']);
      expect(c.choices.length).toBe(5);
      // each set is exactly the moves that lower the distance by one from the state the target reached
      let s = parseSokoban(obs);
      const picked = parseMoves(c.target);
      expect(picked.length).toBe(3);
      picked.forEach((m, j) => {
        const d = solveSokoban(s)!.length;
        const good = (['up', 'down', 'left', 'right'] as const).filter((x) => {
          const o = applyMove(s, x);
          return o.moved && solveSokoban(o.state)?.length === d - 1;
        });
        expect(c.choices[2 * j]).toEqual(good);
        expect(good).toContain(m);
        // and the invalid ones are exactly the moves that do not move from there
        expect(c.invalid[2 * j]).toEqual((['up', 'down', 'left', 'right'] as const).filter((x) => !applyMove(s, x).moved));
        if (j > 0) expect(c.invalid[2 * j - 1]).toEqual([]);
        s = applyMove(s, m).state;
      });
    }
    expect(sokobanChoices(obs, new Rng(1))!.target).toMatch(/^(down, right, up|right, down, left)$/);
  });

  it('stops at the solution and gives null for a solved or dead position', () => {
    // a corridor: up, down and left bump into walls at both moves
    expect(sokobanChoices(sk(['######', '#PX_O#', '######']), new Rng(0))).toEqual({
      choices: [['right'], [', '], ['right']], target: 'right, right', invalid: [['up', 'down', 'left'], [], ['up', 'down']], deadMoves: [[], [], []],
      pushMemoryTarget: false,
    });
    expect(sokobanChoices(sk(['#####', '#P*_#', '#####']), new Rng(0))).toBeNull();
    expect(sokobanChoices(sk(['#####', '#X_P#', '#O__#', '#####']), new Rng(0))).toBeNull();
  });
});
