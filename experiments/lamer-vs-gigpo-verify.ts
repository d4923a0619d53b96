/**
 * Compares the first iteration of freshly trained runs with recorded ones (experiments/lamer-vs-gigpo.sh):
 * for each arm, point 0 of NEW_DIR/<arm>/seed-<s>/learning-curve.json against RECORDED_DIR's (for
 * the paper's setting, both are one game's folder). Fields that curves of older commits lack
 * (outputTokens, reflectionTokens, actionEntropy, reflectionEntropy) are equal when both lack them.
 * Training is deterministic for a given commit, seed and worker count (one worker per job in the
 * recorded runs), so the rollout figures must be equal and the job's figures equal within a relative
 * 1e-6 (float summation order is the only freedom).
 * Usage: npx tsx experiments/lamer-vs-gigpo-verify.ts RECORDED_DIR NEW_DIR SEED ARM...
 * Prints one table row per arm and field; exit status 1 when a field differs, 2 on bad usage.
 * Both runs come from the recorded commit's code (experiments/lamer-vs-gigpo-verify.sh), whose curve
 * points may name the zero-advantage group count by its earlier name `skippedGroups` (those
 * commits dropped such groups); either name is read.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { CurvePoint } from '../src/eval/experiment.js';

const [recorded, fresh, seedArg, ...arms] = process.argv.slice(2);
if (!recorded || !fresh || !/^\d+$/.test(seedArg ?? '') || arms.length === 0) {
  console.error('usage: npx tsx experiments/lamer-vs-gigpo-verify.ts RECORDED_DIR NEW_DIR SEED ARM...');
  process.exit(2);
}

/** Fields of a curve point that the rollouts fix exactly (counts and sums of env rewards). */
const EXACT = ['sessions', 'meanReturn', 'meanReturnFirstAttempt', 'passAtK', 'invalidActionRate', 'groups', 'zeroAdvantageGroups', 'samples', 'tokensTrained', 'outputTokens', 'reflectionTokens'] as const;
/** Earlier names of fields, as curve points of older commits hold them. */
const LEGACY: Record<string, string> = { zeroAdvantageGroups: 'skippedGroups' };
const field = (p: Record<string, unknown>, k: string): unknown => (k in p || !(k in LEGACY) ? p[k] : p[LEGACY[k]!]);
/** Fields computed by the training job (float32 sums over the minibatches). */
const CLOSE = ['loss', 'entropy', 'clipFrac', 'actionEntropy', 'reflectionEntropy'] as const;
const REL_TOL = 1e-6;

function point0(dir: string, arm: string): CurvePoint {
  const f = path.join(dir, arm, `seed-${seedArg}`, 'learning-curve.json');
  if (!existsSync(f)) { console.error(`missing ${f}`); process.exit(2); }
  const p = (JSON.parse(readFileSync(f, 'utf8')) as { points: CurvePoint[] }).points[0];
  if (!p) { console.error(`${f} has no points`); process.exit(2); }
  return p;
}

let bad = 0;
console.log('| arm | field | recorded | new | match |');
console.log('|---|---|---|---|---|');
for (const arm of arms) {
  const a = point0(recorded, arm) as unknown as Record<string, unknown>;
  const b = point0(fresh, arm) as unknown as Record<string, unknown>;
  for (const k of EXACT) {
    const x = field(a, k), y = field(b, k);
    const ok = JSON.stringify(x) === JSON.stringify(y);
    if (!ok) bad++;
    console.log(`| ${arm} | ${k} | ${JSON.stringify(x)} | ${JSON.stringify(y)} | ${ok ? 'yes' : 'NO'} |`);
  }
  for (const k of CLOSE) {
    const x = a[k] as number | null, y = b[k] as number | null;
    const ok = x === y || (typeof x === 'number' && typeof y === 'number' && Math.abs(x - y) <= REL_TOL * Math.max(1e-12, Math.abs(x)));
    if (!ok) bad++;
    console.log(`| ${arm} | ${k} | ${x} | ${y} | ${ok ? 'yes' : 'NO'} |`);
  }
}
console.log(bad === 0 ? `first iteration reproduced for ${arms.join(', ')} (seed ${seedArg})` : `${bad} field(s) differ`);
process.exit(bad === 0 ? 0 : 1);
