/**
 * Training throughput of the job runner (src/training/run/job.ts runTrainingJob, SFT) by worker count
 * (data parallelism over worker threads, src/training/run/data-parallel.ts), measured back to back on
 * the same checkpoint and samples, and the ceiling for 2 cores: independent 1-worker copies of the
 * same job run at the same time as separate processes. Used by bench/model.ts; also runs alone:
 *   npx tsx bench/training-workers.ts [--backend wasm] [--workers 1,2] [--steps 6] [--minibatch 16] [--seq 128] [--checkpoint DIR]
 *   npx tsx bench/training-workers.ts --independent 2 [--backend wasm] [--steps 6] [--minibatch 16] [--seq 128] [--checkpoint DIR]
 * (without --checkpoint, a fresh benchmark checkpoint from bench/cli.ts). `--json-only` prints the
 * by-workers figures as one JSON line (no load averages) and, when started with an IPC channel,
 * waits for a `go` message before training: the form independentJobsTokensPerSec starts its copies in.
 * Samples: `minibatch` SFT samples of `seq` tokens each (96-token prompt, the rest output) per step;
 * tokens/s = non-padding positions of the steps after the first (warm-up) over their seconds;
 * CPU seconds per token = the process's CPU time (all threads, user + system) over the same steps
 * per token: on a machine shared with other work the wall-clock ratio mostly measures the other
 * work, while equal CPU per token for 1 and 2 workers says that splitting the step costs little.
 * The independent copies' summed tokens/s over one copy's is what this machine gives two training
 * streams at all (shared memory bandwidth and caches included), so the 2-over-1 worker ratio is
 * judged against it rather than against 2.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BackendPreference } from '../src/model/backend.js';
import type { TrainingSample } from '../src/training/data/data.js';
import { createModelIO } from '../src/training/run/gpt-adapter.js';
import type { ModelIO } from '../src/training/model-api.js';
import { runTrainingJob } from '../src/training/run/job.js';
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

/** One job's figures over its timed steps (all but the first). */
interface JobMeasurement {
  tokensPerSec: number;
  cpuSecondsPerToken: number;
  /** Wall-clock epoch milliseconds at the end of the warm-up step and at the end of the last step. */
  timedStartMs: number;
  timedEndMs: number;
}

/** `steps * mb` SFT samples of `seq + 1` tokens (96 prompt, the rest output), deterministic. */
function benchSamples(steps: number, mb: number, seq: number): TrainingSample[] {
  return Array.from({ length: steps * mb }, (_, i) => ({
    sessionId: `s${i}`, taskId: 't', attempt: 0, step: 0, kind: 'action',
    promptTokenIds: Array.from({ length: 96 }, (_, j) => 32 + ((i * 31 + j * 7) % 90)),
    outputTokenIds: Array.from({ length: seq + 1 - 96 }, (_, j) => 32 + ((i * 13 + j * 11) % 90)),
    oldLogprobs: null, advantage: 0, return: 0,
  }));
}

/** Runs one SFT job with `workers` data-parallel workers into a temporary folder (removed) and measures its timed steps. */
async function measureJob(io: ModelIO, checkpointDir: string, workers: number, mb: number, samples: readonly TrainingSample[]): Promise<JobMeasurement> {
  const outDir = await mkdtemp(path.join(os.tmpdir(), 'lamer-bench-train-'));
  await rm(outDir, { recursive: true, force: true });
  try {
    let cpu0: NodeJS.CpuUsage | null = null;
    let cpu1: NodeJS.CpuUsage | null = null;
    let timedStartMs = NaN;
    let timedEndMs = NaN;
    const now = () => performance.timeOrigin + performance.now();
    const res = await runTrainingJob({ algorithm: 'sft', baseCheckpointDir: checkpointDir, outputDir: outDir, hyper: { minibatchSize: mb, workers, seed: 1 } }, samples, {
      io,
      onProgress: (p) => {
        if (p.iteration === 1) { cpu0 = process.cpuUsage(); timedStartMs = now(); }
        if (p.iteration === p.totalIterations) { cpu1 = process.cpuUsage(cpu0!); timedEndMs = now(); }
      },
    });
    const timed = res.metrics.slice(1);
    const tokens = timed.reduce((a, m) => a + m.tokens, 0);
    const used = cpu1 as NodeJS.CpuUsage | null;
    return {
      tokensPerSec: tokens / timed.reduce((a, m) => a + m.seconds, 0),
      cpuSecondsPerToken: used ? (used.user + used.system) / 1e6 / tokens : NaN,
      timedStartMs,
      timedEndMs,
    };
  } finally {
    await rm(outDir, { recursive: true, force: true });
  }
}

