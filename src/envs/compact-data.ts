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
 */
import { parseGridRows, gridText } from './grid.js';
import { MAX_STEPS, makeEnv } from './index.js';
import { cellAction, MineSweeperEnv, parseCellAction } from './minesweeper.js';
import { analyseMines, type MineAnalysis, type MineMemory } from './solvers/minesweeper-solver.js';
import { solveSokobanAvoiding } from './solvers/sokoban-solver.js';
import {
  applyMove, isCornered, MOVES, MOVES_PER_TURN, parseSokoban, solveSokoban, type Move, type SokobanState,
} from './sokoban.js';
import {
  deadPushMoves, deadPushReflection, firstPush, namedDeadPushes, sokobanFatalPush, type SokobanPush,
} from './sokoban-pushes.js';
import { Rng } from './rng.js';
import type { EnvKind } from '../domain.js';
import type { CompactAttempt, CompactStep, CompactTrial } from '../shared/compact-trial.js';

export type { CompactAttempt, CompactStep, CompactTrial } from '../shared/compact-trial.js';

/**
 * The equally safest hidden cells of a MineSweeper observation, as actions `(r, c)` (1-based),
 * ascending; cells that `knownMines` (0-based indices) names are excluded and count as mines.
 * @throws Error when no hidden cell is left.
 */
export function mineSweeperChoices(observation: string, mines: number, knownMines: ReadonlySet<number>): string[] {
  const cells = parseGridRows(observation);
  const memory: MineMemory = new Map([...knownMines].map((i) => [i, '*']));
  return safestCells(cells, analyseMines(cells, mines, memory), knownMines);
}

/** `mineSweeperChoices` from the board's `analyseMines` with `knownMines` as its memory. */
function safestCells(cells: string[][], a: MineAnalysis, knownMines: ReadonlySet<number>): string[] {
  const cols = cells[0]!.length;
  const flat = cells.flat();
  const hidden = flat.map((s, i) => i).filter((i) => flat[i] === '?' && !knownMines.has(i));
  if (hidden.length === 0) throw new Error('minesweeper: no hidden cell');
  const p = (i: number) => Math.round((Number.isNaN(a.probability[i]!) ? 1 : a.probability[i]!) * 1e9) / 1e9;
  const best = Math.min(...hidden.map(p));
  return hidden.filter((i) => p(i) === best).map((i) => cellAction(Math.floor(i / cols), i % cols));
}

/**
 * A memory contrast decision: the MineSweeper `observation` seen again in a later attempt whose
 * memory says `cell` (an action `(r, c)`, 1-based) was a mine, as a one-decision trial (attempt 0
 * holds only that reflection; attempt 1 the decision, its target the solver's safest cells knowing
 * the mine, marked `memoryMatters`). Built for the cell a model would click, it trains reading the
 * memory exactly where the model's own probability mass sits.
 * @returns null when `cell` is not a hidden cell that can hold a mine on this board (a number
 *   proves it safe), so the memory would not be a fact of any task with this board.
 */
export function mineSweeperContrast(envName: string, seed: number, observation: string, mines: number, cell: string, rng: Rng): CompactTrial | null {
  const cells = parseGridRows(observation);
  const cols = cells[0]!.length;
  const at = parseCellAction(cell.trim());
  if (!at || at.row < 1 || at.col < 1 || at.row > cells.length || at.col > cols || cells[at.row - 1]![at.col - 1] !== '?') return null;
  const i = (at.row - 1) * cols + (at.col - 1);
  const bare = analyseMines(cells, mines);
  if (!(bare.probability[i]! > 0)) return null;
  const choices = mineSweeperChoices(observation, mines, new Set([i]));
  const target = choices[rng.int(choices.length)]!;
  const reflection = `${cellAction(at.row - 1, at.col - 1)} was a mine.`;
  return {
    env: 'minesweeper', envName, seed, instructions: makeEnv(envName).instructions,
    attempts: [
      { steps: [], finalObservation: observation, success: false, reflection },
      {
        steps: [{
          observation, action: target, choices: [choices], target, memoryMatters: true,
          ...invalidField(revealedCells(observation)), ...provableField(provenMines(cells, bare)),
        }],
        finalObservation: observation, success: false, reflection: null,
      },
    ],
  };
}

