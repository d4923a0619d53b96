/**
 * Sokoban as in the LaMer reference code (docs/method.md#environments).
 *
 * - Room `rows x cols` (default 6x6) surrounded by walls, `boxes` boxes (default 2) and as many
 *   targets. `reset(seed)` draws rooms from the seed's random stream (a few interior walls, then
 *   targets, boxes and player on distinct floor cells) until the BFS shortest solution has
 *   `minMoves`..`maxMoves` moves (default 5..21).
 * - Observation (compact, one byte per cell; src/envs/grid.ts): a header line of column numbers,
 *   then per row its number, a space and its cells, rows and columns numbered from 0, e.g.
 *   `  012345` / `0 ######` / `1 #_P__#`; symbols `#` wall, `_` floor, `O` target, `X` box, `P`
 *   player, `*` box on target, `S` player on target (`√`, the reference code's box on target, is
 *   still read by `parseSokoban`).
 * - Action: up to 3 moves a turn from `up`, `down`, `left`, `right`, comma-separated ("up,left");
 *   every such word in the text counts, in order, and moves after the third are ignored.
 * - Rewards per move: -0.1; +1 box pushed onto a target; -1 box pushed off one; +10 when every box
 *   is on a target (done, success). A move into a wall or an unpushable box is a no-op costing
 *   -0.1; a text with no move is one no-op (-0.1); both set `invalidAction`. After a push that
 *   leaves the puzzle unsolvable (a dead state, checked exactly by search) the attempt ends (done,
 *   no success). The turn stops at the move that ends the attempt.
 */
import { checkSokobanParams, SOKOBAN_DEFAULTS, sokobanName, type SokobanParams } from '../shared/env-names.js';
import { gridText } from './grid.js';
import { Rng } from './rng.js';
import type { BuiltinEnv, ResetResult, StepResult } from './types.js';

export { SOKOBAN_DEFAULTS, type SokobanParams };

const SOKOBAN_REWARD = { step: -0.1, boxOn: 1, boxOff: -1, solved: 10 } as const;

/** Moves a turn. */
export const MOVES_PER_TURN = 3;

export type Move = 'up' | 'down' | 'left' | 'right';
export const MOVES: readonly Move[] = ['up', 'down', 'left', 'right'];

/** A Sokoban state. Cells are row-major indices r*cols+c, rows/cols 0-based. */
export interface SokobanState {
  rows: number;
  cols: number;
  wall: boolean[];
  target: boolean[];
  /** Box cells, sorted ascending. */
  boxes: number[];
  player: number;
}

/** Outcome of one move on a state. */
export interface MoveOutcome {
  state: SokobanState;
  /** False when the move was blocked (wall, or box against wall/box): a no-op. */
  moved: boolean;
  /** Box moved from -> to, when the move pushed one. */
  push: { from: number; to: number } | null;
}

function delta(m: Move, cols: number): number {
  return m === 'up' ? -cols : m === 'down' ? cols : m === 'left' ? -1 : 1;
}

/** Whether a step in direction m from cell i stays inside the grid. */
function inside(i: number, m: Move, s: { rows: number; cols: number }): boolean {
  const r = Math.floor(i / s.cols);
  const c = i % s.cols;
  if (m === 'up') return r > 0;
  if (m === 'down') return r < s.rows - 1;
  if (m === 'left') return c > 0;
  return c < s.cols - 1;
}

/** Apply one move (pure). */
export function applyMove(s: SokobanState, m: Move): MoveOutcome {
  if (!inside(s.player, m, s)) return { state: s, moved: false, push: null };
  const d = delta(m, s.cols);
  const next = s.player + d;
  if (s.wall[next]) return { state: s, moved: false, push: null };
  const bi = s.boxes.indexOf(next);
  if (bi < 0) return { state: { ...s, player: next }, moved: true, push: null };
  if (!inside(next, m, s)) return { state: s, moved: false, push: null };
  const beyond = next + d;
  if (s.wall[beyond] || s.boxes.includes(beyond)) return { state: s, moved: false, push: null };
  const boxes = s.boxes.slice();
  boxes[bi] = beyond;
  boxes.sort((a, b) => a - b);
  return { state: { ...s, player: next, boxes }, moved: true, push: { from: next, to: beyond } };
}

function isSolved(s: SokobanState): boolean {
  return s.boxes.every((b) => s.target[b]);
}

/**
 * Whether a box at cell b (not on a target) is stuck in a corner: a wall (or the grid edge) above
 * or below it and a wall left or right of it. Such a box can never move again.
 */