/** @returns tokens/s and CPU seconds per token of the training job by worker count. */
export async function trainingTokensPerSecByWorkers(o: WorkersBenchOptions): Promise<WorkersBenchResult> {
  const { out } = await byWorkers(o);
  return out;
}

async function byWorkers(o: WorkersBenchOptions, beforeFirstJob?: () => Promise<void>): Promise<{ out: WorkersBenchResult; runs: Record<string, JobMeasurement> }> {
  const steps = o.steps ?? 6;
  const mb = o.minibatch ?? 16;
  const samples = benchSamples(steps, mb, o.seq ?? 128);
  const io = await createModelIO({ backend: o.backend });
  await beforeFirstJob?.();
  const out: WorkersBenchResult = { tokensPerSec: {}, cpuSecondsPerToken: {} };
  const runs: Record<string, JobMeasurement> = {};
  for (const w of o.workers) {
    const m = await measureJob(io, o.checkpointDir, w, mb, samples);
    runs[String(w)] = m;
    out.tokensPerSec[String(w)] = m.tokensPerSec;
    out.cpuSecondsPerToken[String(w)] = m.cpuSecondsPerToken;
  }
  return { out, runs };
}

export interface IndependentJobsResult {
  copies: number;
  /** Tokens/s of each copy (1 worker each), in start order. */
  each: number[];
  /** Sum of `each`: the tokens/s the machine gives `copies` training streams at once. */
  sum: number;
  /**
   * Share of the span from the first copy's timed start to the last copy's timed end during which
   * every copy was in its timed steps (1 = the timed windows coincide; 0 = they did not overlap at
   * all, and `sum` does not measure contention).
   */
  timedOverlap: number;
}

/** The child's JSON line: the by-workers figures plus each job's timed window. */
interface ChildLine extends WorkersBenchResult {
  timedWindowMs: Record<string, [number, number]>;
}

const THIS_FILE = fileURLToPath(import.meta.url);
const REPO_ROOT = path.resolve(path.dirname(THIS_FILE), '..');

/**
 * Runs `copies` independent 1-worker training jobs (each as in trainingTokensPerSecByWorkers with
 * `workers: [1]`, same steps, minibatch, seq, backend and checkpoint) at the same time, each in
 * its own node process (this file with `--json-only`), and waits for all. Every child loads its
 * backend and samples first and reports ready; only when all are ready are they told to start, so
 * their warm-up steps and then their timed steps run together.
 * @returns each copy's tokens/s, their sum and how much the timed windows overlapped.
 * @throws RangeError when `copies` is not an integer >= 1 or `steps` < 2 (no timed step).
 * @throws Error when a child fails (exits non-zero or prints no JSON line): its exit status and the
 *   last 2000 characters of its stderr; the other children are killed.
 */