/**
 * A memory contrast pair: `mineSweeperContrast` for a `cell` that the solver counts among the
 * equally safest cells of `observation` when nothing is remembered, and its twin, the same board
 * in a first attempt (no memory), whose target set includes `cell`. Only the memory line tells the
 * two decisions apart, so a model lowers `cell` under the memory without lowering it on the bare
 * board only by reading the memory; a contrast whose cell is a poor click anyway (not among the
 * safest) can be learnt from the board alone and teaches nothing about the memory.
 * @returns null when `cell` cannot hold a mine (see `mineSweeperContrast`) or is not among the
 *   safest cells without memory.
 */
export function mineSweeperContrastPair(
  envName: string, seed: number, observation: string, mines: number, cell: string, rng: Rng,
): { withMemory: CompactTrial; twin: CompactTrial } | null {
  const bare = mineSweeperChoices(observation, mines, new Set());
  const at = parseCellAction(cell.trim());
  // the cell as the env reads the answer (its last `(r, c)`)
  if (!at || !bare.includes(cellAction(at.row - 1, at.col - 1))) return null;
  const withMemory = mineSweeperContrast(envName, seed, observation, mines, cell, rng);
  if (!withMemory) return null;
  const target = bare[rng.int(bare.length)]!;
  // the same board proves the same mines, whatever the memory says
  const { provableMines } = withMemory.attempts[1]!.steps[0]!;
  const twin: CompactTrial = {
    env: 'minesweeper', envName, seed, instructions: withMemory.instructions,
    attempts: [{
      steps: [{
        observation, action: target, choices: [bare], target,
        ...invalidField(revealedCells(observation)), ...(provableMines ? { provableMines: [...provableMines] } : {}),
      }],
      finalObservation: observation, success: false, reflection: null,
    }],
  };
  return { withMemory, twin };
}

/**
 * A Sokoban memory contrast pair: where an `answer` (the moves a model plays from `observation` in a
 * first attempt, at most 3 as the env reads them) makes a push that leaves the puzzle with no
 * solution, `withMemory` is the same board in a later attempt whose memory names that push
 * (`deadPushReflection`), its target the solver's (`sokobanChoices`) with the moves that would
 * make the named push recorded (`deadMoves`; marked `memoryMatters` when the push is one move
 * away, at the first position); `twin` is the same board in a first attempt, the plain solver's
 * target without them. The solver never gives a dead push, so by default the pair's targets agree
 * and only the memory line and its unlikelihood labels separate the two: trained where the model's
 * own answer goes, as `mineSweeperContrastPair` is. With `pushMemoryTargets`, the with-memory
 * target is the one that avoids the named push from this state on (`sokobanChoices` with
 * `avoidNamed`), marked `memoryMatters` and `pushMemoryTarget` where it differs from the twin's
 * plain one, so that the memory line is what separates the two targets.
 * @returns null when the answer makes no dead push, the board has no solution, or the memory
 *   changes nothing: the named push is made at no position of the with-memory target path (the
 *   answer leaves the solver's path before it) and the target does not avoid it.
 */
export function sokobanContrastPair(
  envName: string, seed: number, observation: string, answer: string, rng: Rng, pushMemoryTargets = false,
): { withMemory: CompactTrial; twin: CompactTrial } | null {
  const push = firstPush(observation, answer, (after) => solveSokoban(after) === null);
  if (!push) return null;
  const plain = sokobanChoices(observation, rng, [push]);
  if (!plain) return null;
  const avoiding = pushMemoryTargets ? sokobanChoices(observation, rng, [push], true) : null;
  const c = avoiding?.pushMemoryTarget ? avoiding : plain;
  if (!c.pushMemoryTarget && !c.deadMoves.some((m) => m.length > 0)) return null;
  const instructions = makeEnv(envName).instructions;
  const step = (memory: boolean): CompactStep => {
    const { choices, target, invalid, deadMoves, pushMemoryTarget } = memory ? c : plain;
    return {
      observation, action: target, choices, target,
      ...(memory && (deadMoves[0]!.length > 0 || pushMemoryTarget) ? { memoryMatters: true } : {}),
      ...(memory && pushMemoryTarget ? { pushMemoryTarget: true } : {}),
      ...(invalid.some((m) => m.length > 0) ? { invalidMoves: invalid } : {}),
      ...(memory && deadMoves.some((m) => m.length > 0) ? { deadMoves } : {}),
    };
  };
  const attempt = (memory: boolean): CompactAttempt => ({
    steps: [step(memory)], finalObservation: observation, success: false, reflection: null,
  });
  return {
    withMemory: {
      env: 'sokoban', envName, seed, instructions,
      attempts: [{ steps: [], finalObservation: observation, success: false, reflection: deadPushReflection(push) }, attempt(true)],
    },
    twin: { env: 'sokoban', envName, seed, instructions, attempts: [attempt(false)] },
  };
}

