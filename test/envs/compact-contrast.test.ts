/**
 * MineSweeper memory contrast trials (src/envs/compact-contrast.ts): the board again under a
 * memory that names a cell a mine, and its no-memory twin. The Sokoban contrast pairs are tested
 * with the dead-push memory they name, in test/envs/compact-data.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { mineSweeperContrast, mineSweeperContrastPair } from '../../src/envs/compact-contrast.js';
import { gridText } from '../../src/envs/grid.js';
import { Rng } from '../../src/envs/rng.js';

const ms = (rows: string[]) => gridText(rows, 1);

describe('mineSweeperContrast', () => {
  it('is the board again in a later attempt whose memory names the cell a mine, the target knowing it', () => {
    const board = ms(['.1?', '.1?', '.1?']);
    const t = mineSweeperContrast('minesweeper-3x3-1', 4, board, 1, '(2, 3)', new Rng(1))!;
    expect(t.attempts).toHaveLength(2);
    expect(t.attempts[0]).toMatchObject({ steps: [], success: false, reflection: '(2, 3) was a mine.' });
    const [step] = t.attempts[1]!.steps;
    expect(t.attempts[1]!.reflection).toBeNull();
    expect(step).toMatchObject({
      observation: board, choices: [['(1, 3)', '(3, 3)']], memoryMatters: true, invalid: ['(1, 1)', '(1, 2)', '(2, 1)', '(2, 2)', '(3, 1)', '(3, 2)'],
      provableMines: ['(2, 3)'],
    });
    expect(['(1, 3)', '(3, 3)']).toContain(step!.target);
    // on a fresh board every other cell is as safe
    const fresh = ms(['??', '??']);
    expect(mineSweeperContrast('minesweeper-2x2-1', 4, fresh, 1, '(1, 1)', new Rng(1))!.attempts[1]!.steps[0]!.choices).toEqual([['(1, 2)', '(2, 1)', '(2, 2)']]);
  });

  it('is null for a cell that cannot be a mine there: open, off the board, proved safe, or not a cell', () => {
    const board = ms(['?1.', '?1.']);
    for (const cell of ['(1, 2)', '(1, 3)', '(3, 1)', '(0, 1)', 'up', '']) expect(mineSweeperContrast('minesweeper-2x3-1', 4, board, 1, cell, new Rng(1))).toBeNull();
    expect(mineSweeperContrast('minesweeper-2x3-1', 4, board, 1, '(2, 1)', new Rng(1))).not.toBeNull();
  });
});

describe('mineSweeperContrastPair', () => {
  it('is the contrast and the same board with no memory, whose targets keep the cell', () => {
    const fresh = ms(['??', '??']);
    const pair = mineSweeperContrastPair('minesweeper-2x2-1', 4, fresh, 1, '(1, 1)', new Rng(1))!;
    expect(pair.withMemory.attempts[0]!.reflection).toBe('(1, 1) was a mine.');
    expect(pair.withMemory.attempts[1]!.steps[0]!.choices).toEqual([['(1, 2)', '(2, 1)', '(2, 2)']]);
    expect(pair.twin.attempts).toHaveLength(1);
    const [step] = pair.twin.attempts[0]!.steps;
    expect(step).toMatchObject({ observation: fresh, choices: [['(1, 1)', '(1, 2)', '(2, 1)', '(2, 2)']] });
    expect(step!.memoryMatters).toBeUndefined();
    // a fresh board proves no mine
    expect(step!.provableMines).toBeUndefined();
    // the 1s around (1, 1) see no other hidden cell: it is a mine with the memory and without it
    const proving = mineSweeperContrastPair('minesweeper-2x4-2', 4, ms(['?11?', '111?']), 2, '(1, 4)', new Rng(1))!;
    expect(proving.twin.attempts[0]!.steps[0]).toMatchObject({ choices: [['(1, 4)', '(2, 4)']], provableMines: ['(1, 1)'] });
    expect(proving.withMemory.attempts[1]!.steps[0]).toMatchObject({ choices: [['(2, 4)']], provableMines: ['(1, 1)'] });
    expect(pair.twin.attempts[0]!.reflection).toBeNull();
    // the answer is read as the env reads it: its last cell
    expect(mineSweeperContrastPair('minesweeper-2x2-1', 4, fresh, 1, '(2, 2)(1, 1)', new Rng(1))!.withMemory.attempts[0]!.reflection).toBe('(1, 1) was a mine.');
  });

  it('is null where the cell is not among the safest cells of the bare board, or cannot be a mine', () => {
    // one mine, next to all three 1s: (2, 3) is the mine, (1, 3) and (3, 3) are safe
    const board = ms(['.1?', '.1?', '.1?']);
    expect(mineSweeperContrastPair('minesweeper-3x3-1', 4, board, 1, '(2, 3)', new Rng(1))).toBeNull();
    expect(mineSweeperContrastPair('minesweeper-3x3-1', 4, board, 1, '(1, 3)', new Rng(1))).toBeNull();
    expect(mineSweeperContrastPair('minesweeper-3x3-1', 4, board, 1, 'up', new Rng(1))).toBeNull();
  });
});
