/**
 * Report of bench/lamer-vs-gigpo.sh. Reads, under OUT_DIR,
 *   <arm>/seed-<s>/learning-curve.json   (lamer train, one per arm and training seed)
 *   eval-<arm>-seed<s>.json              (lamer eval of that run's last version)
 *   eval-sft-lamer-mode.json, eval-sft-independent.json   (the common SFT start, both ways)
 * and writes OUT_DIR/report.md (tables: pass@1/2/3 and the gain as mean ± std over seeds, paired
 * bootstrap intervals over tasks, reflection statistics, compute, per-iteration curves; maths in
 * src/eval/compare.ts) and OUT_DIR/curves.svg (mean over seeds per arm). With --results FILE the
 * report also replaces the marked section `lamer-vs-gigpo-redone` of FILE (docs/RESULTS.md).
 * Usage: npx tsx bench/lamer-vs-gigpo-report.ts OUT_DIR [--results FILE] [--curve-every N]
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { comparisonMarkdown, pairedBootstrap, pairedDiffs, replaceSection, summarizeArm, type ArmResult, type RunResult } from '../src/eval/compare.js';
import type { EvalReport } from '../src/eval/harness.js';
import { learningCurveSvg } from '../src/eval/chart-svg.js';
import type { CurvePoint } from '../src/eval/experiment.js';

const args = process.argv.slice(2);
const out = args[0];
if (!out) throw new Error('usage: bench/lamer-vs-gigpo-report.ts OUT_DIR [--results FILE] [--curve-every N]');
const opt = (name: string) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : undefined; };
const resultsFile = opt('--results');
const curveEvery = Number(opt('--curve-every') ?? 1);

/** The arms of the experiment (bench/lamer-vs-gigpo.sh trains them with these settings). */
const ARMS: Array<{ key: string; label: string; evalMode: string }> = [
  { key: 'lamer', label: 'LaMer', evalMode: '3-attempt sessions, reflections' },
  { key: 'gigpo', label: 'GiGPO (paper: 1 attempt in training)', evalMode: 'independent retries' },
  { key: 'gigpo-ref', label: 'GiGPO (reference MineSweeper script: 3 attempts + reflections in training)', evalMode: 'independent retries' },
];

interface Curve { points: CurvePoint[]; wallSeconds?: number; config?: Record<string, unknown> }
const readJson = <T>(f: string): T | null => (existsSync(f) ? (JSON.parse(readFileSync(f, 'utf8')) as T) : null);

const arms: ArmResult[] = [];
const compute: string[] = [];
/** Per arm, how its runs trained (from the first run's curve config): the setup line of the report. */
const setups: string[] = [];
for (const a of ARMS) {
  const dir = path.join(out, a.key);
  const seeds = existsSync(dir) ? readdirSync(dir).filter((d) => /^seed-\d+$/.test(d)).map((d) => Number(d.slice(5))).sort((x, y) => x - y) : [];
  const runs: RunResult[] = [];
  for (const s of seeds) {
    const curve = readJson<Curve>(path.join(dir, `seed-${s}`, 'learning-curve.json'));
    const ev = readJson<EvalReport>(path.join(out, `eval-${a.key}-seed${s}.json`));
    if (!ev) continue;
    runs.push({ seed: s, sessions: ev.sessions, curve: curve?.points, trainSeconds: curve?.wallSeconds });
    const c = curve?.config as { algorithm?: string; group?: number; tasksPerIter?: number; hyperparameters?: { gammaTraj?: number; lr?: number } } | undefined;
    if (c && runs.length === 1) {
      const sessions = c.algorithm === 'lamer' ? `${c.group} sessions x 3 attempts (reflections) per task, gamma_traj ${c.hyperparameters?.gammaTraj ?? 'default'}` : `${3 * (c.group ?? 0)} single-attempt sessions per task`;
      setups.push(`- ${a.label}: \`--algorithm ${c.algorithm}\`, ${sessions}, ${c.tasksPerIter} tasks an iteration, lr ${c.hyperparameters?.lr ?? 'default'}.`);
    }
    if (curve) {
      const pts = curve.points;
      const sum = (f: (p: CurvePoint) => number) => pts.reduce((acc, p) => acc + f(p), 0);
      const secs = sum((p) => p.rolloutSeconds + p.trainSeconds);
      compute.push(`| ${a.label} | ${s} | ${pts.length} | ${sum((p) => p.sessions)} | ${sum((p) => p.tokensTrained)} | ${sum((p) => p.rolloutSeconds).toFixed(0)} | ${sum((p) => p.trainSeconds).toFixed(0)} | ${(secs / Math.max(1, pts.length)).toFixed(1)} | ${ev.durationS.toFixed(0)} |`);
    }
  }
  if (runs.length > 0) arms.push({ ...a, runs });
}
for (const [file, key, label, evalMode] of [
  ['eval-sft-lamer-mode.json', 'sft-lamer-mode', 'SFT start', '3-attempt sessions, reflections'],
  ['eval-sft-independent.json', 'sft-independent', 'SFT start', 'independent retries'],
] as const) {
  const ev = readJson<EvalReport>(path.join(out, file));
  if (ev) arms.push({ key, label: `${label} (${evalMode})`, evalMode, runs: [{ seed: 0, sessions: ev.sessions }] });
}

// Sessions that ended with a server or network error count as failed attempts in pass@k (as
// lamer eval counts them); list them so a reader can see how many results they touch.
const errored = readdirSync(out).filter((f) => /^eval-.*\.json$/.test(f)).map((f) => [f, readJson<EvalReport>(path.join(out, f))?.metrics.errors ?? 0] as const).filter(([, n]) => n > 0);

