/**
 * `npm run bench:packed-forward`: what one serving forward (src/model/gpt-cached.ts) costs on this
 * machine's backend, in the padded layout (`forwardPadded`) and the packed one (`forwardPacked`), for
 * uniform and mixed batches of the shipped base model (models/base, or LAMER_BASE_MODEL_DIR), and
 * how close it comes to the backend's own matMul at the same shapes.
 *
 * Workloads (rows of (cached positions, new tokens), every row keeping its cache as the server's do):
 * - `prefill B=1` and `prefill B=32`: a MineSweeper decision's prompt delta, 27 new tokens over 22
 *   cached (its prompt is 49 tokens);
 * - `decode B=1` and `decode B=32`: one new token over 49 cached;
 * - `mixed B=32`: 32 rows drawn from the forwards of the builtin server at 32 MineSweeper clients
 *   (bench:builtin-http, 2026-12-06): prompt deltas of 5 to 48 tokens over 0 to 47 cached, the
 *   extension of a sampled action (2-6 tokens), and 4 decode steps of reflections over ~95 cached.
 * Each runs as one forward (the server cuts a group into sections of LAMER_FORWARD_SECTION_TOKENS).
 * Time is the CPU time of this process (`process.cpuUsage`, so other processes' load distorts it
 * less than wall time), the best of BENCH_ROUNDS (3) rounds of BENCH_REPS (10) forwards, the two
 * layouts alternated within a round.
 *
 * Figures per workload and layout: ms per forward, ms per row, GFLOP/s (FLOPs of the forward: the
 * linear layers 2 x 12 C^2 per layer and token, the attention 4 C per layer, token and key it
 * attends to, the head 2 C V per row whose logprobs are returned), and that over the GFLOP/s of
 * the backend's matMul on the forward's four linear shapes ([T, C] x [C, 3C], [C, C], [C, 4C], and
 * [T, 4C] x [4C, C], T the forward's tokens, padded ones included for the padded layout) timed alone
 * the same way. Writes bench/results/packed-forward.json (BENCH_OUT: another path).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as tf from '@tensorflow/tfjs';
import { ensureDirSync } from '../src/ensure-dir.js';
import { initBackend } from '../src/model/backend.js';
import { loadCheckpoint } from '../src/model/checkpoint.js';
import { disposeCache, forwardPacked, forwardPadded, type CachedRow, type CachedRowResult } from '../src/model/gpt-cached.js';
import type { GPT } from '../src/model/gpt.js';
import type { RowCache } from '../src/model/kv-cache.js';
import { simdAttentionAvailable } from '../src/model/packed-attention.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const REPS = Number(process.env.BENCH_REPS ?? 10);

/** Rows of the server at c=32 (cached, new), see the module comment. */
const SERVER_MIX: Array<[number, number]> = [
  [38, 9], [24, 23], [20, 30], [26, 21], [31, 16], [30, 17], [5, 45], [26, 24], [41, 12], [8, 39], [42, 5], [0, 47], [20, 27], [27, 20],
  [19, 30], [9, 38], [6, 41], [5, 48], [28, 21], [26, 24], [31, 19], [24, 29], [41, 6], [47, 46], [41, 6], [15, 35], [0, 47], [0, 47],
  [93, 1], [94, 1], [94, 1], [97, 1],
];
const WORKLOADS: Array<{ name: string; rows: Array<[number, number]> }> = [
  { name: 'prefill B=1', rows: [[22, 27]] },
  { name: 'prefill B=32', rows: Array.from({ length: 32 }, () => [22, 27] as [number, number]) },
  { name: 'decode B=1', rows: [[49, 1]] },
  { name: 'decode B=32', rows: Array.from({ length: 32 }, () => [49, 1] as [number, number]) },
  { name: 'mixed B=32', rows: SERVER_MIX },
];

type Forward = (m: GPT, rows: CachedRow[]) => CachedRowResult[];
const LAYOUTS: Array<[string, Forward]> = [['padded', forwardPadded], ['packed', forwardPacked]];

/** CPU ms of `fn` per call over REPS calls. */
function cpuMs(fn: () => void): number {
  const c0 = process.cpuUsage();
  for (let i = 0; i < REPS; i++) fn();
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / 1000 / REPS;
}

/** FLOPs of one forward of `rows` (see the module comment). */
function flops(m: GPT, rows: Array<[number, number]>): number {
  const { n_embd: C, n_layer: L, vocab_size: V } = m.config;
  let f = 0;
  for (const [c, n] of rows) {
    let keys = 0;
    for (let j = 0; j < n; j++) keys += c + j + 1;
    f += n * L * 24 * C * C + keys * L * 4 * C + 2 * C * V;
  }
  return f;
}

