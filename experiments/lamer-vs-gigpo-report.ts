/**
 * Report of experiments/lamer-vs-gigpo.sh. Reads, under OUT_DIR, per game folder <game>/ (the paper's
 * setting: minesweeper-6x6-3, sokoban-6x6-2; or OUT_DIR itself for the earlier one-game layout of
 * the MineSweeper 4x4 run, experiments/results/lamer-vs-gigpo/):
 *   <arm>/seed-<s>/learning-curve.json   (lamer train, one per arm and training seed)
 *   eval-<arm>-seed<s>.json              (lamer eval of that run's last version)
 *   eval-sft-lamer-mode.json, eval-sft-independent.json   (the common SFT start, both ways)
 *   timings.jsonl                        (wall and CPU seconds of each piece, when recorded)
 * and OUT_DIR/meta.json (commit and settings), and writes OUT_DIR/report.md: per game and arm
 * pass@1/2/3 and the pass@1 -> pass@3 gain as mean ± std over seeds, trajectory diversity, the
 * share of trained tokens that are reflections and the action and reflection entropies apart;
 * paired differences (LaMer - GiGPO, each arm - the SFT start evaluated the same way) with 95%
 * bootstrap intervals over tasks and over training seeds and tasks (src/eval/compare.ts); the
 * issue's aims; reflection statistics; per-iteration learning curves; compute and wall time; and
 * one table like the paper's Table 1 with the paper's numbers beside ours (Jiang et al., docs/method.md#sources);
 * per game the "Does memory act?" section (experiments/lamer-vs-gigpo-memory.ts; it also reads the LaMer
 * runs' databases <game>/lamer/seed-<s>/data/lamer.db, copied, never written).
 * Also OUT_DIR/curves-<game>.svg (curves.svg for the one-game layout; mean over seeds per arm).
 * With --results FILE the report also replaces the marked section of FILE (--section NAME,
 * default lamer-vs-gigpo-paper, which docs/RESULTS.md holds; lamer-vs-gigpo-redone for the one-game
 * layout, which docs/results/history/2026-12-01-lamer-vs-gigpo-4x4.md holds), or appends it when
 * FILE has none.
 * Usage: npx tsx experiments/lamer-vs-gigpo-report.ts OUT_DIR [--results FILE] [--section NAME] [--curve-every N] [--resamples N]
 */
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  meanStd, pairedBootstrap, pct, reflectionStats, replaceSection, seedTaskBootstrap, summarizeArm, taskValues,
  type ArmResult, type RunResult,
} from '../src/eval/compare.js';
import type { EvalReport } from '../src/eval/harness.js';
import { learningCurveSvg } from '../src/eval/chart-svg.js';
import { memorySection, readMemoryGame } from './lamer-vs-gigpo-memory.js';
import type { CurvePoint } from '../src/eval/experiment.js';

const USAGE = 'usage: experiments/lamer-vs-gigpo-report.ts OUT_DIR [--results FILE] [--section NAME] [--curve-every N] [--resamples N]';
const args = process.argv.slice(2);
const out = args[0];
if (!out || out.startsWith('-')) { console.error(USAGE); process.exit(2); }
const opt = (name: string) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : undefined; };
const resultsFile = opt('--results');
const curveEvery = Math.max(1, Number(opt('--curve-every') ?? 1));
const resamples = Number(opt('--resamples') ?? 10_000);
const K = 3;

