/**
 * Board symmetries of compact trials (src/envs/compact-symmetry.ts), on trials that
 * src/envs/compact-data.ts plays: the mapped trials keep their boards' symbols and labels, replay
 * on the mapped boards, and the 8 maps are distinct.
 */
import { describe, expect, it } from 'vitest';
import { symmetriesFor, symmetry, transformTrial } from '../../src/envs/compact-symmetry.js';
import { noisyPolicy, playCompactTrial, type CompactTrial } from '../../src/envs/compact-data.js';
import { mineSweeperChoices, provableMineCells, revealedCells } from '../../src/envs/compact-targets.js';
import { gridText, parseGridRows } from '../../src/envs/grid.js';
import { parseCellAction } from '../../src/envs/minesweeper.js';
import { applyMove, parseMoves, parseSokoban, renderSokoban, solveSokoban } from '../../src/envs/sokoban.js';

const ms = (rows: string[]) => gridText(rows, 1);
const sk = (rows: string[]) => gridText(rows, 0);

describe('board symmetries', () => {
  const trials: CompactTrial[] = [];
  for (let seed = 0; seed < 6; seed++) {
    trials.push(playCompactTrial({ envName: 'minesweeper-4x4-2', seed, maxAttempts: 3, policy: noisyPolicy(0.5), rngSeed: seed }));
    trials.push(playCompactTrial({ envName: 'sokoban-5x5-1', seed, maxAttempts: 2, policy: noisyPolicy(0.3), rngSeed: seed }));
  }
  const symbols = (obs: string) => parseGridRows(obs).flat().sort().join('');
  const at = (obs: string, action: string, base: number) => {
    const c = parseCellAction(action)!;
    return parseGridRows(obs)[c.row - base]![c.col - base];
  };

  it('keep every board\'s symbols, and the cells actions and targets name', () => {
    for (const t of trials) for (let k = 0; k < 8; k++) {
      const m = transformTrial(t, symmetry(k));
      expect(m.attempts.length).toBe(t.attempts.length);
      t.attempts.forEach((a, n) => {
        const b = m.attempts[n]!;
        expect(symbols(b.finalObservation)).toBe(symbols(a.finalObservation));
        expect(b.reflection === null).toBe(a.reflection === null);
        a.steps.forEach((s, i) => {
          const u = b.steps[i]!;
          expect(symbols(u.observation)).toBe(symbols(s.observation));
          if (t.env === 'minesweeper') {
            expect(at(u.observation, u.action, 1)).toBe(at(s.observation, s.action, 1));
            s.choices![0]!.forEach((c, j) => expect(at(u.observation, u.choices![0]![j]!, 1)).toBe(at(s.observation, c, 1)));
          }
        });
      });
    }
  });

  it('map a MineSweeper trial to one whose targets, invalid cells and provable mines are those of the mapped boards', () => {
    for (const t of trials.filter((x) => x.env === 'minesweeper')) for (let k = 0; k < 8; k++) {
      const m = transformTrial(t, symmetry(k));
      const known = new Set<number>();
      m.attempts.forEach((a) => {
        for (const s of a.steps) {
          expect([...s.choices![0]!].sort()).toEqual([...mineSweeperChoices(s.observation, 2, known)].sort());
          expect([...(s.invalid ?? [])].sort()).toEqual(revealedCells(s.observation).sort());
          expect([...(s.provableMines ?? [])].sort()).toEqual(provableMineCells(s.observation, 2).sort());
        }
        if (a.reflection?.endsWith('was a mine.')) {
          const c = parseCellAction(a.reflection)!;
          expect(parseGridRows(a.finalObservation)[c.row - 1]![c.col - 1]).toBe('*');
          known.add((c.row - 1) * 4 + (c.col - 1));
        }
      });
    }
  });

  it('map a Sokoban trial to one whose mapped moves replay on the mapped boards', () => {
    // the env applies a turn's moves until the puzzle is solved or dead: some prefix of the mapped
    // moves must lead from the mapped board to the mapped next board
    const reaches = (obs: string, action: string, next: string) => {
      let s = parseSokoban(obs);
      if (renderSokoban(s) === next) return true;
      for (const mv of parseMoves(action)) {
        s = applyMove(s, mv).state;
        if (renderSokoban(s) === next) return true;
      }
      return false;
    };
    let moved = 0;
    for (const t of trials.filter((x) => x.env === 'sokoban')) for (let k = 0; k < 8; k++) {
      const m = transformTrial(t, symmetry(k));
      for (const a of m.attempts) a.steps.forEach((s, i) => {
        const next = a.steps[i + 1]?.observation ?? a.finalObservation;
        expect(reaches(s.observation, s.action, next)).toBe(true);
        if (next !== s.observation) moved++;
        // the mapped invalid moves still do not move, along the mapped target's path
        if (s.invalidMoves) {
          let st = parseSokoban(s.observation);
          const path = parseMoves(s.target!);
          s.invalidMoves.forEach((set, j) => {
            if (j % 2 === 1) return expect(set).toEqual([]);
            for (const mv of set) expect(applyMove(st, mv as never).moved).toBe(false);
            st = applyMove(st, path[j / 2]!).state;
          });
        }
        // the mapped target is still optimal on the mapped board
        if (s.choices) {
          const d = solveSokoban(parseSokoban(s.observation))!.length;
          const first = parseMoves(s.target!)[0]!;
          expect(solveSokoban(applyMove(parseSokoban(s.observation), first).state)!.length).toBe(d - 1);
        }
        if (a.reflection?.startsWith('box ')) {
          const c = parseCellAction(a.reflection)!;
          expect('X*'.includes(parseGridRows(a.finalObservation)[c.row]![c.col]!)).toBe(true);
        }
      });
    }
    expect(moved).toBeGreaterThan(20);
  });

  it('are 8 distinct maps of a square board; the involutions undo themselves', () => {
    const t: CompactTrial = {
      env: 'minesweeper', envName: 'minesweeper-3x3-1', seed: 0, instructions: 'I',
      attempts: [{ steps: [{ observation: ms(['12?', '???', '???']), action: '(1, 3)', choices: [['(1, 3)', '(2, 1)']], target: '(2, 1)' }], finalObservation: ms(['12*', '???', '???']), success: false, reflection: '(1, 3) was a mine.' }],
    };
    const boards = Array.from({ length: 8 }, (_, k) => transformTrial(t, symmetry(k)).attempts[0]!.steps[0]!.observation);
    expect(new Set(boards).size).toBe(8);
    expect(boards[0]).toBe(t.attempts[0]!.steps[0]!.observation);
    // transpose: row 1 becomes column 1
    const tr = transformTrial(t, symmetry(4));
    expect(tr.attempts[0]).toEqual({
      steps: [{ observation: ms(['1??', '2??', '???']), action: '(3, 1)', choices: [['(3, 1)', '(1, 2)']], target: '(1, 2)' }],
      finalObservation: ms(['1??', '2??', '*??']), success: false, reflection: '(3, 1) was a mine.',
    });
    for (const k of [0, 1, 2, 3, 4, 7]) expect(transformTrial(transformTrial(t, symmetry(k)), symmetry(k))).toEqual(t);
    // the rotations (5, 6) are each other's inverse
    expect(transformTrial(transformTrial(t, symmetry(5)), symmetry(6))).toEqual(t);
    for (const tt of trials) for (const k of [1, 2, 3, 4, 7]) expect(transformTrial(transformTrial(tt, symmetry(k)), symmetry(k))).toEqual(tt);
  });

  it('map move words, and refuse a transpose of a non-square board', () => {
    const t: CompactTrial = {
      env: 'sokoban', envName: 'sokoban-3x5-1', seed: 0, instructions: 'I',
      attempts: [{ steps: [{ observation: sk(['#####', '#PX_O', '#####']), action: 'right, up', choices: [['right'], [', '], ['up']], target: 'right, up' }], finalObservation: sk(['#####', '#_PXO', '#####']), success: false, reflection: 'turns ran out.' }],
    };
    const flip = transformTrial(t, symmetry(1)).attempts[0]!.steps[0]!;
    expect(flip).toEqual({ observation: sk(['#####', 'O_XP#', '#####']), action: 'left, up', choices: [['left'], [', '], ['up']], target: 'left, up' });
    expect(transformTrial(t, symmetry(2)).attempts[0]!.steps[0]!.action).toBe('right, down');
    expect(() => transformTrial(t, symmetry(4))).toThrow(/transpose needs a square board, got 3x5/);
    expect(symmetriesFor(3, 5)).toEqual([0, 1, 2, 3]);
    expect(symmetriesFor(6, 6)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
  });
});
