/**
 * SFT examples of the compact builtin policy from demonstration trials (src/envs/compact-data.ts):
 * every decision's served prompt (rendered by the agent's own renderer, src/agent/prompt.ts, in
 * the checkpoint's prompt format, fitted by its tokenizer exactly as the engine fits it) followed by
 * the solver's answer, with a *soft target* at each answer position (uniform over the equally good
 * pieces there) and EOS after it; every reflection as prompt -> reflection tokens + EOS, one-hot.
 */
import { renderActPrompt, renderReflectionPrompt, type PromptAttempt, type PromptStep } from '../../agent/prompt.js';
import type { CompactPromptFormat } from '../../model/prompt-format.js';
import { EOS } from '../../model/tokenizer.js';
import { type Tokenizer } from '../../model/tokenizers.js';
import type { CompactTrial } from '../../shared/compact-trial.js';

/** One training sequence: `ids` `[T]` int token ids; `targets[k]` trains the logits at `at[k]`. */
export interface CompactExample {
  kind: 'action' | 'reflection';
  ids: number[];
  /** Positions whose next-token logits are trained, ascending, each < ids.length. */
  at: number[];
  /** For each trained position, the target token ids (uniform weights over them). */
  targets: number[][];
  /** Reflection examples: the failure class of the reflection (`reflectionClass`). */
  failure?: string;
  /** Acting examples: the step's `memoryMatters` (the memory removes a cell from the target). */
  memoryMatters?: boolean;
  /**
   * MineSweeper acting examples after a reflection that named a mine: the token ids of the cells
   * the memory names as mines (never in the first position's target), for an unlikelihood term at
   * `at[0]` (src/training/maths/soft-targets.ts `unlikelihoodLoss`). Absent: none.
   */
  namedMines?: number[];
  /** Acting examples: the token ids of the step's `invalid` answers at `at[0]`, for the same term. Absent: none. */
  invalid?: number[];
  /**
   * MineSweeper acting examples: the token ids of the step's `provableMines` (cells the board proves
   * to be mines) at `at[0]`, less the first position's target, for the same term. Absent: none.
   */
  provableMines?: number[];
  /**
   * Sokoban acting examples: per answer position (`at[k]`, k < the number of answer pieces), the
   * token ids of the step's `invalidMoves` there, for the same term. Absent: none.
   */
  invalidMoves?: number[][];
  /**
   * Sokoban acting examples: per answer position, the token ids of the step's `deadMoves` there
   * (moves that would make a push the memory names as a dead end), for the same term. Absent: none.
   */
  deadMoves?: number[][];
}

/**
 * The failure class of a compact reflection (src/envs/compact-data.ts writes them): the text with
 * every `(r, c)` cell replaced by `C` and every move word by `M`, e.g. `C was a mine.`,
 * `turns ran out.`, `box C stuck in a corner.`, `boxes stuck. dead end.`, `box C M dead end.`.
 */
export function reflectionClass(text: string): string {
  return text.replace(/\(\d+, \d+\)/g, 'C').replace(/\b(up|down|left|right)\b/g, 'M');
}

/** The failure class of a reflection example, null for an acting one: a `takeOneKind` stratum. */
export const failureOf = (x: { kind: string; failure?: string }): string | null => (x.kind === 'reflection' ? x.failure ?? null : null);

export interface CompactExampleOptions {
  tokenizer: Tokenizer;
  format: CompactPromptFormat;
  /** The model's context; prompts are fitted to blockSize - reserve as served. */
  blockSize: number;
  /** Tokens the engine keeps free after an acting / reflection prompt (its generation caps). */
  actionReserve: number;
  reflectionReserve: number;
  /** Train reflections too (default true). */
  reflections?: boolean;
}

