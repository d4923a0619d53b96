/**
 * "Does memory act?": the section of experiments/lamer-vs-gigpo-report.ts that measures whether the
 * memory between attempts (reflections, docs/method.md#memory-and-reflections) changes what the next attempt does,
 * and whether the cross-episode return (§2) credits the reflections that carry the right lesson.
 *
 * Read from one game folder of experiments/lamer-vs-gigpo.sh (`readMemoryGame`):
 *   eval-<arm>-seed<s>.json, eval-sft-lamer-mode.json, eval-sft-independent.json  (lamer eval)
 *     LaMer rows and sft-lamer-mode are 3-attempt sessions with reflections ("memory"); GiGPO
 *     rows, sft-independent and, when present, eval-lamer-independent-seed<s>.json (a LaMer run's
 *     weights evaluated without memory: the same-weights control; experiments/lamer-vs-gigpo.sh does not
 *     write it) are 3 independent single-attempt retries (`--independent-attempts`,
 *     src/eval/harness.ts: recorded as one session of attempts 0..2 without reflections), which
 *     is the no-memory control: the same measure there is what repeating looks like by chance.
 *   lamer/seed-<s>/data/lamer.db  (the LaMer run's server database: every iteration's rollouts
 *     and the job that trained on them), for the runs that have their eval file.
 *
 * Eval measures, per row, all over "pairs": a failed attempt k followed by attempt k+1 of the same
 * session (a session stops at its first success, so every attempt but the last failed), both with
 * at least one action; counted per task, then pooled over tasks (ratio of sums):
 *   - same first action: attempt k+1's first action equals attempt k's (canonical action strings
 *     of the eval's `trajectory`); same trajectory: the whole action sequence is equal;
 *   - next attempt solves: attempt k+1 succeeded (success rate of k+1 given k failed);
 *   - MineSweeper, re-clicks the mine: of the pairs whose attempt k ended on a mine (the cell of
 *     its last action, src/eval/compare.ts endingCell), attempt k+1 clicks that cell again;
 *   - reflections (memory rows; src/eval/compare.ts reflectionStats of each task's sessions):
 *     MineSweeper, of the reflections after a mine, the share naming that cell (namesEndingCell),
 *     and of the cell clicks made while the session's memory names a mine (minesNamed), the share
 *     on such a cell (clicksOnNamedMine); Sokoban, the share naming a box with its cell
 *     (src/eval/base-policy.ts namesBoxCell, as boxCellShare).
 * Shares are fractions in [0, 1], printed as percent with 95% percentile bootstrap intervals over
 * tasks (`taskBootstrap`: tasks resampled with replacement, the pooled ratio recomputed); the
 * memory - no-memory differences resample the tasks both rows played, paired, with each side's
 * training seeds pooled per task (seeds are not resampled).
 *
 * Training measure (LaMer runs): for every reflection trained in an iteration, the advantage the
 * LaMer job gave its tokens, recomputed exactly as the job computes it: the job's own data filter
 * and hyperparameters (training_jobs.config) through src/training/data/select.ts
 * selectTrainingRecords and src/training/data/data.ts buildRlSamples (src/training/maths returns
 * and GiGPO advantages), as src/training/run/manager.ts prepare does; checked against the
 * advantage the job stored on the step row. Units: the env's reward units (MineSweeper: a win is
 * +10). Reflections are split by what they say: MineSweeper, after an attempt that ended on a mine,
 * naming that cell (namesCell) or not, and reflections after the turn cap; Sokoban, naming a box
 * with its cell or not (a description, not a correctness check). If the reflections that name the
 * mine do not get a higher advantage than those that miss it, the policy gradient cannot learn to
 * write them. Within a task of one iteration every reflection has the same GiGPO episode term
 * (docs/method.md#gigpo), so the within-task difference is the difference of their returns G_0(n+1);
 * the pooled means also carry the task's episode term.
 *
 * Standalone: node_modules/.bin/tsx experiments/lamer-vs-gigpo-memory.ts OUT_DIR [--resamples N]
 * prints the section for every game folder of OUT_DIR (or OUT_DIR itself when it holds eval files).
 */
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { asc, eq } from 'drizzle-orm';
import { openDatabase } from '../src/db/index.js';
import { trainingJobs } from '../src/db/schema.js';
import { TrainingDataRepo } from '../src/db/training-data.js';
import type { EnvKind } from '../src/domain.js';
import { namesBoxCell } from '../src/eval/base-policy.js';
import { cellOf, endingCell, namesCell, quantile, reflectionStats } from '../src/eval/compare.js';
import { canonicalAction, type EvalReport } from '../src/eval/harness.js';
import type { AttemptRecord, SessionRecord } from '../src/eval/metrics.js';
import { Rng } from '../src/shared/rng.js';
import { buildRlSamples } from '../src/training/data/data.js';
import { chooseTrainingSessions, trainingRecordsOf, type DataFilter } from '../src/training/data/select.js';
import { DEFAULT_RETURNS, type ReturnMode } from '../src/training/maths/returns.js';

// --- counts per task -------------------------------------------------------------------------

