/**
 * `npx tsx bench/backend-kernels.ts [--backend webgpu] [--tolerance 1e-3]`: checks the kernels the
 * builtin model uses on another tfjs backend against wasm (the reference backend of this project),
 * on small shapes with fixed seeded inputs: plain / transposed / batched matMul, softmax,
 * logSoftmax, GELU (tanh form), moments (layer norm), a small GPT's forward logits and the
 * gradients of its next-token loss. Prints one row per check (max absolute difference, max
 * difference relative to the reference's largest magnitude, pass/fail) and exits 0 when every
 * relative difference is within --tolerance, 1 when one is not, 2 when the backend does not load
 * (then nothing was checked: "not measured"). Run by bench/gpu-check.sh on a GPU machine; on this
 * CPU-only machine `--backend cpu` checks the script itself.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import * as tf from '@tensorflow/tfjs';
import { initBackend, type BackendPreference } from '../src/model/backend.js';
import { forward, initModel, type GPTConfig } from '../src/model/gpt.js';
import { VOCAB_SIZE } from '../src/model/tokenizer.js';

const { values } = parseArgs({ options: { backend: { type: 'string', default: 'webgpu' }, tolerance: { type: 'string', default: '1e-3' }, emit: { type: 'string' } } });
const target = values.backend as BackendPreference;
const tolerance = Number(values.tolerance);
if (!['webgpu', 'cpu', 'tensorflow', 'wasm'].includes(target) || !(tolerance > 0)) {
  console.error('backend-kernels: --backend must be webgpu, cpu or tensorflow and --tolerance a positive number');
  process.exit(2);
}

const CONFIG: GPTConfig = { vocab_size: VOCAB_SIZE, block_size: 64, n_layer: 2, n_head: 4, n_embd: 64 };

/** Seeded inputs, as plain arrays so that each backend builds its own tensors from the same numbers. */
function uniform(shape: number[], seed: number): { shape: number[]; data: Float32Array } {
  return { shape, data: tf.randomUniform(shape, -1, 1, 'float32', seed).dataSync() as Float32Array };
}

type Check = { name: string; run: () => Promise<Float32Array[]> };

function checks(): Check[] {
  const a = uniform([33, 47], 1), b = uniform([47, 29], 2), bt = uniform([29, 47], 3), at = uniform([47, 33], 4);
  const ba = uniform([4, 17, 16], 5), bb = uniform([4, 16, 17], 6), x = uniform([8, 260], 7);
  const t = (u: { shape: number[]; data: Float32Array }) => tf.tensor(u.data, u.shape);
  const read = async (...ts: tf.Tensor[]) => Promise.all(ts.map(async (y) => (await y.data()) as Float32Array));
  const tokens = Array.from({ length: 2 * 32 }, (_, i) => (i * 37 + 11) % 256);
  return [
    { name: 'matMul [33,47]x[47,29]', run: () => read(tf.matMul(t(a), t(b))) },
    { name: 'matMul transposeB', run: () => read(tf.matMul(t(a), t(bt), false, true)) },
    { name: 'matMul transposeA', run: () => read(tf.matMul(t(at), t(b), true, false)) },
    { name: 'batched matMul [4,17,16]x[4,16,17]', run: () => read(tf.matMul(t(ba), t(bb))) },
    { name: 'softmax [8,260]', run: () => read(tf.softmax(t(x))) },
    { name: 'logSoftmax [8,260]', run: () => read(tf.logSoftmax(t(x))) },
    {
      name: 'GELU (tanh form) [8,260]',
      run: () => read(tf.tidy(() => { const v = t(x); return tf.mul(tf.mul(v, 0.5), tf.add(1, tf.tanh(tf.mul(Math.sqrt(2 / Math.PI), tf.add(v, tf.mul(0.044715, tf.pow(v, 3))))))); })),
    },
    { name: 'moments over the last axis [8,260]', run: () => { const m = tf.moments(t(x), -1, true); return read(m.mean, m.variance); } },
    {
      name: 'GPT 2x64 forward logits [2,32,260]',
      run: async () => { const model = initModel(CONFIG, 7); try { return await read(forward(model, tf.tensor2d(tokens, [2, 32], 'int32'))); } finally { model.dispose(); } },
    },
    {
      name: 'GPT 2x64 next-token loss gradients',
      run: async () => {
        const model = initModel(CONFIG, 7);
        try {
          const idx = tf.tensor2d(tokens, [2, 32], 'int32');
          const targets = tf.oneHot(tf.tensor2d(tokens.map((v) => (v + 1) % 256), [2, 32], 'int32'), VOCAB_SIZE);
          const { grads } = tf.variableGrads(() => tf.losses.softmaxCrossEntropy(targets, forward(model, idx)) as tf.Scalar, model.trainableVariables);
          return await read(...Object.keys(grads).sort().map((k) => grads[k]!));
        } finally { model.dispose(); }
      },
    },
  ];
}

async function runAll(): Promise<Float32Array[][]> {
  const out: Float32Array[][] = [];
  for (const c of checks()) out.push(await c.run());
  return out;
}

// Each backend runs in its own process (a process keeps the backend it chose first): a child with
// --emit FILE runs every check on --backend and writes the outputs there, or exits 2 when that
// backend does not load.
if (values.emit) {
  const loaded = await initBackend(target);
  if (loaded !== target) {
    console.log(`backend ${target} did not load (got ${loaded})`);
    process.exit(2);
  }
  writeFileSync(values.emit, JSON.stringify((await runAll()).map((outs) => outs.map((o) => Array.from(o)))));
  process.exit(0);
}

const dir = mkdtempSync(path.join(tmpdir(), 'lamer-kernels-'));
function emit(backend: string): number[][][] | null {
  const file = path.join(dir, `${backend}.json`);
  const r = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), '--backend', backend, '--emit', file], { stdio: ['ignore', 'inherit', 'inherit'] });
  if (r.status === 2) return null;
  if (r.status !== 0) throw new Error(`checks on ${backend} exited with ${r.status}`);
  return JSON.parse(readFileSync(file, 'utf8')) as number[][][];
}
let reference: number[][][] | null, got: number[][][] | null;
try {
  reference = emit('wasm');
  got = emit(target);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
if (!reference) {
  console.log('the wasm reference backend did not load: nothing checked');
  process.exit(2);
}
if (!got) {
  console.log(`backend ${target} did not load: not measured`);
  process.exit(2);
}
let failed = 0;
console.log(`${'check'.padEnd(40)} ${'max |diff|'.padStart(12)} ${'relative'.padStart(10)}  result   (${target} vs wasm, tolerance ${tolerance})`);
checks().forEach((c, i) => {
  let maxAbs = 0, scale = 0;
  reference![i]!.forEach((r, j) => {
    const g = got![i]![j]!;
    for (let k = 0; k < r.length; k++) {
      maxAbs = Math.max(maxAbs, Math.abs(r[k]! - g[k]!));
      scale = Math.max(scale, Math.abs(r[k]!));
    }
  });
  const rel = maxAbs / Math.max(scale, 1e-12);
  const ok = Number.isFinite(rel) && rel <= tolerance;
  if (!ok) failed++;
  console.log(`${c.name.padEnd(40)} ${maxAbs.toExponential(2).padStart(12)} ${rel.toExponential(2).padStart(10)}  ${ok ? 'ok' : 'FAIL'}`);
});
console.log(failed === 0 ? 'all kernels within tolerance' : `${failed} check(s) out of tolerance`);
process.exit(failed === 0 ? 0 : 1);
