/**
 * The held-out rows of a base checkpoint (experiments/eval-base.ts, `npm run eval:base`): per game, the
 * same tasks played three ways by the same model,
 *   (a) 'lamer':       K-attempt sessions with reflection_only memory, no availableActions;
 *   (b) 'lamer-avail': the same with the env's legal actions sent as availableActions;
 *   (c) 'independent': K independent single-attempt sessions (no memory), as the paper evaluates
 *                      single-attempt baselines;
 * summarised as pass@1..K, the invalid-action rate and reflection statistics (./compare.ts
 * reflectionStats), with a paired bootstrap interval over tasks of the pass@K difference (a) - (c),
 * and, when measured, the checkpoint's held-out loss on demonstrations of the same held-out tasks
 * (src/recipes/heldout-loss.ts). Pure functions over eval reports (./harness.ts). Units: rates are fractions
 * in [0, 1] (the markdown prints percent and percentage points); losses are nats per token.
 */
import { firstSuccess } from '../shared/passk.js';
import { pairedBootstrap, pairedDiffs, pct, reflectionStats, type BootstrapInterval, type ReflectionStats } from './compare.js';
import type { EvalReport } from './harness.js';
import type { HeldOutDemoLoss } from '../shared/heldout-loss.js';
import { summarize, type SessionRecord } from './metrics.js';

/** The rows, in table order. */
export const BASE_ROWS = ['lamer', 'lamer-avail', 'independent'] as const;
export type BaseRow = (typeof BASE_ROWS)[number];

/** How each row is played (EvalOptions fields) and labelled. */
export const BASE_ROW_SPECS: Record<BaseRow, { label: string; availableActions: boolean; independentAttempts: boolean }> = {
  lamer: { label: '(a) LaMer session, reflections, no availableActions', availableActions: false, independentAttempts: false },
  'lamer-avail': { label: '(b) LaMer session, reflections, availableActions', availableActions: true, independentAttempts: false },
  independent: { label: '(c) independent retries, no memory', availableActions: false, independentAttempts: true },
};

/** One row's figures. */
export interface RowSummary {
  row: BaseRow;
  env: string;
  tasks: number;
  sessions: number;
  errors: number;
  /** {"1": pass@1, ..., "K": pass@K}. */
  passAtK: Record<string, number>;
  invalidActionRate: number;
  meanActionsPerAttempt: number;
  /** Reflection statistics; `namesEndingCell` counts MineSweeper mines only (null elsewhere). */
  reflections: ReflectionStats;
  /** Sokoban: share of the reflections that name a box and its cell ("box (r, c) ..."); null for
   *  other envs or without reflections. */
  namesBoxCell: number | null;
  /** Per task (sorted by taskId): the 0-based attempt of its first success, -1 for none; enough to
   *  recompute pass@k and the paired differences. */
  firstSuccess: Array<[string, number]>;
}

/**
 * The figures of one played row. @param report an eval report of one env (sessions of any trials).
 */
export function rowSummary(row: BaseRow, report: Pick<EvalReport, 'env' | 'attempts' | 'sessions'>): RowSummary {
  const m = summarize(report.sessions, report.attempts);
  return {
    row, env: report.env, tasks: m.tasks, sessions: m.sessions, errors: m.errors, passAtK: m.passAtK,
    invalidActionRate: m.invalidActionRate, meanActionsPerAttempt: m.meanActionsPerAttempt,
    reflections: reflectionStats(report.sessions),
    namesBoxCell: report.env.startsWith('sokoban') ? boxCellShare(report.sessions) : null,
    firstSuccess: [...report.sessions].sort((x, y) => (x.taskId < y.taskId ? -1 : x.taskId > y.taskId ? 1 : x.trial - y.trial)).map((s) => [s.taskId, firstSuccess(s.attempts)]),
  };
}

/** Whether a Sokoban reflection names a box with its cell: "box" or "boxes", then "(r, c)" in the same sentence ("box (2, 3)", "boxes at (1, 1)"). */
export function namesBoxCell(reflection: string): boolean {
  return /\bbox(?:es)?\b[^.;\n]*\(\s*\d+\s*,\s*\d+\s*\)/i.test(reflection);
}

