/**
 * Reference policies that play the built-in envs locally, from the observation text only (like a
 * model would): `random` (uniformly random legal actions: a hidden cell; three unblocked moves,
 * each uniform among the moves unblocked at that point) and `solver` (MineSweeper constraint
 * solver with memory of earlier attempts; Sokoban BFS). They give every results table its floor
 * and ceiling.
 */
import { cellAction, parseMineSweeperObservation } from './minesweeper.js';
import { applyMove, MOVES, MOVES_PER_TURN, parseSokoban, type Move } from './sokoban.js';
import { mineSweeperSolverMove, rememberMines, type MineMemory } from './solvers/minesweeper-solver.js';
import { sokobanSolverMove } from './solvers/sokoban-solver.js';
import { Rng } from './rng.js';
import type { EnvKind } from '../domain.js';

export type PolicyName = 'random' | 'solver';

export interface LocalPolicy {
  /** The action for the current observation of the running attempt. */
  act(observation: string): string;
  /** End of an attempt: its last observation and whether it succeeded (for memory). */
  endAttempt(lastObservation: string, success: boolean): void;
}

/** A uniformly random hidden cell. */
function randomMineSweeperMove(observation: string, rng: Rng): string {
  const cells = parseMineSweeperObservation(observation);
  const cols = cells[0].length;
  const hidden = cells.flat().map((s, i) => (s === '?' ? i : -1)).filter((i) => i >= 0);
  const i = rng.pick(hidden);
  return cellAction(Math.floor(i / cols), i % cols);
}

/** Three moves, each uniform among the moves not blocked at that point of the turn. */
function randomSokobanMove(observation: string, rng: Rng): string {
  let s = parseSokoban(observation);
  const seq: Move[] = [];
  for (let k = 0; k < MOVES_PER_TURN; k++) {
    const legal = MOVES.filter((m) => applyMove(s, m).moved);
    if (legal.length === 0) break;
    const m = rng.pick(legal);
    seq.push(m);
    s = applyMove(s, m).state;
  }
  return seq.length > 0 ? seq.join(', ') : 'up';
}

/**
 * Make a fresh policy for one session (memory starts empty). `seed` drives the random choices.
 * `mines` is the env's mine count (MineSweeper solver).
 */
export function makePolicy(name: PolicyName, kind: EnvKind, seed: number, opts: { mines?: number } = {}): LocalPolicy {
  const rng = new Rng(seed);
  if (name === 'random') {
    return {
      act: (obs) => (kind === 'minesweeper' ? randomMineSweeperMove(obs, rng) : randomSokobanMove(obs, rng)),
      endAttempt: () => {},
    };
  }
  if (kind === 'minesweeper') {
    const memory: MineMemory = new Map();
    const mines = opts.mines ?? 3;
    return {
      act: (obs) => {
        rememberMines(memory, obs);
        return mineSweeperSolverMove(obs, mines, memory);
      },
      endAttempt: (obs) => rememberMines(memory, obs),
    };
  }
  return {
    act: (obs) => sokobanSolverMove(obs) ?? randomSokobanMove(obs, rng),
    endAttempt: () => {},
  };
}
