/**
 * MineSweeper as in the LaMer reference code (docs/method.md#environments).
 *
 * - Board `rows x cols` (default 6x6) with `mines` mines (default 3). `reset(seed)` draws a first
 *   click uniformly at random, places the mines uniformly among the other cells and applies that
 *   click (so the first click is always safe); boards that this click already wins are redrawn
 *   from the same random stream.
 * - Observation (compact, one byte per cell for a small byte-level model): a header line of column
 *   numbers, then one line per row: its number, a space and one symbol per cell, so that a cell's
 *   column is its position in the row (rows and columns numbered from 1; `gridText`):
 *     `  123456` / `1 ??1.??` / ...; cells `?` hidden, `.` empty (no adjacent mine), `1`-`8`
 *   adjacent-mine count, `*` the mine that was clicked (shown only after a loss).
 * - Action: "(row, col)", 1-indexed; the last "(r, c)" pattern anywhere in the text is used.
 * - Rewards: invalid (no pattern, out of range) or useless (already revealed) click -1 and the game
 *   goes on; revealing one cell +0.5; a cascade (an empty cell opening several) +2; the click that
 *   reveals the last safe cell +10 and done with success; a mine -0.1 and done.
 */
import { checkMineSweeperParams, MINESWEEPER_DEFAULTS, mineSweeperName, type MineSweeperParams } from '../shared/env-names.js';
import { gridText, parseGridRows } from './grid.js';
import { Rng } from './rng.js';
import type { BuiltinEnv, ResetResult, StepResult } from './types.js';

export { MINESWEEPER_DEFAULTS, type MineSweeperParams };

const MS_REWARD = { invalid: -1, single: 0.5, cascade: 2, win: 10, mine: -0.1 } as const;

/** A cell, 0-based internally. */
export interface Cell {
  row: number;
  col: number;
}

const CELL_RE = /\(\s*(-?\d+)\s*,\s*(-?\d+)\s*\)/g;

/**
 * Parse a "(row, col)" action anywhere in `text` (the last match wins, so reasoning before the
 * answer does not matter). Returns the 1-indexed numbers as written, or null when there is none.
 */
export function parseCellAction(text: string): Cell | null {
  let last: RegExpExecArray | null = null;
  for (const m of text.matchAll(CELL_RE)) last = m as RegExpExecArray;
  if (!last) return null;
  return { row: Number(last[1]), col: Number(last[2]) };
}

/** Canonical action text of a 0-based cell: "(row+1, col+1)". */
export function cellAction(row: number, col: number): string {
  return `(${row + 1}, ${col + 1})`;
}

/** The rules in about 200 bytes: symbols, coordinates, goal and the answer format with an example. */
function mineSweeperInstructions(p: MineSweeperParams): string {
  return (
    `MineSweeper ${p.rows}x${p.cols}, ${p.mines} mines. Rows left, columns on top, from 1. ` +
    `? hidden, . no mine around, 1-8 mines around, * mine. ` +
    `Reveal all safe cells; a mine loses. Answer one hidden cell as (row, col), e.g. (2, 3)`
  );
}

export class MineSweeperEnv implements BuiltinEnv {
  readonly kind = 'minesweeper' as const;
  readonly name: string;
  readonly instructions: string;
  readonly params: MineSweeperParams;
  private mine: boolean[] = [];
  private revealed: boolean[] = [];
  private count: number[] = [];
  private hit = -1;
  private over = true;
  private started = false;

  constructor(params: Partial<MineSweeperParams> = {}) {
    this.params = { ...MINESWEEPER_DEFAULTS, ...params };
    checkMineSweeperParams(this.params);
    this.name = mineSweeperName(this.params);
    this.instructions = mineSweeperInstructions(this.params);
  }

  reset(seed: number): ResetResult {
    const { rows, cols, mines } = this.params;
    const n = rows * cols;
    const rng = new Rng(seed);
    for (let tries = 0; tries < 10_000; tries++) {
      const first = rng.int(n);
      const others = [...Array(n).keys()].filter((i) => i !== first);
      rng.shuffle(others);
      const mineSet = new Set(others.slice(0, mines));
      this.load([...Array(n).keys()].map((i) => mineSet.has(i)));
      this.reveal(first);
      if (!this.isWon()) return { observation: this.render(), availableActions: this.legalActions() };
    }
    throw new Error(`minesweeper: could not draw a board for seed ${seed}`);
  }