export function isCornered(s: SokobanState, b: number): boolean {
  if (s.target[b]) return false;
  const blocked = (m: Move) => !inside(b, m, s) || s.wall[b + delta(m, s.cols)];
  return (blocked('up') || blocked('down')) && (blocked('left') || blocked('right'));
}

function key(s: SokobanState): string {
  return `${s.player}|${s.boxes.join(',')}`;
}

/**
 * Pushes a search must never make, as `pushKey(from, move)` keys: the box on cell index `from`
 * (row-major, before the push) pushed by the player's `move`. src/envs/solvers/sokoban-solver.ts
 * `solveSokobanAvoiding` builds it from pushes named by cell.
 */
export type ForbiddenPushes = ReadonlySet<string>;

/** The key of the push of the box on cell index `from` by the player's move `m` (`ForbiddenPushes`). */
export const pushKey = (from: number, m: Move): string => `${from} ${m}`;

/**
 * BFS shortest move sequence from `s` to a solved state; null when unsolvable, or when more than
 * `maxNodes` states were expanded (then `exhausted` is set on the result of `solveSokobanDetailed`).
 * With `forbidden`, the search never makes one of those pushes (anywhere on the path): the result
 * is the shortest solution without them, null when every solution needs one.
 */
export function solveSokoban(s: SokobanState, maxNodes = 200_000, forbidden?: ForbiddenPushes): Move[] | null {
  return solveSokobanDetailed(s, maxNodes, forbidden).moves;
}

function solveSokobanDetailed(
  s: SokobanState, maxNodes = 200_000, forbidden?: ForbiddenPushes,
): { moves: Move[] | null; exhausted: boolean } {
  if (isSolved(s)) return { moves: [], exhausted: false };
  const parent = new Map<string, { prev: string; move: Move } | null>();
  parent.set(key(s), null);
  let frontier: SokobanState[] = [s];
  while (frontier.length) {
    const nextFrontier: SokobanState[] = [];
    for (const cur of frontier) {
      const ck = key(cur);
      for (const m of MOVES) {
        const o = applyMove(cur, m);
        if (!o.moved) continue;
        if (o.push && isCornered(o.state, o.push.to)) continue;
        if (o.push && forbidden?.has(pushKey(o.push.from, m))) continue;
        const nk = key(o.state);
        if (parent.has(nk)) continue;
        parent.set(nk, { prev: ck, move: m });
        if (isSolved(o.state)) {
          const moves: Move[] = [];
          let k: string = nk;
          for (let p = parent.get(k); p; p = parent.get(k)) {
            moves.push(p.move);
            k = p.prev;
          }
          return { moves: moves.reverse(), exhausted: false };
        }
        if (parent.size > maxNodes) return { moves: null, exhausted: true };
        nextFrontier.push(o.state);
      }
    }
    frontier = nextFrontier;
  }
  return { moves: null, exhausted: false };
}

/** Render a state as the observation text. */
export function renderSokoban(s: SokobanState): string {
  const lines: string[] = [];
  for (let r = 0; r < s.rows; r++) {
    let line = '';
    for (let c = 0; c < s.cols; c++) {
      const i = r * s.cols + c;
      const box = s.boxes.includes(i);
      if (s.wall[i]) line += '#';
      else if (i === s.player) line += s.target[i] ? 'S' : 'P';
      else if (box) line += s.target[i] ? '*' : 'X';
      else line += s.target[i] ? 'O' : '_';
    }
    lines.push(line);
  }
  return gridText(lines, 0);
}

/**
 * Parse a grid: an observation (`renderSokoban`: header `  012345`, rows `0 ######`), the older
 * spaced form (`0: # # # ...`), or bare rows (`######`, `#_P__#`). Digit-only lines (column
 * headers) are skipped.
 * @throws Error when rows differ in length, a symbol is unknown, or there is not exactly one player.
 */
