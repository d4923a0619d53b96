/**
 * Comparing trained methods on the same held-out tasks (experiments/lamer-vs-gigpo.sh, docs/RESULTS.md):
 * mean +- std over training seeds, a paired bootstrap interval over tasks, reflection statistics,
 * and the markdown report. Pure functions over eval reports (src/eval/harness.ts) and learning
 * curves (src/eval/experiment.ts).
 *
 * Units: pass rates are fractions in [0, 1] (the report prints percent); entropies in nats.
 */
import { Rng } from '../shared/rng.js';
import { pairedBootstrap, quantile, type BootstrapInterval } from '../shared/bootstrap.js';
import { passAtKRate } from '../shared/passk.js';
import { summarize, type AttemptRecord, type SessionRecord } from './metrics.js';

/** Mean and sample standard deviation (n - 1; 0 for fewer than 2 values). NaN mean for none. */
export function meanStd(xs: readonly number[]): { mean: number; std: number; n: number } {
  const n = xs.length;
  const mean = n ? xs.reduce((a, b) => a + b, 0) / n : NaN;
  const std = n > 1 ? Math.sqrt(xs.reduce((a, x) => a + (x - mean) * (x - mean), 0) / (n - 1)) : 0;
  return { mean, std, n };
}

export { pairedBootstrap, quantile, type BootstrapInterval };

/**
 * Per task: the share of `sessions` of that task solved within the first k attempts (over the
 * seeds' or trials' sessions of the task). Keyed by taskId.
 */
function taskPassAtK(sessions: readonly SessionRecord[], k: number): Map<string, number> {
  const by = new Map<string, SessionRecord[]>();
  for (const s of sessions) by.set(s.taskId, [...(by.get(s.taskId) ?? []), s]);
  return new Map([...by].map(([t, ss]) => [t, passAtKRate(ss.map((s) => s.attempts), k)[String(k)] ?? 0]));
}

/**
 * Per-task differences a - b of task pass@k on the tasks both methods played (sorted by taskId).
 * `a` and `b` hold every evaluated session of the method (all seeds).
 */
export function pairedDiffs(a: readonly SessionRecord[], b: readonly SessionRecord[], k: number): number[] {
  const pa = taskPassAtK(a, k);
  const pb = taskPassAtK(b, k);
  return [...pa.keys()].filter((t) => pb.has(t)).sort().map((t) => pa.get(t)! - pb.get(t)!);
}

/**
 * Per task: a value of one run's sessions on the task, keyed by taskId: `taskPassAtK` of the run
 * for k, or, with `gainTo`, the task's pass@gainTo - pass@k (the gain of later attempts).
 */
export function taskValues(sessions: readonly SessionRecord[], k: number, gainTo?: number): Map<string, number> {
  const at = taskPassAtK(sessions, k);
  if (gainTo === undefined) return at;
  const to = taskPassAtK(sessions, gainTo);
  return new Map([...at].map(([t, v]) => [t, (to.get(t) ?? 0) - v]));
}

export interface SeedTaskInterval extends BootstrapInterval {
  /** Runs (training seeds) of each method. */
  runsA: number;
  runsB: number;
}

/**
 * Paired two-stage bootstrap over training seeds and tasks (a hierarchical bootstrap, Davison &
 * Hinkley 1997 §3.8, with both levels resampled; Efron & Tibshirani 1993 ch. 13 for the
 * percentile interval): `a[r]` and `b[r]` are per run (training seed) of methods A and B a value
 * per task (e.g. `taskValues`). Each resample draws A's runs and B's runs with replacement,
 * independently (separate training runs; a method with one run, such as the SFT start, keeps it),
 * and n tasks with replacement, the same tasks for both (paired: the same held-out tasks); its
 * statistic is the mean over the drawn tasks of [mean over A's drawn runs] - [mean over B's drawn
 * runs]. The point estimate uses every run and task. Tasks: those every run of both played.
 * The interval reflects the variation between training seeds as well as between tasks; with
 * fewer than 2 runs per method it is the tasks-only interval. Deterministic for a given `seed`.
 * @throws RangeError for no runs, no common task, a level outside (0, 1) or fewer than 1 resample.
 */
