/**
 * Training throughput on the shipped base checkpoint (models/base): PPO minibatch steps on
 * MineSweeper-sized prompts, in this thread and through the worker thread.
 * Run: npx tsx bench/training.ts [--backend wasm|cpu] [--samples 16] [--minibatch 8] [--micro 4096] [--prompt-bytes 400]
 * Prints seconds per iteration and tokens/s (non-padding positions of the batch per second).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { BOS, encode, EOS } from '../src/model/tokenizer.js';
import type { TrainingSample } from '../src/training/data/data.js';
import { createModelIO } from '../src/training/run/gpt-adapter.js';
import { outputLogprobs } from '../src/training/data/behaviour.js';
import { runTrainingJob } from '../src/training/run/job.js';
import { DEFAULT_MODEL_IO, startTrainingWorker } from '../src/training/run/worker.js';

const { values } = parseArgs({ options: {
  backend: { type: 'string', default: 'wasm' }, samples: { type: 'string', default: '16' },
  minibatch: { type: 'string', default: '8' }, micro: { type: 'string', default: '4096' }, 'prompt-bytes': { type: 'string', default: '400' },
} });
const backend = values.backend as 'wasm' | 'cpu';
const n = Number(values.samples);
const promptBytes = Number(values['prompt-bytes']);
const base = new URL('../models/base', import.meta.url).pathname;

const board = (i: number) => Array.from({ length: 6 }, (_, r) => `Row ${r + 1}: ` + Array.from({ length: 6 }, (_, c) => ((r * 7 + c * 3 + i) % 5 === 0 ? '1' : '?')).join(' ')).join('\n');
const samples: TrainingSample[] = Array.from({ length: n }, (_, i) => {
  let text = `You are playing MineSweeper. Reveal all safe cells.\nObservation:\n${board(i)}\nAction:`;
  while (encode(text).length < promptBytes) text = `Observation:\n${board(i + text.length)}\nAction: (1, 2)\n` + text;
  const prompt = [BOS, ...encode(text).slice(-promptBytes)];
  return { sessionId: `s${i}`, taskId: `t${i % 4}`, attempt: 0, step: 0, kind: 'action', promptTokenIds: prompt, outputTokenIds: [...encode(` (${1 + (i % 6)}, ${1 + ((i * 5) % 6)})`), EOS], oldLogprobs: null, advantage: i % 2 ? 1 : -1, return: 0 };
});

const io = await createModelIO({ backend });
const m0 = await io.load(base);
const lp = outputLogprobs(m0, samples, 8);
m0.dispose();
const withLp = samples.map((s, i) => ({ ...s, oldLogprobs: lp[i] }));
const dir = await mkdtemp(join(tmpdir(), 'lamer-bench-'));
const spec = (name: string) => ({ algorithm: 'lamer' as const, baseCheckpointDir: base, outputDir: join(dir, name), hyper: { lr: 1e-5, epochs: 1, minibatchSize: Number(values.minibatch), microBatchTokens: Number(values.micro) } });

const res = await runTrainingJob(spec('main'), withLp, { io });
const iters = res.metrics;
const tok = iters.reduce((a, m) => a + m.tokens, 0);
const sec = iters.reduce((a, m) => a + m.seconds, 0);
console.log(JSON.stringify({ where: 'main thread', backend, samples: n, promptTokens: promptBytes + 1, minibatch: Number(values.minibatch), iterations: iters.length, secondsPerIteration: +(sec / iters.length).toFixed(3), tokensPerSec: Math.round(tok / sec), jobSeconds: +res.seconds.toFixed(2) }));

let ticks = 0;
const timer = setInterval(() => { ticks++; }, 10);
const t0 = performance.now();
const h = startTrainingWorker({ spec: spec('worker'), samples: withLp, modelIO: { ...DEFAULT_MODEL_IO, options: { backend } } });
const wres = await h.done;
clearInterval(timer);
const wtok = wres.metrics.reduce((a, m) => a + m.tokens, 0);
const wsec = wres.metrics.reduce((a, m) => a + m.seconds, 0);
console.log(JSON.stringify({ where: 'worker', backend, iterations: wres.iterations, tokensPerSec: Math.round(wtok / wsec), wallSeconds: +((performance.now() - t0) / 1000).toFixed(2), mainLoopTicksPer10ms: ticks }));
await rm(dir, { recursive: true, force: true });