/** CPU ms of the four linear matMuls of one layer at T tokens, times the layers, and their FLOPs. */
function matmulReference(m: GPT, T: number, rounds: number): { ms: number; flops: number } {
  const { n_embd: C, n_layer: L } = m.config;
  const shapes: Array<[number, number]> = [[C, 3 * C], [C, C], [C, 4 * C], [4 * C, C]];
  const xs = shapes.map(([k]) => tf.randomNormal([T, k]) as tf.Tensor2D);
  const ws = shapes.map(([k, n]) => tf.randomNormal([k, n]) as tf.Tensor2D);
  const run = () => shapes.forEach((_, i) => tf.matMul(xs[i], ws[i]).dispose());
  run();
  const best = Math.min(...Array.from({ length: rounds }, () => cpuMs(run)));
  tf.dispose([...xs, ...ws]);
  return { ms: best * L, flops: L * 2 * T * 12 * C * C };
}

/** Each row's own cache (null for 0 cached positions), made by `f`, as a server's sessions hold them. */
function caches(m: GPT, f: Forward, rows: Array<[number, number]>): Array<RowCache | null> {
  return rows.map(([c]) => {
    const ids = Array.from({ length: c }, (_, i) => 3 + ((i * 7) % 300));
    return c === 0 ? null : f(m, [{ cache: null, tokens: ids, allPositions: false, keepCache: true }])[0].cache;
  });
}

async function main(): Promise<void> {
  const backend = await initBackend('auto');
  const dir = process.env.LAMER_BASE_MODEL_DIR ?? path.join(root, 'models', 'base');
  const { model } = await loadCheckpoint(dir);
  const results: Array<Record<string, string | number>> = [];
  const kernel = backend === 'wasm' ? `, packed attention in ${simdAttentionAvailable() ? 'WebAssembly SIMD' : 'JavaScript'}` : '';
  console.log(`backend ${backend}${kernel}; model ${dir} ${JSON.stringify(model.config)}\n`);
  console.log('| workload | layout | ms / forward | ms / row | GFLOP/s | matMul GFLOP/s at its shapes | achieved / matMul |');
  console.log('|---|---|---|---|---|---|---|');
  for (const w of WORKLOADS) {
    const made = LAYOUTS.map(([, f]) => caches(model, f, w.rows));
    const forwards = LAYOUTS.map(([, f], k) => () => {
      const rows = w.rows.map(([, n], i) => ({
        cache: made[k][i], tokens: Array.from({ length: n }, (_, j) => 3 + ((i * 13 + j * 5) % 300)), allPositions: false, keepCache: true,
      }));
      for (const r of f(model, rows)) disposeCache(r.cache);
    });
    forwards.forEach((fn) => fn()); // warm-up
    const times = LAYOUTS.map(() => [] as number[]);
    for (let r = 0; r < ROUNDS; r++) forwards.forEach((fn, k) => times[k].push(cpuMs(fn)));
    const f = flops(model, w.rows);
    const tokens = w.rows.reduce((s, [, n]) => s + n, 0);
    const paddedTokens = w.rows.length * Math.max(...w.rows.map(([, n]) => n));
    LAYOUTS.forEach(([layout], k) => {
      const ms = Math.min(...times[k]);
      const ref = matmulReference(model, layout === 'packed' ? tokens : paddedTokens, ROUNDS);
      const gflops = f / ms / 1e6;
      const refGflops = ref.flops / ref.ms / 1e6;
      const row = {
        workload: w.name, layout, rows: w.rows.length, tokens, msPerForward: +ms.toFixed(2), msPerRow: +(ms / w.rows.length).toFixed(3),
        gflops: +gflops.toFixed(2), matmulGflops: +refGflops.toFixed(2), overMatmul: +(gflops / refGflops).toFixed(2),
      };
      results.push(row);
      console.log(`| ${w.name} | ${layout} | ${row.msPerForward} | ${row.msPerRow} | ${row.gflops} | ${row.matmulGflops} | ${row.overMatmul} |`);
    });
    for (const m of made) for (const c of m) disposeCache(c);
  }
  console.log(`\nload average ${os.loadavg().map((x) => x.toFixed(2)).join(' ')} (${os.cpus().length} CPUs)`);
  const out = process.env.BENCH_OUT ?? path.join('bench', 'results', 'packed-forward.json');
  ensureDirSync(path.dirname(path.resolve(root, out)));
  fs.writeFileSync(path.resolve(root, out), JSON.stringify({
    date: new Date().toISOString(), node: process.version, backend, simdAttention: simdAttentionAvailable(), cpus: os.cpus().length,
    loadAverage: os.loadavg(), model: model.config, rounds: ROUNDS, reps: REPS, results,
  }, null, 2) + '\n');
  console.log(`wrote ${out}`);
  model.dispose();
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
