/**
 * Sokoban pushes as the memory names them: the reflection that names the push which ended an
 * attempt dead (`box (2, 3) right dead end.`), its parser, the push replayed from an attempt's last
 * action, and the moves from a state that would make a named push (the labels of the dead-push
 * unlikelihood term; docs/method.md). Cells are 0-based as Sokoban observations number them.
 */
import { applyMove, MOVES, parseMoves, parseSokoban, type Move, type SokobanState } from './sokoban.js';

/**
 * A Sokoban push: the box on cell (`row`, `col`) (0-based, as observations number them) pushed
 * one cell in direction `move` (the player's move).
 */
export interface SokobanPush { row: number; col: number; move: Move }

/**
 * The compact reflection that names the push that left the puzzle unsolvable (the env ends an
 * attempt there): `box (r, c) <move> dead end.`, e.g. `box (2, 3) right dead end.` for pushing the
 * box on (2, 3) to the right. Every piece is a token of the game vocabulary (src/envs/vocab.ts:
 * `box `, the cell, a byte space, the move word, ` dead end.`), and the cell and the move word map
 * under the board symmetries (`transformTrial`).
 */
export const deadPushReflection = (p: SokobanPush): string => `box (${p.row}, ${p.col}) ${p.move} dead end.`;

/**
 * The push that a memory line names (`deadPushReflection`'s form, surrounding space ignored), or
 * null for any other text (a model may write anything).
 */
export function parseDeadPush(line: string): SokobanPush | null {
  const m = /^box \((\d+), (\d+)\) (up|down|left|right) dead end\.$/.exec(line.trim());
  return m ? { row: Number(m[1]), col: Number(m[2]), move: m[3] as Move } : null;
}

/**
 * The push that ended a Sokoban attempt dead: the moves of the attempt's last `action` (at most
 * 3, as the env reads them) replayed from its last pre-action `observation`; the first push after
 * which the board is `finalObservation` (the env stops at the push that leaves the puzzle
 * unsolvable, so that push is the first to reach the final board).
 * @returns null when no push of the action reaches the final board (the attempt did not end at a
 *   push of this action, e.g. the turn cap).
 * @throws Error when an observation is not a Sokoban board (`parseSokoban`).
 */
export function sokobanFatalPush(observation: string, action: string, finalObservation: string): SokobanPush | null {
  const end = parseSokoban(finalObservation);
  return firstPush(observation, action, (x) => x.player === end.player && x.boxes.join(',') === end.boxes.join(','));
}

/** The push of the box on cell index `from` of `s` by the player's `move`. */
const pushOf = (s: SokobanState, from: number, move: Move): SokobanPush => ({ row: Math.floor(from / s.cols), col: from % s.cols, move });

/**
 * The first push of `action`'s moves (at most 3, as the env reads them), replayed from
 * `observation`, whose resulting state passes `test`; null when none does.
 */
export function firstPush(observation: string, action: string, test: (after: SokobanState) => boolean): SokobanPush | null {
  let s = parseSokoban(observation);
  for (const m of parseMoves(action)) {
    const o = applyMove(s, m);
    if (o.push && test(o.state)) return pushOf(s, o.push.from, m);
    s = o.state;
  }
  return null;
}

/** The pushes that memory lines name (`parseDeadPush`), lines that do not parse left out. */
export const namedDeadPushes = (memory: readonly string[]): SokobanPush[] =>
  memory.map(parseDeadPush).filter((p): p is SokobanPush => p !== null);

/** The moves from `s` that make one of the `named` pushes into a state with no solution (`dead`). */
export function deadPushMoves(s: SokobanState, named: readonly SokobanPush[], dead: (x: SokobanState) => boolean): Move[] {
  if (named.length === 0) return [];
  return MOVES.filter((m) => {
    const o = applyMove(s, m);
    if (!o.push) return false;
    const q = pushOf(s, o.push.from, m);
    return named.some((p) => p.row === q.row && p.col === q.col && p.move === m) && dead(o.state);
  });
}
