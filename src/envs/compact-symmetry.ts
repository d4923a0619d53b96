/**
 * Board symmetries of compact trials: the 8 symmetries of a square grid (4 of a non-square one)
 * map a whole trial (observations, actions, targets, labels, reflections) to an equally valid
 * trial of the mapped task.
 *
 * Apart from src/envs/compact-data.ts because it plays nothing: it rewrites finished trials as
 * text, whatever played them (the SFT pools of src/recipes/sft-base augment with it). Pure.
 */
import { gridText, parseGridRows } from './grid.js';
import type { Move } from './sokoban.js';
import type { CompactTrial } from '../shared/compact-trial.js';

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