const pairs: Array<[string, string]> = [['lamer', 'gigpo'], ['lamer', 'gigpo-ref'], ['lamer', 'sft-lamer-mode'], ['gigpo', 'sft-independent'], ['gigpo-ref', 'sft-independent']];
const anyEval = arms[0]?.runs[0] ? readJson<EvalReport>(path.join(out, arms[0].key.startsWith('sft') ? `eval-${arms[0].key}.json` : `eval-${arms[0].key}-seed${arms[0].runs[0].seed}.json`)) : null;
const lines: string[] = [];
lines.push(`Measured by \`bench/lamer-vs-gigpo.sh\` (report: \`bench/lamer-vs-gigpo-report.ts\`), ${new Date().toISOString().slice(0, 10)}.`);
if (anyEval) lines.push(`Evaluation: ${anyEval.tasks} held-out tasks (eval seeds ${anyEval.seeds.first}..${anyEval.seeds.last}), ${anyEval.attempts} attempts, sampling ${JSON.stringify(anyEval.sampling)}; the same tasks for every method (paired).`);
const meta = readJson<{ commit: string; dirty?: boolean; settings: Record<string, string> }>(path.join(out, 'meta.json'));
if (meta) lines.push(`Code: commit \`${meta.commit.slice(0, 12)}\`${meta.dirty ? ' (with uncommitted changes)' : ''}; settings ${Object.entries(meta.settings).map(([k, v]) => `${k}=${v}`).join(' ')}; each seed's curve and eval are in this folder.`);
if (setups.length) lines.push('', 'How each arm trained (the same SFT start, fixed iterations, fresh training tasks per iteration and seed):', '', ...setups);
if (errored.length) lines.push('', `Sessions ended by an error (counted as failed attempts): ${errored.map(([f, n]) => `${f.replace(/^eval-|\.json$/g, '')} ${n}`).join(', ')}.`);
lines.push('');
lines.push(comparisonMarkdown(arms, pairs, { curveEvery }));
// The issue's aims, checked against the paper's baseline arm (LaMer - GiGPO on the same tasks).
const lamerArm = arms.find((a) => a.key === 'lamer');
const gigpoArm = arms.find((a) => a.key === 'gigpo');
if (lamerArm && gigpoArm) {
  const d = pairedDiffs(lamerArm.runs.flatMap((r) => r.sessions), gigpoArm.runs.flatMap((r) => r.sessions), 3);
  const ci = pairedBootstrap(d);
  const gl = summarizeArm(lamerArm).gain.mean, gg = summarizeArm(gigpoArm).gain.mean;
  const yes = (b: boolean) => (b ? 'met' : 'not met');
  lines.push('Aims (LaMer against the paper-setting GiGPO, same tasks):', '');
  lines.push('| aim | measured | |', '|---|---|---|');
  lines.push(`| pass@3 at least 10 points above GiGPO, 95% interval excluding 0 | ${(100 * ci.mean).toFixed(1)} pts, [${(100 * ci.lo).toFixed(1)}, ${(100 * ci.hi).toFixed(1)}] | ${yes(ci.mean >= 0.1 && ci.lo > 0)} |`);
  lines.push(`| pass@1 -> pass@3 gain at least twice GiGPO's | ${(100 * gl).toFixed(1)} vs ${(100 * gg).toFixed(1)} pts (${gg > 0 ? (gl / gg).toFixed(2) + 'x' : 'GiGPO gain <= 0'}) | ${yes(gl >= 2 * gg && gl > 0)} |`);
  lines.push('');
}
lines.push('Compute (per training run; seconds on this machine):');
lines.push('');
lines.push('| method | seed | iterations | rollout sessions | tokens trained | rollout s | train s | s / iteration | eval s |');
lines.push('|---|---|---|---|---|---|---|---|---|');
lines.push(...compute);
const report = lines.join('\n') + '\n';
writeFileSync(path.join(out, 'report.md'), report);
console.log(report);

// curves: mean over seeds per arm, iteration by iteration (as many as every seed has)
const meanCurve = (a: ArmResult): CurvePoint[] => {
  const cs = a.runs.map((r) => (r.curve ?? []) as unknown as CurvePoint[]).filter((c) => c.length > 0);
  if (cs.length === 0) return [];
  const n = Math.min(...cs.map((c) => c.length));
  const avg = (f: (p: CurvePoint) => number | null) => (i: number) => { const xs = cs.map((c) => f(c[i]!)).filter((x): x is number => x !== null); return xs.length ? xs.reduce((s, x) => s + x, 0) / xs.length : null; };
  return Array.from({ length: n }, (_, i) => ({
    ...cs[0]![i]!,
    passAtK: Object.fromEntries(['1', '2', '3'].map((k) => [k, avg((p) => p.passAtK[k] ?? null)(i) ?? 0])),
    meanReturn: avg((p) => p.meanReturn)(i) ?? 0,
    loss: avg((p) => p.loss)(i),
    entropy: avg((p) => p.entropy)(i),
  }));
};
const curveRuns = arms.filter((a) => !a.key.startsWith('sft')).map((a) => ({ label: a.key, points: meanCurve(a) })).filter((r) => r.points.length > 0);
writeFileSync(path.join(out, 'curves.svg'), learningCurveSvg(curveRuns, 'MineSweeper 4x4, 2 mines; rollouts of each iteration, mean over training seeds'));
console.log(`wrote ${path.join(out, 'report.md')} and ${path.join(out, 'curves.svg')}`);

if (resultsFile) {
  writeFileSync(resultsFile, replaceSection(readFileSync(resultsFile, 'utf8'), 'lamer-vs-gigpo-redone', report));
  console.log(`updated the lamer-vs-gigpo-redone section of ${resultsFile}`);
}
