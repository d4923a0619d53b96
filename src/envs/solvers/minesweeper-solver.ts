/**
 * MineSweeper solver: exact constraint enumeration with mine probabilities.
 *
 * Each revealed number v gives the constraint sum(hidden neighbours) = v - (known mine neighbours).
 * All assignments of the frontier (hidden cells next to a number) that satisfy every constraint are
 * enumerated by backtracking; an assignment with k frontier mines has weight C(U, M - k), the
 * number of ways to put the other mines among the U unconstrained hidden cells (M = total mines
 * not yet known). Then P(mine) of a frontier cell = sum of weights of assignments where it is a
 * mine / total weight, and of an unconstrained cell = sum_k w_k (M - k) / U / total.
 * The move is the hidden cell with the lowest P(mine) (0 = certain), ties broken towards a cell
 * already known from memory to be empty ('.', opens a cascade), then the highest estimated chance
 * of showing no number (a cascade: corners and edges first on an open board), then row-major order.
 */
import { neighbours, parseMineSweeperObservation, cellAction } from '../minesweeper.js';

/** Knowledge carried between attempts of one task (same board): cell index -> symbol seen. */
export type MineMemory = Map<number, string>;

export interface MineAnalysis {
  /** P(mine) per cell index; NaN for revealed cells. */
  probability: number[];
  /** Hidden cells that are certainly safe / certainly mines. */
  safe: number[];
  mines: number[];
  /** False when the frontier was too large and probabilities are approximate. */
  exact: boolean;
}

/** Constraint of one revealed number: exactly `need` of the hidden cells `vars` are mines. */
interface NumberConstraint {
  vars: number[];
  need: number;
}

/**
 * One constraint per revealed number ('.' is 0) that touches hidden cells ('?'): its hidden
 * neighbours hold its number minus the known mines ('*') around it. `known`: row-major symbols.
 */
function numberConstraints(known: string[], rows: number, cols: number): NumberConstraint[] {
  const constraints: NumberConstraint[] = [];
  for (let i = 0; i < known.length; i++) {
    if (!/^[0-8.]$/.test(known[i])) continue;
    const v = known[i] === '.' ? 0 : Number(known[i]);
    const nb = neighbours(i, rows, cols);
    const vars = nb.filter((j) => known[j] === '?');
    if (vars.length === 0) continue;
    constraints.push({ vars, need: v - nb.filter((j) => known[j] === '*').length });
  }
  return constraints;
}

/**
 * Analyse a board. `cells`: rows of symbols ('?', '.', '1'-'8', '*'); `mines`: total mines;
 * `memory`: symbols known from earlier attempts (filled into hidden cells as knowledge).
 */
