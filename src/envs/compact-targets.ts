/**
 * The solver's soft targets of single decisions of the compact builtin policy: the set of equally
 * good answers at one observation, and the optional labels a step carries beside it.
 *
 * - MineSweeper: the equally safest hidden cells (src/envs/solvers analyseMines, exact
 *   enumeration), knowing the mines that memory names; the revealed cells (invalid answers); the
 *   cells the board proves to be mines.
 * - Sokoban: per move position the moves that start a shortest solution (BFS, `solveSokoban`, or
 *   `solveSokobanAvoiding` with named pushes forbidden), the moves that do not move, and the moves
 *   that make a named dead push.
 *
 * Apart from src/envs/compact-data.ts because these answer for one observation, with no env and no
 * trial: the played trials (compact-data.ts) and the contrast trials (compact-contrast.ts) both
 * label their steps with them. Pure and deterministic given the `rng`; no model, no HTTP.
 */
import { parseGridRows } from './grid.js';
import { cellAction } from './minesweeper.js';
import { analyseMines, type MineAnalysis, type MineMemory } from './solvers/minesweeper-solver.js';
import { solveSokobanAvoiding } from './solvers/sokoban-solver.js';
import { applyMove, MOVES, MOVES_PER_TURN, parseSokoban, solveSokoban, type Move, type SokobanState } from './sokoban.js';
import { deadPushMoves, type SokobanPush } from './sokoban-pushes.js';
import type { Rng } from './rng.js';

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

/** The revealed (not `?`) cells of a MineSweeper observation as actions `(r, c)`, in reading order. */
export function revealedCells(observation: string): string[] {
  const cells = parseGridRows(observation);
  return cells.flatMap((row, r) => row.flatMap((s, c) => (s === '?' ? [] : [cellAction(r, c)])));
}

/** `{ invalid }` when there are invalid answers, else nothing: a step's optional field. */
export const invalidField = (invalid: string[]): { invalid?: string[] } => (invalid.length > 0 ? { invalid } : {});

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
export function provenMines(cells: string[][], bare: MineAnalysis): string[] {
  const cols = cells[0]!.length;
  const flat = cells.flat();
  return bare.mines.filter((i) => flat[i] === '?').map((i) => cellAction(Math.floor(i / cols), i % cols));
}

/** `{ provableMines }` when there are any, else nothing: a step's optional field. */
export const provableField = (provableMines: string[]): { provableMines?: string[] } => (provableMines.length > 0 ? { provableMines } : {});

/**
 * The labels of one MineSweeper decision of a trial: the solver's safest cells knowing the mines
 * that reflections name (`knownMines`, indices; `namedMines`, the same as actions), the cells the
 * board proves to be mines, and whether a named mine is among the safest cells of the bare board
 * (`memoryMatters`). The bare board is analysed once for both; the memory adds a second analysis.
 */
export function mineSweeperLabels(
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
export function sokobanLabels(observation: string, rng: Rng, named: readonly SokobanPush[], avoidNamed: boolean) {
  const c = sokobanChoices(observation, rng, named, avoidNamed);
  return c && { ...c, memoryMatters: c.deadMoves[0]!.length > 0 || c.pushMemoryTarget };
}
