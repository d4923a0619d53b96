/**
 * `npm run bench:matmul`: the wasm backend's two matmuls (LAMER_MATMUL=wasm, the tfjs-wasm kernel,
 * against LAMER_MATMUL=blas, OpenBLAS through native/blas; src/model/blas.ts) measured in one run.
 * Each round starts one child process per matmul (the choice is made once per process), alternated,
 * BENCH_ROUNDS (3) rounds; the table gives min / median / max over rounds and the ratio of medians.
 *
 * A child measures, with the shipped base model's shape (4 layers, n_embd 128, 4 heads, vocab 381):
 * - `matmul [T,C]x[C,N]`: GFLOP/s of one product at the model's four linear shapes (qkv 3C, proj C,
 *   MLP up 4C, MLP down from 4C) and the tied head ([T, C] x [V, C]^T), T = 2,048 rows (a training
 *   batch of 32 sequences of 64 tokens); 2 T C N FLOPs each;
 * - `train step`: one `model:sft-base`-sized step (32 sequences of 65 tokens, next-token loss,
 *   backward, Adam), ms per step and tokens per second (random init; the cost does not depend on the
 *   weights);
 * - `serve forward`: one cached forward of 32 rows of a MineSweeper decision's prompt delta (27 new
 *   tokens over 22 cached, as bench:packed-forward's `prefill B=32`), and of one such row, in ms.
 * Times are wall times of this child, best of BENCH_REPS (5) repetitions after 2 warm-ups.
 * Writes bench/results/matmul.json (BENCH_OUT: another path). Needs the addon built
 * (`npm run build:blas`); without it the blas children fail and the bench says why.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as tf from '@tensorflow/tfjs';
import { ensureDirSync } from '../src/ensure-dir.js';
import { activeMatmul, initBackend } from '../src/model/backend.js';
import { disposeCache, forwardCached } from '../src/model/gpt-cached.js';
import { type GPTConfig, initModel, tokenLogprobs } from '../src/model/gpt.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const REPS = Number(process.env.BENCH_REPS ?? 5);
const BASE: GPTConfig = { vocab_size: 381, block_size: 384, n_layer: 4, n_head: 4, n_embd: 128 };
const MATMULS = ['wasm', 'blas'] as const;

/** Best wall ms of `fn` over REPS calls after 2 warm-ups. */
function best(fn: () => void): number {
  fn();
  fn();
  let ms = Number.POSITIVE_INFINITY;
  for (let i = 0; i < REPS; i++) {
    const t0 = performance.now();
    fn();
    ms = Math.min(ms, performance.now() - t0);
  }
  return ms;
}

/** One child's figures (see the module comment). */
async function child(): Promise<Record<string, number>> {
  await initBackend('wasm');
  const out: Record<string, number> = {};
  const C = BASE.n_embd;
  const T = 2048;
  for (const [name, k, n, tb] of [['qkv', C, 3 * C, false], ['proj', C, C, false], ['mlp up', C, 4 * C, false], ['mlp down', 4 * C, C, false], ['head', C, BASE.vocab_size, true]] as const) {
    const a = tf.randomUniform([T, k]);
    const b = tf.randomUniform(tb ? [n, k] : [k, n]);
    const ms = best(() => {
      const c = tf.matMul(a, b, false, tb);
      c.dataSync();
      c.dispose();
    });
    out[`matmul ${name} GFLOP/s`] = (2 * T * k * n) / ms / 1e6;
    tf.dispose([a, b]);
  }
  const model = initModel(BASE, 1);
  const tokens = tf.tensor2d(Array.from({ length: 32 * 65 }, (_, i) => (i * 7) % BASE.vocab_size), [32, 65], 'int32');
  const opt = tf.train.adam(1e-4);
  const step = () => {
    const { value, grads } = tf.variableGrads(() => tf.neg(tf.mean(tokenLogprobs(model, tokens))) as tf.Scalar, model.trainableVariables);
    opt.applyGradients(grads as Parameters<typeof opt.applyGradients>[0]);
    value.dataSync();
    tf.dispose([value, ...Object.values(grads)]);
  };
  const stepMs = best(step);
  out['train step ms'] = stepMs;
  out['train tokens/s'] = (32 * 64) / (stepMs / 1000);
  const cached = forwardCached(model, [{ cache: null, tokens: Array.from({ length: 22 }, (_, i) => i), allPositions: false, keepCache: true }])[0]!;
  for (const B of [1, 32]) {
    const rows = Array.from({ length: B }, (_, r) => ({ cache: cached.cache, tokens: Array.from({ length: 27 }, (_, j) => (r + j) % 256), allPositions: false, keepCache: true }));
    out[`serve forward B=${B} ms`] = best(() => {
      for (const res of forwardCached(model, rows)) disposeCache(res.cache);
    });
  }
  out.matmulIsBlas = activeMatmul() === 'blas' ? 1 : 0;
  return out;
}

const fmt = (x: number) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  if (process.argv.includes('--child')) {
    console.log(JSON.stringify(await child()));
    return;
  }
  const runs: Record<string, Array<Record<string, number>>> = { wasm: [], blas: [] };
  for (let round = 0; round < ROUNDS; round++) {
    for (const m of MATMULS) {
      const r = spawnSync(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--child'], {
        cwd: root, encoding: 'utf8', env: { ...process.env, LAMER_MATMUL: m }, maxBuffer: 1 << 24,
      });
      const line = r.stdout.trim().split('\n').pop() ?? '';
      if (r.status !== 0 || !line.startsWith('{')) {
        console.error(`bench:matmul: the ${m} child failed (exit ${r.status}): ${r.stderr.trim().split('\n').slice(-3).join(' | ')}`);
        process.exit(1);
      }
      const fig = JSON.parse(line) as Record<string, number>;
      if (fig.matmulIsBlas !== (m === 'blas' ? 1 : 0)) throw new Error(`the ${m} child ran the other matmul`);
      runs[m]!.push(fig);
      console.error(`round ${round + 1}/${ROUNDS} ${m}: train ${fmt(fig['train step ms']!)} ms/step`);
    }
  }
  const keys = Object.keys(runs.wasm![0]!).filter((k) => k !== 'matmulIsBlas');
  const rows = keys.map((k) => {
    const w = runs.wasm!.map((f) => f[k]!);
    const b = runs.blas!.map((f) => f[k]!);
    return { figure: k, wasm: { min: Math.min(...w), median: median(w), max: Math.max(...w) }, blas: { min: Math.min(...b), median: median(b), max: Math.max(...b) }, blasOverWasm: median(b) / median(w) };
  });
  console.log(`| figure | wasm (min / median / max) | blas (min / median / max) | blas / wasm (medians) |\n|---|---|---|---|`);
  for (const r of rows) console.log(`| ${r.figure} | ${fmt(r.wasm.min)} / ${fmt(r.wasm.median)} / ${fmt(r.wasm.max)} | ${fmt(r.blas.min)} / ${fmt(r.blas.median)} / ${fmt(r.blas.max)} | ${r.blasOverWasm.toFixed(2)} |`);
  const out = process.env.BENCH_OUT ?? path.join(root, 'bench', 'results', 'matmul.json');
  ensureDirSync(path.dirname(out));
  fs.writeFileSync(out, `${JSON.stringify({ measuredAt: new Date().toISOString(), rounds: ROUNDS, reps: REPS, model: BASE, rows, runs }, null, 2)}\n`);
  console.log(`wrote ${path.relative(root, out)}`);
}

await main();