/** The trained arms (experiments/lamer-vs-gigpo.sh trains lamer and gigpo, and lamer-own when asked; gigpo-ref only in the 4x4 run). */
const ARMS: Array<{ key: string; label: string; evalMode: string }> = [
  { key: 'lamer', label: 'LaMer', evalMode: '3-attempt sessions, reflections' },
  { key: 'lamer-own', label: 'LaMer, reflections centred among themselves (ablation)', evalMode: '3-attempt sessions, reflections' },
  { key: 'gigpo', label: 'GiGPO', evalMode: 'independent retries' },
  { key: 'gigpo-ref', label: 'GiGPO (reference MineSweeper script: 3 attempts + reflections in training)', evalMode: 'independent retries' },
];
const SFT: Array<{ key: string; file: string; label: string; evalMode: string }> = [
  { key: 'sft-lamer-mode', file: 'eval-sft-lamer-mode.json', label: 'SFT start', evalMode: '3-attempt sessions, reflections' },
  { key: 'sft-independent', file: 'eval-sft-independent.json', label: 'SFT start', evalMode: 'independent retries' },
];
/** Differences reported: a - b on the same tasks (each RL arm against the SFT start evaluated its way). */
const PAIRS: Array<[string, string]> = [
  ['lamer', 'gigpo'], ['lamer', 'gigpo-ref'], ['lamer-own', 'lamer'], ['lamer-own', 'gigpo'], ['lamer', 'sft-lamer-mode'], ['lamer-own', 'sft-lamer-mode'],
  ['gigpo', 'sft-independent'], ['gigpo-ref', 'sft-independent'],
];
/** The paper's Table 1 (Jiang et al., arXiv 2512.16848): Qwen3-4B, pass@1 / pass@2 / pass@3 in percent. */
const PAPER: Record<string, { sokoban: number[]; minesweeper: number[] }> = {
  'Zero-shot': { sokoban: [6.8, 9.8, 12.9], minesweeper: [4.5, 6.6, 8.6] },
  'Reflexion (prompting)': { sokoban: [6.4, 9.8, 12.1], minesweeper: [5.5, 7.2, 9.8] },
  GRPO: { sokoban: [22.9, 26.4, 27.0], minesweeper: [36.3, 40.0, 40.4] },
  GiGPO: { sokoban: [41.6, 43.6, 44.1], minesweeper: [52.0, 54.9, 55.1] },
  LaMer: { sokoban: [42.4, 52.0, 55.9], minesweeper: [44.1, 66.4, 74.4] },
};

type Curve = { points: CurvePoint[]; wallSeconds?: number; config?: CurveConfig };
type CurveConfig = {
  algorithm?: string; group?: number; tasksPerIter?: number; iterations?: number; availableActions?: boolean;
  sampling?: { temperature: number; topP: number; topK: number }; hyperparameters?: { gammaTraj?: number; lr?: number };
};
interface Timing { piece: string; wallS: number; cpuS: number; code?: string }
const readJson = <T>(f: string): T | null => (existsSync(f) ? (JSON.parse(readFileSync(f, 'utf8')) as T) : null);
const isDir = (f: string) => existsSync(f) && statSync(f).isDirectory();

/** One game's results: its arms (trained arms with their runs, then the SFT rows) and what it took. */
interface Game {
  dir: string;
  /** Env name as the evals report it, e.g. minesweeper-6x6-3. */
  env: string;
  arms: Array<ArmResult & { curves: Curve[] }>;
  evals: Map<string, EvalReport>;
  timings: Timing[];
}

function readGame(dir: string): Game | null {
  const evals = new Map<string, EvalReport>();
  const arms: Game['arms'] = [];
  for (const a of ARMS) {
    const adir = path.join(dir, a.key);
    const seeds = isDir(adir) ? readdirSync(adir).filter((d) => /^seed-\d+$/.test(d)).map((d) => Number(d.slice(5))).sort((x, y) => x - y) : [];
    const runs: RunResult[] = [];
    const curves: Curve[] = [];
    for (const s of seeds) {
      const ev = readJson<EvalReport>(path.join(dir, `eval-${a.key}-seed${s}.json`));
      if (!ev) continue; // a run still training or not evaluated yet
      const curve = readJson<Curve>(path.join(adir, `seed-${s}`, 'learning-curve.json'));
      evals.set(`${a.key}-seed${s}`, ev);
      runs.push({ seed: s, sessions: ev.sessions, curve: curve?.points, trainSeconds: curve?.wallSeconds });
      if (curve) curves.push(curve);
    }
    if (runs.length > 0) arms.push({ ...a, runs, curves });
  }
  for (const s of SFT) {
    const ev = readJson<EvalReport>(path.join(dir, s.file));
    if (!ev) continue;
    evals.set(s.key, ev);
    arms.push({ key: s.key, label: `${s.label} (${s.evalMode})`, evalMode: s.evalMode, runs: [{ seed: 0, sessions: ev.sessions }], curves: [] });
  }
  if (evals.size === 0) return null;
  const tfile = path.join(dir, 'timings.jsonl');
  const timings = existsSync(tfile) ? readFileSync(tfile, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l) as Timing) : [];
  return { dir, env: [...evals.values()][0]!.env, arms, evals, timings };
}

