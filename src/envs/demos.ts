/**
 * Demonstration sessions for the SFT warm start (written by `lamer demos`, read by sft training
 * jobs), one JSON object per line:
 *   { env, taskId, instructions, memory: 'reflection_only',
 *     attempts: [{ steps: [{ observation, action, reward, done, success }], reflection }] }
 * steps[i].observation is what the env posted at step i, reward the reward of the previous action
 * (0 at step 0); the last step has action null (done true, or false when the turn cap ended it).
 * `reflection` follows a failed attempt when another attempt follows, else null.
 *
 * Sessions are solver play on training seeds (see ./index.ts). round(failRate * tasks) sessions,
 * spread evenly over the tasks (`deliberateFailures`), start with a deliberately failed attempt (MineSweeper: the solver's moves then a click on a mine;
 * Sokoban: the solver's turns then the shortest walk that pushes a box into a dead position),
 * followed by a reflection written from the facts of the failure (which cell was a mine, which box
 * got stuck where) and a solver attempt that uses them. Natural solver failures (a forced guess
 * that hit a mine, running out of turns) get the same kind of reflection.
 */
import { writeFileSync } from 'node:fs';
import type { EnvKind } from '../domain.js';
import { makeEnv, MAX_STEPS, taskId, trainSeed, type EnvParams } from './index.js';
import { cellAction, MineSweeperEnv, parseMineSweeperObservation } from './minesweeper.js';
import { applyMove, isCornered, MOVES, MOVES_PER_TURN, parseSokoban, renderSokoban, SokobanEnv, type Move, type SokobanState } from './sokoban.js';
import { mineSweeperSolverMove, rememberMines, type MineMemory } from './solvers/minesweeper-solver.js';
import { sokobanSolverMove } from './solvers/sokoban-solver.js';
import { playAttempt, type PlayedAttempt } from './play.js';
import { Rng } from './rng.js';
import type { DemoAttempt, DemoSession, DemoStep } from '../training/data.js';

export interface DemoOptions {
  env: EnvKind;
  params?: EnvParams;
  /** Number of sessions (tasks). */
  tasks: number;
  /** Offset into the training seed range; task i uses trainSeed(seed, i). */
  seed: number;
  /** Fraction of sessions whose first attempt fails on purpose, in [0, 1]. Default 0.3. */
  failRate?: number;
  maxAttempts?: number;
  maxSteps?: number;
}

/** Generate demonstration sessions. @throws RangeError for bad options. */
export function generateDemos(opts: DemoOptions): DemoSession[] {
  const failRate = opts.failRate ?? 0.3;
  const maxAttempts = opts.maxAttempts ?? 3;
  const maxSteps = opts.maxSteps ?? MAX_STEPS[opts.env];
  if (!Number.isInteger(opts.tasks) || opts.tasks < 0) throw new RangeError(`tasks must be a non-negative integer, got ${opts.tasks}`);
  if (!(failRate >= 0 && failRate <= 1)) throw new RangeError(`failRate must be in [0, 1], got ${failRate}`);
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1) throw new RangeError('maxAttempts must be a positive integer');
  const out: DemoSession[] = [];
  const failing = deliberateFailures(opts.tasks, failRate);
  for (let i = 0; i < opts.tasks; i++) {
    const seed = trainSeed(opts.seed, i);
    const rng = new Rng(seed ^ 0x5bd1e995);
    rng.next(); // one draw skipped so a seed keeps giving the same sabotaged tasks (reproducible demo files)
    const failFirst = maxAttempts > 1 && failing[i];
    out.push(opts.env === 'minesweeper'
      ? mineSweeperSession(new MineSweeperEnv(opts.params as object), seed, rng, failFirst, maxAttempts, maxSteps)
      : sokobanSession(new SokobanEnv(opts.params as object), seed, rng, failFirst, maxAttempts, maxSteps));
  }
  return out;
}

/**
 * Which of `tasks` sessions fail on purpose: exactly k = round(failRate * tasks) of them, spread
 * evenly (session i fails when floor((i + 1) k / tasks) > floor(i k / tasks)), so that small
 * samples show reflections too. Returns [tasks] booleans.
 */
export function deliberateFailures(tasks: number, failRate: number): boolean[] {
  const k = Math.round(failRate * tasks);
  return Array.from({ length: tasks }, (_, i) => Math.floor(((i + 1) * k) / tasks) > Math.floor((i * k) / tasks));
}

/** Write sessions as JSONL. */
export function writeDemos(path: string, sessions: DemoSession[]): void {
  writeFileSync(path, sessions.map((s) => JSON.stringify(s)).join('\n') + (sessions.length ? '\n' : ''));
}

