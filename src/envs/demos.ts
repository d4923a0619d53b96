/**
 * Demonstration sessions for the SFT warm start (written by `lamer demos`, read by sft training
 * jobs), one JSON object per line:
 *   { env, taskId, instructions, memory: 'reflection_only',
 *     attempts: [{ steps: [{ observation, action, reward, done, success }], reflection }] }
 * steps[i].observation is what the env posted at step i, reward the reward of the previous action
 * (0 at step 0); the last step has action null (done true, or false when the turn cap ended it).
 * `reflection` follows a failed attempt when another attempt follows, else null.
 *
 * Sessions are solver play on training seeds (see ./index.ts), or on the held-out eval seeds with
 * `seedRange: 'eval'` (demonstrations of the eval tasks, to measure a checkpoint's held-out loss,
 * src/recipes/heldout-loss.ts; never to train on). round(failRate * tasks) sessions,
 * spread evenly over the tasks (`deliberateFailures`), start with a deliberately failed attempt (MineSweeper: the solver's moves then a click on a mine;
 * Sokoban: the solver's turns then the shortest walk that pushes a box into a dead position),
 * followed by a reflection written from the facts of the failure (which cell was a mine, which box
 * got stuck where) and a solver attempt that uses them. Natural solver failures (a forced guess
 * that hit a mine, running out of turns) get the same kind of reflection.
 */
import { writeFileSync } from 'node:fs';
import type { EnvKind } from '../domain.js';
import { evalSeed, MAX_STEPS, parseEnvName, taskId, trainSeed, type EnvParams } from './index.js';
import { cellAction, MineSweeperEnv, parseMineSweeperObservation } from './minesweeper.js';
import { applyMove, isCornered, MOVES, MOVES_PER_TURN, parseSokoban, renderSokoban, SokobanEnv, type Move, type SokobanState } from './sokoban.js';
import { mineSweeperSolverMove, rememberMines, type MineMemory } from './solvers/minesweeper-solver.js';
import { sokobanSolverMove } from './solvers/sokoban-solver.js';
import { playAttempt, type PlayedAttempt } from './play.js';
import { Rng } from './rng.js';
import type { DemoAttempt, DemoSession, DemoStep } from '../shared/demos.js';

export interface DemoOptions {
  env: EnvKind;
  params?: EnvParams;
  /** Number of sessions (tasks). */
  tasks: number;
  /** Offset into the seed range; task i uses trainSeed(seed, i), or evalSeed(seed, i) with seedRange 'eval'. */
  seed: number;
  /** Which seeds the tasks come from: 'train' (default) or 'eval' (the held-out tasks of `lamer eval`
   *  and eval:base with the same seed offset). */
  seedRange?: SeedRange;
  /** Fraction of sessions whose first attempt fails on purpose, in [0, 1]. Default 0.3. */
  failRate?: number;
  maxAttempts?: number;
  maxSteps?: number;
}

/** The seed range of demonstrations (src/envs/index.ts: disjoint train and eval seeds). */
export type SeedRange = 'train' | 'eval';

/**
 * Generate demonstration sessions.
 * @throws RangeError for bad options (seedRange included), or a seed outside its range.
 */
export function generateDemos(opts: DemoOptions): DemoSession[] {
  const failRate = opts.failRate ?? 0.3;
  const maxAttempts = opts.maxAttempts ?? 3;
  const maxSteps = opts.maxSteps ?? MAX_STEPS[opts.env];
  if (!Number.isInteger(opts.tasks) || opts.tasks < 0) throw new RangeError(`tasks must be a non-negative integer, got ${opts.tasks}`);
  if (!(failRate >= 0 && failRate <= 1)) throw new RangeError(`failRate must be in [0, 1], got ${failRate}`);
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1) throw new RangeError('maxAttempts must be a positive integer');
  const range = opts.seedRange ?? 'train';
  if (range !== 'train' && range !== 'eval') throw new RangeError(`seedRange must be 'train' or 'eval', got ${JSON.stringify(range)}`);
  const seedOf = range === 'eval' ? evalSeed : trainSeed;
  const out: DemoSession[] = [];
  const failing = deliberateFailures(opts.tasks, failRate);
  for (let i = 0; i < opts.tasks; i++) {
    const seed = seedOf(opts.seed, i);
    const rng = new Rng(seed ^ 0x5bd1e995);
    rng.next(); // one draw skipped so a seed keeps giving the same sabotaged tasks (reproducible demo files)
    const failFirst = maxAttempts > 1 && failing[i];
    out.push(opts.env === 'minesweeper'
      ? mineSweeperSession(new MineSweeperEnv(opts.params as object), seed, rng, failFirst, maxAttempts, maxSteps)
      : sokobanSession(new SokobanEnv(opts.params as object), seed, rng, failFirst, maxAttempts, maxSteps));
  }
  return out;
}