/** "MineSweeper 6x6, 3 mines" from "minesweeper-6x6-3". */
function gameLabel(env: string): string {
  let m = /^minesweeper-(\d+)x(\d+)-(\d+)$/.exec(env);
  if (m) return `MineSweeper ${m[1]}x${m[2]}, ${m[3]} mine${m[3] === '1' ? '' : 's'}`;
  m = /^sokoban-(\d+)x(\d+)-(\d+)/.exec(env);
  if (m) return `Sokoban ${m[1]}x${m[2]}, ${m[3]} box${m[3] === '1' ? '' : 'es'}`;
  return env;
}

// --- numbers per arm -------------------------------------------------------------------------

/** mean ± std (sample std over seeds); the mean alone for one seed. */
const pm = (m: { mean: number; std: number; n?: number }, scale = 100, digits = 1) =>
  (Number.isNaN(m.mean) ? '-' : m.n === 1 ? (scale * m.mean).toFixed(digits) : `${(scale * m.mean).toFixed(digits)} ± ${(scale * m.std).toFixed(digits)}`);
const num = (x: number | null | undefined, digits = 3) => (x === null || x === undefined || Number.isNaN(x) ? '-' : x.toFixed(digits));
const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);
const present = (xs: Array<number | null | undefined>): number[] => xs.filter((x): x is number => typeof x === 'number' && Number.isFinite(x));

/** Over an arm's runs: the share of trained output tokens in reflection turns (all iterations), null when no curve records it. */
function reflectionShare(curves: Curve[]): { mean: number; std: number } | null {
  const per = curves.map((c) => {
    const o = c.points.reduce((a, p) => a + (p.outputTokens ?? 0), 0);
    const r = c.points.reduce((a, p) => a + (p.reflectionTokens ?? 0), 0);
    return c.points.some((p) => typeof p.reflectionTokens === 'number') && o > 0 ? r / o : null;
  });
  const xs = present(per);
  return xs.length ? meanStd(xs) : null;
}

/** Mean over an arm's runs of `f` at the first and at the last iteration, "first -> last" (or '-'). */
function firstLast(curves: Curve[], f: (p: CurvePoint) => number | null | undefined): string {
  const first = present(curves.map((c) => (c.points[0] ? f(c.points[0]) : null)));
  const last = present(curves.map((c) => (c.points.length ? f(c.points[c.points.length - 1]!) : null)));
  if (!first.length && !last.length) return '-';
  return `${num(mean(first))} -> ${num(mean(last))}`;
}

/** Per run, a value per task (`taskValues`) for pass@k (gainTo: the gain pass@gainTo - pass@k). */
const runValues = (arm: ArmResult, k: number, gainTo?: number) => arm.runs.map((r) => taskValues(r.sessions, k, gainTo));

/** The a - b difference at pass@k (or the gain) with both intervals, or null when a side is missing. */
function difference(arms: Game['arms'], ka: string, kb: string, k: number, gainTo?: number) {
  const a = arms.find((x) => x.key === ka);
  const b = arms.find((x) => x.key === kb);
  if (!a || !b) return null;
  try {
    const va = runValues(a, k, gainTo), vb = runValues(b, k, gainTo);
    const both = seedTaskBootstrap(va, vb, { resamples });
    // tasks only: per common task, the mean over A's seeds minus the mean over B's seeds
    const avg = (runs: Array<Map<string, number>>, t: string) => mean(runs.map((m) => m.get(t)!));
    const tasks = [...va[0]!.keys()].filter((t) => va.every((m) => m.has(t)) && vb.every((m) => m.has(t))).sort();
    const tasksOnly = pairedBootstrap(tasks.map((t) => avg(va, t) - avg(vb, t)), { resamples });
    return { a, b, both, tasksOnly };
  } catch {
    return null; // no common tasks
  }
}
const ci = (x: { lo: number; hi: number }) => `[${(100 * x.lo).toFixed(1)}, ${(100 * x.hi).toFixed(1)}]`;

