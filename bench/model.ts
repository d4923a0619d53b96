/**
 * `npm run bench:model`: speed of the builtin model on this machine's backend.
 *
 * Measures, in one run (so ratios are against the same machine state):
 * 1. plain matMul GFLOP/s ([1024,128]x[128,384] and 512x512), the backend's reference rate;
 * 2. forward tokens/s by batch size: full-sequence forward [B, 128] and KV-cached decode steps
 *    (B rows, one new token each, 256 cached positions);
 * 3. engine step latency p50/p99 (ms) and steps/s at concurrency 1, 8, 32 with batching on
 *    (window 2 ms, max 32 rows) and off (max 1 row), and the throughput ratio. Each session plays
 *    8 steps (4 with --quick) of a MineSweeper-like prompt (~330-byte head, ~80-byte observation
 *    per step, 8-token free-form actions), so per-session KV caches are exercised; and the same
 *    for 64-token reflections (decode-heavy) at concurrency 1 and 32;
 * 4. training tokens/s (Adam, [8, 128] tokens) and achieved GFLOP/s with nanoGPT's estimate
 *    6 N + 12 L T C FLOPs per token (N = parameters without wpe), and its ratio to (1).
 * 5. the limit: `reference.matmulGflopsOneCore` (backend matMul 1024^3, one thread: the wasm backend
 *    runs single-threaded under Node), `reference.nativeMatmulGflops` (numpy/OpenBLAS fp32 2048^3 on
 *    all cores, run in a python3 child whose environment drops OPENBLAS_CORETYPE and
 *    OPENBLAS_L2_SIZE; null when python3 or numpy is missing), training tokens/s (the job runner
 *    with 1 and 2 data-parallel workers, bench/training-workers.ts; ratio trainingWorkers2over1), the
 *    ceiling for that ratio on this machine (two independent 1-worker copies of the same job run at
 *    the same time as two processes; ratios trainingIndependentJobs2over1, their summed tokens/s over
 *    the 1-worker figure, and trainingWorkers2overCeiling, the worker ratio over that one) and serving
 *    steps/s (concurrency 32, batching on) with 1 and 2 serving workers (bench/serving-workers.ts;
 *    ratio servingWorkers2over1), and training GFLOP/s over both references.
 * Prints a table and writes bench/results/model.json.
 * Flags: --backend auto|tensorflow|webgpu|wasm|cpu (default auto), --quick (fewer iterations, ~1-2 min),
 * --out PATH (default bench/results/model.json).
 * Model: DEFAULT_CONFIG of src/model/gpt.ts (2 layers, 128 wide, 4 heads, block 1024).
 */
import * as tf from '@tensorflow/tfjs';
import { spawnSync } from 'node:child_process';
import { rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ensureDir } from '../src/ensure-dir.js';
import { initBackend } from '../src/model/backend.js';
import { countParams, DEFAULT_CONFIG, forward, initModel, tokenLogprobs, type GPT } from '../src/model/gpt.js';
import { disposeCache, forwardCached } from '../src/model/gpt-cached.js';
import { createBuiltinEngineInstance } from '../src/policy/builtin-engine.js';
import { backendFlag, BENCH_SEED, flag, saveBenchCheckpoint } from './cli.js';
import { independentJobsTokensPerSec, trainingTokensPerSecByWorkers } from './training-workers.js';
import { board, HEAD, servingStepsPerSecByWorkers } from './serving-workers.js';

const QUICK = process.argv.slice(2).includes('--quick');
const backendPref = backendFlag('auto');

function percentile(xs: number[], p: number): number {
  const s = xs.slice().sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}
const median = (xs: number[]) => percentile(xs, 50);

/** Median seconds of `fn` over `reps` runs after `warm` warm-up runs. */
function timeIt(fn: () => void, reps: number, warm = 2): number {
  for (let i = 0; i < warm; i++) fn();
  const ts: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    fn();
    ts.push((performance.now() - t0) / 1000);
  }
  return median(ts);
}

function matmulGflops(m: number, k: number, n: number): number {
  const a = tf.randomNormal([m, k]);
  const b = tf.randomNormal([k, n]);
  // (never return a TypedArray from tf.tidy: it walks every element looking for tensors)
  const s = timeIt(() => {
    const c = tf.matMul(a, b);
    c.dataSync();
    c.dispose();
  }, QUICK ? 5 : 15);
  a.dispose();
  b.dispose();
  return (2 * m * k * n) / s / 1e9;
}