/** The revealed (not `?`) cells of a MineSweeper observation as actions `(r, c)`, in reading order. */
export function revealedCells(observation: string): string[] {
  const cells = parseGridRows(observation);
  return cells.flatMap((row, r) => row.flatMap((s, c) => (s === '?' ? [] : [cellAction(r, c)])));
}

/** `{ invalid }` when there are invalid answers, else nothing: a step's optional field. */
const invalidField = (invalid: string[]): { invalid?: string[] } => (invalid.length > 0 ? { invalid } : {});

/**
 * The hidden cells of a MineSweeper observation that the board itself proves to be mines: mine
 * probability exactly 1 in the solver's analysis of the revealed numbers and the mine count
 * (src/envs/solvers analyseMines, no memory), as actions `(r, c)` (1-based), in reading order.
 * Where the frontier is too large for exact enumeration, the solver's fallback still names only
 * proven mines (a number whose hidden neighbours must all be mines), possibly fewer.
 */
export function provableMineCells(observation: string, mines: number): string[] {
  const cells = parseGridRows(observation);
  return provenMines(cells, analyseMines(cells, mines));
}

/** `provableMineCells` from the board's `analyseMines` without memory. */
function provenMines(cells: string[][], bare: MineAnalysis): string[] {
  const cols = cells[0]!.length;
  const flat = cells.flat();
  return bare.mines.filter((i) => flat[i] === '?').map((i) => cellAction(Math.floor(i / cols), i % cols));
}

/** `{ provableMines }` when there are any, else nothing: a step's optional field. */
const provableField = (provableMines: string[]): { provableMines?: string[] } => (provableMines.length > 0 ? { provableMines } : {});

/**
 * The labels of one MineSweeper decision of a trial: the solver's safest cells knowing the mines
 * that reflections name (`knownMines`, indices; `namedMines`, the same as actions), the cells the
 * board proves to be mines, and whether a named mine is among the safest cells of the bare board
 * (`memoryMatters`). The bare board is analysed once for both; the memory adds a second analysis.
 */
function mineSweeperLabels(
  observation: string, mines: number, knownMines: ReadonlySet<number>, namedMines: ReadonlySet<string>,
): { choices: string[]; provableMines: string[]; memoryMatters: boolean } {
  const cells = parseGridRows(observation);
  const bare = analyseMines(cells, mines);
  const choices = knownMines.size > 0 ? mineSweeperChoices(observation, mines, knownMines) : safestCells(cells, bare, knownMines);
  const memoryMatters = namedMines.size > 0 && safestCells(cells, bare, new Set()).some((c) => namedMines.has(c));
  return { choices, provableMines: provenMines(cells, bare), memoryMatters };
}

/**
 * The solver a soft target follows: shortest solution lengths memoised per state key (`memo`),
 * with the pushes of `forbidden` never made (none: the plain solver).
 */
interface SokobanGoal { memo: Map<string, number | null>; forbidden: readonly SokobanPush[] }

/** Shortest solution length from `s` under `goal` (`solveSokobanAvoiding`), or null when there is none; memoised. */
function distance(s: SokobanState, goal: SokobanGoal): number | null {
  const k = `${s.player}|${[...s.boxes].sort((a, b) => a - b).join(',')}`;
  if (goal.memo.has(k)) return goal.memo.get(k)!;
  const plan = goal.forbidden.length > 0 ? solveSokobanAvoiding(s, goal.forbidden) : solveSokoban(s);
  const d = plan ? plan.length : null;
  goal.memo.set(k, d);
  return d;
}

/**
 * The moves from `s` (distance `d` under `goal`, > 0) that start a shortest solution under `goal`:
 * moves that move, make no forbidden push, and lower the distance by one.
 */
const shortestMoves = (s: SokobanState, d: number, goal: SokobanGoal): Move[] => MOVES.filter((m) => {
  const o = applyMove(s, m);
  if (!o.moved || (o.push && goal.forbidden.some((p) => p.row * s.cols + p.col === o.push!.from && p.move === m))) return false;
  return distance(o.state, goal) === d - 1;
});