export function analyseMines(cells: string[][], mines: number, memory: MineMemory = new Map(), maxNodes = 200_000): MineAnalysis {
  const rows = cells.length;
  const cols = cells[0].length;
  const n = rows * cols;
  // Known symbol per cell: the board, then memory for cells hidden now.
  const known: string[] = cells.flat().map((s, i) => (s === '?' && memory.has(i) ? memory.get(i)! : s));
  const isMine = (i: number) => known[i] === '*';
  const isHidden = (i: number) => known[i] === '?';
  const knownMines = known.filter((s) => s === '*').length;
  const remaining = mines - knownMines;
  const constraints = numberConstraints(known, rows, cols);
  const frontier = [...new Set(constraints.flatMap((c) => c.vars))].sort((a, b) => a - b);
  const hidden = known.map((_, i) => i).filter(isHidden);
  const others = hidden.filter((i) => !frontier.includes(i));
  const U = others.length;
  const pos = new Map(frontier.map((v, k) => [v, k]));
  const byVar: number[][] = frontier.map(() => []);
  constraints.forEach((c, ci) => c.vars.forEach((v) => byVar[pos.get(v)!].push(ci)));
  const assign = new Int8Array(frontier.length).fill(-1);
  const mineW = new Float64Array(frontier.length);
  const wByK = new Float64Array(frontier.length + 1);
  let nodes = 0;
  let exact = true;
  const ok = (ci: number): boolean => {
    const c = constraints[ci];
    let set = 0;
    let open = 0;
    for (const v of c.vars) {
      const a = assign[pos.get(v)!];
      if (a === 1) set++;
      else if (a === -1) open++;
    }
    return set <= c.need && set + open >= c.need;
  };
  const rec = (k: number, minesSoFar: number): void => {
    if (!exact) return;
    if (++nodes > maxNodes) {
      exact = false;
      return;
    }
    if (minesSoFar > remaining) return;
    if (k === frontier.length) {
      if (remaining - minesSoFar > U) return;
      const w = binom(U, remaining - minesSoFar);
      wByK[minesSoFar] += w;
      for (let j = 0; j < frontier.length; j++) if (assign[j] === 1) mineW[j] += w;
      return;
    }
    for (const val of [0, 1] as const) {
      assign[k] = val;
      if (byVar[k].every(ok)) rec(k + 1, minesSoFar + val);
    }
    assign[k] = -1;
  };
  rec(0, 0);
  const probability = new Array<number>(n).fill(NaN);
  const total = wByK.reduce((a, b) => a + b, 0);
  if (exact && total > 0) {
    frontier.forEach((v, j) => (probability[v] = mineW[j] / total));
    let expOther = 0;
    wByK.forEach((w, k) => (expOther += w * (remaining - k)));
    for (const v of others) probability[v] = U > 0 ? expOther / U / total : 0;
  } else {
    // Fallback: each cell's worst local ratio need/vars, unconstrained cells the global density.
    const density = hidden.length > 0 ? Math.max(0, remaining) / hidden.length : 0;
    for (const v of others) probability[v] = density;
    for (const v of frontier) probability[v] = 0;
    for (const c of constraints) for (const v of c.vars) probability[v] = Math.max(probability[v], c.need / c.vars.length);
    exact = false;
  }
  for (let i = 0; i < n; i++) if (isMine(i)) probability[i] = 1;
  // Cells hidden now but known from memory to be safe: probability 0.
  const board = cells.flat();
  const fromMemory = board.map((s, i) => i).filter((i) => board[i] === '?' && !isHidden(i) && !isMine(i));
  for (const i of fromMemory) probability[i] = 0;
  const safe = [...fromMemory, ...hidden.filter((i) => probability[i] === 0)].sort((a, b) => a - b);
  const minesOut = [...hidden.filter((i) => probability[i] === 1), ...known.map((s, i) => (s === '*' ? i : -1)).filter((i) => i >= 0)];
  return { probability, safe, mines: [...new Set(minesOut)].sort((a, b) => a - b), exact };
}

/**
 * The solver's move for an observation: canonical "(row, col)" action (1-indexed).
 * @throws Error when no cell is hidden.
 */
export function mineSweeperSolverMove(observation: string, mines: number, memory: MineMemory = new Map()): string {
  const cells = parseMineSweeperObservation(observation);
  const rows = cells.length;
  const cols = cells[0].length;
  const a = analyseMines(cells, mines, memory);
  const flat = cells.flat();
  const candidates = flat.map((s, i) => i).filter((i) => flat[i] === '?' && memory.get(i) !== '*');
  if (candidates.length === 0) throw new Error('minesweeper solver: no hidden cell');
  // Chance that the cell shows no number (and so opens a cascade): product of P(safe) of its
  // hidden neighbours, treating them as independent (a heuristic used only to break ties).
  const pZero = (i: number) =>
    neighbours(i, rows, cols).reduce((acc, j) => acc * (flat[j] === '?' ? 1 - (Number.isNaN(a.probability[j]) ? 0 : a.probability[j]) : 1), 1);
  const round = (x: number) => Math.round(x * 1e9) / 1e9;
  const score = (i: number): [number, number, number, number] => [round(a.probability[i]), memory.get(i) === '.' ? 0 : 1, -round(pZero(i)), i];
  candidates.sort((x, y) => {
    const sx = score(x);
    const sy = score(y);
    for (let k = 0; k < 4; k++) if (sx[k] !== sy[k]) return sx[k] - sy[k];
    return 0;
  });
  const best = candidates[0];
  return cellAction(Math.floor(best / cols), best % cols);
}

/** Record what an observation shows into the memory (revealed symbols and a hit mine). */
export function rememberMines(memory: MineMemory, observation: string): void {
  parseMineSweeperObservation(observation)
    .flat()
    .forEach((s, i) => {
      if (s !== '?') memory.set(i, s);
    });
}

function binom(n: number, k: number): number {
  if (k < 0 || k > n) return 0;
  let r = 1;
  for (let i = 1; i <= k; i++) r = (r * (n - k + i)) / i;
  return r;
}