/**
 * fp32 matmul GFLOP/s of numpy (OpenBLAS, all cores) on n x n, best of 5 after one warm-up, or null
 * when python3 or numpy is unavailable or the child fails. OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are
 * removed from the child's environment only, so OpenBLAS picks its kernel for the real CPU.
 */
function nativeMatmulGflops(n: number): number | null {
  const env = { ...process.env };
  delete env.OPENBLAS_CORETYPE;
  delete env.OPENBLAS_L2_SIZE;
  const code = [
    'import time, numpy as np',
    `n = ${n}`,
    'a = np.random.rand(n, n).astype(np.float32); b = np.random.rand(n, n).astype(np.float32)',
    'a @ b',
    'best = min((lambda t0: (a @ b, time.perf_counter() - t0)[1])(time.perf_counter()) for _ in range(5))',
    'print(2 * n ** 3 / best / 1e9)',
  ].join('\n');
  const r = spawnSync('python3', ['-c', code], { env, encoding: 'utf8', timeout: 120_000 });
  if (r.status !== 0) return null;
  const v = Number(r.stdout.trim());
  return Number.isFinite(v) && v > 0 ? v : null;
}

function forwardTokensPerSec(model: GPT, B: number, T: number): number {
  const idx = tf.tensor2d(Array.from({ length: B * T }, (_, i) => i % 256), [B, T], 'int32');
  const s = timeIt(() => {
    const logits = forward(model, idx);
    logits.dataSync();
    logits.dispose();
  }, QUICK ? 2 : 5, 1);
  idx.dispose();
  return (B * T) / s;
}

function decodeTokensPerSec(model: GPT, B: number, cached: number): number {
  const pre = forwardCached(model, [{ cache: null, tokens: Array.from({ length: cached }, (_, i) => i % 256), allPositions: false, keepCache: true }])[0];
  const rows = Array.from({ length: B }, (_, i) => ({ cache: pre.cache, tokens: [i % 256], allPositions: false, keepCache: true }));
  const s = timeIt(() => {
    for (const r of forwardCached(model, rows)) disposeCache(r.cache);
  }, QUICK ? 5 : 15);
  disposeCache(pre.cache);
  return B / s;
}

/** FLOPs per trained token, nanoGPT estimate_mfu: 6 N + 12 L T C (N without wpe). */
function trainFlopsPerToken(model: GPT, T: number): number {
  const { n_layer, n_embd, block_size } = model.config;
  const N = countParams(model.config) - block_size * n_embd;
  return 6 * N + 12 * n_layer * T * n_embd;
}

function trainBench(model: GPT, B: number, T: number): { tokensPerSec: number; gflops: number; stepSec: number; forwardSec: number } {
  const opt = tf.train.adam(1e-3);
  const tokens = tf.tensor2d(Array.from({ length: B * (T + 1) }, (_, i) => (i * 7) % 256), [B, T + 1], 'int32');
  const step = () => {
    const { value, grads } = tf.variableGrads(() => tf.neg(tf.mean(tokenLogprobs(model, tokens))) as tf.Scalar, model.trainableVariables);
    opt.applyGradients(grads as Parameters<typeof opt.applyGradients>[0]);
    value.dataSync();
    value.dispose();
    tf.dispose(grads);
  };
  const stepSec = timeIt(step, QUICK ? 2 : 5, 1);
  const forwardSec = timeIt(() => {
    const lp = tokenLogprobs(model, tokens);
    lp.dataSync();
    lp.dispose();
  }, QUICK ? 2 : 5, 1);
  opt.dispose();
  tokens.dispose();
  const tokensPerSec = (B * T) / stepSec;
  return { tokensPerSec, gflops: (tokensPerSec * trainFlopsPerToken(model, T)) / 1e9, stepSec, forwardSec };
}

interface LatencyResult {
  /** 'act': 8-token actions on a growing MineSweeper-like prompt; 'reflect': 64-token reflections. */
  kind: 'act' | 'reflect';
  concurrency: number;
  batching: boolean;
  steps: number;
  p50ms: number;
  p99ms: number;
  stepsPerSec: number;
  meanBatchRows: number;
  /** Share of wall time spent inside forward passes. */
  forwardBusyShare: number;
}