function toDemo(a: PlayedAttempt): DemoStep[] {
  return a.steps.map(({ observation, action, reward, done, success }) => ({ observation, action, reward, done, success }));
}

function sessionOf(env: { name: string; instructions: string; kind: EnvKind }, seed: number, attempts: DemoAttempt[]): DemoSession {
  return { env: env.kind, taskId: taskId(env.name, seed), instructions: env.instructions, memory: 'reflection_only', attempts };
}

// ---------------------------------------------------------------------------------------------
// MineSweeper

function mineSweeperSession(env: MineSweeperEnv, seed: number, rng: Rng, failFirst: boolean, maxAttempts: number, maxSteps: number): DemoSession {
  const mines = env.params.mines;
  const memory: MineMemory = new Map();
  const attempts: DemoAttempt[] = [];
  for (let n = 0; n < maxAttempts; n++) {
    const sabotage = failFirst && n === 0;
    const sabotageAt = sabotage ? rng.int(Math.min(3, maxSteps)) : -1;
    const played = playAttempt(env, seed, maxSteps, (obs, t) => {
      rememberMines(memory, obs);
      if (t === sabotageAt) {
        const hidden = new Set(parseMineSweeperObservation(obs).flat().map((s, i) => (s === '?' ? i : -1)));
        const m = env.mineCells().filter((c) => hidden.has(c.row * env.params.cols + c.col));
        if (m.length) {
          const c = rng.pick(m);
          return cellAction(c.row, c.col);
        }
      }
      return mineSweeperSolverMove(obs, mines, memory);
    });
    const last = played.steps[played.steps.length - 1];
    rememberMines(memory, last.observation);
    const more = !played.success && n + 1 < maxAttempts;
    attempts.push({ steps: toDemo(played), reflection: more ? mineSweeperReflection(played, memory, env.params.cols, n) : null });
    if (played.success) break;
  }
  return sessionOf(env, seed, attempts);
}

/**
 * A reflection from the facts of a failed MineSweeper attempt: how it ended, the mines known so far
 * (`memory`: cell index -> symbol seen revealed, over this session's attempts), and up to two cells
 * to open early next time: cells hidden in the attempt's initial observation that are known safe
 * (empty cells, which open an area, before numbered ones). Every attempt starts from the same
 * initial observation, so each suggested click is a legal, safe move.
 */
function mineSweeperReflection(played: PlayedAttempt, memory: MineMemory, cols: number, attempt: number): string {
  const name = (i: number) => cellAction(Math.floor(i / cols), i % cols);
  const mines = [...memory].filter(([, s]) => s === '*').map(([i]) => name(i));
  const initial = parseMineSweeperObservation(played.steps[0].observation).flat();
  const safeHidden = (sym: (s: string) => boolean) =>
    [...memory].filter(([i, s]) => initial[i] === '?' && sym(s)).map(([i]) => i).sort((x, y) => x - y);
  const empty = safeHidden((s) => s === '.');
  const numbered = safeHidden((s) => /^[1-8]$/.test(s));
  const last = played.steps[played.steps.length - 1];
  const lastAction = played.steps[played.steps.length - 2]?.action ?? '';
  const parts: string[] = [];
  if (last.done && !last.success) {
    parts.push(`Attempt ${attempt + 1} failed: ${lastAction.trim()} was a mine.`);
  } else {
    const hidden = parseMineSweeperObservation(last.observation).flat().filter((s) => s === '?').length;
    parts.push(`Attempt ${attempt + 1} ran out of turns with ${hidden} cells still hidden.`);
  }
  if (mines.length) parts.push(`Known mines: ${mines.join(', ')}. Never click them.`);
  if (empty.length) {
    parts.push(`Click known empty cells first to open large areas, e.g. ${empty.slice(0, 2).map(name).join(', ')}.`);
    parts.push('Then click only cells the numbers prove safe.');
  } else if (numbered.length) {
    parts.push(`Known safe cells: ${numbered.slice(0, 2).map(name).join(', ')}.`);
    parts.push('Then click only cells the numbers prove safe.');
  } else {
    parts.push('Click only cells the numbers prove safe.');
  }
  return parts.join(' ');
}

// ---------------------------------------------------------------------------------------------
// Sokoban

