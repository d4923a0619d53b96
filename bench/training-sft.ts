/**
 * SFT on generated demonstrations with the shipped base checkpoint: loss curve and throughput.
 * Run: npx tsx bench/training-sft.ts [--env minesweeper|sokoban] [--tasks 16] [--epochs 1] [--minibatch 8] [--micro 4096] [--backend wasm]
 * Prints one JSON line per iteration (loss, tokens/s, padFrac) and a summary.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { generateDemos } from '../src/envs/demos.js';
import { readCheckpointMetadata } from '../src/model/checkpoint.js';
import { buildSftSamples } from '../src/training/data/data.js';
import { createModelIO } from '../src/training/run/gpt-adapter.js';
import { runTrainingJob } from '../src/training/run/job.js';

const { values } = parseArgs({ options: {
  env: { type: 'string', default: 'minesweeper' }, tasks: { type: 'string', default: '16' }, epochs: { type: 'string', default: '1' },
  minibatch: { type: 'string', default: '8' }, micro: { type: 'string', default: '4096' }, backend: { type: 'string', default: 'wasm' }, lr: { type: 'string', default: '1e-3' },
} });
const base = new URL('../models/base', import.meta.url).pathname;
const demos = generateDemos({ env: values.env as 'minesweeper' | 'sokoban', tasks: Number(values.tasks), seed: 7 });
const { config } = await readCheckpointMetadata(base);
const { samples, stats } = buildSftSamples(demos, { blockSize: config.block_size });
const promptLens = samples.map((s) => s.promptTokenIds.length);
console.log(JSON.stringify({ demos: demos.length, samples: samples.length, reflections: samples.filter((s) => s.kind === 'reflection').length, meanPromptTokens: Math.round(promptLens.reduce((a, b) => a + b, 0) / promptLens.length), maxPromptTokens: Math.max(...promptLens), outputTokens: stats.outputTokens, passAtK: stats.passAtK }));
const io = await createModelIO({ backend: values.backend as 'wasm' | 'cpu' });
const dir = await mkdtemp(join(tmpdir(), 'lamer-sftbench-'));
const res = await runTrainingJob({ algorithm: 'sft', baseCheckpointDir: base, outputDir: join(dir, 'out'), hyper: { lr: Number(values.lr), epochs: Number(values.epochs), minibatchSize: Number(values.minibatch), microBatchTokens: Number(values.micro) } }, samples, {
  io, onProgress: (p) => console.log(JSON.stringify({ iteration: p.iteration, of: p.totalIterations, loss: +p.metrics.loss.toFixed(4), gradNorm: +p.metrics.gradNorm.toFixed(3), tokensPerSec: Math.round(p.metrics.tokensPerSec), padFrac: +p.metrics.padFrac.toFixed(3), seconds: +p.metrics.seconds.toFixed(2) })),
});
const tok = res.metrics.reduce((a, m) => a + m.tokens, 0);
console.log(JSON.stringify({ summary: true, iterations: res.iterations, firstLoss: res.metrics[0].loss, lastLoss: res.metrics[res.metrics.length - 1].loss, tokensPerSec: Math.round(tok / res.metrics.reduce((a, m) => a + m.seconds, 0)), seconds: +res.seconds.toFixed(1) }));
await rm(dir, { recursive: true, force: true });
