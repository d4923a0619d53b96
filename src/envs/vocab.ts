/**
 * The game vocabulary of the builtin games' compact checkpoints (src/model/tokenizers.ts
 * GameTokenizer): one token per piece of text the games and their memory language repeat, so that
 * a board is about one token per cell and an action one token.
 *
 * - `(r, c)` for r, c in 0..8: MineSweeper clicks (1-based) and Sokoban box cells (0-based);
 * - the move words `up`, `down`, `left`, `right` and the separator `, `;
 * - row labels `\n0 `..`\n8 ` and column headers (`  123456`, `  012345`, sizes 3..8), as
 *   src/envs/grid.ts gridText writes them;
 * - the compact prompt's env tags and cues (`\n> ` act, `\n! ` reflect, `\nm ` memory line);
 * - the memory words of src/envs/compact-data.ts reflections.
 * Any other text falls back to bytes. The list is stored in the checkpoint, so changing it here
 * only affects checkpoints trained after the change.
 */

/** Env labels the compact checkpoints are trained on (the sessions' `env` field). */
export const GAME_ENV_TAGS = ['minesweeper', 'sokoban'] as const;

/** Memory words of the compact reflections (src/envs/compact-data.ts). */
export const MEMORY_WORDS = [' was a mine.', ' safe: ', 'turns ran out.', 'box ', ' stuck in a corner.', ' stuck against a wall.', ' boxes stuck.', ' dead end.'] as const;

/** The pieces (ids 260, 261, ... of a GameTokenizer), in a fixed order. */
export function gameVocabulary(): string[] {
  const pieces: string[] = [];
  for (let r = 0; r <= 8; r++) for (let c = 0; c <= 8; c++) pieces.push(`(${r}, ${c})`);
  pieces.push('up', 'down', 'left', 'right', ', ');
  for (let r = 0; r <= 8; r++) pieces.push(`\n${r} `);
  for (let n = 3; n <= 8; n++) {
    pieces.push('  ' + Array.from({ length: n }, (_, i) => String(i + 1)).join(''));
    pieces.push('  ' + Array.from({ length: n }, (_, i) => String(i)).join(''));
  }
  for (const t of GAME_ENV_TAGS) pieces.push(`[${t}]`);
  pieces.push('\n> ', '\n! ', '\nm ', '\nh ');
  pieces.push(...MEMORY_WORDS);
  return pieces;
}
