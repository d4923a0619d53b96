/** How the compact trainer's held-out evaluation keys an attempt's ending (src/recipes/sft-base/play.ts endingKey). */
import { describe, expect, it } from 'vitest';
import { endingKey } from '../../../src/recipes/sft-base/play.js';

describe('endingKey', () => {
  it.each([
    ['a MineSweeper mine ending is the clicked cell', 'minesweeper', 'Row 1: 1 * ?', ' (2, 3)', '(2, 3)'],
    ['a MineSweeper ending without a mine (turns ran out) has no key', 'minesweeper', 'Row 1: 1 1 ?', '(2, 3)', null],
    ['a MineSweeper mine ending with no click has no key', 'minesweeper', 'Row 1: *', undefined, null],
    ['a Sokoban ending is the board without the player', 'sokoban', '#P X_\n#_O*', 'up', '#_ X_\n#_O*'],
    ['a player on a target is that target', 'sokoban', '#S X_', 'left', '#O X_'],
  ] as const)('%s', (_name, env, obs, action, key) => {
    expect(endingKey(env, obs, action)).toBe(key);
  });

  it('two Sokoban endings in one box configuration with the player elsewhere have the same key', () => {
    expect(endingKey('sokoban', '#P_X', 'up')).toBe(endingKey('sokoban', '#_PX', 'down'));
    expect(endingKey('sokoban', '#P_X', 'up')).not.toBe(endingKey('sokoban', '#PX_', 'up'));
  });
});
