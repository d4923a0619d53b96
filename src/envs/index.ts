/**
 * Registry of the built-in environments, task ids and seed ranges.
 *
 * Env names carry their parameters: `minesweeper-6x6-3` (rows x cols, mines),
 * `sokoban-6x6-2` (rows x cols, boxes; optional `-m<min>-<max>` solution-length bounds).
 * A task id is `<env name>:seed=<seed>`, e.g. `minesweeper-6x6-3:seed=42`.
 *
 * Seed ranges (disjoint, so no evaluation task is ever trained on):
 * - train seeds: 0 <= seed < 1_000_000_000 (demonstrations, training rollouts);
 * - eval seeds:  1_000_000_000 <= seed < 2^32 (held-out tasks of `lamer eval`).
 * Turn caps per attempt (LaMer reference code; docs/method.md#environments): 7 for both games.
 */
import { MineSweeperEnv, type MineSweeperParams } from './minesweeper.js';
import { SokobanEnv, type SokobanParams } from './sokoban.js';
import type { BuiltinEnv } from './types.js';
import type { EnvKind } from '../domain.js';
import { EVAL_SEED_START, parseEnvName, SEED_END, type EnvParams } from '../shared/env-names.js';

const TRAIN_SEED_START = 0;
export { EVAL_SEED_START, parseEnvName, type EnvParams };
/** How many held-out eval seeds there are, [EVAL_SEED_START, 2^32): the most tasks an evaluation can play. */
export const EVAL_SEED_COUNT = SEED_END - EVAL_SEED_START;

/** Turns per attempt (`maxSteps` of a session). */
export const MAX_STEPS: Record<EnvKind, number> = { minesweeper: 7, sokoban: 7 };

/**
 * Make an env from a kind ('minesweeper' | 'sokoban', with optional params) or a full name
 * ('minesweeper-8x8-10'). @throws RangeError for an unknown name or bad parameters.
 */
export function makeEnv(name: string, params: EnvParams = {}): BuiltinEnv {
  const parsed = parseEnvName(name);
  if (parsed.kind === 'minesweeper') return new MineSweeperEnv({ ...parsed.params, ...(params as Partial<MineSweeperParams>) });
  return new SokobanEnv({ ...parsed.params, ...(params as Partial<SokobanParams>) });
}

/** `${envName}:seed=${seed}`. @throws RangeError for a seed outside [0, 2^32). */
export function taskId(envName: string, seed: number): string {
  checkSeed(seed);
  return `${envName}:seed=${seed}`;
}

/** Parse a task id. @throws RangeError when malformed. */
export function parseTaskId(id: string): { envName: string; kind: EnvKind; params: EnvParams; seed: number } {
  const m = /^([a-z0-9x-]+):seed=(\d+)$/.exec(id);
  if (!m) throw new RangeError(`bad task id '${id}': expected <env>:seed=<n>`);
  const seed = Number(m[2]);
  checkSeed(seed);
  const { kind, params } = parseEnvName(m[1]);
  return { envName: m[1], kind, params, seed };
}

function checkSeed(seed: number): void {
  if (!Number.isInteger(seed) || seed < 0 || seed >= SEED_END) throw new RangeError(`seed must be an integer in [0, 2^32), got ${seed}`);
}

/** The i-th held-out eval seed after offset `base`. @throws RangeError outside the eval range. */
export function evalSeed(base: number, i: number): number {
  const s = EVAL_SEED_START + base + i;
  if (!Number.isInteger(s) || s < EVAL_SEED_START || s >= SEED_END) throw new RangeError(`eval seed ${s} outside [${EVAL_SEED_START}, 2^32)`);
  return s;
}

/** The i-th training seed after offset `base`. @throws RangeError outside the train range. */
export function trainSeed(base: number, i: number): number {
  const s = TRAIN_SEED_START + base + i;
  if (!Number.isInteger(s) || s < TRAIN_SEED_START || s >= EVAL_SEED_START) throw new RangeError(`train seed ${s} outside [0, ${EVAL_SEED_START})`);
  return s;
}

export { MineSweeperEnv, SokobanEnv };
export type { BuiltinEnv, TextEnv } from './types.js';
