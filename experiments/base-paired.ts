/**
 * `npm run experiment:base-paired -- --new DIR --old DIR [--resamples B] [--seed S] [--out FILE]`:
 * the paired differences new - old of pass@1 and pass@K between two checkpoints measured on the
 * same held-out tasks, from two folders written by `npm run eval:base -- --reports DIR`
 * (experiments/eval-base.ts: one full eval report `{game}-{row}.json` per game and row, row one of
 * lamer, lamer-avail, independent).
 *
 * For every game and row whose report is in both folders and for k = 1 and k = K (the reports'
 * attempts, 3 for eval:base): per task i of the tasks both reports played, the difference
 * d_i = new_i - old_i of the task's pass@k (the share of its sessions solved within the first k
 * attempts, src/shared/passk.ts; 0 or 1 with one trial a task), and the paired percentile bootstrap
 * over tasks of the mean difference (Efron & Tibshirani 1993, ch. 13; src/eval/compare.ts
 * pairedDiffs and pairedBootstrap: B resamples of the tasks with replacement, the 2.5% and 97.5%
 * type-7 quantiles of the resampled means, deterministic for --seed).
 *
 * Units: the table prints pass rates in percent and the difference and its 95% interval in
 * percentage points ("+50.0": new solves half of the tasks more), one decimal as toFixed rounds
 * (like the project's other tables; an exact tie such as -6.25 prints -6.3 where Python's format
 * prints -6.2); the JSON holds the same figures unrounded, as fractions in [0, 1]. The new and old
 * pass rates are over the paired tasks, so the difference is exactly theirs.
 *
 * A report in only one folder is skipped: its game and row are named in one line on stderr and
 * in the JSON's `skipped`, and the others are compared (eval:base --games / --rows can leave rows
 * out on purpose). Prints the markdown table; writes the figures as JSON (default
 * experiments/results/base-paired.json, its folder created).
 *
 * This replaces experiments/results/base-run-d/paired.py (kept: it made the run-D figures of
 * docs/results/history/2026-12-02-base-run-d.md). On run D's folders the point differences are the
 * same; the intervals differ a little (a different random stream, and type-7 quantiles instead of
 * the 250th / 9750th of 10,000).
 * Unlike paired.py, a task played in several trials counts the share of its sessions that pass
 * (paired.py kept the last session of each task), and only tasks both reports played are paired.
 *
 * Exit code: 0; 2 for bad options, checked before any bootstrap: one line on stderr naming the
 * option (a --new / --old folder that is missing or holds no report, no game and row in both
 * folders, a report that is not an eval report, two reports of a pair with different attempts or
 * no task in common); 1 for a failure later.
 */
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { intOpt, parseArgsMessage, UsageError } from '../src/cli/args.js';
import { ensureDirSync } from '../src/ensure-dir.js';
import { BASE_ROWS, type BaseRow } from '../src/eval/base-policy.js';
import { pairedBootstrap, pairedDiffs, taskValues } from '../src/eval/compare.js';
import type { SessionRecord } from '../src/eval/metrics.js';

const DEFAULT_OUT = 'experiments/results/base-paired.json';
const DEFAULT_RESAMPLES = 10_000;
/** pairedBootstrap's own default seed (what eval:base's (a) - (c) intervals use). */
const DEFAULT_SEED = 12345;
const LEVEL = 0.95;

/** The fields of an eval report (src/eval/harness.ts EvalReport) this script reads. */
export interface PairedReport {
  env?: string;
  attempts: number;
  sessions: SessionRecord[];
}

/** One game and row of the table at one k. Rates are fractions in [0, 1]. */
export interface PairedRow {
  game: string;
  row: BaseRow;
  k: number;
  /** Tasks both reports played (the pairs). */
  tasks: number;
  /** Mean task pass@k over the paired tasks. */
  newRate: number;
  oldRate: number;
  /** Mean of the per-task differences new - old (= newRate - oldRate). */
  difference: number;
  /** The 95% percentile interval of the difference. */
  lo: number;
  hi: number;
}

/** A report file name `{game}-{row}.json` as its game and row, or null (the longest row suffix wins: `-lamer-avail`). */
export function parseReportName(file: string): { game: string; row: BaseRow } | null {
  const rows = [...BASE_ROWS].sort((a, b) => b.length - a.length);
  for (const row of rows) {
    const suffix = `-${row}.json`;
    if (file.endsWith(suffix) && file.length > suffix.length) return { game: file.slice(0, -suffix.length), row };
  }
  return null;
}

/** The `{game}-{row}.json` files of a folder, as "game/row" keys to file names. */
function reportFiles(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const f of readdirSync(dir)) {
    const p = parseReportName(f);
    if (p) out.set(`${p.game}/${p.row}`, f);
  }
  return out;
}

