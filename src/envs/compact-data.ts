/**
 * Demonstration trials for the compact builtin policy: the builtin games played as LaMer sessions
 * (up to 3 attempts at one task, the same initial state each attempt), where every decision carries
 * the solver's *soft target*: the set of equally good answers, not one of them.
 *
 * - MineSweeper: the hidden cells whose mine probability is the lowest (src/envs/solvers
 *   analyseMines, exact enumeration), knowing the mines that earlier attempts' reflections name.
 * - Sokoban: one answer is up to 3 moves; at each move the set of moves that start a shortest
 *   solution from the state reached so far (BFS, `solveSokoban`).
 * - Reflections are factual, in the compact memory language (src/envs/vocab.ts MEMORY_WORDS):
 *   `(2, 3) was a mine.`, `turns ran out.`, `box (2, 3) stuck in a corner.`, `boxes stuck. dead end.`,
 *   or, with `pushReflections`, the push that ended a Sokoban attempt: `box (2, 3) right dead end.`.
 * - Failures on purpose: a trial's acting policy takes a random action with probability `noise`
 *   at each step, so that attempts fail, reflections follow and later attempts act with memory.
 * - The 8 board symmetries (4 for non-square boards) map a whole trial to an equally valid one
 *   (`transformTrial`).
 * Pure and deterministic given the seeds; no model, no HTTP.
 *
 * The solver's soft targets of one decision live in src/envs/compact-targets.ts, the memory
 * contrast trials in src/envs/compact-contrast.ts and the board symmetries in
 * src/envs/compact-symmetry.ts; this module plays the trials and re-exports all three.
 */
import { parseGridRows } from './grid.js';
import { MAX_STEPS, makeEnv } from './index.js';
import { cellAction, MineSweeperEnv, parseCellAction } from './minesweeper.js';
import { isCornered, MOVES, MOVES_PER_TURN, parseSokoban, solveSokoban } from './sokoban.js';
import { deadPushReflection, namedDeadPushes, sokobanFatalPush, type SokobanPush } from './sokoban-pushes.js';
import { invalidField, mineSweeperLabels, provableField, revealedCells, sokobanLabels } from './compact-targets.js';
import { Rng } from './rng.js';
import type { EnvKind } from '../domain.js';
import type { CompactAttempt, CompactStep, CompactTrial } from '../shared/compact-trial.js';

export type { CompactAttempt, CompactStep, CompactTrial } from '../shared/compact-trial.js';
export { mineSweeperChoices, provableMineCells, revealedCells, sokobanChoices } from './compact-targets.js';
export { mineSweeperContrast, mineSweeperContrastPair, sokobanContrastPair } from './compact-contrast.js';
export { symmetriesFor, symmetry, transformTrial, type Symmetry } from './compact-symmetry.js';

/** Compact reflection after a failed MineSweeper attempt: the mine clicked, or the turn cap. */
export function mineSweeperCompactReflection(lastAction: string, finalObservation: string, hitMine: boolean): string {
  if (hitMine) {
    const cell = parseCellAction(lastAction);
    const cells = parseGridRows(finalObservation);
    // the clicked mine is the '*' on the final board; the action names it when it parses
    let name = cell ? `(${cell.row}, ${cell.col})` : null;
    if (!name) {
      const i = cells.flat().indexOf('*');
      if (i >= 0) name = cellAction(Math.floor(i / cells[0]!.length), i % cells[0]!.length);
    }
    if (name) return `${name} was a mine.`;
  }
  return 'turns ran out.';
}

/**
 * Compact reflection after a failed Sokoban attempt. With `push` (the push that ended it dead,
 * `sokobanFatalPush`): that push, `deadPushReflection`. Without: a cornered box
 * (`box (r, c) stuck in a corner.`), another dead end (`boxes stuck. dead end.`), or the turn cap
 * (`turns ran out.`), read from the final board.
 */
export function sokobanCompactReflection(finalObservation: string, push: SokobanPush | null = null): string {
  if (push) return deadPushReflection(push);
  const s = parseSokoban(finalObservation);
  const cornered = s.boxes.find((b) => isCornered(s, b));
  if (cornered !== undefined) return `box (${Math.floor(cornered / s.cols)}, ${cornered % s.cols}) stuck in a corner.`;
  if (solveSokoban(s) === null) return 'boxes stuck. dead end.';
  return 'turns ran out.';
}

/** A policy that plays a trial: the answer for a decision, given what the solver would do. */
export type TrialPolicy = (ctx: {
  env: EnvKind; observation: string; attempt: number; step: number; memory: string[];
  choices: string[][] | null; target: string | null; rng: Rng;
}) => string;

/** The solver itself, drawing one of its equally good answers. */
export const solverPolicy: TrialPolicy = (c) => c.target ?? randomAction(c.env, c.observation, c.rng);

/** A uniformly random hidden cell (MineSweeper) or three random moves (Sokoban). */
export function randomAction(env: EnvKind, observation: string, rng: Rng): string {
  if (env === 'minesweeper') {
    const cells = parseGridRows(observation);
    const flat = cells.flat();
    const hidden = flat.map((_, i) => i).filter((i) => flat[i] === '?');
    const i = hidden.length ? hidden[rng.int(hidden.length)]! : 0;
    return cellAction(Math.floor(i / cells[0]!.length), i % cells[0]!.length);
  }
  return Array.from({ length: MOVES_PER_TURN }, () => MOVES[rng.int(4)]!).join(', ');
}

/** The solver, but with probability `noise` a random action instead (failures on purpose). */
export function noisyPolicy(noise: number): TrialPolicy {
  return (c) => (c.rng.next() < noise ? randomAction(c.env, c.observation, c.rng) : solverPolicy(c));
}