// --- the report of one game ------------------------------------------------------------------

function gameSection(g: Game, level: string): string[] {
  const L: string[] = [];
  const kind = g.env.startsWith('minesweeper') ? 'minesweeper' : 'sokoban';
  L.push(`${level} ${gameLabel(g.env)}`, '');
  // how it trained and was evaluated
  const anyEval = [...g.evals.values()][0]!;
  L.push(`Evaluation: ${anyEval.tasks} held-out tasks (eval seeds ${anyEval.seeds.first}..${anyEval.seeds.last}), ${anyEval.attempts} attempts, at most ${anyEval.maxSteps} turns each, sampling ${samplingText(anyEval.sampling)}; the same tasks for every method (paired).`);
  const setups: string[] = [];
  for (const a of g.arms) {
    const c = a.curves[0]?.config;
    if (!c) continue;
    const iterations = a.curves[0]!.points.length;
    const sessions = c.algorithm === 'lamer'
      ? `${c.group} trial${c.group === 1 ? '' : 's'} x 3 attempts (reflections trained) per task, gamma_traj ${c.hyperparameters?.gammaTraj ?? 'default'}`
      : `${3 * (c.group ?? 0)} single-attempt sessions per task`;
    setups.push(`- ${a.label}: \`--algorithm ${c.algorithm}\`, ${sessions}, ${c.tasksPerIter} task${c.tasksPerIter === 1 ? '' : 's'} an iteration, ${iterations} iteration${iterations === 1 ? '' : 's'}, lr ${c.hyperparameters?.lr ?? 'default'}, rollouts sampled at ${samplingText(c.sampling ?? null)}${c.availableActions ? ', with availableActions' : ', without availableActions'}.`);
  }
  if (setups.length) L.push('', 'Training (the same SFT start, a fixed number of iterations, fresh training tasks per iteration; seed s trains both arms on the same tasks):', '', ...setups);
  const errored = [...g.evals].filter(([, e]) => e.metrics.errors > 0);
  if (errored.length) L.push('', `Sessions ended by an error (counted as failed attempts): ${errored.map(([k, e]) => `${k} ${e.metrics.errors}`).join(', ')}.`);

  // main table
  L.push('', `| method | eval | seeds | pass@1 (%) | pass@2 (%) | pass@3 (%) | pass@1 -> pass@3 (pts) | trajectory diversity (nats) | reflection share of trained tokens | action entropy, first -> last iteration (nats) | reflection entropy, first -> last (nats) |`);
  L.push('|---|---|---|---|---|---|---|---|---|---|---|');
  for (const a of g.arms) {
    const s = summarizeArm(a, K);
    const share = reflectionShare(a.curves);
    L.push(`| ${a.label} | ${a.evalMode} | ${s.seeds} | ${s.passAtK.map((m) => pm(m)).join(' | ')} | ${pm(s.gain)} | ${pm(s.diversity, 1, 2)} | ${share ? pm(share) + '%' : '-'} | ${firstLast(a.curves, (p) => p.actionEntropy)} | ${firstLast(a.curves, (p) => p.reflectionEntropy)} |`);
  }
  L.push('', 'Trajectory diversity: per task, the entropy of the distribution over the distinct action sequences of its evaluated attempts (one session of up to 3 attempts per task, so at most ln 3 = 1.10, and 0 for a task solved at the first attempt), mean over tasks, then mean ± std over seeds. The paper\'s figure (base 3.3, RL 0.55, LaMer 1.6 nats) samples many trajectories per task, so the scales differ. Entropies: of the sampling distribution being trained, over the job\'s action tokens and its reflection tokens apart (means over its optimiser steps, then over seeds).');

  // differences
  L.push('', `Paired differences on the same tasks (${resamples.toLocaleString('en-US')} bootstrap resamples, 95% percentile intervals; "seeds and tasks": each method's training seeds and the tasks resampled, src/eval/compare.ts seedTaskBootstrap; "tasks": each task's value averaged over the seeds first):`, '');
  L.push('| difference | measure | tasks | seeds (a, b) | mean (pts) | 95% interval, seeds and tasks | 95% interval, tasks |');
  L.push('|---|---|---|---|---|---|---|');
  for (const [ka, kb] of PAIRS) {
    for (const [measure, k, to] of [['pass@1', 1, undefined], ['pass@3', 3, undefined], ['pass@1 -> pass@3 gain', 1, 3]] as const) {
      const d = difference(g.arms, ka, kb, k, to);
      if (!d) continue;
      L.push(`| ${d.a.label} - ${d.b.label} | ${measure} | ${d.both.tasks} | ${d.both.runsA}, ${d.both.runsB} | ${(100 * d.both.mean).toFixed(1)} | ${ci(d.both)} | ${ci(d.tasksOnly)} |`);
    }
  }

  // the issue's aims
  const lam = g.arms.find((a) => a.key === 'lamer');
  const gig = g.arms.find((a) => a.key === 'gigpo');
  if (lam && gig) {
    const yes = (b: boolean) => (b ? 'met' : 'not met');
    const d3 = difference(g.arms, 'lamer', 'gigpo', 3);
    const gl = summarizeArm(lam, K).gain.mean, gg = summarizeArm(gig, K).gain.mean;
    const stretch = kind === 'minesweeper' ? 19 : 12;
    L.push('', `Aims (issue 23${kind === 'minesweeper' ? '' : '; the +5 aim is set for MineSweeper, shown here for comparison'}):`, '');
    L.push('| aim | measured | |', '|---|---|---|');
    if (d3) L.push(`| LaMer pass@3 at least GiGPO's + 5 points, interval (seeds and tasks) above 0 | ${(100 * d3.both.mean).toFixed(1)} pts, ${ci(d3.both)} | ${yes(d3.both.mean >= 0.05 && d3.both.lo > 0)} |`);
    L.push(`| LaMer's pass@1 -> pass@3 gain at least 1.5x GiGPO's | ${(100 * gl).toFixed(1)} vs ${(100 * gg).toFixed(1)} pts (${gg > 0 ? (gl / gg).toFixed(2) + 'x' : "GiGPO's gain <= 0"}) | ${yes(gl > 0 && gl >= 1.5 * gg)} |`);
    for (const [ka, kb] of [['lamer', 'sft-lamer-mode'], ['gigpo', 'sft-independent']] as const) {
      const d = difference(g.arms, ka, kb, 3);
      if (d) L.push(`| ${d.a.label} beats the SFT start (${d.b.evalMode}) at pass@3, interval (seeds and tasks) above 0 | ${(100 * d.both.mean).toFixed(1)} pts, ${ci(d.both)} | ${yes(d.both.lo > 0)} |`);
    }
    if (d3) L.push(`| stretch: the paper's LaMer - GiGPO at pass@3 (+${stretch} points) | ${(100 * d3.both.mean).toFixed(1)} pts | ${yes(d3.both.mean >= stretch / 100)} |`);
  }

  // reflections
  L.push('', 'Reflections in the evaluated sessions (over every seed; "names the ending cell": the reflection after an attempt that ended on a mine names that cell; MineSweeper only):', '');
  L.push('| method | reflections | after a mine | names the ending cell | same as the previous reflection | text also in another task |');
  L.push('|---|---|---|---|---|---|');
  const share = (x: number | null) => (x === null ? '-' : `${pct(x)}%`);
  for (const a of g.arms) {
    const r = reflectionStats(a.runs.flatMap((x) => x.sessions));
    if (r.reflections === 0) continue;
    L.push(`| ${a.label} | ${r.reflections} | ${r.afterLosingAction} | ${share(r.namesEndingCell)} | ${share(r.repeatsPrevious)} | ${share(r.sharedAcrossTasks)} |`);
  }

  // does memory act? (experiments/lamer-vs-gigpo-memory.ts: eval rows with and without memory, and the
  // advantage LaMer's jobs gave the reflections)
  const memory = readMemoryGame(g.dir);
  if (memory) L.push('', ...memorySection(memory, { level: `${level}#`, resamples }));

  // learning curves
  for (const a of g.arms) {
    const cs = a.curves.map((c) => c.points).filter((p) => p.length > 0);
    if (cs.length === 0) continue;
    const n = Math.min(...cs.map((c) => c.length));
    L.push('', `Per-iteration rollouts of ${a.label} (mean over ${cs.length} seed${cs.length > 1 ? 's' : ''}; training sampling; held-out: the version that iteration trained, on the run's held-out probe tasks at the evaluation's sampling; clip fraction: the job's; KL: of the rollout policy from the start, nats per action token):`, '');
    L.push('| iteration | pass@1 (%) | pass@3 (%) | held-out pass@1 (%) | held-out pass@3 (%) | mean return | action entropy | reflection entropy | clip fraction | KL to start | reflection share of tokens | zero-advantage groups | rollout s | train s |');
    L.push('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
    for (let i = 0; i < n; i += curveEvery) {
      const at = (f: (p: CurvePoint) => number | null | undefined) => mean(present(cs.map((c) => f(c[i]!))));
      const shareAt = at((p) => (p.outputTokens && typeof p.reflectionTokens === 'number' ? p.reflectionTokens / p.outputTokens : null));
      const held = (k: string) => { const x = at((p) => p.heldOut?.passAtK[k]); return Number.isNaN(x) ? '-' : pct(x); };
      const kl = at((p) => p.klToStart);
      L.push(`| ${i} | ${pct(at((p) => p.passAtK['1'] ?? 0))} | ${pct(at((p) => p.passAtK['3'] ?? p.passAtK['1'] ?? 0))} | ${held('1')} | ${held('3')} | ${num(at((p) => p.meanReturn), 2)} | ${num(at((p) => p.actionEntropy))} | ${num(at((p) => p.reflectionEntropy))} | ${num(at((p) => p.clipFrac), 4)} | ${Number.isNaN(kl) ? '-' : kl.toExponential(2)} | ${Number.isNaN(shareAt) ? '-' : pct(shareAt) + '%'} | ${num(at((p) => p.zeroAdvantageGroups), 1)}/${num(at((p) => p.groups), 0)} | ${num(at((p) => p.rolloutSeconds), 0)} | ${num(at((p) => p.trainSeconds), 0)} |`);
    }
  }

  // compute
  L.push('', 'Compute (per training run; seconds on the machine that ran it; "CPU s" from timings.jsonl where recorded):', '');
  L.push('| method | seed | iterations | rollout sessions | output tokens trained | of which reflections | rollout s | train s | s / iteration | train wall s / CPU s | eval s (wall / CPU) |');
  L.push('|---|---|---|---|---|---|---|---|---|---|---|');
  const timing = (piece: string) => g.timings.filter((t) => t.piece === piece).at(-1);
  // a training run recorded in parts (`train <arm> seed <s> to <n>`, one per lamer train --resume): their sum
  const trainTiming = (key: string, seed: number) => {
    const parts = g.timings.filter((t) => t.piece.startsWith(`train ${key} seed ${seed} to `));
    return parts.length ? { wallS: parts.reduce((a, t) => a + t.wallS, 0), cpuS: parts.reduce((a, t) => a + t.cpuS, 0) } : timing(`train ${key} seed ${seed}`);
  };
  for (const a of g.arms) {
    if (a.curves.length === 0) continue;
    a.runs.forEach((r) => {
      const pts = (r.curve ?? []) as CurvePoint[];
      const sum = (f: (p: CurvePoint) => number) => pts.reduce((acc, p) => acc + f(p), 0);
      const secs = sum((p) => p.rolloutSeconds + p.trainSeconds);
      const tt = trainTiming(a.key, r.seed);
      const te = timing(`eval ${a.key}-seed${r.seed}`);
      const ev = g.evals.get(`${a.key}-seed${r.seed}`)!;
      L.push(`| ${a.label} | ${r.seed} | ${pts.length} | ${sum((p) => p.sessions)} | ${sum((p) => p.outputTokens ?? 0) || '-'} | ${pts.some((p) => typeof p.reflectionTokens === 'number') ? sum((p) => p.reflectionTokens ?? 0) : '-'} | ${sum((p) => p.rolloutSeconds).toFixed(0)} | ${sum((p) => p.trainSeconds).toFixed(0)} | ${(secs / Math.max(1, pts.length)).toFixed(1)} | ${tt ? `${tt.wallS.toFixed(0)} / ${tt.cpuS.toFixed(0)}` : '-'} | ${te ? `${te.wallS.toFixed(0)} / ${te.cpuS.toFixed(0)}` : ev.durationS.toFixed(0)} |`);
    });
  }
  for (const s of SFT) {
    const te = timing(`eval ${s.key}`);
    if (te) L.push(`| SFT start (${s.evalMode}) | - | - | - | - | - | - | - | - | - | ${te.wallS.toFixed(0)} / ${te.cpuS.toFixed(0)} |`);
  }
  if (g.timings.length) {
    const w = g.timings.reduce((a, t) => a + t.wallS, 0), c = g.timings.reduce((a, t) => a + t.cpuS, 0);
    L.push('', `Wall time of this game's recorded pieces: ${(w / 3600).toFixed(2)} h (${(c / 3600).toFixed(2)} CPU hours).`);
    const codes = [...new Set(g.timings.map((t) => t.code).filter((x): x is string => !!x))];
    if (codes.length > 1) L.push('', `**Warning: the pieces of this game ran different code** (trees of src/: ${codes.map((x) => `\`${x}\``).join(', ')}; timings.jsonl says which piece ran which).`);
  }
  return L;
}

const samplingText = (s: { temperature: number; topP: number; topK: number } | null) => (s ? `temperature ${s.temperature}, top-p ${s.topP}, top-k ${s.topK || 'none'}` : 'greedy');

/** The paper's Table 1 rows beside ours (mean over seeds), for the games present. */
function paperTable(games: Game[]): string[] {
  const cols = (['sokoban', 'minesweeper'] as const).map((kind) => ({ kind, game: games.find((g) => g.env.startsWith(kind)) }));
  const ours = (g: Game | undefined, key: string) => {
    const a = g?.arms.find((x) => x.key === key);
    if (!a) return '-';
    return summarizeArm(a, K).passAtK.map((m) => (100 * m.mean).toFixed(1)).join(' / ');
  };
  const paper = (name: string, kind: 'sokoban' | 'minesweeper') => PAPER[name]![kind].map((x) => x.toFixed(1)).join(' / ');
  const L: string[] = [];
  L.push(`| method | ${cols.map((c) => `${c.game ? gameLabel(c.game.env) : c.kind === 'sokoban' ? 'Sokoban' : 'MineSweeper'}: ours`).join(' | ')} | ${cols.map((c) => `${c.kind === 'sokoban' ? 'Sokoban' : 'MineSweeper'}: paper`).join(' | ')} |`);
  L.push(`|---|${cols.map(() => '---|').join('')}${cols.map(() => '---|').join('')}`);
  const row = (label: string, key: string | null, paperName: string | null) =>
    L.push(`| ${label} | ${cols.map((c) => (key ? ours(c.game, key) : '-')).join(' | ')} | ${cols.map((c) => (paperName ? paper(paperName, c.kind) : '-')).join(' | ')} |`);
  row('Start: our SFT base, 3 attempts with reflections / paper: zero-shot Qwen3-4B', 'sft-lamer-mode', 'Zero-shot');
  row('Start: our SFT base, independent retries', 'sft-independent', null);
  row('Reflexion (prompting)', null, 'Reflexion (prompting)');
  row('GRPO', null, 'GRPO');
  row('GiGPO (1 attempt in training; evaluated as independent retries)', 'gigpo', 'GiGPO');
  row('LaMer', 'lamer', 'LaMer');
  return L;
}

// --- main ------------------------------------------------------------------------------------

const meta = readJson<{ commit: string; dirty?: boolean; settings: Record<string, string> }>(path.join(out, 'meta.json'));
const legacy = readdirSync(out).some((f) => /^eval-.*\.json$/.test(f));
const games = (legacy ? [out] : readdirSync(out).map((d) => path.join(out, d)).filter(isDir))
  .map(readGame).filter((g): g is Game => g !== null)
  .sort((a, b) => a.env.localeCompare(b.env));
if (games.length === 0) { console.error(`no eval files under ${out} (expected <game>/eval-*.json)`); process.exit(1); }

const lines: string[] = [];
lines.push(`Measured by \`experiments/lamer-vs-gigpo.sh\` (report: \`experiments/lamer-vs-gigpo-report.ts\`), ${new Date().toISOString().slice(0, 10)}.`);
if (meta) lines.push(`Code: commit \`${meta.commit.slice(0, 12)}\`${meta.dirty ? ' (with uncommitted changes)' : ''}; settings ${Object.entries(meta.settings).map(([k, v]) => `${k}=${v}`).join(' ')}; every curve and eval is in the run's folder.`);
const trainSampling = games.flatMap((g) => g.arms.flatMap((a) => a.curves.map((c) => c.config?.sampling))).find((x) => x);
if (trainSampling) lines.push(`Training rollouts sampled at ${samplingText(trainSampling)}${trainSampling.temperature === 1 && trainSampling.topP === 1 && !trainSampling.topK ? ' (the paper trains at temperature 1.0)' : ''}; the job trains that sampling distribution. Both RL arms see the same number of trajectories per task: LaMer G trials x 3 attempts (a trial stops at its first success), GiGPO 3G single attempts.`);
if (!legacy) {
  lines.push('', 'Against the paper (Table 1; Qwen3-4B there, our small SFT model here; pass@1 / pass@2 / pass@3 in %, ours as the mean over training seeds):', '');
  lines.push(...paperTable(games));
}
for (const g of games) lines.push('', ...gameSection(g, legacy ? '####' : '###'));
const report = lines.join('\n') + '\n';
writeFileSync(path.join(out, 'report.md'), report);
console.log(report);