async function latencyBench(dir: string, concurrency: number, batching: boolean, stepsPerSession: number, kind: 'act' | 'reflect' = 'act'): Promise<LatencyResult> {
  const engine = await createBuiltinEngineInstance({
    backend: backendPref,
    batchWindowMs: batching ? 2 : 0,
    maxBatchSize: batching ? 32 : 1,
    limits: { maxActionTokens: 8, maxReflectionTokens: 64, stopTokens: kind === 'reflect' ? [] : undefined },
  });
  await engine.load('bench', dir);
  const lat: number[] = [];
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, s) => {
      const steps: string[] = [];
      for (let i = 0; i < stepsPerSession; i++) {
        const t = performance.now();
        const req = {
          sessionId: `s${s}`,
          modelVersion: 'bench',
          prompt: { head: HEAD, steps, tail: board(i) + (kind === 'act' ? 'Action: ' : 'Reflection: ') },
          sampling: { temperature: 1, topP: 1, topK: 0, seed: s * 1000 + i },
        };
        const g = kind === 'act' ? await engine.act(req) : await engine.reflect(req);
        lat.push(performance.now() - t);
        steps.push(board(i) + `Action: ${g.output}\n`);
      }
      engine.release(`s${s}`);
    }),
  );
  const wall = (performance.now() - t0) / 1000;
  const st = engine.stats().bench;
  await engine.dispose();
  return {
    kind,
    concurrency,
    batching,
    steps: lat.length,
    p50ms: percentile(lat, 50),
    p99ms: percentile(lat, 99),
    stepsPerSec: lat.length / wall,
    meanBatchRows: st.rows / st.forwards,
    forwardBusyShare: st.busyMs / 1000 / wall,
  };
}