export interface TrialOptions {
  envName: string;
  seed: number;
  /** Attempts per trial (LaMer: 3). */
  maxAttempts: number;
  /** Turns per attempt (default: the env's, 7). */
  maxSteps?: number;
  /** Plays the trial's decisions; the solver's `choices` are recorded as targets whatever it plays. */
  policy: TrialPolicy;
  /** Seed of the draws among equally good answers and of noisy policies. */
  rngSeed: number;
  /**
   * Sokoban reflections name the push that ended an attempt dead (`deadPushReflection`), and the
   * decisions of later attempts record the moves that would make a push the memory names
   * (`CompactStep.deadMoves`, marked `memoryMatters`). Default false: the cornered-box and
   * dead-end reflections, no such labels.
   */
  pushReflections?: boolean;
  /**
   * With `pushReflections`: the target of a Sokoban decision whose memory names dead pushes is the
   * solver's for the game where those pushes are forbidden from the start of the attempt
   * (`sokobanChoices` with `avoidNamed`; the plain solver's where no solution avoids them), and a
   * decision whose target that changes is marked `memoryMatters` and `pushMemoryTarget`. Default
   * false: the plain solver's targets.
   */
  pushMemoryTargets?: boolean;
}

/**
 * Plays one trial: attempts until success or `maxAttempts`, each from `env.reset(seed)`, with a
 * factual reflection after each failed attempt that has attempts left. MineSweeper targets after a
 * reflection know the mines the reflections name (as a model reading its memory could); a step
 * where that knowledge changes the target (a named mine would otherwise be among the safest cells)
 * is marked `memoryMatters`. With `pushReflections`, a Sokoban step whose memory names a dead push
 * that a move of the target path could make records those moves (`deadMoves`), and is marked
 * `memoryMatters` when its first move could (the named push is one move away); with
 * `pushMemoryTargets` too, its target avoids the named pushes, and it is marked `memoryMatters` and
 * `pushMemoryTarget` where that changes the target.
 */
export function playCompactTrial(opts: TrialOptions): CompactTrial {
  const env = makeEnv(opts.envName);
  const rng = new Rng(opts.rngSeed);
  const maxSteps = opts.maxSteps ?? MAX_STEPS[env.kind];
  const attempts: CompactAttempt[] = [];
  const memory: string[] = [];
  const knownMines = new Set<number>();
  /** `knownMines` as actions `(r, c)`. */
  const namedMines = new Set<string>();
  for (let n = 0; n < opts.maxAttempts; n++) {
    const play = opts.policy;
    let obs = env.reset(opts.seed).observation;
    const steps: CompactStep[] = [];
    let success = false;
    let hitMine = false;
    /** The attempt ran out of turns (not ended by the env). */
    let truncated = true;
    for (let t = 0; t < maxSteps; t++) {
      let choices: string[][] | null = null;
      let target: string | null = null;
      let memoryMatters = false;
      let invalid: string[] = [];
      let provableMines: string[] = [];
      let invalidMoves: string[][] = [];
      let deadMoves: string[][] = [];
      let pushMemoryTarget = false;
      if (env instanceof MineSweeperEnv) {
        invalid = revealedCells(obs);
        const labels = mineSweeperLabels(obs, env.params.mines, knownMines, namedMines);
        ({ provableMines, memoryMatters } = labels);
        choices = [labels.choices];
        target = labels.choices[rng.int(labels.choices.length)]!;
      } else {
        const c = sokobanLabels(obs, rng, opts.pushReflections ? namedDeadPushes(memory) : [], opts.pushMemoryTargets === true);
        if (c) ({ choices, target, invalid: invalidMoves, deadMoves, pushMemoryTarget, memoryMatters } = c);
      }
      const action = play({ env: env.kind, observation: obs, attempt: n, step: t, memory, choices, target, rng });
      const r = env.step(action);
      steps.push({
        observation: obs, action, choices, target,
        ...(memoryMatters ? { memoryMatters } : {}),
        ...(pushMemoryTarget ? { pushMemoryTarget } : {}),
        ...invalidField(invalid),
        ...provableField(provableMines),
        ...(invalidMoves.some((m) => m.length > 0) ? { invalidMoves } : {}),
        ...(deadMoves.some((m) => m.length > 0) ? { deadMoves } : {}),
        ...(r.invalidAction ? { invalidAction: true } : {}),
      });
      obs = r.observation;
      if (r.done) {
        truncated = false;
        success = r.success;
        hitMine = env.kind === 'minesweeper' && !r.success;
        break;
      }
    }
    const more = !success && n + 1 < opts.maxAttempts;
    let reflection: string | null = null;
    if (more) {
      const last = steps[steps.length - 1];
      const dead = opts.pushReflections && env.kind === 'sokoban' && last && !truncated;
      const push = dead ? sokobanFatalPush(last.observation, last.action, obs) : null;
      reflection = env.kind === 'minesweeper'
        ? mineSweeperCompactReflection(last!.action, obs, hitMine)
        : sokobanCompactReflection(obs, push);
      memory.push(reflection);
      const named = parseCellAction(reflection);
      if (env.kind === 'minesweeper' && named && reflection.includes('was a mine')) {
        knownMines.add((named.row - 1) * (env as MineSweeperEnv).params.cols + (named.col - 1));
        namedMines.add(cellAction(named.row - 1, named.col - 1));
      }
    }
    attempts.push({ steps, finalObservation: obs, success, reflection });
    if (success) break;
  }
  return { env: env.kind, envName: env.name, seed: opts.seed, instructions: env.instructions, attempts };
}