// curves: mean over seeds per arm, iteration by iteration (as many as every seed has)
const meanCurve = (curves: Curve[]): CurvePoint[] => {
  const cs = curves.map((c) => c.points).filter((c) => c.length > 0);
  if (cs.length === 0) return [];
  const n = Math.min(...cs.map((c) => c.length));
  const avg = (i: number, f: (p: CurvePoint) => number | null | undefined) => { const xs = present(cs.map((c) => f(c[i]!))); return xs.length ? mean(xs) : null; };
  return Array.from({ length: n }, (_, i) => ({
    ...cs[0]![i]!,
    passAtK: Object.fromEntries(['1', '2', '3'].map((k) => [k, avg(i, (p) => p.passAtK[k]) ?? 0])),
    meanReturn: avg(i, (p) => p.meanReturn) ?? 0,
    loss: avg(i, (p) => p.loss),
    entropy: avg(i, (p) => p.entropy),
  }));
};
for (const g of games) {
  const runs = g.arms.filter((a) => a.curves.length > 0).map((a) => ({ label: a.key, points: meanCurve(a.curves) })).filter((r) => r.points.length > 0);
  if (runs.length === 0) continue;
  const file = path.join(out, legacy ? 'curves.svg' : `curves-${g.env}.svg`);
  writeFileSync(file, learningCurveSvg(runs, `${gameLabel(g.env)}; rollouts of each iteration, mean over training seeds`));
  console.log(`wrote ${file}`);
}
console.log(`wrote ${path.join(out, 'report.md')}`);

if (resultsFile) {
  const section = opt('--section') ?? (legacy ? 'lamer-vs-gigpo-redone' : 'lamer-vs-gigpo-paper');
  writeFileSync(resultsFile, replaceSection(readFileSync(resultsFile, 'utf8'), section, report));
  console.log(`updated the ${section} section of ${resultsFile}`);
}
