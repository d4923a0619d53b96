/**
 * Sokoban solver: breadth-first search over (player, boxes) states from the observation, which
 * gives a shortest move sequence (see `solveSokoban` in ../sokoban.ts; pushes into a corner off
 * target are pruned). A turn plays the first 3 moves of the plan.
 */
import { MOVES_PER_TURN, parseSokoban, solveSokoban, type Move } from '../sokoban.js';

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