/** The single token of a piece. @throws Error when the piece is not one token of the vocabulary. */
export function pieceToken(tok: Tokenizer, piece: string): number {
  const ids = tok.encode(piece);
  if (ids.length !== 1) throw new Error(`target piece ${JSON.stringify(piece)} is ${ids.length} tokens; soft targets need one-token pieces`);
  return ids[0]!;
}

/**
 * The target path of one decision: the solver's answer split into `choices` positions, each with
 * the token of the piece it took and the tokens of every equally good piece there.
 * @throws Error when `target` is not a concatenation of one piece from each set.
 */
export function targetPath(tok: Tokenizer, choices: string[][], target: string): { path: number[]; sets: number[][] } {
  const path: number[] = [];
  const sets: number[][] = [];
  let rest = target;
  for (const set of choices) {
    const piece = set.find((p) => rest.startsWith(p));
    if (piece === undefined) throw new Error(`target ${JSON.stringify(target)} does not follow its choices`);
    rest = rest.slice(piece.length);
    path.push(pieceToken(tok, piece));
    sets.push([...new Set(set.map((p) => pieceToken(tok, p)))]);
  }
  if (rest !== '') throw new Error(`target ${JSON.stringify(target)} has text beyond its choices`);
  return { path, sets };
}

/** Training examples of one trial: one per decision with a target, one per reflection. */
export function compactExamples(trial: CompactTrial, opts: CompactExampleOptions): CompactExample[] {
  const tok = opts.tokenizer;
  const out: CompactExample[] = [];
  const previous: PromptAttempt[] = [];
  /** Token ids of the cells that earlier reflections of this trial name as mines (MineSweeper). */
  const namedMines = new Set<number>();
  trial.attempts.forEach((a, n) => {
    const done: PromptStep[] = [];
    for (const s of a.steps) {
      if (s.choices && s.target !== null) {
        const parts = renderActPrompt({
          instructions: trial.instructions, memory: 'reflection_only', attempt: n, previousAttempts: previous,
          steps: done, observation: s.observation, env: trial.env, format: opts.format,
        });
        const enc = tok.fitPrompt(parts, opts.blockSize, opts.actionReserve);
        const { path, sets } = targetPath(tok, s.choices, s.target);
        const ids = [...enc.ids, ...path];
        const at = [...path.keys()].map((j) => enc.ids.length - 1 + j);
        at.push(ids.length - 1);
        const named = [...namedMines].filter((v) => !sets[0]!.includes(v));
        const invalid = (s.invalid ?? []).map((p) => pieceToken(tok, p)).filter((v) => !sets[0]!.includes(v));
        const provableMines = (s.provableMines ?? []).map((p) => pieceToken(tok, p)).filter((v) => !sets[0]!.includes(v));
        const invalidMoves = s.invalidMoves?.map((set, k) => set.map((p) => pieceToken(tok, p)).filter((v) => !sets[k]!.includes(v)));
        const deadMoves = s.deadMoves?.map((set, k) => set.map((p) => pieceToken(tok, p)).filter((v) => !sets[k]!.includes(v)));
        out.push({
          kind: 'action', ids, at, targets: [...sets, [EOS]],
          ...(s.memoryMatters ? { memoryMatters: true } : {}),
          ...(named.length > 0 ? { namedMines: named } : {}),
          ...(invalid.length > 0 ? { invalid } : {}),
          ...(provableMines.length > 0 ? { provableMines } : {}),
          ...(invalidMoves?.some((m) => m.length > 0) ? { invalidMoves } : {}),
          ...(deadMoves?.some((m) => m.length > 0) ? { deadMoves } : {}),
        });
      }
      done.push({ observation: s.observation, action: s.action });
    }
    if (a.reflection !== null && opts.reflections !== false) {
      const parts = renderReflectionPrompt({
        instructions: trial.instructions, memory: 'reflection_only', attempt: n, previousAttempts: previous,
        steps: done, finalObservation: a.finalObservation, env: trial.env, format: opts.format,
      });
      const enc = tok.fitPrompt(parts, opts.blockSize, opts.reflectionReserve);
      const text = tok.encode(a.reflection);
      const ids = [...enc.ids, ...text];
      const at = Array.from({ length: text.length + 1 }, (_, j) => enc.ids.length - 1 + j);
      out.push({ kind: 'reflection', ids, at, targets: [...text.map((t) => [t]), [EOS]], failure: reflectionClass(a.reflection) });
    }
    previous.push({ steps: done, finalObservation: a.finalObservation, success: a.success, reflection: a.reflection });
    const mine = trial.env === 'minesweeper' && a.reflection !== null ? /^(\(\d+, \d+\)) was a mine\./.exec(a.reflection) : null;
    if (mine) namedMines.add(pieceToken(tok, mine[1]!));
  });
  return out;
}