/** What one task contributes (summed over a row's sessions of the task). */
export interface TaskCounts {
  /** Failed attempt k followed by attempt k+1, both with at least one action. */
  pairs: number;
  /** Of `pairs`: attempt k+1's first action is attempt k's. */
  sameFirst: number;
  /** Of `pairs`: attempt k+1's action sequence is attempt k's. */
  sameWhole: number;
  /** Of `pairs`: attempt k+1 succeeded. */
  nextSolved: number;
  /** Of `pairs`: attempt k ended on a mine (MineSweeper; `endingCell`). */
  afterMine: number;
  /** Of `afterMine`: attempt k+1 clicks that cell again. */
  reclicksMine: number;
  /** Of `afterMine`: the reflection written after attempt k names that cell (namesCell). */
  afterMineNamed: number;
  /** Of `afterMineNamed`: attempt k+1 clicks that cell again. */
  reclicksNamed: number;
  /** Of `afterMine`: a reflection after attempt k that does not name that cell. */
  afterMineUnnamed: number;
  /** Of `afterMineUnnamed`: attempt k+1 clicks that cell again. */
  reclicksUnnamed: number;
  /** Reflections written (reflectionStats.reflections). */
  reflections: number;
  /** Reflections after an attempt that ended on a mine (reflectionStats.afterLosingAction). */
  reflAfterMine: number;
  /** Of `reflAfterMine`: naming that cell (reflectionStats.namesEndingCell x afterLosingAction). */
  reflNamesMine: number;
  /** Cell clicks while the session's earlier reflections name a mine (reflectionStats.clicksWithNamedMines). */
  clicksWithNamed: number;
  /** Of `clicksWithNamed`: on a cell so named (reflectionStats.clicksOnNamedMine x clicksWithNamedMines). */
  clicksOnNamed: number;
  /** Sokoban: reflections naming a box with its cell (namesBoxCell). */
  reflBoxCell: number;
}
const COUNT_KEYS = ['pairs', 'sameFirst', 'sameWhole', 'nextSolved', 'afterMine', 'reclicksMine', 'afterMineNamed', 'reclicksNamed', 'afterMineUnnamed', 'reclicksUnnamed', 'reflections', 'reflAfterMine', 'reflNamesMine', 'clicksWithNamed', 'clicksOnNamed', 'reflBoxCell'] as const;
type CountKey = (typeof COUNT_KEYS)[number];
const zero = (): TaskCounts => Object.fromEntries(COUNT_KEYS.map((k) => [k, 0])) as unknown as TaskCounts;

/** The shares reported: numerator and denominator counts. */
export const RATIOS = {
  sameFirst: ['sameFirst', 'pairs'],
  sameWhole: ['sameWhole', 'pairs'],
  nextSolved: ['nextSolved', 'pairs'],
  reclicksMine: ['reclicksMine', 'afterMine'],
  reclicksNamed: ['reclicksNamed', 'afterMineNamed'],
  reclicksUnnamed: ['reclicksUnnamed', 'afterMineUnnamed'],
  reflNamesMine: ['reflNamesMine', 'reflAfterMine'],
  clicksOnNamed: ['clicksOnNamed', 'clicksWithNamed'],
  reflBoxCell: ['reflBoxCell', 'reflections'],
} as const satisfies Record<string, readonly [CountKey, CountKey]>;
export type RatioName = keyof typeof RATIOS;

/** Whether a trajectory of canonical actions clicks `cell` at some step. */
const clicksCell = (trajectory: readonly string[], [r, c]: readonly [number, number]) => trajectory.some((x) => { const cell = cellOf(x); return cell !== null && cell[0] === r && cell[1] === c; });
const sameSeq = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((x, i) => x === b[i]);

/** The counts of `sessions` (of any tasks and seeds) per task id. */
export function taskCounts(sessions: readonly SessionRecord[]): Map<string, TaskCounts> {
  const byTask = new Map<string, SessionRecord[]>();
  for (const s of sessions) byTask.set(s.taskId, [...(byTask.get(s.taskId) ?? []), s]);
  const out = new Map<string, TaskCounts>();
  for (const [task, ss] of byTask) {
    const c = zero();
    for (const s of ss) {
      const at = [...s.attempts].sort((x, y) => x.attempt - y.attempt);
      for (let k = 0; k + 1 < at.length; k++) {
        const a = at[k]!, b = at[k + 1]!;
        if (a.success || a.trajectory.length === 0 || b.trajectory.length === 0) continue;
        c.pairs++;
        if (a.trajectory[0] === b.trajectory[0]) c.sameFirst++;
        if (sameSeq(a.trajectory, b.trajectory)) c.sameWhole++;
        if (b.success) c.nextSolved++;
        const mine = endingCell(a);
        if (mine) {
          c.afterMine++;
          const again = clicksCell(b.trajectory, mine);
          if (again) c.reclicksMine++;
          if (a.reflection !== undefined) {
            if (namesCell(a.reflection, mine)) { c.afterMineNamed++; if (again) c.reclicksNamed++; } else { c.afterMineUnnamed++; if (again) c.reclicksUnnamed++; }
          }
        }
      }
      for (const a of at) if (a.reflection !== undefined && namesBoxCell(a.reflection)) c.reflBoxCell++;
    }
    const r = reflectionStats(ss);
    c.reflections = r.reflections;
    c.reflAfterMine = r.afterLosingAction;
    c.reflNamesMine = Math.round((r.namesEndingCell ?? 0) * r.afterLosingAction);
    c.clicksWithNamed = r.clicksWithNamedMines ?? 0;
    c.clicksOnNamed = Math.round((r.clicksOnNamedMine ?? 0) * (r.clicksWithNamedMines ?? 0));
    out.set(task, c);
  }
  return out;
}