export function parseSokoban(text: string | string[]): SokobanState {
  const raw = (Array.isArray(text) ? text : text.split('\n')).map((l) => l.trim()).filter((l) => l.length > 0 && !/^\d+$/.test(l));
  const grid = raw.map((l) => {
    const m = /^\d+:\s*(.*)$/.exec(l) ?? /^\d+ (\S+)$/.exec(l);
    const body = m ? m[1] : l;
    return body.includes(' ') ? body.split(/\s+/) : [...body];
  });
  const rows = grid.length;
  const cols = grid[0]?.length ?? 0;
  if (rows === 0 || grid.some((g) => g.length !== cols)) throw new Error('sokoban: grid rows must all have the same length');
  const n = rows * cols;
  const s: SokobanState = { rows, cols, wall: Array(n).fill(false), target: Array(n).fill(false), boxes: [], player: -1 };
  grid.flat().forEach((ch, i) => {
    switch (ch) {
      case '#': s.wall[i] = true; break;
      case '_': break;
      case 'O': s.target[i] = true; break;
      case 'X': s.boxes.push(i); break;
      case '*':
      case '√': s.boxes.push(i); s.target[i] = true; break;
      case 'P':
      case 'S':
        if (s.player >= 0) throw new Error('sokoban: more than one player');
        s.player = i;
        if (ch === 'S') s.target[i] = true;
        break;
      default: throw new Error(`sokoban: unknown symbol '${ch}'`);
    }
  });
  if (s.player < 0) throw new Error('sokoban: no player');
  s.boxes.sort((a, b) => a - b);
  return s;
}

/** Moves named in `text`, in order (case-insensitive whole words), at most `limit`. */
export function parseMoves(text: string, limit = MOVES_PER_TURN): Move[] {
  const out: Move[] = [];
  for (const m of text.matchAll(/\b(up|down|left|right)\b/gi)) {
    out.push(m[1].toLowerCase() as Move);
    if (out.length >= limit) break;
  }
  return out;
}

/** The rules in about 220 bytes: symbols, coordinates, goal and the answer format with an example. */
function sokobanInstructions(p: SokobanParams): string {
  const boxes = p.boxes === 1 ? '1 box' : `${p.boxes} boxes`;
  return (
    `Sokoban ${p.rows}x${p.cols}, ${boxes}. Rows left, columns on top, from 0. ` +
    `# wall, _ floor, O target, X box, * box on target, P you, S you on target. ` +
    `Push all boxes onto targets. Boxes can't be pulled: a box in a corner is stuck. ` +
    `Answer 1-3 moves, e.g. up, left, left`
  );
}

/**
 * Draw a puzzle from `rng`: border walls, up to floor(interior/8) random interior walls, then
 * targets, boxes and player on distinct floor cells; kept when no box starts on a target and the
 * BFS shortest solution has minMoves..maxMoves moves. Returns the state and that solution.
 * @throws Error when 100,000 draws found none (impossible bounds).
 */
export function generateSokoban(rng: Rng, p: SokobanParams): { state: SokobanState; solution: Move[] } {
  const { rows, cols, boxes } = p;
  const n = rows * cols;
  const interior: number[] = [];
  for (let r = 1; r < rows - 1; r++) for (let c = 1; c < cols - 1; c++) interior.push(r * cols + c);
  const maxExtraWalls = Math.floor(interior.length / 8);
  for (let tries = 0; tries < 100_000; tries++) {
    const wall = Array<boolean>(n).fill(true);
    for (const i of interior) wall[i] = false;
    const cells = rng.shuffle(interior.slice());
    const extra = rng.int(maxExtraWalls + 1);
    for (let k = 0; k < extra; k++) wall[cells[k]] = true;
    const floor = cells.slice(extra);
    const target = Array<boolean>(n).fill(false);
    for (const t of floor.slice(0, boxes)) target[t] = true;
    const state: SokobanState = {
      rows, cols, wall, target,
      boxes: floor.slice(boxes, 2 * boxes).sort((a, b) => a - b),
      player: floor[2 * boxes],
    };
    if (state.boxes.some((b) => isCornered(state, b))) continue;
    const solution = solveSokoban(state, 50_000);
    if (solution && solution.length >= p.minMoves && solution.length <= p.maxMoves) return { state, solution };
  }
  throw new Error('sokoban: no puzzle within the solution-length bounds after 100000 draws');
}

export class SokobanEnv implements BuiltinEnv {
  readonly kind = 'sokoban' as const;
  readonly name: string;
  readonly instructions: string;
  readonly params: SokobanParams;
  private s: SokobanState | null = null;
  private initial: SokobanState | null = null;
  private over = true;
  /** Memo of exact solvability, keyed by boxes and the player's reachable region. */
  private solvable = new Map<string, boolean>();
  /**
   * Why the last attempt ended dead: the push that left it unsolvable (the box's cell before it,
   * `from`, and after it, `box`, row-major indices; the player's `move`), and whether that box is
   * now cornered (for reflections).
   */
  lastDead: { box: number; cornered: boolean; from: number; move: Move } | null = null;

  constructor(params: Partial<SokobanParams> = {}) {
    this.params = { ...SOKOBAN_DEFAULTS, ...params };
    checkSokobanParams(this.params);
    this.name = sokobanName(this.params);
    this.instructions = sokobanInstructions(this.params);
  }