export function seedTaskBootstrap(
  a: ReadonlyArray<ReadonlyMap<string, number>>, b: ReadonlyArray<ReadonlyMap<string, number>>, opts: { resamples?: number; level?: number; seed?: number } = {},
): SeedTaskInterval {
  const B = opts.resamples ?? 10_000;
  const level = opts.level ?? 0.95;
  if (a.length === 0 || b.length === 0) throw new RangeError('bootstrap of no runs');
  if (!(level > 0 && level < 1)) throw new RangeError(`level must be in (0, 1), got ${level}`);
  if (!(Number.isInteger(B) && B >= 1)) throw new RangeError(`resamples must be an integer >= 1, got ${B}`);
  const tasks = [...a[0].keys()].filter((t) => a.every((m) => m.has(t)) && b.every((m) => m.has(t))).sort();
  const n = tasks.length;
  if (n === 0) throw new RangeError('bootstrap of no common tasks');
  // values[run][task]
  const va = a.map((m) => Float64Array.from(tasks, (t) => m.get(t)!));
  const vb = b.map((m) => Float64Array.from(tasks, (t) => m.get(t)!));
  const rowMean = (rows: Float64Array[], pick: number[]) => {
    const out = new Float64Array(n);
    for (const r of pick) for (let i = 0; i < n; i++) out[i] += rows[r][i] / pick.length;
    return out;
  };
  const all = (k: number) => Array.from({ length: k }, (_, r) => r);
  const ma = rowMean(va, all(va.length)), mb = rowMean(vb, all(vb.length));
  let point = 0;
  for (let i = 0; i < n; i++) point += (ma[i] - mb[i]) / n;
  const rng = new Rng(opts.seed ?? 12345);
  const draw = (k: number) => Array.from({ length: k }, () => Math.floor(rng.next() * k));
  const means = new Float64Array(B);
  for (let s = 0; s < B; s++) {
    const ra = rowMean(va, draw(va.length)); // A's runs resampled
    const rb = rowMean(vb, draw(vb.length)); // B's runs resampled
    let sum = 0;
    for (let i = 0; i < n; i++) { const t = Math.floor(rng.next() * n); sum += ra[t] - rb[t]; } // tasks resampled, paired
    means[s] = sum / n;
  }
  means.sort();
  const sorted = Array.from(means);
  return {
    mean: point, lo: quantile(sorted, (1 - level) / 2), hi: quantile(sorted, (1 + level) / 2),
    level, resamples: B, tasks: n, runsA: a.length, runsB: b.length,
  };
}

export interface ReflectionStats {
  /** Reflections written (attempts followed by one). */
  reflections: number;
  /** Of those, attempts that ended on a losing action (done, not success): the cell to name. */
  afterLosingAction: number;
  /** Share of `afterLosingAction` reflections that name the cell of the attempt's last action; null if none. */
  namesEndingCell: number | null;
  /** Share of reflections identical to the session's previous reflection; null if none could be. */
  repeatsPrevious: number | null;
  /** Share of reflections whose exact text also occurs in another task's sessions; null if none. */
  sharedAcrossTasks: number | null;
  /** Cell actions taken while the session's earlier reflections named at least one mine cell. */
  clicksWithNamedMines?: number;
  /** Share of those that clicked a cell an earlier reflection names as a mine; null if none. */
  clicksOnNamedMine?: number | null;
}

/**
 * The cells a reflection names as mines, as "r,c" keys: "(r, c)" followed in the same sentence
 * by "mine" ("(2, 3) was a mine."), or "mine(s) at/in/on (r, c)".
 */
export function minesNamed(reflection: string): Set<string> {
  const out = new Set<string>();
  for (const sentence of reflection.split(/[.;\n]/)) {
    const cells = [...sentence.matchAll(/\(\s*(\d+)\s*,\s*(\d+)\s*\)/g)];
    if (cells.length === 0 || !/\bmines?\b/i.test(sentence)) continue;
    // "(r, c) was a mine" names the cells before the word; "mine at (r, c)" the ones after it
    const at = sentence.search(/\bmines?\b/i);
    const before = cells.filter((m) => m.index! < at);
    for (const m of before.length > 0 ? before : cells) out.add(`${m[1]},${m[2]}`);
  }
  return out;
}

