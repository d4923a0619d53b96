/**
 * The built-in environments' names, parameters and seed ranges, without the games themselves: what
 * src/envs/ (the games), training (the promotion gate's checks, src/training/run/gate.ts) and the
 * configuration (LAMER_TRAIN_GATE_*) share.
 *
 * Env names carry their parameters: `minesweeper-6x6-3` (rows x cols, mines), `sokoban-6x6-2`
 * (rows x cols, boxes; optional `-m<min>-<max>` solution-length bounds). A task id is
 * `<env name>:seed=<seed>`. Seeds: training 0 <= seed < 1e9, held-out (eval) 1e9 <= seed < 2^32
 * (disjoint, so no evaluation task is ever trained on).
 */
/** The built-in games (src/domain.ts ENV_KINDS). */
type EnvKind = 'minesweeper' | 'sokoban';

export interface MineSweeperParams {
  rows: number;
  cols: number;
  mines: number;
}

export interface SokobanParams {
  rows: number;
  cols: number;
  boxes: number;
  /** Bounds of the BFS shortest solution length, in moves. */
  minMoves: number;
  maxMoves: number;
}

export type EnvParams = Partial<MineSweeperParams> | Partial<SokobanParams>;

export const MINESWEEPER_DEFAULTS: MineSweeperParams = { rows: 6, cols: 6, mines: 3 };
export const SOKOBAN_DEFAULTS: SokobanParams = { rows: 6, cols: 6, boxes: 2, minMoves: 5, maxMoves: 21 };

/** First held-out (eval) seed; training seeds are below it. */
export const EVAL_SEED_START = 1_000_000_000;
/** One past the last seed: seeds are 32-bit. */
export const SEED_END = 2 ** 32;

/** Validate MineSweeper params. @throws RangeError with the offending field. */
export function checkMineSweeperParams(p: MineSweeperParams): void {
  for (const k of ['rows', 'cols', 'mines'] as const) {
    if (!Number.isInteger(p[k]) || p[k] < 1) throw new RangeError(`minesweeper: ${k} must be a positive integer, got ${p[k]}`);
  }
  if (p.rows > 30 || p.cols > 30) throw new RangeError('minesweeper: rows and cols must be at most 30');
  if (p.mines > p.rows * p.cols - 2) throw new RangeError(`minesweeper: at most rows*cols-2 = ${p.rows * p.cols - 2} mines`);
}

/** Validate Sokoban params. @throws RangeError naming the field. */
export function checkSokobanParams(p: SokobanParams): void {
  for (const k of ['rows', 'cols', 'boxes', 'minMoves', 'maxMoves'] as const) {
    if (!Number.isInteger(p[k]) || p[k] < 1) throw new RangeError(`sokoban: ${k} must be a positive integer, got ${p[k]}`);
  }
  if (p.rows < 5 || p.cols < 5 || p.rows > 10 || p.cols > 10) throw new RangeError('sokoban: rows and cols must be in 5..10');
  if (p.minMoves > p.maxMoves) throw new RangeError('sokoban: minMoves must be <= maxMoves');
  if (2 * p.boxes + 1 > (p.rows - 2) * (p.cols - 2) - 2) throw new RangeError('sokoban: too many boxes for the room');
}

/** The env name of MineSweeper params: `minesweeper-<rows>x<cols>-<mines>`. */
export function mineSweeperName(p: MineSweeperParams): string {
  return `minesweeper-${p.rows}x${p.cols}-${p.mines}`;
}

/** The env name of Sokoban params: `sokoban-<rows>x<cols>-<boxes>`, with `-m<min>-<max>` when the bounds are not the defaults. */
export function sokobanName(p: SokobanParams): string {
  const defaultBounds = p.minMoves === SOKOBAN_DEFAULTS.minMoves && p.maxMoves === SOKOBAN_DEFAULTS.maxMoves;
  const bounds = defaultBounds ? '' : `-m${p.minMoves}-${p.maxMoves}`;
  return `sokoban-${p.rows}x${p.cols}-${p.boxes}${bounds}`;
}

/** Parse an env name into kind and params. @throws RangeError when it is not one of the grammars above. */
export function parseEnvName(name: string): { kind: EnvKind; params: EnvParams } {
  if (name === 'minesweeper') return { kind: 'minesweeper', params: { ...MINESWEEPER_DEFAULTS } };
  if (name === 'sokoban') return { kind: 'sokoban', params: { ...SOKOBAN_DEFAULTS } };
  let m = /^minesweeper-(\d+)x(\d+)-(\d+)$/.exec(name);
  if (m) return { kind: 'minesweeper', params: { rows: +m[1], cols: +m[2], mines: +m[3] } };
  m = /^sokoban-(\d+)x(\d+)-(\d+)(?:-m(\d+)-(\d+))?$/.exec(name);
  if (m) {
    const p: Partial<SokobanParams> = { rows: +m[1], cols: +m[2], boxes: +m[3] };
    if (m[4] !== undefined) Object.assign(p, { minMoves: +m[4], maxMoves: +m[5] });
    return { kind: 'sokoban', params: p };
  }
  throw new RangeError(`unknown env '${name}': expected minesweeper[-RxC-M] or sokoban[-RxC-B]`);
}

/**
 * The full name of a valid env (`minesweeper` -> `minesweeper-6x6-3`), the name its task ids
 * carry. @throws RangeError for an unknown name or parameters the game refuses.
 */
export function canonicalEnvName(name: string): string {
  const { kind, params } = parseEnvName(name);
  if (kind === 'minesweeper') {
    const p = { ...MINESWEEPER_DEFAULTS, ...(params as Partial<MineSweeperParams>) };
    checkMineSweeperParams(p);
    return mineSweeperName(p);
  }
  const p = { ...SOKOBAN_DEFAULTS, ...(params as Partial<SokobanParams>) };
  checkSokobanParams(p);
  return sokobanName(p);
}

/** The env name and seed of a task id `<env name>:seed=<seed>`, or null when the id is not of that form (any env name is read). */
export function taskSeedOf(taskId: string): { envName: string; seed: number } | null {
  const m = /^([a-z0-9x-]+):seed=(\d{1,10})$/.exec(taskId);
  if (!m) return null;
  const seed = Number(m[2]);
  return seed < SEED_END ? { envName: m[1]!, seed } : null;
}