export async function independentJobsTokensPerSec(o: Omit<WorkersBenchOptions, 'workers'>, copies = 2): Promise<IndependentJobsResult> {
  if (!(Number.isInteger(copies) && copies >= 1)) throw new RangeError(`copies must be an integer >= 1, got ${copies}`);
  const steps = o.steps ?? 6;
  if (!(Number.isInteger(steps) && steps >= 2)) throw new RangeError(`steps must be an integer >= 2 (the first is warm-up), got ${steps}`);
  const args = ['--import', 'tsx', THIS_FILE, '--json-only', '--workers', '1', '--checkpoint', o.checkpointDir, '--backend', o.backend,
    '--steps', String(steps), '--minibatch', String(o.minibatch ?? 16), '--seq', String(o.seq ?? 128)];
  const children = Array.from({ length: copies }, () => {
    const child = spawn(process.execPath, args, { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const failure = (code: number | null, signal: NodeJS.Signals | null, why: string) =>
      new Error(`independent training copy (pid ${child.pid}) ${why}: exit ${code ?? signal}; stderr tail:\n${stderr.slice(-2000)}`);
    const exited = new Promise<string>((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', (code, signal) => {
        const line = stdout.split('\n').reverse().find((l) => l.startsWith('{'));
        if (code === 0 && line) resolve(line);
        else reject(failure(code, signal, code === 0 ? 'printed no JSON line' : 'failed'));
      });
    });
    const ready = new Promise<void>((resolve, reject) => {
      child.once('message', () => resolve());
      exited.then(() => reject(failure(0, null, 'exited before it was ready')), reject);
    });
    return { child, ready, exited };
  });
  try {
    await Promise.all(children.map((c) => c.ready));
    for (const c of children) c.child.send('go');
    const lines = (await Promise.all(children.map((c) => c.exited))).map((l) => JSON.parse(l) as ChildLine);
    const each = lines.map((l) => l.tokensPerSec['1']);
    const windows = lines.map((l) => l.timedWindowMs['1']);
    const span = Math.max(...windows.map((w) => w[1])) - Math.min(...windows.map((w) => w[0]));
    const common = Math.min(...windows.map((w) => w[1])) - Math.max(...windows.map((w) => w[0]));
    return { copies, each, sum: each.reduce((a, b) => a + b, 0), timedOverlap: span > 0 ? Math.max(0, common) / span : 1 };
  } finally {
    for (const c of children) if (c.child.exitCode === null && c.child.signalCode === null) c.child.kill('SIGKILL');
    await Promise.allSettled(children.map((c) => c.exited));
  }
}

/** Runs `fn` on `--checkpoint DIR` when given, else on a fresh benchmark checkpoint. */
function withCheckpoint<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = flag('--checkpoint');
  return dir ? fn(dir) : withBenchCheckpoint(fn);
}

if (isMain(import.meta.url)) {
  const opts = { backend: backendFlag('wasm'), steps: Number(flag('--steps') ?? 6), minibatch: Number(flag('--minibatch') ?? 16), seq: Number(flag('--seq') ?? 128) };
  const independent = flag('--independent');
  if (process.argv.includes('--json-only')) {
    // a child of independentJobsTokensPerSec (or a plain run): one JSON line on stdout; on failure
    // the error on stderr and exit status 1
    await withCheckpoint(async (dir) => {
      const { out, runs } = await byWorkers({ ...opts, checkpointDir: dir, workers: workersFlag() }, async () => {
        if (!process.send) return;
        process.send('ready');
        await new Promise((resolve) => process.once('message', resolve));
        process.disconnect();
      });
      const timedWindowMs = Object.fromEntries(Object.entries(runs).map(([w, m]): [string, [number, number]] => [w, [m.timedStartMs, m.timedEndMs]]));
      console.log(JSON.stringify({ ...out, timedWindowMs } satisfies ChildLine));
    }).catch((err: unknown) => {
      console.error(err instanceof Error ? err.stack ?? err.message : err);
      process.exit(1);
    });
  } else if (independent !== undefined) {
    await withCheckpoint((dir) => printWithLoad(() => independentJobsTokensPerSec({ ...opts, checkpointDir: dir }, Number(independent))));
  } else {
    await withCheckpoint((dir) =>
      printWithLoad(async () => {
        const r = await trainingTokensPerSecByWorkers({ ...opts, checkpointDir: dir, workers: workersFlag() });
        return { ...r, ratio2over1: ratio2over1(r.tokensPerSec) };
      }),
    );
  }
}