/** One env of a curriculum: a kind with params, and its share of the sessions. */
export interface CurriculumItem {
  env: EnvKind;
  params: EnvParams;
  /** Exact number of sessions, or null to take a `weight` share of the remaining tasks. */
  count: number | null;
  /** Relative share of the tasks not given by counts (default 1). */
  weight: number;
}

const ITEM_RE = /^(minesweeper|sokoban)(?::(\d+)x(\d+)\/(\d+))?(?:=(\d+)|@(\d+(?:\.\d+)?))?$/;

/**
 * Parse a curriculum: a comma-separated list of `kind[:RxC/N][=COUNT|@WEIGHT]` (N = mines or boxes;
 * e.g. `minesweeper:4x4/2@2,sokoban:6x6/2=50`), or a JSON array of
 * `{ "env": "minesweeper" | "minesweeper-4x4-2" | ..., "params"?: {...}, "count"?: n, "weight"?: w }`.
 * @throws RangeError naming the bad item.
 */
export function parseCurriculum(text: string): CurriculumItem[] {
  const t = text.trim();
  const items: CurriculumItem[] = [];
  if (t.startsWith('[')) {
    let raw: unknown;
    try { raw = JSON.parse(t); } catch (e) { throw new RangeError(`curriculum: bad JSON: ${(e as Error).message}`); }
    if (!Array.isArray(raw)) throw new RangeError('curriculum: expected a JSON array');
    for (const [k, x] of raw.entries()) {
      const o = x as { env?: unknown; params?: unknown; count?: unknown; weight?: unknown };
      if (typeof o !== 'object' || o === null || typeof o.env !== 'string') throw new RangeError(`curriculum item ${k}: needs "env"`);
      const parsed = parseEnvName(o.env);
      if (o.params !== undefined && (typeof o.params !== 'object' || o.params === null || Array.isArray(o.params))) throw new RangeError(`curriculum item ${k}: "params" must be an object`);
      const count = o.count === undefined ? null : Number(o.count);
      const weight = o.weight === undefined ? 1 : Number(o.weight);
      items.push(checkItem({ env: parsed.kind, params: { ...parsed.params, ...(o.params as object | undefined) }, count, weight }, String(k)));
    }
  } else {
    if (t === '') throw new RangeError('curriculum: no items');
    for (const [k, part] of t.split(',').map((x) => x.trim()).entries()) {
      if (part === '') throw new RangeError(`curriculum item ${k}: empty (two commas in a row, or a comma at an end)`);
      const kind = /^[a-z]+/i.exec(part)?.[0] ?? '';
      if (kind !== 'minesweeper' && kind !== 'sokoban') throw new RangeError(`curriculum item '${part}': unknown env '${kind}' (minesweeper or sokoban)`);
      const m = ITEM_RE.exec(part);
      if (!m) throw new RangeError(`curriculum item '${part}': expected kind[:RxC/N][=COUNT|@WEIGHT], e.g. minesweeper:6x6/3@2`);
      const env = m[1] as EnvKind;
      const params: EnvParams = m[2] === undefined ? {} : env === 'minesweeper' ? { rows: +m[2], cols: +m[3], mines: +m[4] } : { rows: +m[2], cols: +m[3], boxes: +m[4] };
      items.push(checkItem({ env, params, count: m[5] === undefined ? null : +m[5], weight: m[6] === undefined ? 1 : +m[6] }, part));
    }
  }
  if (items.length === 0) throw new RangeError('curriculum: no items');
  return items;
}

