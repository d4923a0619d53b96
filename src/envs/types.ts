/**
 * The environment interface: a text environment that an agent plays by
 * reading observations and answering actions. Built-in envs (MineSweeper, Sokoban) implement it;
 * the eval harness and the demonstration generator drive it exactly as an external client of the
 * HTTP API would.
 *
 * Units: rewards are as given by the environment (docs/method.md#environments); one `step` call is one
 * turn (one action string, which for Sokoban may hold up to 3 moves).
 */
import type { EnvKind } from '../domain.js';

export interface ResetResult {
  /** The initial observation of the task instance named by the seed. */
  observation: string;
  /** Legal actions in canonical form, when the env can list them. */
  availableActions?: string[];
}

export interface StepResult {
  observation: string;
  /** Reward of this action (sum over moves for multi-move turns). */
  reward: number;
  /** The attempt is over (won, lost or dead). */
  done: boolean;
  /** The attempt is over and the task was solved. */
  success: boolean;
  /** The env rejected (part of) the action: unparseable, out of range or illegal. */
  invalidAction: boolean;
}

export interface TextEnv {
  /** Env name with its parameters, e.g. `minesweeper-6x6-3`; the task id is `${name}:seed=${seed}`. */
  readonly name: string;
  /** Rules, symbols and the exact answer format, as the env would tell a person. */
  readonly instructions: string;
  /** Start the task instance of `seed` (same seed, same initial state on every machine). */
  reset(seed: number): ResetResult;
  /** Play one turn. Throws if called before `reset` or after `done`. */
  step(action: string): StepResult;
}

/**
 * What the built-in envs offer beyond the contract: the legal actions of the current state (for
 * the random reference policy and for `availableActions`) and a kind tag.
 */
export interface BuiltinEnv extends TextEnv {
  readonly kind: EnvKind;
  /** Legal actions of the current state in canonical form; [] when done. */
  legalActions(): string[];
}