/** Games in name order, rows in eval:base's order. */
function byGameThenRow(a: { game: string; row: BaseRow }, b: { game: string; row: BaseRow }): number {
  return a.game < b.game ? -1 : a.game > b.game ? 1 : BASE_ROWS.indexOf(a.row) - BASE_ROWS.indexOf(b.row);
}

/**
 * The paired rows of one game and row: for k = 1 and k = K (once when K = 1), the task pass@k of
 * each report averaged over the tasks both played, and the paired bootstrap of new - old.
 * @throws RangeError when the reports share no task.
 */
export function pairedRows(game: string, row: BaseRow, neu: PairedReport, old: PairedReport, opts: { resamples: number; seed: number }): PairedRow[] {
  const ks = [...new Set([1, neu.attempts])];
  return ks.map((k) => {
    const diffs = pairedDiffs(neu.sessions, old.sessions, k);
    if (diffs.length === 0) throw new RangeError(`${game}-${row}: the two reports share no task`);
    const ci = pairedBootstrap(diffs, { resamples: opts.resamples, seed: opts.seed, level: LEVEL });
    const vn = taskValues(neu.sessions, k);
    const vo = taskValues(old.sessions, k);
    const common = [...vn.keys()].filter((t) => vo.has(t));
    const mean = (m: Map<string, number>) => common.reduce((s, t) => s + m.get(t)!, 0) / common.length;
    return { game, row, k, tasks: ci.tasks, newRate: mean(vn), oldRate: mean(vo), difference: ci.mean, lo: ci.lo, hi: ci.hi };
  });
}

/** A fraction as percent with one decimal ("37.5"). */
const pct = (x: number): string => (100 * x).toFixed(1);
/** A fraction as signed percentage points with one decimal ("+2.3", "-0.8", "+0.0"). */
export const pts = (x: number): string => {
  const s = (100 * x).toFixed(1);
  return s.startsWith('-') ? s : `+${s}`;
};

/** Header lines of the printed table (markdown). */
export const TABLE_HEAD = '| game | row | k | tasks | new pass@k (%) | old pass@k (%) | difference new - old (pts) | 95% interval (pts) |\n|---|---|---|---|---|---|---|---|';

/** One row of the printed table. */
export function tableRow(r: PairedRow): string {
  return `| ${r.game} | ${r.row} | ${r.k} | ${r.tasks} | ${pct(r.newRate)} | ${pct(r.oldRate)} | ${pts(r.difference)} | [${pts(r.lo)}, ${pts(r.hi)}] |`;
}

const USAGE = `usage: npm run experiment:base-paired -- --new DIR --old DIR [options]

Paired bootstrap over tasks of the pass@1 and pass@K differences new - old, per game and row,
between two folders of eval:base reports (npm run eval:base -- --reports DIR).

  --new DIR       the eval:base --reports folder of the new checkpoint (required)
  --old DIR       the eval:base --reports folder of the old checkpoint (required)
  --resamples B   bootstrap resamples, an integer in [1, 1000000] (default ${DEFAULT_RESAMPLES})
  --seed S        bootstrap seed, an integer in [0, 4294967295] (default ${DEFAULT_SEED})
  --out FILE      the figures as JSON (default ${DEFAULT_OUT})
  -h, --help      print this text and exit

A report in only one folder is skipped and named on stderr. Exit code: 0; 2 for bad options
(one line on stderr naming the option).`;

/** A bad command line: one line on stderr (as the lamer CLIs, src/cli/args.ts), exit code 2. */
function fail(msg: string): never {
  process.stderr.write(`experiment:base-paired: ${msg.replace(/\s*\n\s*/g, ' ')}\n`);
  process.exit(2);
}

interface Pair { game: string; row: BaseRow; neu: PairedReport; old: PairedReport }
interface Options { newDir: string; oldDir: string; resamples: number; seed: number; out: string; pairs: Pair[]; skipped: string[] }

/** Reads one report, or fails naming the option and the file. */
function readReport(opt: string, dir: string, file: string): PairedReport {
  const p = path.join(dir, file);
  let r: Partial<PairedReport>;
  try {
    r = JSON.parse(readFileSync(p, 'utf8'));
  } catch (e) {
    fail(`${opt} ${p}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message.split('\n')[0]}`);
  }
  if (typeof r !== 'object' || r === null || !Array.isArray(r.sessions) || !Number.isInteger(r.attempts) || r.attempts! < 1) {
    fail(`${opt} ${p}: not an eval:base report (needs attempts and sessions)`);
  }
  if (r.sessions.some((s) => typeof s?.taskId !== 'string' || !Array.isArray(s.attempts))) fail(`${opt} ${p}: a session without taskId or attempts`);
  return r as PairedReport;
}