// --- bootstrap over tasks --------------------------------------------------------------------

/** A statistic with its percentile interval; `value` NaN when undefined on the data (a zero denominator). */
export interface Interval {
  value: number;
  lo: number;
  hi: number;
  /** Resamples on which the statistic was defined (the interval's quantiles are over these). */
  resamples: number;
}

/**
 * Percentile bootstrap over tasks (clusters; Efron & Tibshirani 1993 ch. 13, Davison & Hinkley 1997
 * §3.8): `rows[i]` is task i's vector of counts or sums. Each resample draws n tasks with
 * replacement, sums their vectors and evaluates every statistic of `stats` on the sum (so ratios
 * are ratios of pooled sums); the interval is the (1-level)/2 and (1+level)/2 quantiles (type 7,
 * src/eval/compare.ts quantile) over the resamples where the statistic is finite (a zero
 * denominator leaves a resample out). The point value is the statistic on all tasks. Deterministic
 * for a given `seed`.
 * @throws RangeError for a level outside (0, 1) or fewer than 1 resample.
 */
export function taskBootstrap(rows: ReadonlyArray<readonly number[]>, stats: ReadonlyArray<(sum: readonly number[]) => number>, opts: { resamples?: number; level?: number; seed?: number } = {}): Interval[] {
  const B = opts.resamples ?? 10_000;
  const level = opts.level ?? 0.95;
  if (!(level > 0 && level < 1)) throw new RangeError(`level must be in (0, 1), got ${level}`);
  if (!(Number.isInteger(B) && B >= 1)) throw new RangeError(`resamples must be an integer >= 1, got ${B}`);
  const n = rows.length;
  const width = rows[0]?.length ?? 0;
  const total = new Array<number>(width).fill(0);
  for (const r of rows) for (let j = 0; j < width; j++) total[j] += r[j]!;
  const values = stats.map((f) => f(total));
  const draws: number[][] = stats.map(() => []);
  if (n > 0) {
    const rng = new Rng(opts.seed ?? 12345);
    const sum = new Array<number>(width);
    for (let b = 0; b < B; b++) {
      sum.fill(0);
      for (let i = 0; i < n; i++) { const r = rows[Math.floor(rng.next() * n)]!; for (let j = 0; j < width; j++) sum[j] += r[j]!; }
      stats.forEach((f, s) => { const v = f(sum); if (Number.isFinite(v)) draws[s]!.push(v); });
    }
  }
  return values.map((value, s) => {
    const d = draws[s]!.sort((x, y) => x - y);
    return Number.isFinite(value) && d.length > 0
      ? { value, lo: quantile(d, (1 - level) / 2), hi: quantile(d, (1 + level) / 2), resamples: d.length }
      : { value: NaN, lo: NaN, hi: NaN, resamples: d.length };
  });
}

const vec = (c: TaskCounts) => COUNT_KEYS.map((k) => c[k]);
const at = (k: CountKey, offset = 0) => offset + COUNT_KEYS.indexOf(k);
const ratioOf = (name: RatioName, offset = 0) => (s: readonly number[]) => { const [a, b] = RATIOS[name]; return s[at(a, offset)]! / s[at(b, offset)]!; };

/** Per ratio: pooled share over the tasks of `counts` with its interval over tasks, and its numerator and denominator. */
export function rowShares(counts: ReadonlyMap<string, TaskCounts>, names: readonly RatioName[], opts: { resamples?: number; level?: number } = {}): Record<string, Interval & { num: number; den: number }> {
  const rows = [...counts.keys()].sort().map((t) => vec(counts.get(t)!));
  const ivs = taskBootstrap(rows, names.map((n) => ratioOf(n)), opts);
  const sum = (k: CountKey) => [...counts.values()].reduce((a, c) => a + c[k], 0);
  return Object.fromEntries(names.map((n, i) => [n, { ...ivs[i]!, num: sum(RATIOS[n][0]), den: sum(RATIOS[n][1]) }]));
}

/** Per ratio: share(a) - share(b) over the tasks both played, tasks resampled paired. */
export function shareDifferences(a: ReadonlyMap<string, TaskCounts>, b: ReadonlyMap<string, TaskCounts>, names: readonly RatioName[], opts: { resamples?: number; level?: number } = {}): { tasks: number; diffs: Record<string, Interval> } {
  const tasks = [...a.keys()].filter((t) => b.has(t)).sort();
  const w = COUNT_KEYS.length;
  const rows = tasks.map((t) => [...vec(a.get(t)!), ...vec(b.get(t)!)]);
  const ivs = taskBootstrap(rows, names.map((n) => (s: readonly number[]) => ratioOf(n)(s) - ratioOf(n, w)(s)), opts);
  return { tasks: tasks.length, diffs: Object.fromEntries(names.map((n, i) => [n, ivs[i]!])) };
}