async function main(): Promise<void> {
  const backend = await initBackend(backendPref);
  const model = initModel(DEFAULT_CONFIG, BENCH_SEED);
  const dir = await saveBenchCheckpoint(model);
  console.log(`backend ${backend}, model ${JSON.stringify(DEFAULT_CONFIG)} (${countParams(DEFAULT_CONFIG)} params), node ${process.version}, ${os.cpus().length} cpus, load ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);

  const matmul = { m1024x128x384: matmulGflops(1024, 128, 384), m512: matmulGflops(512, 512, 512) };
  const matmulRef = Math.max(matmul.m1024x128x384, matmul.m512);
  console.log(`\nplain matMul GFLOP/s: [1024,128]x[128,384] ${matmul.m1024x128x384.toFixed(2)}, 512^3 ${matmul.m512.toFixed(2)}`);
  // The limit: one large square matmul on the backend (one thread) and numpy/OpenBLAS on all cores.
  const matmulGflopsOneCore = matmulGflops(1024, 1024, 1024);
  const nativeMatmul = nativeMatmulGflops(2048);
  console.log(`reference: ${backend} matMul 1024^3 one thread ${matmulGflopsOneCore.toFixed(2)} GFLOP/s; numpy/OpenBLAS 2048^3 all cores ${nativeMatmul === null ? 'n/a (no python3 with numpy)' : nativeMatmul.toFixed(2) + ' GFLOP/s'}`);

  const fwd: Array<{ batch: number; fullSeqTokensPerSec: number; decodeTokensPerSec: number }> = [];
  for (const B of [1, 8, 32]) {
    fwd.push({ batch: B, fullSeqTokensPerSec: forwardTokensPerSec(model, Math.min(B, 8), 128), decodeTokensPerSec: decodeTokensPerSec(model, B, 256) });
  }
  console.log('\nforward tokens/s    batch   full-seq [min(B,8),128]   decode (256 cached)');
  for (const f of fwd) console.log(`                    ${String(f.batch).padStart(5)}   ${f.fullSeqTokensPerSec.toFixed(0).padStart(23)}   ${f.decodeTokensPerSec.toFixed(0).padStart(19)}`);

  const train = trainBench(model, 8, 128);
  // the job runner (SFT, minibatch 16 x 128 tokens) with 1 and 2 data-parallel workers, back to back
  const trainByWorkers = await trainingTokensPerSecByWorkers({ backend: backendPref, checkpointDir: dir, workers: [1, 2], steps: QUICK ? 4 : 8 });
  // the ceiling for 2 workers: two independent 1-worker copies of the same job at once, as two processes
  const trainIndependent = await independentJobsTokensPerSec({ backend: backendPref, checkpointDir: dir, steps: QUICK ? 4 : 8 }, 2);
  const trainRatio = train.gflops / matmulRef;
  console.log(`\ntraining [8,128] Adam: ${train.tokensPerSec.toFixed(0)} tokens/s, step ${(train.stepSec * 1000).toFixed(0)} ms (forward ${(train.forwardSec * 1000).toFixed(0)} ms, backward+update ${(1000 * (train.stepSec - train.forwardSec)).toFixed(0)} ms), ${train.gflops.toFixed(2)} GFLOP/s = ${(100 * trainRatio).toFixed(0)}% of plain matMul ${matmulRef.toFixed(2)} GFLOP/s`);

  const lat: LatencyResult[] = [];
  for (const c of [1, 8, 32]) {
    const stepsPerSession = QUICK ? 4 : 8; // one attempt of a MineSweeper-like task
    for (const batching of [false, true]) lat.push(await latencyBench(dir, c, batching, stepsPerSession));
  }
  for (const c of [1, 32]) {
    for (const batching of [false, true]) lat.push(await latencyBench(dir, c, batching, QUICK ? 1 : 2, 'reflect'));
  }
  console.log('\nengine calls                  conc  batching  steps   p50 ms   p99 ms   steps/s  rows/forward  busy');
  for (const r of lat) {
    console.log(`${(r.kind === 'act' ? 'act (8-token actions)' : 'reflect (64 tokens)').padEnd(30)}${String(r.concurrency).padStart(4)}  ${(r.batching ? 'on' : 'off').padStart(8)}  ${String(r.steps).padStart(5)}  ${r.p50ms.toFixed(1).padStart(7)}  ${r.p99ms.toFixed(1).padStart(7)}  ${r.stepsPerSec.toFixed(1).padStart(8)}  ${r.meanBatchRows.toFixed(1).padStart(12)}  ${(100 * r.forwardBusyShare).toFixed(0).padStart(3)}%`);
  }
  const ratios = lat
    .filter((r) => r.batching)
    .map((on) => {
      const off = lat.find((r) => r.kind === on.kind && r.concurrency === on.concurrency && !r.batching)!;
      return { kind: on.kind, concurrency: on.concurrency, throughputRatio: on.stepsPerSec / off.stepsPerSec };
    });
  console.log('batched/unbatched throughput: ' + ratios.map((r) => `${r.kind} c=${r.concurrency}: ${r.throughputRatio.toFixed(2)}x`).join(', '));

  // act steps at concurrency 32 with 1 worker (the in-process engine) and 2 (the serving pool,
  // LAMER_SERVE_WORKERS=2), back to back (bench/serving-workers.ts)
  const serveByWorkers = await servingStepsPerSecByWorkers({ backend: backendPref, checkpointDir: dir, workers: [1, 2], concurrency: 32, steps: QUICK ? 4 : 8 });
  const limit = {
    reference: { matmulGflopsOneCore, nativeMatmulGflops: nativeMatmul, matmulShape: '1024x1024x1024 (backend), 2048x2048x2048 (numpy fp32)' },
    ratios: {
      trainingToMatmulOneCore: train.gflops / matmulGflopsOneCore,
      trainingToNative: nativeMatmul === null ? null : train.gflops / nativeMatmul,
      trainingWorkers2over1: trainByWorkers.tokensPerSec['2'] / trainByWorkers.tokensPerSec['1'],
      trainingIndependentJobs2over1: trainIndependent.sum / trainByWorkers.tokensPerSec['1'],
      trainingWorkers2overCeiling: trainByWorkers.tokensPerSec['2'] / trainIndependent.sum,
      servingWorkers2over1: serveByWorkers.stepsPerSec['2'] / serveByWorkers.stepsPerSec['1'],
    },
  };
  console.log('\nlimit                                   value');
  console.log(`reference matMul one core (GFLOP/s)     ${matmulGflopsOneCore.toFixed(2)}`);
  console.log(`reference native all cores (GFLOP/s)    ${nativeMatmul === null ? 'null' : nativeMatmul.toFixed(2)}`);
  console.log(`training (GFLOP/s)                      ${train.gflops.toFixed(2)}`);
  console.log(`training / one-core matMul              ${(100 * limit.ratios.trainingToMatmulOneCore).toFixed(1)}%`);
  console.log(`training / native                       ${limit.ratios.trainingToNative === null ? 'null' : (100 * limit.ratios.trainingToNative).toFixed(1) + '%'}`);
  console.log(`training job tokens/s by workers        1: ${trainByWorkers.tokensPerSec['1'].toFixed(0)}, 2: ${trainByWorkers.tokensPerSec['2'].toFixed(0)} (${limit.ratios.trainingWorkers2over1.toFixed(2)}x; CPU ms per 1k tokens 1: ${(1e6 * trainByWorkers.cpuSecondsPerToken['1']).toFixed(0)}, 2: ${(1e6 * trainByWorkers.cpuSecondsPerToken['2']).toFixed(0)})`);
  console.log(`training 2 independent jobs tokens/s    ${trainIndependent.each.map((x) => x.toFixed(0)).join(' + ')} = ${trainIndependent.sum.toFixed(0)} (${limit.ratios.trainingIndependentJobs2over1.toFixed(2)}x the 1-worker job, timed overlap ${(100 * trainIndependent.timedOverlap).toFixed(0)}%; 2 workers reach ${(100 * limit.ratios.trainingWorkers2overCeiling).toFixed(0)}% of it)`);
  console.log(`serving steps/s at c=32 by workers      1: ${serveByWorkers.stepsPerSec['1'].toFixed(1)}, 2: ${serveByWorkers.stepsPerSec['2'].toFixed(1)} (${limit.ratios.servingWorkers2over1.toFixed(2)}x; CPU ms per step 1: ${serveByWorkers.cpuMsPerStep['1'].toFixed(1)}, 2: ${serveByWorkers.cpuMsPerStep['2'].toFixed(1)})`);

  const result = {
    date: new Date().toISOString(),
    backend,
    config: DEFAULT_CONFIG,
    params: countParams(DEFAULT_CONFIG),
    machine: { cpus: os.cpus().length, loadavg: os.loadavg(), node: process.version, note: 'shared machine: other processes may run concurrently' },
    quick: QUICK,
    matmulGflops: matmul,
    forward: fwd,
    reference: limit.reference,
    training: {
      batch: 8,
      seq: 128,
      ...train,
      matmulRefGflops: matmulRef,
      ratioToMatmul: trainRatio,
      flopsPerToken: trainFlopsPerToken(model, 128),
      tokensPerSecondByWorkers: trainByWorkers.tokensPerSec,
      cpuSecondsPerTokenByWorkers: trainByWorkers.cpuSecondsPerToken,
      tokensPerSecondIndependentJobs: trainIndependent,
      note: 'tokensPerSecondByWorkers: runTrainingJob (SFT, minibatch 16 x 128 tokens, steps after the first) with 1 and 2 data-parallel workers (threads, one backend each), measured back to back; cpuSecondsPerTokenByWorkers: CPU time of the process (all threads) per token over the same steps; tokensPerSecondIndependentJobs: right after, `copies` independent 1-worker copies of the same job started together as separate processes, each copy\'s tokens/s (`each`), their `sum` (what this machine gives that many training streams at once: the ceiling for data parallelism, below copies x one job when the streams contend for memory bandwidth) and `timedOverlap` (share of the span of their timed steps during which all ran); ratios.trainingIndependentJobs2over1 = sum / tokensPerSecondByWorkers[1], ratios.trainingWorkers2overCeiling = tokensPerSecondByWorkers[2] / sum (= trainingWorkers2over1 / trainingIndependentJobs2over1); tokensPerSec above: one raw Adam step [8, 128] in this thread',
    },
    serving: {
      concurrency: 32,
      batching: true,
      stepsPerSecondByWorkers: serveByWorkers.stepsPerSec,
      cpuMsPerStepByWorkers: serveByWorkers.cpuMsPerStep,
      note: 'stepsPerSecondByWorkers: act steps (8-token actions, batching on) at concurrency 32 with 1 worker (the in-process engine) and 2 (the serving pool, LAMER_SERVE_WORKERS=2), measured back to back after one untimed run of the same workload (bench/serving-workers.ts); cpuMsPerStepByWorkers: CPU time of the process (all threads) per step over the same steps',
    },
    ratios: limit.ratios,
    latency: lat,
    batchingThroughputRatio: ratios,
  };
  const out = flag('--out') ?? 'bench/results/model.json';
  await ensureDir(path.dirname(out));
  await writeFile(out, JSON.stringify(result, null, 2) + '\n');
  console.log(`\nwrote ${out}`);
  model.dispose();
  await rm(dir, { recursive: true, force: true });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
