/**
 * Worker-thread side of the compact trainer's data thread (src/recipes/sft-base/data-thread.ts): its
 * own tfjs backend (wasm), a model of the trainer's shape whose weights it copies from the shared
 * buffer when told, the game tokenizer, and the example pool (src/recipes/sft-base/pool.ts).
 */
import * as tf from '@tensorflow/tfjs';
import { parentPort } from 'node:worker_threads';
import { initBackend } from '../../model/backend.js';
import { initModel, type GPT } from '../../model/gpt.js';
import { GameTokenizer } from '../../model/tokenizers.js';
import { gameVocabulary } from '../../envs/vocab.js';
import { paramCount, writeWeights } from '../../training/run/data-parallel.js';
import { ExamplePool, poolRng } from './pool.js';
import type { FromDataThread, ToDataThread } from './data-thread.js';

if (!parentPort) throw new Error('data-entry.ts must run in a worker thread');
const port = parentPort;
const post = (m: FromDataThread) => port.postMessage(m);

let state: { model: GPT; vars: tf.Variable[]; weights: Float32Array; pool: ExamplePool; refillMs: number } | null = null;

async function handle(m: ToDataThread): Promise<void> {
  if (m.type === 'init') {
    await initBackend('wasm');
    const model = initModel(m.config, 1);
    const vars = model.trainableVariables;
    const weights = new Float32Array(m.weights);
    writeWeights(vars, weights);
    const pool = new ExamplePool(m.pool, model, new GameTokenizer(gameVocabulary()), m.format, poolRng(m.pool.seed), m.size);
    const t0 = Date.now();
    pool.refill(false);
    state = { model, vars, weights, pool, refillMs: Date.now() - t0 };
    post({ type: 'ready', params: paramCount(vars), refillMs: state.refillMs });
    return;
  }
  if (!state) throw new Error('take before init');
  if (m.syncWeights) writeWeights(state.vars, state.weights);
  const examples = state.pool.take(m.n);
  const { trials, daggerTrials, deadPushExamples, pushMemoryTargets } = state.pool;
  post({ type: 'batch', examples, trials, daggerTrials, deadPushExamples, pushMemoryTargets, refillMs: state.refillMs });
  const t0 = Date.now();
  state.pool.refill(m.daggerOn, m.memoryOn);
  state.refillMs = Date.now() - t0;
}

// one message at a time, in order: a take waits for the refill of the one before
let chain = Promise.resolve();
port.on('message', (m: ToDataThread) => {
  chain = chain.then(() => handle(m)).catch((e: Error) => post({ type: 'error', message: e.message, stack: e.stack }));
});
