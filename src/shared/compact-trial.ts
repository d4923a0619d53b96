/**
 * Demonstration trials of the compact builtin policy: what the environments play
 * (src/envs/compact-data.ts) and training turns into SFT examples
 * (src/training/data/compact-sft.ts), which must not import each other, so the shape lives here,
 * below both. Types only.
 */
import type { EnvKind } from '../domain.js';

/** One decision: the observation, the answer played, and the soft target it was drawn from. */
export interface CompactStep {
  observation: string;
  /** The answer played (for a solver step one draw from `choices`; for a noisy or model step anything). */
  action: string;
  /**
   * The target as a sequence of positions, each the set of equally good pieces there, conditioned
   * on the pieces of the solver's own answer before it (`target`): MineSweeper `[[cells...]]`;
   * Sokoban `[[moves], [', '], [moves], ...]`. null: no target (a Sokoban state with no solution).
   */
  choices: string[][] | null;
  /** The solver's answer whose pieces condition `choices` (one draw from each set). */
  target: string | null;
  /**
   * MineSweeper: a mine that the memory names is among the equally safest cells the solver would
   * give without the memory, so only reading the memory keeps the answer off it. Sokoban: a push
   * that the memory names as a dead end can be made by the answer's first move (`deadMoves[0]`), or
   * the target avoids the pushes the memory names and differs from the plain solver's there
   * (`pushMemoryTarget`). Absent: false.
   */
  memoryMatters?: boolean;
  /**
   * Sokoban: the target is the solver's for the game where the pushes the memory names as dead
   * ends are forbidden (src/envs/compact-targets.ts `sokobanChoices` with `avoidNamed`), and it
   * differs from the plain solver's target. Absent: false.
   */
  pushMemoryTarget?: boolean;
  /**
   * Answers the environment refuses as invalid in this state, as pieces of the first answer
   * position (MineSweeper: the revealed cells `(r, c)`), never among `choices[0]`. Absent: none.
   */
  invalid?: string[];
  /**
   * MineSweeper: the hidden cells that the board in front of the player proves to be mines (the
   * solver's exact mine probability 1 from the revealed numbers and the mine count, no memory), as
   * pieces of the first answer position, never among `choices[0]`. Absent: none.
   */
  provableMines?: string[];
  /**
   * Sokoban: for each position of `choices`, the moves that would not move from the state that
   * the pieces of `target` before it reach (into a wall, or pushing a box into a wall or a box:
   * the env's no-op, an invalid action); [] at the separators. Absent: no such move anywhere.
   */
  invalidMoves?: string[][];
  /**
   * Sokoban: for each position of `choices` (aligned as `invalidMoves`), the moves that would make
   * a push that the memory names as a dead end (src/envs/sokoban-pushes.ts `deadPushReflection`)
   * into a state with no solution, from the state the pieces of `target` before it reach; [] at
   * the separators. Never among the position's choices. Absent: no such move anywhere.
   */
  deadMoves?: string[][];
  /** The env flagged the answer played (`action`) as an invalid action. Absent: false. */
  invalidAction?: boolean;
}

export interface CompactAttempt {
  steps: CompactStep[];
  finalObservation: string;
  success: boolean;
  /** The reflection written after the attempt (a failed one with attempts left), else null. */
  reflection: string | null;
}

export interface CompactTrial {
  env: EnvKind;
  /** Full env name, e.g. `minesweeper-6x6-3`. */
  envName: string;
  seed: number;
  instructions: string;
  attempts: CompactAttempt[];
}
