/**
 * The pure parts of the base-model scaling grid (experiments/base-scaling.ts, `npm run
 * experiment:base-scaling`): the grid's points from the command line (`LxE[hH]:S`, layers x n_embd
 * [heads] : optimiser steps), the per-point record built from the model:sft-chat summary and the
 * eval:base JSON (experiments/eval-base.ts, row (a) 'lamer', and the held-out loss when measured), the
 * markdown table of the records, and
 * the SVG of pass@1 / pass@3 against the tokens trained (log10 x), one series per model size.
 * Units: rates are fractions in [0, 1] (the table and the chart show percent); tokens are byte
 * tokens trained on (non-padding positions); seconds of wall time; held-out losses in nats per
 * trained token.
 */
import { chartPanel, svgDocument, type Series } from './chart-svg.js';
import type { GameResult } from './base-policy.js';
import type { HeldOutLoss } from '../shared/heldout-loss.js';
import { pct } from './compare.js';

/** A bad `--points`, `--existing` or `--sft-args` value; the message names it. */
export class ScalingUsageError extends Error {}

/** One point of the grid: the model config and the training length. */
export interface PointSpec {
  layers: number;
  embd: number;
  heads: number;
  steps: number;
  /** Folder name under the grid's output folder: `LxE-sS`, or `LxEhH-sS` when H is not the default. */
  name: string;
}

/**
 * The aims of the builtin policy on the held-out boards, pass@1 and pass@3 as fractions:
 * MineSweeper 6x6/3 40% / 60%, Sokoban 6x6/2 30% / 45%.
 */
export const AIMS: Readonly<Record<string, { passAt1: number; passAt3: number }>> = {
  'minesweeper-6x6-3': { passAt1: 0.4, passAt3: 0.6 },
  'sokoban-6x6-2': { passAt1: 0.3, passAt3: 0.45 },
};

/** Heads when the point does not give them: n_embd / 32 rounded down, at least 1. */
export function defaultHeads(embd: number): number {
  return Math.max(1, Math.floor(embd / 32));
}

/** The folder name of a point (see PointSpec.name). */
export function pointName(p: Pick<PointSpec, 'layers' | 'embd' | 'heads' | 'steps'>): string {
  return `${p.layers}x${p.embd}${p.heads === defaultHeads(p.embd) ? '' : `h${p.heads}`}-s${p.steps}`;
}

/** Names of the folders a grid writes under its output folder (one per point). */
export const POINT_DIR_RE = /^\d+x\d+(h\d+)?-s\d+$/;

const POINT_RE = /^(\d+)x(\d+)(?:h(\d+))?:(\d+)$/;

/**
 * One point, `LxE:S` or `LxEhH:S` (e.g. `4x128:800`, `2x64h2:200`): positive integers, heads
 * dividing n_embd.
 * @throws ScalingUsageError naming the bad text and the expected form.
 */
export function parsePoint(text: string): PointSpec {
  const t = text.trim();
  const m = POINT_RE.exec(t);
  if (!m) throw new ScalingUsageError(`point '${t}' is not LAYERSxEMBD[hHEADS]:STEPS (e.g. 4x128:800 or 2x64h2:200)`);
  const [layers, embd, steps] = [Number(m[1]), Number(m[2]), Number(m[4])];
  const heads = m[3] === undefined ? defaultHeads(embd) : Number(m[3]);
  for (const [name, v] of [['layers', layers], ['embd', embd], ['heads', heads], ['steps', steps]] as const) {
    if (!Number.isSafeInteger(v) || v < 1) throw new ScalingUsageError(`point '${t}': ${name} must be an integer >= 1, got ${v}`);
  }
  if (embd % heads !== 0) {
    throw new ScalingUsageError(`point '${t}': ${heads} heads do not divide n_embd ${embd}; give the heads, e.g. ${layers}x${embd}h${[4, 2, 1].find((h) => embd % h === 0)}:${steps}`);
  }
  return { layers, embd, heads, steps, name: pointName({ layers, embd, heads, steps }) };
}

/**
 * A comma-separated list of points (see parsePoint). @throws ScalingUsageError for an empty list,
 * a bad item or two items with the same folder name.
 */