/**
 * Removes and returns up to `n` examples of `pool`, all of one kind: the first drawn uniformly, the
 * rest uniformly among the pool's examples of its kind (acting or reflection). A batch is padded
 * to its longest sequence and a reflection example is about twice as long as an acting one, so a
 * mixed batch costs about what a reflection batch does; one-kind batches keep the mixture (a
 * batch is of a kind with that kind's share of the pool) and pay each kind's own length.
 * With `stratum` (e.g. `failureOf`), a batch whose first example has a stratum (not null) is drawn
 * balanced instead: the first is put back and each of the n examples picks a stratum uniformly
 * among those its kind still has in the pool, then an example of it uniformly; the kind's share
 * of batches is unchanged. Returns fewer than `n` when the first's kind has fewer examples left;
 * [] for an empty pool. `rng.int(k)` must return an integer in [0, k).
 */
export function takeOneKind<T extends { kind: string }>(
  pool: T[], n: number, rng: { int(k: number): number }, stratum?: (x: T) => string | null,
): T[] {
  if (pool.length === 0 || n < 1) return [];
  const firstAt = rng.int(pool.length);
  const kind = pool[firstAt]!.kind;
  if (stratum && stratum(pool[firstAt]!) !== null) return takeBalanced(pool, n, rng, kind, stratum);
  const first = pool.splice(firstAt, 1)[0]!;
  const same: number[] = [];
  pool.forEach((x, i) => { if (x.kind === kind) same.push(i); });
  // a partial Fisher-Yates shuffle of the same-kind indices picks n - 1 of them
  const k = Math.min(n - 1, same.length);
  for (let j = 0; j < k; j++) {
    const r = j + rng.int(same.length - j);
    [same[j], same[r]] = [same[r]!, same[j]!];
  }
  const picked = same.slice(0, k).sort((x, y) => y - x); // splice from the back keeps indices valid
  return [first, ...picked.map((i) => pool.splice(i, 1)[0]!)];
}

/** `takeOneKind`'s balanced draw: n examples of `kind`, each from a uniformly drawn stratum. */
function takeBalanced<T extends { kind: string }>(pool: T[], n: number, rng: { int(k: number): number }, kind: string, stratum: (x: T) => string | null): T[] {
  const groups = new Map<string, number[]>();
  pool.forEach((x, i) => {
    if (x.kind !== kind) return;
    const s = stratum(x) ?? '';
    let g = groups.get(s);
    if (!g) groups.set(s, (g = []));
    g.push(i);
  });
  const names = [...groups.keys()].sort(); // a fixed order: the draw depends only on rng and pool
  const chosen: number[] = [];
  for (let j = 0; j < n && names.length > 0; j++) {
    const gi = rng.int(names.length);
    const g = groups.get(names[gi]!)!;
    const r = rng.int(g.length);
    chosen.push(g[r]!);
    g[r] = g[g.length - 1]!;
    g.pop();
    if (g.length === 0) names.splice(gi, 1);
  }
  const out = chosen.map((i) => pool[i]!);
  for (const i of [...chosen].sort((x, y) => y - x)) pool.splice(i, 1);
  return out;
}