  reset(seed: number): ResetResult {
    const { state } = generateSokoban(new Rng(seed), this.params);
    return this.setState(state);
  }

  /** Start from a given state (hand-made boards in tests; see `parseSokoban`). */
  setState(state: SokobanState): ResetResult {
    this.s = state;
    this.initial = state;
    this.over = false;
    this.lastDead = null;
    this.solvable.clear();
    return { observation: renderSokoban(state), availableActions: this.legalActions() };
  }

  /** The current state (immutable value). @throws Error before reset. */
  get state(): SokobanState {
    if (!this.s) throw new Error('sokoban: no state before reset');
    return this.s;
  }

  get done(): boolean {
    return this.over;
  }

  step(action: string): StepResult {
    if (!this.s) throw new Error('sokoban: step before reset');
    if (this.over) throw new Error('sokoban: step after done');
    const moves = parseMoves(action);
    if (moves.length === 0) {
      return { observation: renderSokoban(this.s), reward: SOKOBAN_REWARD.step, done: false, success: false, invalidAction: true };
    }
    let reward = 0;
    let invalid = false;
    for (const m of moves) {
      const before = this.s;
      const o = applyMove(before, m);
      reward += SOKOBAN_REWARD.step;
      if (!o.moved) {
        invalid = true;
        continue;
      }
      this.s = o.state;
      if (o.push) {
        if (!before.target[o.push.from] && o.state.target[o.push.to]) reward += SOKOBAN_REWARD.boxOn;
        if (before.target[o.push.from] && !o.state.target[o.push.to]) reward += SOKOBAN_REWARD.boxOff;
        if (isSolved(o.state)) {
          this.over = true;
          return { observation: renderSokoban(o.state), reward: round(reward + SOKOBAN_REWARD.solved), done: true, success: true, invalidAction: invalid };
        }
        if (this.isDead(o.state)) {
          this.over = true;
          this.lastDead = { box: o.push.to, cornered: isCornered(o.state, o.push.to), from: o.push.from, move: m };
          return { observation: renderSokoban(o.state), reward: round(reward), done: true, success: false, invalidAction: invalid };
        }
      }
    }
    return { observation: renderSokoban(this.s), reward: round(reward), done: false, success: false, invalidAction: invalid };
  }

  /**
   * Legal actions: every sequence of up to 3 unblocked moves (shorter when a move ends the
   * attempt), as "up, left, left".
   */
  legalActions(): string[] {
    if (!this.s || this.over) return [];
    const out: string[] = [];
    const walk = (s: SokobanState, seq: Move[]) => {
      if (seq.length === MOVES_PER_TURN) return void out.push(seq.join(', '));
      let any = false;
      for (const m of MOVES) {
        const o = applyMove(s, m);
        if (!o.moved) continue;
        any = true;
        if (o.push && (isSolved(o.state) || this.isDead(o.state))) out.push([...seq, m].join(', '));
        else walk(o.state, [...seq, m]);
      }
      if (!any && seq.length > 0) out.push(seq.join(', '));
    };
    walk(this.s, []);
    return out;
  }

  /** Whether `s` can no longer be solved (exact search, memoised; a cornered box short-cuts it). */
  isDead(s: SokobanState): boolean {
    if (s.boxes.some((b) => isCornered(s, b))) return true;
    const k = `${s.boxes.join(',')}|${reachRoot(s)}`;
    let ok = this.solvable.get(k);
    if (ok === undefined) {
      const r = solveSokobanDetailed(s, 100_000);
      ok = r.moves !== null || r.exhausted; // when the search gives up, do not call it dead
      this.solvable.set(k, ok);
    }
    return !ok;
  }

  /** The initial state of the current task (after reset). */
  get initialState(): SokobanState {
    if (!this.initial) throw new Error('sokoban: no state before reset');
    return this.initial;
  }
}

/** Smallest cell index the player can walk to without pushing: names the player's region. */
function reachRoot(s: SokobanState): number {
  const seen = new Set<number>([s.player]);
  const stack = [s.player];
  let min = s.player;
  while (stack.length) {
    const i = stack.pop()!;
    for (const m of MOVES) {
      if (!inside(i, m, s)) continue;
      const j = i + delta(m, s.cols);
      if (s.wall[j] || s.boxes.includes(j) || seen.has(j)) continue;
      seen.add(j);
      if (j < min) min = j;
      stack.push(j);
    }
  }
  return min;
}

function round(x: number): number {
  return Math.round(x * 1e6) / 1e6;
}
