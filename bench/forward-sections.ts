/**
 * `npm run bench:forward-sections`: how the bound on one synchronous forward section
 * (LAMER_FORWARD_SECTION_TOKENS, src/model/batcher.ts) trades the longest time the event loop is
 * held against forward throughput, on the shipped base model (models/base, or LAMER_BASE_MODEL_DIR)
 * and this machine's backend.
 *
 * Workloads, shaped like the start of a 64-client MineSweeper burst (bench:healthz-burst; the
 * game vocabulary makes a first prompt ~47 tokens and a step's prompt delta ~27 tokens):
 * - `first prompts`: 64 prefills of 47 tokens, no cache;
 * - `prompt deltas`: 64 rows of 27 new tokens over caches of 200 tokens;
 * - `re-prefills`: 8 rows of 340 tokens, no cache (a prompt refitted after dropping steps).
 * Each workload is submitted to a `ForwardBatcher` (window 0, 32 rows, as the server runs) as one
 * request per row in the same tick, for each bound in BOUNDS (BENCH_BOUNDS; 2048: sections as
 * large as the grouping allows, the behaviour before sections), BENCH_REPS (5) times, interleaved so
 * that a change of machine load hits every bound alike. Reports per bound the sections run, the
 * longest one (ms), the median wall time of the workload and its tokens/s relative to 2048, and the
 * median CPU time of this process (user + system) and tokens per CPU second relative to 2048 (the
 * figure to read on a machine that other processes share). Writes bench/results/forward-sections.json.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as tf from '@tensorflow/tfjs';
import { ensureDirSync } from '../src/ensure-dir.js';
import { initBackend } from '../src/model/backend.js';
import { ForwardBatcher } from '../src/model/batcher.js';
import { loadCheckpoint } from '../src/model/checkpoint.js';
import { disposeCache, forwardCached, type CachedRow } from '../src/model/gpt-cached.js';
import type { GPT } from '../src/model/gpt.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const BOUNDS = (process.env.BENCH_BOUNDS ?? '32,64,128,256,512,1024,2048').split(',').map(Number);
const REPS = Number(process.env.BENCH_REPS ?? 5);

interface Workload {
  name: string;
  rows: number;
  newTokens: number;
  cached: number;
}
const WORKLOADS: Workload[] = [
  { name: 'first prompts', rows: 64, newTokens: 47, cached: 0 },
  { name: 'prompt deltas', rows: 64, newTokens: 27, cached: 200 },
  { name: 're-prefills', rows: 8, newTokens: 340, cached: 0 },
];

/** One run: wall ms, CPU ms of this process, sections, longest section (wall ms). */
interface Run {
  ms: number;
  cpuMs: number;
  sections: number;
  longestMs: number;
}

const token = (i: number, j: number, V: number) => 4 + ((i * 131 + j * 17) % (V - 4));

/** One run of `w` through a batcher bounded at `bound`: wall ms, sections, longest section ms. */
async function runOnce(model: GPT, w: Workload, bound: number): Promise<Run> {
  const V = model.config.vocab_size;
  // the cached prefixes are made outside the timed part
  const caches = w.cached === 0 ? new Array(w.rows).fill(null) : forwardCached(
    model,
    Array.from({ length: w.rows }, (_, i) => ({ cache: null, tokens: Array.from({ length: w.cached }, (_, j) => token(i, j, V)), allPositions: false, keepCache: true })),
  ).map((r) => r.cache);
  let sections = 0;
  let longestMs = 0;
  const batcher = new ForwardBatcher((rows) => forwardCached(model, rows), {
    windowMs: 0,
    maxBatchSize: 32,
    maxSectionTokens: bound,
    onForward: (_rows, ms) => {
      sections++;
      longestMs = Math.max(longestMs, ms);
    },
  });
  const rows: CachedRow[] = caches.map((cache, i) => ({
    cache, tokens: Array.from({ length: w.newTokens }, (_, j) => token(i, w.cached + j, V)), allPositions: false, keepCache: true,
  }));
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const results = await Promise.all(rows.map((r) => batcher.submit([r])));
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const cpuMs = (cpu.user + cpu.system) / 1000;
  for (const [r] of results) disposeCache(r.cache);
  for (const c of caches) disposeCache(c);
  return { ms, cpuMs, sections, longestMs };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const backend = await initBackend('auto');
  const dir = process.env.LAMER_BASE_MODEL_DIR || path.join(root, 'models', 'base');
  const { model } = await loadCheckpoint(dir);
  const tensorsBefore = tf.memory().numTensors;
  const out: Array<Record<string, unknown>> = [];
  for (const w of WORKLOADS) {
    await runOnce(model, w, 2048); // warm-up
    const runs = new Map<number, Run[]>(BOUNDS.map((b) => [b, []]));
    for (let r = 0; r < REPS; r++) for (const b of BOUNDS) runs.get(b)!.push(await runOnce(model, w, b));
    const base = median(runs.get(2048)?.map((x) => x.ms) ?? [NaN]);
    const baseCpu = median(runs.get(2048)?.map((x) => x.cpuMs) ?? [NaN]);
    console.log(`\n${w.name}: ${w.rows} rows x ${w.newTokens} new tokens over ${w.cached} cached (${REPS} runs each, median)\n`);
    console.log('| bound (tokens) | sections | longest section ms | workload ms | tokens/s vs 2048 | CPU ms | tokens per CPU s vs 2048 |');
    console.log('|---|---|---|---|---|---|---|');
    for (const b of BOUNDS) {
      const xs = runs.get(b)!;
      const ms = median(xs.map((x) => x.ms));
      const cpuMs = median(xs.map((x) => x.cpuMs));
      const row = {
        workload: w.name, bound: b, sections: xs[0]!.sections, longestSectionMs: Math.round(median(xs.map((x) => x.longestMs))),
        workloadMs: Math.round(ms), tokensPerSecVs2048: Math.round((base / ms) * 100) / 100,
        cpuMs: Math.round(cpuMs), tokensPerCpuSecVs2048: Math.round((baseCpu / cpuMs) * 100) / 100,
      };
      out.push(row);
      console.log(`| ${b} | ${row.sections} | ${row.longestSectionMs} | ${row.workloadMs} | ${row.tokensPerSecVs2048} | ${row.cpuMs} | ${row.tokensPerCpuSecVs2048} |`);
    }
  }
  const leaked = tf.memory().numTensors - tensorsBefore;
  console.log(`\nbackend ${backend}, load average ${os.loadavg().map((x) => x.toFixed(2)).join(' ')} (${os.cpus().length} CPUs), tensors left ${leaked}`);
  ensureDirSync(path.join(root, 'bench', 'results'));
  fs.writeFileSync(
    path.join(root, 'bench', 'results', 'forward-sections.json'),
    JSON.stringify({ date: new Date().toISOString(), node: process.version, backend, cpus: os.cpus().length, loadAverage: os.loadavg(), reps: REPS, rows: out }, null, 2) + '\n',
  );
  console.log('wrote bench/results/forward-sections.json');
  model.dispose();
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