/**
 * Soft target of one Sokoban turn from an observation: per move position the moves that start a
 * shortest solution, along one drawn optimal path of up to 3 moves (fewer when it solves sooner);
 * `invalid`, aligned with `choices`, the moves that would not move at each move position of that
 * path ([] at the separators); `deadMoves`, aligned alike, the moves there that make one of the
 * `named` pushes (what the memory names, `namedDeadPushes`) into a state with no solution.
 * With `avoidNamed` (`--push-memory-targets`), the shortest solutions are those of the game where
 * the `named` pushes are forbidden from this state on (src/envs/solvers `solveSokobanAvoiding`),
 * and the plain solver's where no solution avoids them (or its search budget runs out);
 * `pushMemoryTarget` is true when that changed the target: at some position of the drawn path the
 * set of moves differs from the plain solver's set from the same state. Where it is false the
 * result is the plain solver's, draw for draw.
 * Without `avoidNamed`, the draws from `rng` do not depend on `named`.
 * @returns null when the position has no solution (or is already solved).
 */
export function sokobanChoices(
  observation: string, rng: Rng, named: readonly SokobanPush[] = [], avoidNamed = false,
): { choices: string[][]; target: string; invalid: string[][]; deadMoves: string[][]; pushMemoryTarget: boolean } | null {
  let s = parseSokoban(observation);
  const plain: SokobanGoal = { memo: new Map(), forbidden: [] };
  if (!distance(s, plain)) return null; // null (no solution) or 0 (solved)
  const avoiding: SokobanGoal = { memo: new Map(), forbidden: avoidNamed ? named : [] };
  const goal = avoiding.forbidden.length > 0 && distance(s, avoiding) !== null ? avoiding : plain;
  let d = distance(s, goal)!;
  const choices: string[][] = [];
  const invalid: string[][] = [];
  const deadMoves: string[][] = [];
  const picked: Move[] = [];
  let pushMemoryTarget = false;
  for (let j = 0; j < MOVES_PER_TURN && d > 0; j++) {
    const good = shortestMoves(s, d, goal);
    if (good.length === 0) break; // cannot happen for an exact BFS distance
    if (goal === avoiding && good.join() !== shortestMoves(s, distance(s, plain)!, plain).join()) pushMemoryTarget = true;
    if (j > 0) {
      choices.push([', ']);
      invalid.push([]);
      deadMoves.push([]);
    }
    choices.push(good);
    invalid.push(MOVES.filter((m) => !applyMove(s, m).moved));
    deadMoves.push(deadPushMoves(s, named, (x) => distance(x, plain) === null));
    const m = good[rng.int(good.length)]!;
    picked.push(m);
    s = applyMove(s, m).state;
    d -= 1;
  }
  return { choices, target: picked.join(', '), invalid, deadMoves, pushMemoryTarget };
}

/**
 * The labels of one Sokoban decision of a trial: `sokobanChoices` for the pushes its memory names
 * (`named`), and whether it is a memory decision (`memoryMatters`): the analogue of a named mine
 * among the safest cells, a named push one move away (`deadMoves[0]`), or a target that avoiding
 * the named pushes changed (`pushMemoryTarget`, with `avoidNamed`). Null where `sokobanChoices` is.
 */
function sokobanLabels(observation: string, rng: Rng, named: readonly SokobanPush[], avoidNamed: boolean) {
  const c = sokobanChoices(observation, rng, named, avoidNamed);
  return c && { ...c, memoryMatters: c.deadMoves[0]!.length > 0 || c.pushMemoryTarget };
}

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

// ---------------------------------------------------------------------------------------------
// Board symmetries
// ---------------------------------------------------------------------------------------------

/**
 * One of the 8 symmetries of a square grid (4 of a non-square one): transpose first (when
 * `transpose`), then flip rows, then flip columns. Index k in 0..7: bit 2 transpose, bit 1 flip
 * rows, bit 0 flip columns.
 */
export interface Symmetry {
  transpose: boolean;
  flipRows: boolean;
  flipCols: boolean;
}

export const symmetry = (k: number): Symmetry => ({ transpose: (k & 4) !== 0, flipRows: (k & 2) !== 0, flipCols: (k & 1) !== 0 });

/** Maps a 0-based cell of an R x C grid (R x C before the transform). */
function mapCell(sym: Symmetry, r: number, c: number, R: number, C: number): [number, number] {
  let [rr, cc, RR, CC] = sym.transpose ? [c, r, C, R] : [r, c, R, C];
  if (sym.flipRows) rr = RR - 1 - rr;
  if (sym.flipCols) cc = CC - 1 - cc;
  return [rr, cc];
}