export function parsePoints(text: string): PointSpec[] {
  const items = text.split(',').map((s) => s.trim()).filter(Boolean);
  if (items.length === 0) throw new ScalingUsageError('no points given (e.g. 2x64:200,4x128:800)');
  const out = items.map(parsePoint);
  assertDistinct(out.map((p) => p.name));
  return out;
}

/** @throws ScalingUsageError when a folder name occurs twice. */
export function assertDistinct(names: readonly string[]): void {
  const seen = new Set<string>();
  for (const n of names) {
    if (seen.has(n)) throw new ScalingUsageError(`point ${n} is given twice`);
    seen.add(n);
  }
}

/**
 * Already-trained checkpoints, comma-separated `POINT=DIR` (e.g. `4x128:700=models/base`): the
 * point as in parsePoint, the checkpoint folder after the first '='.
 * @throws ScalingUsageError for an item without '=' or DIR, a bad point or a repeated point.
 */
export function parseExisting(text: string): Array<{ spec: PointSpec; dir: string }> {
  const items = text.split(',').map((s) => s.trim()).filter(Boolean);
  if (items.length === 0) throw new ScalingUsageError('no existing checkpoints given (e.g. 4x128:700=models/base)');
  const out = items.map((item) => {
    const i = item.indexOf('=');
    if (i < 0 || item.slice(i + 1).trim() === '') throw new ScalingUsageError(`existing '${item}' is not POINT=DIR (e.g. 4x128:700=models/base)`);
    return { spec: parsePoint(item.slice(0, i)), dir: item.slice(i + 1).trim() };
  });
  assertDistinct(out.map((e) => e.spec.name));
  return out;
}

/** Options of model:sft-chat that each point sets itself; `--sft-args` may not give them. */
export const PER_POINT_SFT_OPTIONS = ['--out', '--layers', '--embd', '--heads', '--steps', '--epochs', '--dry-run', '--help', '-h'] as const;

/**
 * The extra model:sft-chat arguments of `--sft-args`, split on whitespace (no quoting: no value
 * that model:sft-chat takes contains a space).
 * @throws ScalingUsageError for quote characters or an option that each point sets itself.
 */
