import { describe, expect, it } from 'vitest';
import { evalSeed, makeEnv, parseTaskId, taskId, trainSeed, EVAL_SEED_START } from '../../src/envs/index.js';

describe('env registry and task ids', () => {
  it('parses task ids with parameters', () => {
    expect(parseTaskId('minesweeper-6x6-3:seed=42')).toEqual({
      envName: 'minesweeper-6x6-3', kind: 'minesweeper', params: { rows: 6, cols: 6, mines: 3 }, seed: 42,
    });
    expect(parseTaskId('sokoban-7x7-3:seed=1000000000')).toMatchObject({ kind: 'sokoban', params: { rows: 7, cols: 7, boxes: 3 }, seed: 1e9 });
    expect(() => parseTaskId('chess:seed=1')).toThrow(/unknown env/);
    expect(() => parseTaskId('minesweeper-6x6-3:seed=-1')).toThrow(/bad task id/);
    expect(() => parseTaskId('minesweeper-6x6-3:seed=99999999999')).toThrow(/seed/);
  });

  it('makes envs by kind or name; names round-trip into task ids', () => {
    expect(makeEnv('minesweeper').name).toBe('minesweeper-6x6-3');
    expect(makeEnv('sokoban').name).toBe('sokoban-6x6-2');
    expect(makeEnv('minesweeper', { mines: 5 }).name).toBe('minesweeper-6x6-5');
    expect(makeEnv('minesweeper-8x8-10').name).toBe('minesweeper-8x8-10');
    expect(taskId('sokoban-6x6-2', 42)).toBe('sokoban-6x6-2:seed=42');
    const env = makeEnv(parseTaskId('minesweeper-6x6-3:seed=42').envName);
    expect(env.reset(42).observation).toBe(makeEnv('minesweeper').reset(42).observation);
  });

  it('train and eval seed ranges are disjoint', () => {
    expect(evalSeed(0, 0)).toBe(EVAL_SEED_START);
    expect(evalSeed(5, 2)).toBe(1_000_000_007);
    expect(trainSeed(0, 3)).toBe(3);
    expect(() => trainSeed(999_999_999, 1)).toThrow(/train seed/);
    expect(() => evalSeed(-1, 0)).toThrow(/eval seed/);
  });
});
