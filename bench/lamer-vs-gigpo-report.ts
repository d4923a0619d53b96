/**
 * Report of bench/lamer-vs-gigpo.sh: reads OUT/{lamer,gigpo}/learning-curve.json and OUT/eval-*.json,
 * writes the combined learning-curve SVG (docs/results/lamer-vs-gigpo-curves.svg by default) and
 * prints the markdown tables for docs/RESULTS.md (pass@1/2/3, compute).
 * Usage: npx tsx bench/lamer-vs-gigpo-report.ts OUT_DIR [SVG_PATH]
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { learningCurveSvg, type CurvePoint } from '../src/training/experiment.js';

const out = process.argv[2];
if (!out) throw new Error('usage: bench/lamer-vs-gigpo-report.ts OUT_DIR [SVG_PATH]');
const svgPath = process.argv[3] ?? 'docs/results/lamer-vs-gigpo-curves.svg';

interface Curve { points: CurvePoint[]; wallSeconds?: number; config?: Record<string, unknown> }
const curve = (name: string): Curve | null => {
  const f = path.join(out, name, 'learning-curve.json');
  return existsSync(f) ? (JSON.parse(readFileSync(f, 'utf8')) as Curve) : null;
};
const runs = (['lamer', 'gigpo'] as const).map((n) => ({ label: n === 'lamer' ? 'LaMer' : 'GiGPO', name: n, c: curve(n) })).filter((r) => r.c);
mkdirSync(path.dirname(svgPath), { recursive: true });
writeFileSync(svgPath, learningCurveSvg(runs.map((r) => ({ label: r.label, points: r.c!.points })), 'MineSweeper 4x4, 2 mines; rollouts of each iteration (8 fresh training tasks); same SFT start'));
console.log(`wrote ${svgPath}`);

const pct = (x: number | undefined) => (x === undefined ? '-' : `${(100 * x).toFixed(1)}%`);
console.log('\n| model | eval mode | pass@1 | pass@2 | pass@3 | pass@3 - pass@1 | mean return attempt 0 | eval s |');
console.log('|---|---|---|---|---|---|---|---|');
for (const [file, model, mode] of [
  ['eval-sft-lamer-mode.json', 'SFT start', '3-attempt session, reflections'],
  ['eval-sft-independent.json', 'SFT start', 'independent retries'],
  ['eval-lamer.json', 'LaMer', '3-attempt session, reflections'],
  ['eval-gigpo.json', 'GiGPO', 'independent retries'],
] as const) {
  const f = path.join(out, file);
  if (!existsSync(f)) continue;
  const r = JSON.parse(readFileSync(f, 'utf8')) as { modelVersion: string | null; durationS: number; metrics: { passAtK: Record<string, number>; meanReturnByAttempt: Array<{ meanReturn: number | null }> } };
  const p = r.metrics.passAtK;
  console.log(`| ${model} (\`${r.modelVersion}\`) | ${mode} | ${pct(p['1'])} | ${pct(p['2'])} | ${pct(p['3'])} | ${((p['3']! - p['1']!) * 100).toFixed(1)} pts | ${r.metrics.meanReturnByAttempt[0]?.meanReturn?.toFixed(2) ?? '-'} | ${r.durationS.toFixed(0)} |`);
}

console.log('\n| run | iterations | sessions | tokens trained | rollout s | train s | wall s |');
console.log('|---|---|---|---|---|---|---|');
for (const r of runs) {
  const pts = r.c!.points;
  const sum = (f: (p: CurvePoint) => number) => pts.reduce((a, p) => a + f(p), 0);
  console.log(`| ${r.label} | ${pts.length} | ${sum((p) => p.sessions)} | ${sum((p) => p.tokensTrained)} | ${sum((p) => p.rolloutSeconds).toFixed(0)} | ${sum((p) => p.trainSeconds).toFixed(0)} | ${(pts[pts.length - 1]?.wallSeconds ?? 0).toFixed(0)} |`);
}

console.log('\nper iteration:');
for (const r of runs) {
  console.log(`\n${r.label}:\n| iter | pass@1 | pass@3 | mean return | loss | entropy | skipped groups | tokens |\n|---|---|---|---|---|---|---|---|`);
  for (const p of r.c!.points) {
    console.log(`| ${p.iteration} | ${pct(p.passAtK['1'])} | ${pct(p.passAtK['3'])} | ${p.meanReturn.toFixed(2)} | ${p.loss?.toFixed(4) ?? '-'} | ${p.entropy?.toFixed(3) ?? '-'} | ${p.skippedGroups ?? '-'}/${(p.groups ?? 0) + (p.skippedGroups ?? 0)} | ${p.tokensTrained} |`);
  }
}