const MOVE_MAP: Record<Move, Record<'transpose' | 'flipRows' | 'flipCols', Move>> = {
  up: { transpose: 'left', flipRows: 'down', flipCols: 'up' },
  down: { transpose: 'right', flipRows: 'up', flipCols: 'down' },
  left: { transpose: 'up', flipRows: 'left', flipCols: 'right' },
  right: { transpose: 'down', flipRows: 'right', flipCols: 'left' },
};

function mapMove(sym: Symmetry, m: Move): Move {
  let out = m;
  if (sym.transpose) out = MOVE_MAP[out].transpose;
  if (sym.flipRows) out = MOVE_MAP[out].flipRows;
  if (sym.flipCols) out = MOVE_MAP[out].flipCols;
  return out;
}

/** A grid observation (gridText form) under `sym`; `base` 1 for MineSweeper, 0 for Sokoban. */
function mapGrid(sym: Symmetry, obs: string, base: 0 | 1): string {
  const rows = parseGridRows(obs);
  const R = rows.length;
  const C = rows[0]!.length;
  const [RR, CC] = sym.transpose ? [C, R] : [R, C];
  const out: string[][] = Array.from({ length: RR }, () => new Array<string>(CC).fill('?'));
  for (let r = 0; r < R; r++) for (let c = 0; c < C; c++) {
    const [rr, cc] = mapCell(sym, r, c, R, C);
    out[rr]![cc] = rows[r]![c]!;
  }
  return gridText(out.map((row) => row.join('')), base);
}

/** Cells `(r, c)` and move words in a text under `sym` (cells numbered from `base`). */
function mapText(sym: Symmetry, text: string, R: number, C: number, base: 0 | 1): string {
  return text
    .replace(/\((\d+), (\d+)\)/g, (all, a: string, b: string) => {
      const r = Number(a) - base;
      const c = Number(b) - base;
      if (r < 0 || c < 0 || r >= R || c >= C) return all;
      const [rr, cc] = mapCell(sym, r, c, R, C);
      return `(${rr + base}, ${cc + base})`;
    })
    .replace(/\b(up|down|left|right)\b/g, (m) => mapMove(sym, m as Move));
}

/**
 * A trial under a board symmetry: every observation, action, target piece and reflection mapped
 * alike, so the result is a trial of the mapped task. Non-square boards take only symmetries
 * without transpose. @throws Error for a transpose of a non-square board.
 */
export function transformTrial(trial: CompactTrial, sym: Symmetry): CompactTrial {
  const first = parseGridRows(trial.attempts[0]!.steps[0]?.observation ?? trial.attempts[0]!.finalObservation);
  const R = first.length;
  const C = first[0]!.length;
  if (sym.transpose && R !== C) throw new Error(`transpose needs a square board, got ${R}x${C}`);
  const base: 0 | 1 = trial.env === 'minesweeper' ? 1 : 0;
  const g = (o: string) => mapGrid(sym, o, base);
  const t = (x: string) => mapText(sym, x, R, C, base);
  return {
    ...trial,
    attempts: trial.attempts.map((a) => ({
      steps: a.steps.map((s) => ({
        observation: g(s.observation),
        action: t(s.action),
        choices: s.choices ? s.choices.map((set) => set.map(t)) : null,
        target: s.target === null ? null : t(s.target),
        ...(s.memoryMatters ? { memoryMatters: true } : {}),
        ...(s.pushMemoryTarget ? { pushMemoryTarget: true } : {}),
        ...(s.invalid ? { invalid: s.invalid.map(t) } : {}),
        ...(s.provableMines ? { provableMines: s.provableMines.map(t) } : {}),
        ...(s.invalidMoves ? { invalidMoves: s.invalidMoves.map((set) => set.map(t)) } : {}),
        ...(s.deadMoves ? { deadMoves: s.deadMoves.map((set) => set.map(t)) } : {}),
        ...(s.invalidAction ? { invalidAction: true } : {}),
      })),
      finalObservation: g(a.finalObservation),
      success: a.success,
      reflection: a.reflection === null ? null : t(a.reflection),
    })),
  };
}

/** Symmetry indices valid for a board (all 8 when square, else the 4 without transpose). */
export function symmetriesFor(rows: number, cols: number): number[] {
  return rows === cols ? [0, 1, 2, 3, 4, 5, 6, 7] : [0, 1, 2, 3];
}