/** Share of the sessions' reflections that name a box with its cell (`namesBoxCell`); null without reflections. */
export function boxCellShare(sessions: readonly SessionRecord[]): number | null {
  const texts = sessions.flatMap((s) => s.attempts.flatMap((a) => (a.reflection === undefined ? [] : [a.reflection])));
  if (texts.length === 0) return null;
  return texts.filter(namesBoxCell).length / texts.length;
}

/**
 * Paired percentile bootstrap (./compare.ts pairedBootstrap, fixed seed) over the tasks both
 * played of pass@K(a) - pass@K(b). @returns null when no task is shared.
 */
export function rowDifference(a: readonly SessionRecord[], b: readonly SessionRecord[], K: number, resamples = 10_000): BootstrapInterval | null {
  const d = pairedDiffs(a, b, K);
  return d.length === 0 ? null : pairedBootstrap(d, { resamples });
}

/** One game's rows and the (a) - (c) difference. */
export interface GameResult {
  env: string;
  rows: RowSummary[];
  /** pass@K of (a) minus (c), paired over tasks; null when either row is missing. */
  lamerMinusIndependent: BootstrapInterval | null;
  /** Nats per trained token of the checkpoint on held-out demonstration sessions of this game
   *  (src/recipes/heldout-loss.ts heldOutDemoLoss); absent or null when not measured. */
  heldOutLoss?: HeldOutDemoLoss | null;
}

/**
 * The markdown table of every game's rows (pass@1..K and the invalid-action rate in percent,
 * reflections written, share of MineSweeper reflections after a mine that name that cell, share
 * repeating the session's previous reflection verbatim, share of Sokoban reflections naming a box cell,
 * share of clicks on a cell the session's memory names as a mine), then one line per game with the paired
 * bootstrap interval of pass@K (a) - (c) in percentage points, then, when a game has its held-out
 * loss, a table of it per game (nats per trained token to 3 decimals, and the tokens counted).
 */
export function basePolicyMarkdown(games: readonly GameResult[], K: number): string {
  const ks = Array.from({ length: K }, (_, k) => k + 1);
  const out: string[] = [];
  out.push(`| game | row | tasks | ${ks.map((k) => `pass@${k} (%)`).join(' | ')} | invalid actions (%) | reflections | names the ending cell (%) | names a box cell (%) | clicks on a mine the memory names (%) | repeats the previous reflection (%) |`);
  out.push(`|---|---|---|${ks.map(() => '---|').join('')}---|---|---|---|---|---|`);
  for (const g of games) {
    for (const r of g.rows) {
      const spec = BASE_ROW_SPECS[r.row];
      const refl = r.row === 'independent'
        ? ['-', '-', '-', '-', '-']
        : [String(r.reflections.reflections), pct(r.reflections.namesEndingCell), pct(r.namesBoxCell), pct(r.reflections.clicksOnNamedMine), pct(r.reflections.repeatsPrevious)];
      out.push(`| ${g.env} | ${spec.label} | ${r.tasks}${r.errors ? ` (${r.errors} errors)` : ''} | ${ks.map((k) => pct(r.passAtK[String(k)] ?? 0)).join(' | ')} | ${pct(r.invalidActionRate)} | ${refl.join(' | ')} |`);
    }
  }
  const diffs = games.filter((g) => g.lamerMinusIndependent);
  if (diffs.length > 0) {
    out.push('');
    for (const g of diffs) {
      const ci = g.lamerMinusIndependent!;
      out.push(`- ${g.env}: pass@${K} (a) - (c) = ${(100 * ci.mean).toFixed(1)} pts, 95% paired bootstrap interval [${(100 * ci.lo).toFixed(1)}, ${(100 * ci.hi).toFixed(1)}] over ${ci.tasks} tasks (${ci.resamples} resamples).`);
    }
  }
  const losses = games.filter((g) => g.heldOutLoss);
  if (losses.length > 0) {
    const nats = (x: number | null) => (x === null ? '-' : x.toFixed(3));
    out.push('', '| game | held-out demonstration sessions | reflection loss (nats/token) | reflection tokens | action loss (nats/token) | action tokens |', '|---|---|---|---|---|---|');
    for (const g of losses) {
      const l = g.heldOutLoss!;
      out.push(`| ${g.env} | ${l.sessions} | ${nats(l.reflection.natsPerToken)} | ${l.reflection.tokens} | ${nats(l.action.natsPerToken)} | ${l.action.tokens} |`);
    }
  }
  return out.join('\n') + '\n';
}