/** The cell of a canonical MineSweeper action "(r, c)" as [r, c], or null. */
export function cellOf(action: string | undefined): [number, number] | null {
  const m = action ? /^\((\d+), (\d+)\)$/.exec(action) : null;
  return m ? [Number(m[1]), Number(m[2])] : null;
}

/**
 * The cell of an attempt's losing last action: the env ended the attempt (`done`) without success
 * and its last action is a cell (MineSweeper: the mine it clicked); null otherwise (a success, the
 * turn cap, Sokoban moves).
 */
export function endingCell(a: Pick<AttemptRecord, 'endReason' | 'success' | 'trajectory'>): [number, number] | null {
  return a.endReason === 'done' && !a.success ? cellOf(a.trajectory[a.trajectory.length - 1]) : null;
}

/** Whether `reflection` names cell (r, c): "(r, c)" with any spacing, or "row r, col(umn) c". */
export function namesCell(reflection: string, [r, c]: readonly [number, number]): boolean {
  return new RegExp(`\\(\\s*${r}\\s*,\\s*${c}\\s*\\)|row\\s*${r}\\s*,\\s*col(?:umn)?\\s*${c}\\b`, 'i').test(reflection);
}

/**
 * Reflection statistics of evaluated sessions. A reflection "names the ending cell" when the
 * attempt ended on a losing action at cell (r, c) (MineSweeper: a mine) and the text contains
 * "(r, c)" (any spacing) or "row r, col(umn) c". A click "lands on a memory-named mine" when an
 * attempt's cell action is a cell that an earlier reflection of the same session names as a mine
 * (`minesNamed`); the share is over the cell actions of attempts whose memory names one.
 */
export function reflectionStats(sessions: readonly SessionRecord[]): ReflectionStats {
  let reflections = 0, afterLosing = 0, naming = 0, repeatable = 0, repeats = 0;
  const tasksOf = new Map<string, Set<string>>();
  for (const s of sessions) for (const a of s.attempts) if (a.reflection !== undefined) {
    tasksOf.set(a.reflection, (tasksOf.get(a.reflection) ?? new Set()).add(s.taskId));
  }
  let shared = 0, clicksWithMemory = 0, clicksOnNamed = 0;
  for (const s of sessions) {
    let prev: string | undefined;
    const named = new Set<string>();
    for (const a of [...s.attempts].sort((x, y) => x.attempt - y.attempt)) {
      if (named.size > 0) {
        for (const action of a.trajectory) {
          const cell = cellOf(action);
          if (!cell) continue;
          clicksWithMemory++;
          if (named.has(`${cell[0]},${cell[1]}`)) clicksOnNamed++;
        }
      }
      if (a.reflection === undefined) continue;
      for (const k of minesNamed(a.reflection)) named.add(k);
      reflections++;
      if (tasksOf.get(a.reflection)!.size > 1) shared++;
      if (prev !== undefined) { repeatable++; if (prev === a.reflection) repeats++; }
      prev = a.reflection;
      const cell = endingCell(a);
      if (!cell) continue;
      afterLosing++;
      if (namesCell(a.reflection, cell)) naming++;
    }
  }
  return {
    reflections,
    afterLosingAction: afterLosing,
    namesEndingCell: afterLosing ? naming / afterLosing : null,
    repeatsPrevious: repeatable ? repeats / repeatable : null,
    sharedAcrossTasks: reflections ? shared / reflections : null,
    clicksWithNamedMines: clicksWithMemory,
    clicksOnNamedMine: clicksWithMemory ? clicksOnNamed / clicksWithMemory : null,
  };
}

/** One evaluated training run: its seed, its eval sessions and (optionally) its learning curve. */
export interface RunResult {
  seed: number;
  sessions: SessionRecord[];
  /** Per training iteration (CurvePoint-like): pass@k and mean return of the rollouts, job entropy. */
  curve?: Array<{ iteration: number; passAtK: Record<string, number>; meanReturn: number; entropy: number | null; rolloutSeconds: number; trainSeconds: number; tokensTrained: number }>;
  /** Wall seconds of the run's training. */
  trainSeconds?: number;
}