function sokobanSession(env: SokobanEnv, seed: number, rng: Rng, failFirst: boolean, maxAttempts: number, maxSteps: number): DemoSession {
  const attempts: DemoAttempt[] = [];
  for (let n = 0; n < maxAttempts; n++) {
    const sabotage = failFirst && n === 0;
    const sabotageAt = sabotage ? rng.int(Math.min(2, maxSteps)) : -1;
    let queued: Move[] | null = null;
    const played = playAttempt(env, seed, maxSteps, (obs, t) => {
      if (t === sabotageAt) queued = deadWalk(env, parseSokoban(obs));
      if (queued && queued.length) return queued.splice(0, MOVES_PER_TURN).join(', ');
      return sokobanSolverMove(obs) ?? 'up';
    });
    const more = !played.success && n + 1 < maxAttempts;
    attempts.push({ steps: toDemo(played), reflection: more ? sokobanReflection(env, played, n) : null });
    if (played.success) break;
  }
  return sessionOf(env, seed, attempts);
}

/**
 * Shortest move sequence from `s` whose last move pushes a box into a dead position (BFS over
 * moves, pushes that keep the puzzle solvable continue the search). Null when none within 9 moves.
 */
function deadWalk(env: SokobanEnv, s: SokobanState): Move[] | null {
  const seen = new Set<string>([`${s.player}|${s.boxes}`]);
  let frontier: Array<{ s: SokobanState; path: Move[] }> = [{ s, path: [] }];
  for (let depth = 0; depth < 9 && frontier.length; depth++) {
    const next: typeof frontier = [];
    for (const { s: cur, path } of frontier) {
      for (const m of MOVES) {
        const o = applyMove(cur, m);
        if (!o.moved) continue;
        if (o.push && o.state.boxes.every((b) => o.state.target[b])) continue;
        if (o.push && env.isDead(o.state)) return [...path, m];
        const k = `${o.state.player}|${o.state.boxes}`;
        if (seen.has(k)) continue;
        seen.add(k);
        next.push({ s: o.state, path: [...path, m] });
      }
    }
    frontier = next;
  }
  return null;
}

/**
 * Whether the box at `b` (not on a target) lies against a wall with no target on its line: a wall
 * (or the grid edge) above or below it and no target anywhere in its row, or a wall left or right
 * of it and no target anywhere in its column. Such a box can only slide along that line (it cannot
 * be pushed off the wall: the player cannot stand on the wall side), so it never reaches a target.
 */
function isAgainstWallNoTarget(s: SokobanState, b: number): boolean {
  if (s.target[b]) return false;
  const r = Math.floor(b / s.cols);
  const c = b % s.cols;
  const blocked = (rr: number, cc: number) => rr < 0 || cc < 0 || rr >= s.rows || cc >= s.cols || s.wall[rr * s.cols + cc];
  const rowHasTarget = Array.from({ length: s.cols }, (_, k) => s.target[r * s.cols + k]).some(Boolean);
  const colHasTarget = Array.from({ length: s.rows }, (_, k) => s.target[k * s.cols + c]).some(Boolean);
  return ((blocked(r - 1, c) || blocked(r + 1, c)) && !rowHasTarget) || ((blocked(r, c - 1) || blocked(r, c + 1)) && !colHasTarget);
}

/**
 * A reflection from the facts of a failed Sokoban attempt. The cause of a dead end is named only
 * when it holds on the final board (box in a corner; box against a wall with no target on its
 * line, `isAgainstWallNoTarget`); otherwise it says what is true of every dead state: after that
 * push the boxes could no longer all reach targets.
 */
export function sokobanReflection(env: SokobanEnv, played: PlayedAttempt, attempt: number): string {
  const init = env.initialState;
  const last = played.steps[played.steps.length - 1];
  const end = parseSokoban(last.observation);
  const at = (i: number) => `row ${Math.floor(i / init.cols)}, column ${i % init.cols}`;
  const parts: string[] = [];
  if (last.done && !last.success && env.lastDead) {
    const b = env.lastDead.box;
    if (isCornered(end, b)) parts.push(`Attempt ${attempt + 1} failed: I pushed a box to ${at(b)}, in a corner, where it is stuck.`);
    else if (isAgainstWallNoTarget(end, b)) parts.push(`Attempt ${attempt + 1} failed: I pushed a box to ${at(b)}, against a wall with no target on its line, so it can never reach a target.`);
    else parts.push(`Attempt ${attempt + 1} failed: after I pushed a box to ${at(b)}, the boxes could no longer all reach targets.`);
  } else {
    parts.push(`Attempt ${attempt + 1} ran out of turns with ${end.boxes.filter((b) => !end.target[b]).length} boxes off target.`);
  }
  const targets = init.target.map((t, i) => (t ? i : -1)).filter((i) => i >= 0);
  parts.push(`Boxes start at ${init.boxes.map(at).join(' and ')}; targets are at ${targets.map(at).join(' and ')}.`);
  const plan = sokobanSolverMove(renderSokoban(init));
  if (plan) parts.push(`Never push a box into a corner or along a wall away from the targets. Start with: ${plan}.`);
  return parts.join(' ');
}