// --- the training databases ------------------------------------------------------------------

/** How a trained reflection reads. */
export type ReflectionGroup = 'names the mine' | 'misses the mine' | 'after the turn cap' | 'names a box cell' | 'no box cell';

/** One reflection trained by a LaMer job, with the advantage the job gave its tokens. */
export interface ReflectionCredit {
  seed: number;
  /** 0-based iteration: the job's rank among the run's succeeded LaMer jobs by creation time. */
  iteration: number;
  taskId: string;
  sessionId: string;
  /** The failed attempt it reflects on (0-based). */
  attempt: number;
  text: string;
  group: ReflectionGroup;
  /** Recomputed as the job does (buildRlSamples), reward units. */
  advantage: number;
  /** Its return G_0(n+1) (buildRlSamples), reward units. */
  return: number;
  /** The advantage the job stored on the step row (null when none was stored). */
  storedAdvantage: number | null;
  /** Attempt n+1 succeeded. */
  nextSolved: boolean;
  /** MineSweeper, attempt n ended on a mine: attempt n+1 clicks that cell again; else null. */
  nextReclicks: boolean | null;
}

/** Hyperparameters of a job request that change returns and advantages (src/training/schemas.ts). */
interface JobHyper { gammaStep?: number; gammaTraj?: number; returnMode?: ReturnMode; invalidPenalty?: number; stepCoef?: number }

/**
 * The reflections trained by each succeeded LaMer job of a run's database, with the advantage the
 * job gave them (see the module doc). Opens a copy of the database (`file` and its `-wal`) in a
 * temporary folder, so the run's folder is only read. `env` says how reflections are grouped
 * (minesweeper-* or sokoban-*).
 */