export interface ArmResult {
  key: string;
  label: string;
  /** How it was evaluated (e.g. "3-attempt sessions, reflections" or "independent retries"). */
  evalMode: string;
  runs: RunResult[];
}

export interface ArmSummary {
  key: string;
  label: string;
  evalMode: string;
  seeds: number;
  passAtK: Array<{ mean: number; std: number; n: number }>;
  gain: { mean: number; std: number; n: number };
  diversity: { mean: number; std: number; n: number };
  trainEntropy: { mean: number; std: number; n: number } | null;
  reflections: ReflectionStats;
}

/**
 * Per-arm summary: pass@1..K (mean +- std over seeds), the pass@1 -> pass@K gain, trajectory
 * diversity (nats), the last training iteration's policy entropy, and reflection statistics over
 * every seed's sessions.
 */
export function summarizeArm(arm: ArmResult, K = 3): ArmSummary {
  const per = arm.runs.map((r) => summarize(r.sessions, K));
  const passAt = Array.from({ length: K }, (_, k) => meanStd(per.map((m) => m.passAtK[String(k + 1)] ?? 0)));
  const ent = arm.runs.map((r) => r.curve?.[r.curve.length - 1]?.entropy).filter((x): x is number => typeof x === 'number');
  return {
    key: arm.key, label: arm.label, evalMode: arm.evalMode, seeds: arm.runs.length,
    passAtK: passAt,
    gain: meanStd(per.map((m) => (m.passAtK[String(K)] ?? 0) - (m.passAtK['1'] ?? 0))),
    diversity: meanStd(per.map((m) => m.trajectoryDiversity)),
    trainEntropy: ent.length ? meanStd(ent) : null,
    reflections: reflectionStats(arm.runs.flatMap((r) => r.sessions)),
  };
}

/** A rate in [0, 1] as a percentage with one decimal ("12.5"); '-' for a missing one. */
export const pct = (x: number | null | undefined): string => (x === null || x === undefined ? '-' : (100 * x).toFixed(1));
const pm = (m: { mean: number; std: number }, scale = 100, digits = 1) => `${(scale * m.mean).toFixed(digits)} ± ${(scale * m.std).toFixed(digits)}`;
const share = (x: number | null) => (x === null ? '-' : `${pct(x)}%`);

/**
 * The markdown report: a table of arms (pass@1/2/3 and gain as mean ± std over seeds, in
 * percent; diversity; training entropy), the paired bootstrap interval of the pass@K difference
 * for each `pairs` entry (a, b), reflection statistics, and per-iteration curves (mean over seeds,
 * every `curveEvery`-th iteration).
 */
