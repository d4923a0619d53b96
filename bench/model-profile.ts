/**
 * `npx tsx bench/model-profile.ts [decode|train|prefill] [B]`: per-kernel time breakdown (tf.profile)
 * of one KV-cached decode forward, one prefill, or one training step of the default model; used to
 * find where the time goes (see bench/model.ts for the headline numbers).
 */
import * as tf from '@tensorflow/tfjs';
import { initBackend } from '../src/model/backend.js';
import { DEFAULT_CONFIG, initModel, tokenLogprobs } from '../src/model/gpt.js';
import { disposeCache, forwardCached } from '../src/model/gpt-cached.js';

const what = process.argv[2] ?? 'decode';
const B = Number(process.argv[3] ?? 32);
await initBackend((process.argv[4] ?? 'wasm') as 'wasm');
const model = initModel(DEFAULT_CONFIG, 1);
let run: () => void;
if (what === 'train') {
  const tokens = tf.tensor2d(Array.from({ length: 8 * 129 }, (_, i) => (i * 7) % 256), [8, 129], 'int32');
  const opt = tf.train.adam(1e-3);
  run = () => {
    const { value, grads } = tf.variableGrads(() => tf.neg(tf.mean(tokenLogprobs(model, tokens))) as tf.Scalar, model.trainableVariables);
    opt.applyGradients(grads as Parameters<typeof opt.applyGradients>[0]);
    value.dataSync();
    value.dispose();
    tf.dispose(grads);
  };
} else {
  const CACHED = Number(process.argv[5] ?? 256);
  const pre = forwardCached(model, [{ cache: null, tokens: Array.from({ length: CACHED }, (_, i) => i % 256), allPositions: false, keepCache: true }])[0];
  const n = what === 'prefill' ? Number(process.argv[6] ?? 48) : 1;
  const rows = Array.from({ length: B }, (_, i) => ({ cache: pre.cache, tokens: Array.from({ length: n }, (_, j) => (i + j) % 256), allPositions: false, keepCache: true }));
  run = () => {
    for (const r of forwardCached(model, rows)) disposeCache(r.cache);
  };
}
for (let i = 0; i < 3; i++) run();
const t0 = performance.now();
for (let i = 0; i < 5; i++) run();
console.log(`${what} B=${B}: ${((performance.now() - t0) / 5).toFixed(1)} ms per call`);
const prof = await tf.profile(run);
const by = new Map<string, { ms: number; n: number }>();
let total = 0;
for (const k of prof.kernels) {
  const key = `${k.name} ${JSON.stringify(k.inputShapes)}`;
  const e = by.get(key) ?? { ms: 0, n: 0 };
  e.ms += Number(k.kernelTimeMs);
  e.n++;
  by.set(key, e);
  total += Number(k.kernelTimeMs);
}
console.log(`kernels: ${prof.kernels.length}, kernel time ${total.toFixed(1)} ms`);
for (const [k, e] of [...by.entries()].sort((a, b) => b[1].ms - a[1].ms).slice(0, 25)) console.log(e.ms.toFixed(1).padStart(8), String(e.n).padStart(4), k.slice(0, 150));