function checkItem(it: CurriculumItem, name: string): CurriculumItem {
  if (it.count !== null && !(Number.isInteger(it.count) && it.count >= 1)) throw new RangeError(`curriculum item ${name}: count must be a positive integer`);
  if (!(Number.isFinite(it.weight) && it.weight > 0)) throw new RangeError(`curriculum item ${name}: weight must be > 0`);
  if (it.env === 'minesweeper') new MineSweeperEnv(it.params as object); // validates, @throws RangeError
  else new SokobanEnv(it.params as object);
  return it;
}

/**
 * Sessions per curriculum item: the exact counts, and `tasks` minus their sum shared among the
 * other items by weight (largest remainder, ties to the earlier item).
 * @throws RangeError when weighted items exist but the counts leave no tasks to share (or tasks is missing).
 */
export function curriculumCounts(items: readonly CurriculumItem[], tasks?: number): number[] {
  const fixed = items.reduce((a, it) => a + (it.count ?? 0), 0);
  const weighted = items.filter((it) => it.count === null);
  if (weighted.length === 0) return items.map((it) => it.count!);
  if (tasks === undefined) throw new RangeError('curriculum: items without a count need a total number of tasks');
  const rest = tasks - fixed;
  if (rest < 0) throw new RangeError(`curriculum: counts (${fixed}) exceed tasks (${tasks})`);
  const W = weighted.reduce((a, it) => a + it.weight, 0);
  const exact = items.map((it) => (it.count === null ? (rest * it.weight) / W : 0));
  const out = items.map((it, k) => (it.count === null ? Math.floor(exact[k]!) : it.count));
  let left = rest - weighted.reduce((a, it) => a + out[items.indexOf(it)]!, 0);
  const order = items.map((_, k) => k).filter((k) => items[k]!.count === null).sort((a, b) => (exact[b]! - out[b]!) - (exact[a]! - out[a]!) || a - b);
  for (const k of order) if (left-- > 0) out[k]!++;
  return out;
}

export interface CurriculumOptions {
  /** Total sessions shared by weight among items without a count. */
  tasks?: number;
  /** Offset into the seed range; the sessions of all items use distinct consecutive seeds from it. */
  seed: number;
  /** 'train' (default) or 'eval' seeds, as in DemoOptions. */
  seedRange?: SeedRange;
  failRate?: number;
  maxAttempts?: number;
  /** Turns per attempt; default MAX_STEPS of each item's kind. */
  maxSteps?: number;
}

/**
 * Demonstrations for a curriculum: per item, `generateDemos` for its share of sessions (in the
 * item order) on seeds (of `seedRange`, default training) that no other item uses (item k starts after the seeds of items
 * 0..k-1). Returns the sessions and the count per item.
 * @throws RangeError for bad counts or a seed range past the end of its seeds.
 */
export function generateCurriculum(items: readonly CurriculumItem[], opts: CurriculumOptions): { sessions: DemoSession[]; counts: number[] } {
  const counts = curriculumCounts(items, opts.tasks);
  const sessions: DemoSession[] = [];
  let offset = opts.seed;
  items.forEach((it, k) => {
    const n = counts[k]!;
    sessions.push(...generateDemos({ env: it.env, params: it.params, tasks: n, seed: offset, seedRange: opts.seedRange, failRate: opts.failRate, maxAttempts: opts.maxAttempts, maxSteps: opts.maxSteps }));
    offset += n;
  });
  return { sessions, counts };
}