export function comparisonMarkdown(arms: readonly ArmResult[], pairs: ReadonlyArray<[string, string]>, opts: { K?: number; curveEvery?: number; resamples?: number } = {}): string {
  const K = opts.K ?? 3;
  const sums = arms.map((a) => summarizeArm(a, K));
  const out: string[] = [];
  const ks = Array.from({ length: K }, (_, k) => k + 1);
  out.push(`| method | eval | seeds | ${ks.map((k) => `pass@${k} (%)`).join(' | ')} | pass@1 -> pass@${K} (pts) | trajectory diversity (nats) | policy entropy, last iteration (nats) |`);
  out.push(`|---|---|---|${ks.map(() => '---|').join('')}---|---|---|`);
  for (const s of sums) {
    out.push(`| ${s.label} | ${s.evalMode} | ${s.seeds} | ${s.passAtK.map((m) => pm(m)).join(' | ')} | ${pm(s.gain)} | ${pm(s.diversity, 1, 2)} | ${s.trainEntropy ? pm(s.trainEntropy, 1, 3) : '-'} |`);
  }
  out.push('');
  out.push(`Paired bootstrap over tasks (10,000 resamples unless stated; each task's pass@${K} averaged over the seeds' sessions; 95% percentile interval):`);
  out.push('');
  out.push(`| difference | tasks | mean (pts) | 95% interval (pts) |`);
  out.push('|---|---|---|---|');
  for (const [ka, kb] of pairs) {
    const a = arms.find((x) => x.key === ka);
    const b = arms.find((x) => x.key === kb);
    if (!a || !b) continue;
    const d = pairedDiffs(a.runs.flatMap((r) => r.sessions), b.runs.flatMap((r) => r.sessions), K);
    if (d.length === 0) continue;
    const ci = pairedBootstrap(d, { resamples: opts.resamples ?? 10_000 });
    out.push(`| ${a.label} - ${b.label}, pass@${K} | ${ci.tasks} | ${(100 * ci.mean).toFixed(1)} | [${(100 * ci.lo).toFixed(1)}, ${(100 * ci.hi).toFixed(1)}] |`);
  }
  out.push('');
  out.push('Reflections (over every seed\'s evaluated sessions; "names the ending cell": the reflection after an attempt that ended on a mine contains that cell):');
  out.push('');
  out.push('| method | reflections | after a mine | names the ending cell | same as the previous reflection | text also in another task |');
  out.push('|---|---|---|---|---|---|');
  for (const s of sums) {
    const r = s.reflections;
    out.push(`| ${s.label} | ${r.reflections} | ${r.afterLosingAction} | ${share(r.namesEndingCell)} | ${share(r.repeatsPrevious)} | ${share(r.sharedAcrossTasks)} |`);
  }
  const every = Math.max(1, opts.curveEvery ?? 1);
  for (const a of arms) {
    const curves = a.runs.map((r) => r.curve ?? []).filter((c) => c.length > 0);
    if (curves.length === 0) continue;
    const n = Math.min(...curves.map((c) => c.length));
    out.push('');
    out.push(`Per-iteration rollouts of ${a.label} (mean over ${curves.length} seed${curves.length > 1 ? 's' : ''}):`);
    out.push('');
    out.push('| iteration | pass@1 (%) | pass@3 (%) | mean return | policy entropy | rollout s | train s |');
    out.push('|---|---|---|---|---|---|---|');
    for (let i = 0; i < n; i += every) {
      const at = (f: (p: (typeof curves)[number][number]) => number | null) => meanStd(curves.map((c) => f(c[i])).filter((x): x is number => x !== null)).mean;
      out.push(`| ${i} | ${pct(at((p) => p.passAtK['1'] ?? 0))} | ${pct(at((p) => p.passAtK['3'] ?? p.passAtK['1'] ?? 0))} | ${at((p) => p.meanReturn).toFixed(2)} | ${at((p) => p.entropy).toFixed(3)} | ${at((p) => p.rolloutSeconds).toFixed(0)} | ${at((p) => p.trainSeconds).toFixed(0)} |`);
    }
  }
  return out.join('\n') + '\n';
}

/** The markers of the section NAME of a document: `<!-- NAME:begin -->` and `<!-- NAME:end -->`. */
export function sectionMarkers(name: string): { begin: string; end: string } {
  return { begin: `<!-- ${name}:begin -->`, end: `<!-- ${name}:end -->` };
}

/** Whether `doc` has the marked section NAME (its begin marker, then its end marker). */
export function hasSection(doc: string, name: string): boolean {
  const { begin, end } = sectionMarkers(name);
  const i = doc.indexOf(begin);
  return i >= 0 && doc.indexOf(end) > i;
}

/**
 * Replaces the text between `<!-- NAME:begin -->` and `<!-- NAME:end -->` in `doc` with `body`
 * (markers kept); appends the marked section at the end when the markers are absent.
 */
export function replaceSection(doc: string, name: string, body: string): string {
  const { begin, end } = sectionMarkers(name);
  const i = doc.indexOf(begin);
  const j = doc.indexOf(end);
  if (i >= 0 && j > i) return doc.slice(0, i + begin.length) + '\n' + body + doc.slice(j);
  return `${doc.replace(/\n*$/, '\n')}\n${begin}\n${body}${end}\n`;
}
