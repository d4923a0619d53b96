/** Micro-benchmark of attention matmul formulations on the current backend (see PERF notes in bench/model.ts). */
import * as tf from '@tensorflow/tfjs';
import { initBackend } from '../src/model/backend.js';
await initBackend((process.argv[2] ?? 'wasm') as 'wasm');
function t(name: string, fn: () => tf.Tensor | tf.Tensor[], reps = 10) {
  for (let i = 0; i < 2; i++) tf.tidy(() => { const r = fn(); (Array.isArray(r) ? r[0] : r).dataSync(); });
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) tf.tidy(() => { const r = fn(); (Array.isArray(r) ? r[0] : r).dataSync(); });
  console.log(name.padEnd(50), ((performance.now() - t0) / reps).toFixed(2), 'ms');
}
for (const [BH, M, K, N] of [[32, 128, 32, 128], [32, 128, 128, 32], [128, 1, 32, 257], [128, 48, 32, 304]]) {
  const a = tf.randomNormal([BH, M, K]); const b = tf.randomNormal([BH, K, N]);
  console.log(`--- [${BH}] ${M}x${K} @ ${K}x${N}  (${(2 * BH * M * K * N / 1e6).toFixed(1)} MFLOP)`);
  t('batched matMul', () => tf.matMul(a, b));
  const as = tf.unstack(a), bs = tf.unstack(b);
  t('per-pair 2D matMul (pre-unstacked)', () => tf.stack(as.map((x, i) => tf.matMul(x as tf.Tensor2D, bs[i] as tf.Tensor2D))));
  t('unstack + per-pair 2D + stack', () => { const a2 = tf.unstack(a), b2 = tf.unstack(b); return tf.stack(a2.map((x, i) => tf.matMul(x as tf.Tensor2D, b2[i] as tf.Tensor2D))); });
  if (M === 1) { const bt = tf.transpose(b, [0, 2, 1]); t('mul+sum (b as [BH,N,K])', () => tf.sum(tf.mul(a, bt), -1)); }
  t('transpose last two of b', () => tf.transpose(b, [0, 2, 1]));
}
const x = tf.randomNormal([1536, 512]);
t('pow x^3 [1536,512]', () => tf.pow(x, 3));
t('x*x*x [1536,512]', () => tf.mul(tf.mul(x, x), x));
t('tanh [1536,512]', () => tf.tanh(x));
t('sigmoid [1536,512]', () => tf.sigmoid(x));
t('matMul [1536,128]x[128,512]', () => tf.matMul(tf.randomNormal([1536,128]), tf.randomNormal([128,512])));