/** Size of demonstration sessions: sessions, attempts, actions (steps with an action), reflections, solved, JSONL bytes. */
export function demoStats(sessions: readonly DemoSession[]): { sessions: number; attempts: number; steps: number; reflections: number; solved: number; bytes: number } {
  let attempts = 0, steps = 0, reflections = 0, solved = 0, bytes = 0;
  for (const s of sessions) {
    attempts += s.attempts.length;
    for (const a of s.attempts) {
      steps += a.steps.filter((x) => x.action !== null).length;
      if (a.reflection !== null) reflections++;
    }
    if (s.attempts.at(-1)?.steps.at(-1)?.success) solved++;
    bytes += Buffer.byteLength(JSON.stringify(s)) + 1;
  }
  return { sessions: sessions.length, attempts, steps, reflections, solved, bytes };
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
    attempts.push({ steps: toDemo(played), reflection: more ? mineSweeperReflection(played, memory, env.params.cols, rng) : null });
    if (played.success) break;
  }
  return sessionOf(env, seed, attempts);
}

/**
 * One of several phrasings: `rng.pick(options)`, or the first when there is no rng (hand-made
 * cases in tests). Every phrasing states the same facts.
 */
function say(rng: Rng | undefined, options: readonly string[]): string {
  return rng ? rng.pick(options) : options[0]!;
}

/**
 * A reflection from the facts of a failed MineSweeper attempt: how it ended, the mines known so far
 * (`memory`: cell index -> symbol seen revealed, over this session's attempts), and up to two cells
 * to open early next time: cells hidden in the attempt's initial observation that are known safe
 * (empty cells, which open an area, before numbered ones). Every attempt starts from the same
 * initial observation, so each suggested click is a legal, safe move. The text never names the
 * attempt: the acting prompt labels each reflection "Attempt i: ..." (src/agent/prompt.ts). The
 * first sentence names the cell that ended the attempt when it was a mine. Phrasings vary with
 * `rng`; a sentence that names cells says "mine" exactly when those cells are mines.
 */
