import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TrainingSample } from '../../../src/training/data/data.js';
import { JobCancelledError } from '../../../src/training/run/job.js';
import { startTrainingWorker, TrainingJobError } from '../../../src/training/run/worker.js';
import { TinyModel, writeTinyCheckpoint } from '../tiny-model.js';

let dir: string;
const tiny = (options: Record<string, unknown> = {}) => ({ module: new URL('../tiny-model.ts', import.meta.url).href, options });
const sample = (output: number, advantage: number): TrainingSample =>
  ({ sessionId: 's', taskId: 't', attempt: 0, step: 0, kind: 'action', promptTokenIds: [1, 2], outputTokenIds: [output], oldLogprobs: [-2], advantage, return: 0 });
const samples = [sample(3, 1), sample(4, -1), sample(5, 1), sample(6, -1)];
const spec = (name: string, epochs = 2) => ({ algorithm: 'rloo' as const, baseCheckpointDir: join(dir, 'base'), outputDir: join(dir, name), hyper: { lr: 0.01, epochs, minibatchSize: 2 } });

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'lamer-worker-'));
  const { default: tf } = await import('@tensorflow/tfjs').then((m) => ({ default: m }));
  await tf.setBackend('cpu');
  const m = TinyModel.init(8, 4, 16);
  await writeTinyCheckpoint(join(dir, 'base'), m);
});
afterAll(async () => { await rm(dir, { recursive: true, force: true }); });

describe('startTrainingWorker', () => {
  it('runs the job off the main thread: progress arrives while the main event loop keeps ticking', async () => {
    let ticks = 0;
    const timer = setInterval(() => { ticks++; }, 5);
    const seen: number[] = [];
    const h = startTrainingWorker({ spec: spec('ok', 3), samples, modelIO: tiny({ slowMs: 60 }) }, (p) => seen.push(p.iteration));
    const res = await h.done;
    clearInterval(timer);
    expect(res.iterations).toBe(6);
    expect(seen).toEqual([1, 2, 3, 4, 5, 6]);
    // 6 training + 2 logprob forwards at >= 60 ms each blocked only the worker
    expect(ticks).toBeGreaterThan(20);
    expect((await stat(join(dir, 'ok', 'tiny.json'))).isFile()).toBe(true);
  });
  it('cancel stops the job', async () => {
    let h: ReturnType<typeof startTrainingWorker> | undefined;
    h = startTrainingWorker({ spec: spec('cancelled', 50), samples, modelIO: tiny({ slowMs: 20 }) }, (p) => { if (p.iteration === 1) h!.cancel(); });
    await expect(h.done).rejects.toBeInstanceOf(JobCancelledError);
    await expect(stat(join(dir, 'cancelled'))).rejects.toThrow(/ENOENT/);
  });
  it('an exception inside the job fails the job with its message', async () => {
    const h = startTrainingWorker({ spec: spec('fail'), samples, modelIO: tiny({ failLoad: true }) });
    await expect(h.done).rejects.toThrow(TrainingJobError);
    await expect(h.done).rejects.toThrow(/load failed on purpose/);
  });
  it('an uncaught error in the worker fails the job, not the parent', async () => {
    const h = startTrainingWorker({ spec: spec('uncaught', 50), samples, modelIO: tiny({ crash: 'uncaught', slowMs: 20 }) });
    await expect(h.done).rejects.toThrow(/crashed: tiny model: uncaught crash on purpose/);
  });
  it('a worker that exits fails the job', async () => {
    const h = startTrainingWorker({ spec: spec('exit'), samples, modelIO: tiny({ crash: 'exit' }) });
    await expect(h.done).rejects.toThrow(/exited with code 3/);
  });
  it('a module without the factory fails the job', async () => {
    const h = startTrainingWorker({ spec: spec('nofactory'), samples, modelIO: { module: new URL('../tiny-model.ts', import.meta.url).href, exportName: 'nope' } });
    await expect(h.done).rejects.toThrow(/has no function nope/);
  });
});