export function parseSftArgs(text: string): string[] {
  if (/["'\\]/.test(text)) throw new ScalingUsageError(`--sft-args is split on whitespace and takes no quotes or backslashes, got ${JSON.stringify(text)}`);
  const args = text.split(/\s+/).filter(Boolean);
  for (const a of args) {
    const opt = a.split('=')[0]!;
    if ((PER_POINT_SFT_OPTIONS as readonly string[]).includes(opt)) {
      throw new ScalingUsageError(`--sft-args may not set ${opt}: each point sets --out, --layers, --embd, --heads and --steps itself`);
    }
  }
  return args;
}

/** How a point's checkpoint came to be. */
export interface PointTraining {
  /** 'trained' by this grid (model:sft-chat), or an 'existing' checkpoint (--existing). */
  source: 'trained' | 'existing';
  modelDir: string;
  /** Tokens trained on: the model:sft-chat summary, or the last point of the checkpoint's
   *  learning-curve.json; null when unknown. */
  tokens: number | null;
  /** Wall seconds of training, from the same sources; null when unknown. */
  trainSeconds: number | null;
}

/** One game's figures of a point (row (a) of eval:base: LaMer sessions, no availableActions). */
export interface ScalingGame {
  env: string;
  tasks: number;
  /** Sessions that failed with an error. */
  errors: number;
  /** {"1": pass@1, ..., "K": pass@K}. */
  passAtK: Record<string, number>;
  invalidActionRate: number;
  /** Share of reflections after a losing MineSweeper click that name that cell; null elsewhere. */
  namesEndingCell: number | null;
  /** Held-out loss of the checkpoint on demonstrations of this game's held-out tasks, nats per
   *  trained token of the reflection and the action text (null: no such tokens); absent when the
   *  eval did not measure it (src/recipes/heldout-loss.ts). */
  heldOutLoss?: { reflection: number | null; action: number | null };
}

/** One point of scaling.json. */
export interface ScalingRecord extends PointTraining {
  point: string;
  layers: number;
  embd: number;
  heads: number;
  parameters: number;
  steps: number;
  games: ScalingGame[];
}

/** The part of eval:base's JSON (experiments/eval-base.ts --out) that a record reads. */
export interface BaseEvalJson {
  model: { config: { n_layer: number; n_embd: number; n_head: number }; parameters: number };
  games: Array<Pick<GameResult, 'env'> & {
    rows: Array<Pick<GameResult['rows'][number], 'row' | 'tasks' | 'errors' | 'passAtK' | 'invalidActionRate' | 'reflections'>>;
    heldOutLoss?: Pick<HeldOutLoss, 'reflection' | 'action'> | null;
  }>;
}

/**
 * The record of one point: the model config and parameter count of the evaluated checkpoint (from
 * the eval JSON, which read the checkpoint's metadata), the training figures, and per game the
 * 'lamer' row and the held-out loss (when the eval JSON has it).
 * @throws Error when a game of the eval JSON has no 'lamer' row.
 */
export function scalingRecord(spec: Pick<PointSpec, 'name' | 'steps'>, training: PointTraining, evalJson: BaseEvalJson): ScalingRecord {
  const c = evalJson.model.config;
  return {
    point: spec.name, layers: c.n_layer, embd: c.n_embd, heads: c.n_head, parameters: evalJson.model.parameters, steps: spec.steps,
    ...training,
    games: evalJson.games.map((g) => {
      const r = g.rows.find((x) => x.row === 'lamer');
      if (!r) throw new Error(`point ${spec.name}: the eval of ${g.env} has no 'lamer' row`);
      const loss = g.heldOutLoss ? { heldOutLoss: { reflection: g.heldOutLoss.reflection.natsPerToken, action: g.heldOutLoss.action.natsPerToken } } : {};
      return { env: g.env, tasks: r.tasks, errors: r.errors, passAtK: r.passAtK, invalidActionRate: r.invalidActionRate, namesEndingCell: r.reflections.namesEndingCell, ...loss };
    }),
  };
}

/** Records in table order: by parameters, then tokens trained (unknown last), then point name. */
export function sortRecords(records: readonly ScalingRecord[]): ScalingRecord[] {
  return [...records].sort((a, b) => a.parameters - b.parameters || (a.tokens ?? Infinity) - (b.tokens ?? Infinity) || (a.point < b.point ? -1 : a.point > b.point ? 1 : 0));
}


/** Tokens for people: 950, 12.3k, 7.47M. */
export function formatTokens(n: number | null): string {
  if (n === null) return '-';
  if (n < 1e3) return String(n);
  if (n < 1e6) return `${(n / 1e3).toFixed(1)}k`;
  return `${(n / 1e6).toFixed(2)}M`;
}

/** The largest k of the records' pass@k; 3 (eval:base's attempts) when there is none. */
function maxK(records: readonly ScalingRecord[]): number {
  const ks = records.flatMap((r) => r.games.flatMap((g) => Object.keys(g.passAtK).map(Number)));
  return ks.length > 0 ? Math.max(...ks) : 3;
}

/**
 * The markdown table, one line per point and game in the records' order: model (LxE, heads),
 * parameters, steps, tokens trained, training seconds, tasks, pass@1..K (%), invalid actions (%),
 * reflections naming the ending cell (%), the held-out loss of the reflection and the action text
 * (nats/token, 3 decimals; '-' when not measured), and whether the game's aim (AIMS: pass@1 and
 * pass@3) is reached ('-' for a game without an aim).
 */
export function scalingMarkdown(records: readonly ScalingRecord[], aims: Readonly<Record<string, { passAt1: number; passAt3: number }>> = AIMS): string {
  const ks = Array.from({ length: maxK(records) }, (_, i) => i + 1);
  const nats = (x: number | null | undefined) => (x === null || x === undefined ? '-' : x.toFixed(3));
  const out = [
    `| model | parameters | steps | tokens trained | training (s) | game | tasks | ${ks.map((k) => `pass@${k} (%)`).join(' | ')} | invalid actions (%) | names the ending cell (%) | held-out reflection loss (nats/token) | held-out action loss (nats/token) | aim pass@1 / pass@3 (%) |`,
    `|---|---|---|---|---|---|---|${ks.map(() => '---|').join('')}---|---|---|---|---|`,
  ];
  for (const r of records) {
    for (const g of r.games) {
      const aim = aims[g.env];
      const reached = aim ? `${(g.passAtK['1'] ?? 0) >= aim.passAt1 && (g.passAtK['3'] ?? 0) >= aim.passAt3 ? 'reached' : 'not reached'} (${pct(aim.passAt1)} / ${pct(aim.passAt3)})` : '-';
      out.push(`| ${r.layers}x${r.embd}, ${r.heads} head${r.heads === 1 ? '' : 's'} | ${r.parameters.toLocaleString('en-US')} | ${r.steps} | ${formatTokens(r.tokens)} | ${r.trainSeconds === null ? '-' : Math.round(r.trainSeconds)} | ${g.env} | ${g.tasks}${g.errors ? ` (${g.errors} errors)` : ''} | ${ks.map((k) => pct(g.passAtK[String(k)] ?? 0)).join(' | ')} | ${pct(g.invalidActionRate)} | ${pct(g.namesEndingCell)} | ${nats(g.heldOutLoss?.reflection)} | ${nats(g.heldOutLoss?.action)} | ${reached} |`);
    }
  }
  return out.join('\n') + '\n';
}

const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf'];

/**
 * The chart series of one game: per model size (layers x embd x heads, in order of parameters) a
 * dashed pass@1 line and a solid pass@3 line through [log10(tokens trained), percent], sorted by
 * tokens; points with unknown or zero tokens, or without the game, are left out, and so are sizes
 * left with no point. Then the game's aims (AIMS) as grey horizontal lines over the whole decades
 * that the points span (at least one).
 */
export function scalingSeries(records: readonly ScalingRecord[], env: string, aims: Readonly<Record<string, { passAt1: number; passAt3: number }>> = AIMS): Series[] {
  const sizes = new Map<string, Array<{ x: number; g: ScalingGame; parameters: number }>>();
  for (const r of records) {
    const g = r.games.find((x) => x.env === env);
    if (!g || r.tokens === null || !(r.tokens > 0)) continue;
    const key = `${r.layers}x${r.embd}, ${r.heads}h`;
    sizes.set(key, [...(sizes.get(key) ?? []), { x: Math.log10(r.tokens), g, parameters: r.parameters }]);
  }
  const ordered = [...sizes].sort((a, b) => a[1][0]!.parameters - b[1][0]!.parameters);
  const series: Series[] = ordered.flatMap(([key, pts], i) => {
    const sorted = [...pts].sort((a, b) => a.x - b.x);
    const color = PALETTE[i % PALETTE.length]!;
    return [
      { label: `${key} pass@1`, color, dashed: true, points: sorted.map((p) => [p.x, 100 * (p.g.passAtK['1'] ?? 0)] as [number, number]) },
      { label: `${key} pass@3`, color, points: sorted.map((p) => [p.x, 100 * (p.g.passAtK['3'] ?? 0)] as [number, number]) },
    ];
  });
  const xs = series.flatMap((s) => s.points.map((p) => p[0]));
  const aim = aims[env];
  if (aim && xs.length > 0) {
    // Over whole decades, so that the x axis (integer ticks) always has at least two labels.
    const lo = Math.floor(Math.min(...xs));
    const hi = Math.max(lo + 1, Math.ceil(Math.max(...xs)));
    series.push(
      { label: `aim pass@1 ${pct(aim.passAt1)}%`, color: '#999', dashed: true, points: [[lo, 100 * aim.passAt1], [hi, 100 * aim.passAt1]] },
      { label: `aim pass@3 ${pct(aim.passAt3)}%`, color: '#999', points: [[lo, 100 * aim.passAt3], [hi, 100 * aim.passAt3]] },
    );
  }
  return series;
}

/** The SVG: one panel per game (scalingSeries), pass@k in percent (0..100) against log10 tokens. */
export function scalingSvg(records: readonly ScalingRecord[], games: readonly string[], caption?: string): string {
  return svgDocument(
    games.map((env) => (x: number, y: number, w: number, h: number) => chartPanel(`${env}: pass@1 (dashed), pass@3 (%)`, 'tokens trained (log10)', scalingSeries(records, env), x, y, w, h, [0, 100])),
    480,
    340,
    caption,
  );
}