/**
 * Parses and checks the command line and reads every report before any bootstrap: --new and
 * --old folders holding `{game}-{row}.json` reports, at least one game and row in both, each
 * report readable with the same attempts as its pair; --resamples and --seed integers in range;
 * --out a file path whose folder can be created. Exits 2 with one line otherwise, 0 after --help.
 */
function parseOptions(argv: string[]): Options {
  let values: { new?: string; old?: string; resamples?: string; seed?: string; out?: string; help?: boolean };
  try {
    ({ values } = parseArgs({
      args: argv, strict: true, allowPositionals: false,
      options: { new: { type: 'string' }, old: { type: 'string' }, resamples: { type: 'string' }, seed: { type: 'string' }, out: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
    }));
  } catch (e) {
    fail(parseArgsMessage(e));
  }
  if (values.help) {
    process.stdout.write(USAGE + '\n');
    process.exit(0);
  }
  let resamples = 0, seed = 0;
  try {
    resamples = intOpt('resamples', values.resamples, DEFAULT_RESAMPLES, 1, 1_000_000);
    seed = intOpt('seed', values.seed, DEFAULT_SEED, 0, 2 ** 32 - 1);
  } catch (e) {
    if (e instanceof UsageError) fail(e.message);
    throw e;
  }
  const files: Record<'new' | 'old', Map<string, string>> = { new: new Map(), old: new Map() };
  for (const opt of ['new', 'old'] as const) {
    const dir = values[opt];
    if (dir === undefined) fail(`--${opt} is required (an eval:base --reports folder)`);
    if (!existsSync(dir) || !statSync(dir).isDirectory()) fail(`--${opt} ${dir}: not a folder`);
    files[opt] = reportFiles(dir);
    if (files[opt].size === 0) fail(`--${opt} ${dir}: no eval:base report ({game}-{row}.json, row one of ${BASE_ROWS.join(', ')})`);
  }
  const key = (k: string) => { const [game, row] = k.split('/') as [string, BaseRow]; return { game, row }; };
  const both = [...files.new.keys()].filter((k) => files.old.has(k)).map(key).sort(byGameThenRow);
  const missing = (from: 'new' | 'old', other: 'new' | 'old') => [...files[from].keys()].filter((k) => !files[other].has(k)).map(key).sort(byGameThenRow).map((p) => `${p.game}-${p.row}.json`);
  const notInOld = missing('new', 'old'), notInNew = missing('old', 'new');
  const skipped = [...notInOld.map((f) => `${f} (not in --old)`), ...notInNew.map((f) => `${f} (not in --new)`)];
  if (both.length === 0) fail(`--new ${values.new} and --old ${values.old}: no report in both folders (${skipped.join(', ')})`);
  const pairs = both.map(({ game, row }): Pair => {
    const file = `${game}-${row}.json`;
    const neu = readReport('--new', values.new!, file);
    const old = readReport('--old', values.old!, file);
    if (neu.attempts !== old.attempts) fail(`--new and --old ${file}: different attempts per session (${neu.attempts} and ${old.attempts})`);
    if (pairedDiffs(neu.sessions, old.sessions, 1).length === 0) fail(`--new and --old ${file}: the two reports share no task`);
    return { game, row, neu, old };
  });
  const out = values.out ?? DEFAULT_OUT;
  if (out === '' || (existsSync(out) && statSync(out).isDirectory())) fail(`--out '${out}' must be a file path, not a folder`);
  try {
    ensureDirSync(path.dirname(out));
  } catch (e) {
    fail(`--out ${out}: ${(e as Error).message}`);
  }
  return { newDir: values.new!, oldDir: values.old!, resamples, seed, out, pairs, skipped };
}

function main(): void {
  const { newDir, oldDir, resamples, seed, out, pairs, skipped } = parseOptions(process.argv.slice(2));
  if (skipped.length > 0) process.stderr.write(`experiment:base-paired: skipped, not in both folders: ${skipped.join(', ')}\n`);
  const rows = pairs.flatMap((p) => pairedRows(p.game, p.row, p.neu, p.old, { resamples, seed }));
  console.log(`Paired bootstrap over tasks, new (${newDir}) - old (${oldDir}): ${resamples} resamples, seed ${seed}, 95% percentile interval; rates in %, differences in percentage points.`);
  console.log('');
  console.log(TABLE_HEAD);
  for (const r of rows) console.log(tableRow(r));
  writeFileSync(out, JSON.stringify({
    new: newDir, old: oldDir, resamples, seed, level: LEVEL,
    units: 'newRate, oldRate, difference, lo, hi: fractions in [0, 1] (the table prints percent and percentage points)',
    measuredAt: new Date().toISOString(), skipped, rows,
  }, null, 1) + '\n');
  console.log(`written: ${out}`);
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('base-paired.ts')) {
  try {
    main();
  } catch (e) {
    process.stderr.write(`experiment:base-paired: ${(e as Error).stack ?? e}\n`);
    process.exit(1);
  }
}