  /**
   * Set a hand-made board (tests, demos): `layout` has one string per row, `*` a mine and any
   * other character a safe cell; `opened` lists 1-indexed cells revealed (with cascade) before play.
   * @throws RangeError when the layout does not match the params or an opened cell is a mine.
   */
  setBoard(layout: string[], opened: Array<[number, number]> = []): ResetResult {
    const { rows, cols, mines } = this.params;
    if (layout.length !== rows || layout.some((l) => l.length !== cols)) {
      throw new RangeError(`minesweeper: layout must be ${rows} strings of ${cols} characters`);
    }
    const m = layout.flatMap((l) => [...l].map((ch) => ch === '*'));
    if (m.filter(Boolean).length !== mines) throw new RangeError(`minesweeper: layout must hold ${mines} mines`);
    this.load(m);
    for (const [r, c] of opened) {
      const i = (r - 1) * cols + (c - 1);
      if (this.mine[i]) throw new RangeError(`minesweeper: opened cell (${r}, ${c}) is a mine`);
      this.reveal(i);
    }
    return { observation: this.render(), availableActions: this.legalActions() };
  }

  step(action: string): StepResult {
    if (!this.started) throw new Error('minesweeper: step before reset');
    if (this.over) throw new Error('minesweeper: step after done');
    const { rows, cols } = this.params;
    const cell = parseCellAction(action);
    const invalid = (): StepResult => ({ observation: this.render(), reward: MS_REWARD.invalid, done: false, success: false, invalidAction: true });
    if (!cell || cell.row < 1 || cell.row > rows || cell.col < 1 || cell.col > cols) return invalid();
    const i = (cell.row - 1) * cols + (cell.col - 1);
    if (this.revealed[i]) return invalid();
    if (this.mine[i]) {
      this.hit = i;
      this.over = true;
      return { observation: this.render(), reward: MS_REWARD.mine, done: true, success: false, invalidAction: false };
    }
    const opened = this.reveal(i);
    if (this.isWon()) {
      this.over = true;
      return { observation: this.render(), reward: MS_REWARD.win, done: true, success: true, invalidAction: false };
    }
    const reward = opened > 1 ? MS_REWARD.cascade : MS_REWARD.single;
    return { observation: this.render(), reward, done: false, success: false, invalidAction: false };
  }

  legalActions(): string[] {
    if (this.over) return [];
    const { cols } = this.params;
    const out: string[] = [];
    this.revealed.forEach((r, i) => {
      if (!r) out.push(cellAction(Math.floor(i / cols), i % cols));
    });
    return out;
  }

  /** The mines as 0-based cells, row-major (the hidden truth; for demos and tests). */
  mineCells(): Cell[] {
    const { cols } = this.params;
    const out: Cell[] = [];
    this.mine.forEach((m, i) => m && out.push({ row: Math.floor(i / cols), col: i % cols }));
    return out;
  }

  /** Whether the attempt is over. */
  get done(): boolean {
    return this.over;
  }

  /** The observation text of the current state. */
  render(): string {
    const { rows, cols } = this.params;
    const lines: string[] = [];
    for (let r = 0; r < rows; r++) {
      let line = '';
      for (let c = 0; c < cols; c++) {
        const i = r * cols + c;
        if (i === this.hit) line += '*';
        else if (!this.revealed[i]) line += '?';
        else line += this.count[i] === 0 ? '.' : String(this.count[i]);
      }
      lines.push(line);
    }
    return gridText(lines, 1);
  }

  private load(m: boolean[]): void {
    const { rows, cols } = this.params;
    this.mine = m;
    this.revealed = m.map(() => false);
    this.count = m.map((_, i) => neighbours(i, rows, cols).filter((j) => m[j]).length);
    this.hit = -1;
    this.over = false;
    this.started = true;
  }

  /** Reveal cell i (safe) with flood fill over empty cells; returns the number newly revealed. */
  private reveal(i: number): number {
    const { rows, cols } = this.params;
    let opened = 0;
    const stack = [i];
    while (stack.length) {
      const j = stack.pop()!;
      if (this.revealed[j] || this.mine[j]) continue;
      this.revealed[j] = true;
      opened++;
      if (this.count[j] === 0) for (const k of neighbours(j, rows, cols)) if (!this.revealed[k]) stack.push(k);
    }
    return opened;
  }

  private isWon(): boolean {
    return this.mine.every((m, i) => m || this.revealed[i]);
  }
}

/** Indices of the up to 8 neighbours of cell i on a rows x cols board (row-major). */
export function neighbours(i: number, rows: number, cols: number): number[] {
  const r = Math.floor(i / cols);
  const c = i % cols;
  const out: number[] = [];
  for (let dr = -1; dr <= 1; dr++)
    for (let dc = -1; dc <= 1; dc++) {
      if (dr === 0 && dc === 0) continue;
      const rr = r + dr;
      const cc = c + dc;
      if (rr >= 0 && rr < rows && cc >= 0 && cc < cols) out.push(rr * cols + cc);
    }
  return out;
}

/**
 * Parse a MineSweeper observation back into cells: returns rows of symbols ('?', '.', '1'-'8', '*').
 * Accepts the compact form of `render` and the older `Row k: ? ? ...` lines.
 * @throws Error when the text has no row lines.
 */
export function parseMineSweeperObservation(obs: string): string[][] {
  const rows = parseGridRows(obs);
  if (rows.length === 0) throw new Error('minesweeper: observation has no row lines');
  return rows;
}
