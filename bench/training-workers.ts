/**
 * Training throughput of the job runner (src/training/job.ts runTrainingJob, SFT) by worker count
 * (data parallelism over worker threads, src/training/data-parallel.ts), measured back to back on
 * the same checkpoint and samples. Used by bench/model.ts; also runs alone:
 *   npx tsx bench/training-workers.ts [--backend wasm] [--workers 1,2] [--steps 6]
 * Samples: `minibatch` SFT samples of `seq` tokens each (96-token prompt, the rest output) per step;
 * tokens/s = non-padding positions of the steps after the first (warm-up) over their seconds;
 * CPU seconds per token = the process's CPU time (all threads, user + system) over the same steps
 * per token: on a machine shared with other work the wall-clock ratio mostly measures the other
 * work, while equal CPU per token for 1 and 2 workers says that splitting the step costs little.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { BackendPreference } from '../src/model/backend.js';
import type { TrainingSample } from '../src/training/data.js';
import { createModelIO } from '../src/training/gpt-adapter.js';
import { runTrainingJob } from '../src/training/job.js';
import { backendFlag, flag, isMain, printWithLoad, ratio2over1, withBenchCheckpoint, workersFlag } from './cli.js';

export interface WorkersBenchOptions {
  backend: BackendPreference;
  /** Checkpoint folder to train from. */
  checkpointDir: string;
  workers: readonly number[];
  /** Optimiser steps per measurement (the first is warm-up). Default 6. */
  steps?: number;
  minibatch?: number;
  seq?: number;
}

export interface WorkersBenchResult {
  /** Keys: the worker counts as strings. */
  tokensPerSec: Record<string, number>;
  cpuSecondsPerToken: Record<string, number>;
}

/** @returns tokens/s and CPU seconds per token of the training job by worker count. */
export async function trainingTokensPerSecByWorkers(o: WorkersBenchOptions): Promise<WorkersBenchResult> {
  const steps = o.steps ?? 6;
  const mb = o.minibatch ?? 16;
  const seq = o.seq ?? 128;
  const samples: TrainingSample[] = Array.from({ length: steps * mb }, (_, i) => ({
    sessionId: `s${i}`, taskId: 't', attempt: 0, step: 0, kind: 'action',
    promptTokenIds: Array.from({ length: 96 }, (_, j) => 32 + ((i * 31 + j * 7) % 90)),
    outputTokenIds: Array.from({ length: seq + 1 - 96 }, (_, j) => 32 + ((i * 13 + j * 11) % 90)),
    oldLogprobs: null, advantage: 0, return: 0,
  }));
  const io = await createModelIO({ backend: o.backend });
  const out: WorkersBenchResult = { tokensPerSec: {}, cpuSecondsPerToken: {} };
  for (const w of o.workers) {
    const outDir = await mkdtemp(path.join(os.tmpdir(), 'lamer-bench-train-'));
    await rm(outDir, { recursive: true, force: true });
    try {
      let cpu0: NodeJS.CpuUsage | null = null;
      let cpu1: NodeJS.CpuUsage | null = null;
      const res = await runTrainingJob({ algorithm: 'sft', baseCheckpointDir: o.checkpointDir, outputDir: outDir, hyper: { minibatchSize: mb, workers: w, seed: 1 } }, samples, {
        io, onProgress: (p) => { if (p.iteration === 1) cpu0 = process.cpuUsage(); if (p.iteration === p.totalIterations) cpu1 = process.cpuUsage(cpu0!); },
      });
      const timed = res.metrics.slice(1);
      const tokens = timed.reduce((a, m) => a + m.tokens, 0);
      out.tokensPerSec[String(w)] = tokens / timed.reduce((a, m) => a + m.seconds, 0);
      const used = cpu1 as NodeJS.CpuUsage | null;
      out.cpuSecondsPerToken[String(w)] = used ? (used.user + used.system) / 1e6 / tokens : NaN;
    } finally {
      await rm(outDir, { recursive: true, force: true });
    }
  }
  return out;
}

if (isMain(import.meta.url)) {
  await withBenchCheckpoint((dir) =>
    printWithLoad(async () => {
      const r = await trainingTokensPerSecByWorkers({
        backend: backendFlag('wasm'), checkpointDir: dir, workers: workersFlag(), steps: Number(flag('--steps') ?? 6),
      });
      return { ...r, ratio2over1: ratio2over1(r.tokensPerSec) };
    }),
  );
}
