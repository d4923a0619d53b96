/**
 * Sokoban solver: breadth-first search over (player, boxes) states from the observation, which
 * gives a shortest move sequence (see `solveSokoban` in ../sokoban.ts; pushes into a corner off
 * target are pruned). A turn plays the first 3 moves of the plan. `solveSokobanAvoiding` is the
 * same search with some pushes forbidden (the pushes a Sokoban memory names as dead ends).
 */
import { MOVES_PER_TURN, parseSokoban, pushKey, solveSokoban, type Move, type SokobanState } from '../sokoban.js';
import type { SokobanPush } from '../sokoban-pushes.js';

/** Shortest plan from an observation; null when the position is unsolvable. */
function sokobanPlan(observation: string): Move[] | null {
  return solveSokoban(parseSokoban(observation));
}

/** The solver's action for one turn ("up, left, left"), or null when the position is unsolvable. */
export function sokobanSolverMove(observation: string): string | null {
  const plan = sokobanPlan(observation);
  if (!plan || plan.length === 0) return null;
  return plan.slice(0, MOVES_PER_TURN).join(', ');
}

/**
 * The shortest solution from `s` that never makes one of the `forbidden` pushes: the box on cell
 * (`row`, `col`) (0-based) pushed in direction `move`, forbidden at every move of the solution,
 * whatever the other boxes' cells (the game where those pushes are not allowed; BFS, so shortest in
 * moves). Pushes of cells outside the board are ignored. With no forbidden push it is
 * `solveSokoban(s, maxNodes)`.
 * @returns the moves ([] when `s` is solved), or null when every solution makes a forbidden push,
 *   none exists, or the search expanded more than `maxNodes` states (its budget ran out).
 */
export function solveSokobanAvoiding(s: SokobanState, forbidden: readonly SokobanPush[], maxNodes = 200_000): Move[] | null {
  const inside = forbidden.filter((p) => p.row >= 0 && p.col >= 0 && p.row < s.rows && p.col < s.cols);
  if (inside.length === 0) return solveSokoban(s, maxNodes);
  return solveSokoban(s, maxNodes, new Set(inside.map((p) => pushKey(p.row * s.cols + p.col, p.move))));
}