function mineSweeperReflection(played: PlayedAttempt, memory: MineMemory, cols: number, rng?: Rng): string {
  const name = (i: number) => cellAction(Math.floor(i / cols), i % cols);
  const mines = [...memory].filter(([, s]) => s === '*').map(([i]) => name(i));
  const initial = parseMineSweeperObservation(played.steps[0].observation).flat();
  const safeHidden = (sym: (s: string) => boolean) =>
    [...memory].filter(([i, s]) => initial[i] === '?' && sym(s)).map(([i]) => i).sort((x, y) => x - y);
  const empty = safeHidden((s) => s === '.');
  const numbered = safeHidden((s) => /^[1-8]$/.test(s));
  const last = played.steps[played.steps.length - 1];
  const cell = (played.steps[played.steps.length - 2]?.action ?? '').trim();
  const parts: string[] = [];
  if (last.done && !last.success) {
    parts.push(say(rng, [
      `${cell} was a mine.`,
      `I clicked ${cell} and it was a mine.`,
      `${cell} hid a mine; clicking it ended the attempt.`,
    ]));
  } else {
    const hidden = parseMineSweeperObservation(last.observation).flat().filter((s) => s === '?').length;
    parts.push(say(rng, [
      `I ran out of turns with ${hidden} cells still hidden.`,
      `I used all my turns; ${hidden} cells were still hidden.`,
      `I hit the turn limit with ${hidden} hidden cells left.`,
    ]));
  }
  if (mines.length) {
    const list = mines.join(', ');
    const them = mines.length === 1 ? 'it' : 'them';
    parts.push(say(rng, [`Known mines: ${list}. Never click ${them}.`, `The mines I know: ${list}. Avoid ${them}.`, `Mines are at ${list}. Do not click ${them}.`]));
  }
  const rule = say(rng, ['Then click only cells the numbers prove safe.', 'After that, only click cells that the numbers prove safe.', 'Then reveal only cells the numbers show are safe.']);
  if (empty.length) {
    const list = empty.slice(0, 2).map(name).join(', ');
    parts.push(say(rng, [
      `Click known empty cells first to open large areas, such as ${list}.`,
      `Start with the empty cells ${list}: they open large areas.`,
      `Open ${list} first; they are empty and reveal a whole region.`,
    ]));
    parts.push(rule);
  } else if (numbered.length) {
    const list = numbered.slice(0, 2).map(name).join(', ');
    parts.push(say(rng, [`Known safe cells: ${list}.`, `${list} are safe to click.`, `Safe cells to start with: ${list}.`]));
    parts.push(rule);
  } else {
    parts.push(say(rng, ['Click only cells the numbers prove safe.', 'Only click cells that the numbers prove safe.', 'Reveal only cells the numbers show are safe.']));
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
    attempts.push({ steps: toDemo(played), reflection: more ? sokobanReflection(env, played, rng) : null });
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
 * A reflection from the facts of a failed Sokoban attempt. The text never names the attempt: the
 * acting prompt labels each reflection "Attempt i: ..." (src/agent/prompt.ts). The cause of a
 * dead end is named only when it holds on the final board (box in a corner; box against a wall
 * with no target on its line, `isAgainstWallNoTarget`); otherwise it says what is true of every
 * dead state: after that push the boxes could no longer all reach targets. The
 * first sentence always names the pushed box as "row R, column C" and its cause with the words
 * "corner", "no target on its line" or "could no longer all reach targets". Phrasings vary with
 * `rng` (the first of each when absent).
 */
export function sokobanReflection(env: SokobanEnv, played: PlayedAttempt, rng?: Rng): string {
  const init = env.initialState;
  const last = played.steps[played.steps.length - 1];
  const end = parseSokoban(last.observation);
  const at = (i: number) => `row ${Math.floor(i / init.cols)}, column ${i % init.cols}`;
  const parts: string[] = [];
  if (last.done && !last.success && env.lastDead) {
    const b = at(env.lastDead.box);
    if (isCornered(end, env.lastDead.box)) {
      parts.push(say(rng, [
        `I pushed a box to ${b}, in a corner, where it is stuck.`,
        `The box I pushed to ${b} is stuck in a corner.`,
        `A box got stuck in the corner at ${b}.`,
      ]));
    } else if (isAgainstWallNoTarget(end, env.lastDead.box)) {
      parts.push(say(rng, [
        `I pushed a box to ${b}, against a wall with no target on its line, so it can never reach a target.`,
        `The box at ${b} is against a wall with no target on its line and can never reach a target.`,
        `I pushed a box against a wall at ${b}; there is no target on its line, so it is lost.`,
      ]));
    } else {
      parts.push(say(rng, [
        `After I pushed a box to ${b}, the boxes could no longer all reach targets.`,
        `Once a box was at ${b}, the boxes could no longer all reach targets.`,
      ]));
    }
  } else {
    const off = end.boxes.filter((b) => !end.target[b]).length;
    parts.push(say(rng, [
      `I ran out of turns with ${off} ${off === 1 ? 'box' : 'boxes'} off target.`,
      `I used all my turns; ${off} ${off === 1 ? 'box was' : 'boxes were'} still off target.`,
    ]));
  }
  const targets = init.target.map((t, i) => (t ? i : -1)).filter((i) => i >= 0);
  const boxes = init.boxes.map(at).join(' and ');
  const goals = targets.map(at).join(' and ');
  parts.push(init.boxes.length === 1
    ? say(rng, [`The box starts at ${boxes}; the target is at ${goals}.`, `The target is at ${goals} and the box starts at ${boxes}.`])
    : say(rng, [
      `Boxes start at ${boxes}; targets are at ${goals}.`,
      `The boxes start at ${boxes} and the targets are at ${goals}.`,
      `Targets: ${goals}. Boxes start at ${boxes}.`,
    ]));
  const plan = sokobanSolverMove(renderSokoban(init));
  if (plan) {
    parts.push(say(rng, [
      `Never push a box into a corner or along a wall away from the targets. Start with: ${plan}.`,
      `Keep boxes out of corners and off walls without targets. First moves: ${plan}.`,
      `Avoid corners and walls with no target. Begin with: ${plan}.`,
    ]));
  }
  return parts.join(' ');
}