export function reflectionCredits(file: string, seed: number, env: string): ReflectionCredit[] {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'lamer-memory-db-'));
  try {
    copyFileSync(file, path.join(tmp, 'lamer.db'));
    if (existsSync(`${file}-wal`)) copyFileSync(`${file}-wal`, path.join(tmp, 'lamer.db-wal'));
    const conn = openDatabase(tmp);
    try {
      const repo = new TrainingDataRepo(conn.db);
      const jobs = conn.db.select().from(trainingJobs).where(eq(trainingJobs.status, 'succeeded')).orderBy(asc(trainingJobs.createdAt)).all().filter((j) => j.algorithm === 'lamer');
      const kind: EnvKind = env.startsWith('minesweeper') ? 'minesweeper' : 'sokoban';
      const out: ReflectionCredit[] = [];
      jobs.forEach((job, iteration) => {
        const cfg = job.config as { data?: DataFilter; hyper?: JobHyper };
        const filter = cfg.data ?? {};
        const h = cfg.hyper ?? {};
        // as src/training/run/manager.ts prepare builds the job's samples (packing changes no score)
        const chosen = chooseTrainingSessions(repo.completedTrainSessions(filter), filter);
        const built = buildRlSamples(trainingRecordsOf(chosen, repo.stepRowsOf(chosen.map((r) => r.id))), {
          algorithm: 'lamer',
          returns: { gammaStep: h.gammaStep ?? DEFAULT_RETURNS.gammaStep, gammaTraj: h.gammaTraj ?? DEFAULT_RETURNS.gammaTraj, mode: h.returnMode ?? DEFAULT_RETURNS.mode },
          invalidPenalty: h.invalidPenalty,
          stepCoef: h.stepCoef,
          pack: false,
        });
        const ids = repo.completedTrainSessions(filter);
        const taskOf = new Map(ids.map((r) => [r.id, r.taskId]));
        const rows = repo.stepRowsOf(ids.map((r) => r.id));
        const sessions = sessionsOfRows(rows, kind);
        const stored = new Map(rows.filter((r) => r.kind === 'reflection').map((r) => [`${r.sessionId}/${r.attempt}`, r.advantage ?? null]));
        for (const s of built.scores) {
          if (s.kind !== 'reflection' || !s.kept) continue;
          const attempts = sessions.get(s.sessionId)!;
          const a = attempts[s.attempt]!;
          const text = a.reflection ?? '';
          const mine = endingCell(a);
          const group: ReflectionGroup = kind === 'minesweeper'
            ? (mine ? (namesCell(text, mine) ? 'names the mine' : 'misses the mine') : 'after the turn cap')
            : (namesBoxCell(text) ? 'names a box cell' : 'no box cell');
          out.push({
            seed, iteration, taskId: taskOf.get(s.sessionId)!, sessionId: s.sessionId, attempt: s.attempt, text, group,
            advantage: s.advantage, return: s.return, storedAdvantage: stored.get(`${s.sessionId}/${s.attempt}`) ?? null,
            nextSolved: attempts[s.attempt + 1]?.success ?? false,
            nextReclicks: mine ? clicksCell(attempts[s.attempt + 1]?.trajectory ?? [], mine) : null,
          });
        }
      });
      return out;
    } finally {
      conn.close();
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/**
 * Per session, its attempts as the eval harness records them (AttemptRecord) from its step rows:
 * the trajectory is the canonical form (src/eval/harness.ts canonicalAction) of each step's
 * action in step order; `done` on a row ends the attempt ('done', success from the row), else it
 * ended at the turn cap; the reflection is the reflection row's output.
 */
export function sessionsOfRows(rows: ReadonlyArray<{ sessionId: string; attempt: number; step: number; kind: string; action: string | null; output: string | null; reward: number; done: boolean; success: boolean; invalidAction: boolean }>, kind: EnvKind): Map<string, AttemptRecord[]> {
  const out = new Map<string, AttemptRecord[]>();
  const sorted = [...rows].sort((x, y) => (x.sessionId < y.sessionId ? -1 : x.sessionId > y.sessionId ? 1 : x.attempt - y.attempt || x.step - y.step));
  for (const r of sorted) {
    let attempts = out.get(r.sessionId);
    if (!attempts) out.set(r.sessionId, (attempts = []));
    const a = (attempts[r.attempt] ??= { attempt: r.attempt, success: false, return: 0, actions: 0, invalidActions: 0, endReason: 'max_steps', trajectory: [] });
    if (r.kind === 'reflection') { a.reflection = r.output ?? ''; continue; }
    a.return += r.reward;
    if (r.invalidAction) a.invalidActions++;
    if (r.done) { a.endReason = 'done'; a.success = r.success; }
    if (r.action !== null) { a.trajectory.push(canonicalAction(kind, r.action)); a.actions++; }
  }
  return out;
}

// --- reading a game folder -------------------------------------------------------------------

/** One evaluated row: its sessions and whether it played with memory. */
export interface MemoryRow {
  /** e.g. lamer-seed0, gigpo-seed1, sft-lamer-mode, sft-independent. */
  key: string;
  label: string;
  /** LaMer, sft-lamer-mode: 3-attempt sessions with reflections; else independent retries. */
  memory: boolean;
  /** Arm key of a trained arm (lamer, gigpo), null for the SFT rows. */
  arm: string | null;
  sessions: SessionRecord[];
}

export interface MemoryGame {
  env: string;
  rows: MemoryRow[];
  /** LaMer runs with their database (those with an eval file). */
  training: Array<{ seed: number; db: string }>;
}

const ARM_LABEL: Record<string, string> = { lamer: 'LaMer', 'lamer-independent': 'LaMer, independent retries', gigpo: 'GiGPO', 'gigpo-ref': 'GiGPO (reference script)' };
/** "LaMer seed 0", "LaMer seed 0, independent retries". */
const rowLabel = (arm: string, seed: number) => (arm === 'lamer-independent' ? `LaMer seed ${seed}, independent retries` : `${ARM_LABEL[arm]} seed ${seed}`);

/** The eval rows and LaMer databases of one game folder of experiments/lamer-vs-gigpo.sh; null without eval files. */
export function readMemoryGame(dir: string): MemoryGame | null {
  const files = existsSync(dir) ? readdirSync(dir).filter((f) => /^eval-.*\.json$/.test(f)) : [];
  const rows: MemoryRow[] = [];
  let env: string | null = null;
  const read = (f: string) => { const e = JSON.parse(readFileSync(path.join(dir, f), 'utf8')) as EvalReport; env ??= e.env; return e.sessions; };
  const trained = files.map((f) => /^eval-(.+)-seed(\d+)\.json$/.exec(f)).filter((m): m is RegExpExecArray => m !== null && m[1]! in ARM_LABEL)
    .map((m) => ({ arm: m[1]!, seed: Number(m[2]), file: m[0] }))
    .sort((x, y) => Object.keys(ARM_LABEL).indexOf(x.arm) - Object.keys(ARM_LABEL).indexOf(y.arm) || x.seed - y.seed);
  for (const t of trained) rows.push({ key: `${t.arm}-seed${t.seed}`, label: rowLabel(t.arm, t.seed), memory: t.arm === 'lamer', arm: t.arm, sessions: read(t.file) });
  if (files.includes('eval-sft-lamer-mode.json')) rows.push({ key: 'sft-lamer-mode', label: 'SFT start, 3-attempt sessions', memory: true, arm: null, sessions: read('eval-sft-lamer-mode.json') });
  if (files.includes('eval-sft-independent.json')) rows.push({ key: 'sft-independent', label: 'SFT start, independent retries', memory: false, arm: null, sessions: read('eval-sft-independent.json') });
  if (rows.length === 0 || env === null) return null;
  const training = trained.filter((t) => t.arm === 'lamer').map((t) => ({ seed: t.seed, db: path.join(dir, 'lamer', `seed-${t.seed}`, 'data', 'lamer.db') })).filter((t) => existsSync(t.db));
  return { env, rows, training };
}

// --- the section -----------------------------------------------------------------------------

const pc = (x: number) => (Number.isNaN(x) ? '-' : (100 * x).toFixed(1));
const share = (iv: Interval | undefined) => (!iv || Number.isNaN(iv.value) ? '-' : `${pc(iv.value)} [${pc(iv.lo)}, ${pc(iv.hi)}]`);
const pts = (iv: Interval | undefined) => (!iv || Number.isNaN(iv.value) ? '-' : `${(100 * iv.value).toFixed(1)} [${(100 * iv.lo).toFixed(1)}, ${(100 * iv.hi).toFixed(1)}]`);
const adv = (iv: Interval | undefined) => (!iv || Number.isNaN(iv.value) ? '-' : `${iv.value.toFixed(2)} [${iv.lo.toFixed(2)}, ${iv.hi.toFixed(2)}]`);

const seedOf = (r: MemoryRow) => r.key.replace(/^.*-seed/, '');
const r0seed = (r: MemoryRow) => `seed ${seedOf(r)}`;

/** The rows pooled per trained arm (every seed's sessions of a task summed); only `seeds` when given. */
function pooled(g: MemoryGame, arm: string, seeds?: readonly string[]): MemoryRow | null {
  const rs = g.rows.filter((r) => r.arm === arm && (!seeds || seeds.includes(seedOf(r))));
  if (rs.length === 0) return null;
  return { key: arm, label: `${ARM_LABEL[arm]} (${rs.length > 1 ? `seeds ${rs.map((r) => r.key.replace(/^.*-seed/, '')).join(', ')} pooled` : r0seed(rs[0]!)})`, memory: rs[0]!.memory, arm, sessions: rs.flatMap((r) => r.sessions) };
}

/**
 * The "Does memory act?" section of one game: markdown lines, starting with a `level` heading.
 * `credits`: the trained reflections of its LaMer runs (`reflectionCredits`); read from
 * `game.training` when not given.
 */
export function memorySection(game: MemoryGame, opts: { level?: string; resamples?: number; credits?: ReflectionCredit[] } = {}): string[] {
  const bopts = { resamples: opts.resamples ?? 10_000 };
  const ms = game.env.startsWith('minesweeper');
  const L: string[] = [];
  L.push(`${opts.level ?? '####'} Does memory act?`, '');
  L.push(`After a failed attempt k, what attempt k+1 does: rows with memory (3-attempt sessions; reflections in the prompt) against rows without (independent retries: the same start, no memory, so their repeats are what the policy's own randomness gives). Pairs: a failed attempt and the next attempt of its session, both with an action. Shares in % (of the pairs, or of the attempts after a mine) with the 95% bootstrap interval over tasks in brackets (${bopts.resamples.toLocaleString('en-US')} resamples; experiments/lamer-vs-gigpo-memory.ts).`, '');
  const names: RatioName[] = ['sameFirst', 'sameWhole', 'nextSolved', ...(ms ? (['reclicksMine'] as const) : [])];
  L.push(`| row | memory | pairs | same first action (%) | same trajectory (%) | next attempt solves (%) |${ms ? ' after a mine | re-clicks that mine (%) |' : ''}`);
  L.push(`|---|---|---|---|---|---|${ms ? '---|---|' : ''}`);
  const counts = new Map(game.rows.map((r) => [r.key, taskCounts(r.sessions)]));
  for (const r of game.rows) {
    const s = rowShares(counts.get(r.key)!, names, bopts);
    L.push(`| ${r.label} | ${r.memory ? 'yes' : 'no'} | ${s.sameFirst!.den} | ${share(s.sameFirst)} | ${share(s.sameWhole)} | ${share(s.nextSolved)} |${ms ? ` ${s.reclicksMine!.den} | ${share(s.reclicksMine)} |` : ''}`);
  }

  // memory - no memory
  const lam = pooled(game, 'lamer'), gig = pooled(game, 'gigpo');
  // the same-weights control: the LaMer seeds evaluated both ways
  const both = game.rows.filter((r) => r.arm === 'lamer-independent').map(seedOf).filter((s) => game.rows.some((r) => r.arm === 'lamer' && seedOf(r) === s));
  const lamB = pooled(game, 'lamer', both), lamI = pooled(game, 'lamer-independent', both);
  const sftM = game.rows.find((r) => r.key === 'sft-lamer-mode'), sftI = game.rows.find((r) => r.key === 'sft-independent');
  const contrasts: Array<[MemoryRow, MemoryRow, string]> = [];
  if (lamB && lamI) contrasts.push([lamB, lamI, 'same weights: the memory alone']);
  if (sftM && sftI) contrasts.push([sftM, sftI, 'same weights: the memory alone']);
  if (lam && gig) contrasts.push([lam, gig, 'other weights too']);
  if (lam && sftM) contrasts.push([lam, sftM, 'both with memory: what LaMer training changed']);
  if (contrasts.length) {
    L.push('', 'Differences (a - b, percentage points; tasks both rows played, resampled paired; a trained arm\'s seeds pooled per task). If memory acted, the rows with memory would repeat less, re-click the mine less and solve the next attempt more:', '');
    L.push(`| a - b | compares | tasks | same first action | same trajectory | next attempt solves |${ms ? ' re-clicks the mine |' : ''}`);
    L.push(`|---|---|---|---|---|---|${ms ? '---|' : ''}`);
    for (const [a, b, what] of contrasts) {
      const ca = a.arm ? taskCounts(a.sessions) : counts.get(a.key)!;
      const cb = b.arm ? taskCounts(b.sessions) : counts.get(b.key)!;
      const d = shareDifferences(ca, cb, names, bopts);
      L.push(`| ${a.label} - ${b.label} | ${what} | ${d.tasks} | ${pts(d.diffs.sameFirst)} | ${pts(d.diffs.sameWhole)} | ${pts(d.diffs.nextSolved)} |${ms ? ` ${pts(d.diffs.reclicksMine)} |` : ''}`);
    }
  }

  // what the reflections say, and whether the next attempt heeds it
  const withMemory = game.rows.filter((r) => r.memory);
  if (withMemory.length) {
    if (ms) {
      L.push('', 'Reflections (rows with memory; src/eval/compare.ts reflectionStats): of the reflections after an attempt that ended on a mine, the share naming that cell; of the cell clicks made while the session\'s earlier reflections name a mine (minesNamed), the share on such a cell; and of the next attempts after a mine, the share that click that cell again, apart for reflections that name it and those that do not (if the reflection acted, the first would be lower):', '');
      L.push('| row | reflections | after a mine | name that cell (%) | clicks while memory names a mine | on a named mine (%) | re-clicks the mine, reflection names it (%) | re-clicks the mine, reflection does not (%) |', '|---|---|---|---|---|---|---|---|');
      for (const r of withMemory) {
        const s = rowShares(counts.get(r.key)!, ['reflNamesMine', 'clicksOnNamed', 'reclicksNamed', 'reclicksUnnamed'], bopts);
        const n = [...counts.get(r.key)!.values()].reduce((a, c) => a + c.reflections, 0);
        L.push(`| ${r.label} | ${n} | ${s.reflNamesMine!.den} | ${share(s.reflNamesMine)} | ${s.clicksOnNamed!.den} | ${share(s.clicksOnNamed)} | ${share(s.reclicksNamed)} of ${s.reclicksNamed!.den} | ${share(s.reclicksUnnamed)} of ${s.reclicksUnnamed!.den} |`);
      }
    } else {
      L.push('', 'Reflections (rows with memory): the share naming a box with its cell (src/eval/base-policy.ts namesBoxCell):', '');
      L.push('| row | reflections | name a box cell (%) |', '|---|---|---|');
      for (const r of withMemory) {
        const s = rowShares(counts.get(r.key)!, ['reflBoxCell'], bopts);
        L.push(`| ${r.label} | ${s.reflBoxCell!.den} | ${share(s.reflBoxCell)} |`);
      }
    }
  }

  // does the return reach the reflections?
  let credits = opts.credits;
  if (!credits) credits = game.training.flatMap((t) => reflectionCredits(t.db, t.seed, game.env));
  L.push(...creditLines(credits, ms, bopts));
  return L;
}

/** The training part of the section: mean advantage of trained reflections per group. */
function creditLines(credits: readonly ReflectionCredit[], ms: boolean, bopts: { resamples: number }): string[] {
  const L: string[] = [''];
  if (credits.length === 0) { L.push('Training: no LaMer training database with trained reflections (lamer/seed-<s>/data/lamer.db of an evaluated run).'); return L; }
  const groups: ReflectionGroup[] = ms ? ['names the mine', 'misses the mine', 'after the turn cap'] : ['names a box cell', 'no box cell'];
  const seeds = [...new Set(credits.map((c) => c.seed))].sort((a, b) => a - b);
  const iterations = Math.max(...credits.map((c) => c.iteration)) + 1;
  L.push(`Does the cross-episode return reach the reflections? Every reflection trained by the LaMer runs' jobs (${credits.length} over ${iterations} iteration${iterations === 1 ? '' : 's'}, seed${seeds.length > 1 ? 's' : ''} ${seeds.join(', ')}), with the advantage the job gave its tokens (recomputed by src/training/data/data.ts buildRlSamples from the job's own data filter and hyperparameters; reward units), by what it says${ms ? ' (after an attempt that ended on a mine: naming that cell or not)' : ' (naming a box with its cell or not: a description, not a correctness check)'}. Intervals: 95% bootstrap over the (seed, iteration, task) groups the job centres over.`, '');
  const stored = credits.filter((c) => c.storedAdvantage !== null);
  const maxDiff = stored.reduce((m, c) => Math.max(m, Math.abs(c.advantage - c.storedAdvantage!)), 0);
  L.push(`Check: the recomputed advantage equals the one the job stored on ${stored.filter((c) => Math.abs(c.advantage - c.storedAdvantage!) <= 1e-6).length} of ${stored.length} reflections with a stored value (largest difference ${maxDiff.toExponential(1)})${stored.length < credits.length ? `; ${credits.length - stored.length} without one` : ''}.`, '');
  // per (seed, iteration, task) cluster, per group: [n, sum advantage, sum G, next solved, after a mine, next re-clicks it]
  const W = 6;
  const clusterRows = (cs: readonly ReflectionCredit[]) => {
    const by = new Map<string, number[]>();
    for (const c of cs) {
      const k = `${c.seed}/${c.iteration}/${c.taskId}`;
      const v = by.get(k) ?? new Array<number>(W * groups.length).fill(0);
      const o = W * groups.indexOf(c.group);
      v[o]! += 1; v[o + 1]! += c.advantage; v[o + 2]! += c.return; v[o + 3]! += c.nextSolved ? 1 : 0;
      if (c.nextReclicks !== null) { v[o + 4]! += 1; v[o + 5]! += c.nextReclicks ? 1 : 0; }
      by.set(k, v);
    }
    return [...by.keys()].sort().map((k) => by.get(k)!);
  };
  const meanOf = (g: number, field: 1 | 2 | 3) => (s: readonly number[]) => s[W * g + field]! / s[W * g]!;
  const reclickOf = (g: number) => (s: readonly number[]) => s[W * g + 5]! / s[W * g + 4]!;
  L.push(`| LaMer seed | reflection | trained | mean advantage | mean return G | next attempt solves (%) |${ms ? ' next attempt re-clicks the mine (%) |' : ''}`, `|---|---|---|---|---|---|${ms ? '---|' : ''}`);
  for (const seed of [...seeds, null]) {
    const cs = credits.filter((c) => seed === null || c.seed === seed);
    if (seed === null && seeds.length < 2) continue;
    const ivs = taskBootstrap(clusterRows(cs), groups.flatMap((_, g) => [meanOf(g, 1), meanOf(g, 2), meanOf(g, 3), reclickOf(g)]), bopts);
    groups.forEach((grp, g) => {
      const n = cs.filter((c) => c.group === grp).length;
      L.push(`| ${seed ?? 'all'} | ${grp} | ${n} | ${adv(ivs[4 * g])} | ${adv(ivs[4 * g + 1])} | ${share(ivs[4 * g + 2])} |${ms ? ` ${share(ivs[4 * g + 3])} |` : ''}`);
    });
  }
  // over every trained reflection: the step term is centred within each task's reflections, so
  // this mean is their mean episode term (0 minus the task's mean episode score)
  const all = taskBootstrap(clusterRows(credits).map((v) => [groups.reduce((a, _, g) => a + v[W * g]!, 0), groups.reduce((a, _, g) => a + v[W * g + 1]!, 0)]), [(s) => s[1]! / s[0]!], bopts)[0]!;
  L.push('', `Mean advantage over every trained reflection: ${adv(all)}. GiGPO centres a reflection's return over the reflections of its task (the step term averages 0 there), so this is their mean episode term: a reflection's own score is 0, centred against the task's attempt reward sums (docs/method.md#gigpo); a negative value pushes every reflection down, whatever it says.`);
  // the split that matters: first group minus second
  const [ga, gb] = [groups[0]!, groups[1]!];
  const diff = taskBootstrap(clusterRows(credits), [(s) => meanOf(0, 1)(s) - meanOf(1, 1)(s), (s) => meanOf(0, 3)(s) - meanOf(1, 3)(s)], bopts);
  // within a task of one iteration (same episode term): mean over such groups of mean(a) - mean(b)
  const within: number[] = [];
  for (const v of clusterRows(credits)) if (v[0]! > 0 && v[W]! > 0) within.push(v[1]! / v[0]! - v[W + 1]! / v[W]!);
  const wIv = taskBootstrap(within.map((x) => [x, 1]), [(s) => s[0]! / s[1]!], bopts)[0]!;
  L.push('', `"${ga}" - "${gb}", all seeds: mean advantage ${adv(diff[0])}, next attempt solves ${pts(diff[1])} points; within the same task and iteration (${within.length} groups with both): mean advantage ${adv(wIv)}.`);
  // per iteration, all seeds
  L.push('', `Per iteration (all seeds): trained reflections and their mean advantage per group.`, '');
  L.push(`| iteration | ${groups.map((g) => `${g}: n | mean advantage`).join(' | ')} |`, `|---|${groups.map(() => '---|---|').join('')}`);
  for (let i = 0; i < iterations; i++) {
    const cs = credits.filter((c) => c.iteration === i);
    L.push(`| ${i} | ${groups.map((g) => { const xs = cs.filter((c) => c.group === g).map((c) => c.advantage); return `${xs.length} | ${xs.length ? (xs.reduce((a, b) => a + b, 0) / xs.length).toFixed(2) : '-'}`; }).join(' | ')} |`);
  }
  return L;
}

// --- standalone ------------------------------------------------------------------------------

/** The section for every game folder of `out` (or `out` itself when it holds eval files). */
export function memoryReport(out: string, opts: { resamples?: number } = {}): string {
  const isDir = (f: string) => existsSync(f) && statSync(f).isDirectory();
  const legacy = readdirSync(out).some((f) => /^eval-.*\.json$/.test(f));
  const dirs = legacy ? [out] : readdirSync(out).map((d) => path.join(out, d)).filter(isDir).sort();
  const L: string[] = [];
  for (const d of dirs) {
    const g = readMemoryGame(d);
    if (!g) continue;
    L.push(`## ${g.env}`, '', ...memorySection(g, { level: '###', resamples: opts.resamples }), '');
  }
  return L.join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const args = process.argv.slice(2);
  const out = args[0];
  if (!out || out.startsWith('-')) {
    console.error('usage: experiments/lamer-vs-gigpo-memory.ts OUT_DIR [--resamples N]');
    process.exit(2);
  }
  const i = args.indexOf('--resamples');
  const text = memoryReport(out, { resamples: i >= 0 ? Number(args[i + 1]) : undefined });
  if (!text) { console.error(`no eval files under ${out} (expected <game>/eval-*.json)`); process.exit(1); }
  console.log(text);
}
