/**
 * Runs a training job in a worker thread so that the server keeps answering steps
 * (docs/architecture.md "The policy engine and the model"). The parent posts one `start` message;
 * the worker answers with `progress` messages (one per iteration, with metrics), then exactly one
 * of `done`, `cancelled` or `error`. A crash of the worker (uncaught error, non-zero exit, out of
 * memory) rejects the job's promise; it never throws in the parent.
 *
 * Under tsx the worker file is TypeScript. `execArgv: ['--import', 'tsx']` does not apply to a
 * worker's entry module on Node 20, so the worker starts from src/shared/worker-bootstrap.mjs
 * (src/shared/worker-channel.ts spawnEntry, called by src/training/run/job-thread.ts), which
 * registers tsx's ESM loader in the worker thread (`tsx/esm/api` register) and then imports
 * worker-entry.ts. When this file runs compiled (.js),
 * worker-entry.js is started directly.
 */
import type { TrainingSample } from '../data/data.js';
import { JobCancelledError, type JobProgress, type JobResult, type TrainingJobSpec } from './job.js';
import type { ModelIOModule } from '../model-api.js';
import { startJobThread } from './job-thread.js';

/** What the worker needs: the job, its samples and where to get the model I/O from. */
export interface WorkerJobRequest {
  spec: TrainingJobSpec;
  samples: TrainingSample[];
  /** Default: src/training/run/gpt-adapter.ts `createModelIO({ backend: 'auto' })`. */
  modelIO?: ModelIOModule;
}

export type ParentToWorker = { type: 'start'; request: WorkerJobRequest } | { type: 'cancel' };
export type WorkerToParent =
  | { type: 'progress'; progress: JobProgress }
  | { type: 'done'; result: JobResult }
  | { type: 'cancelled' }
  | { type: 'error'; error: { name: string; message: string; stack?: string } };

export class TrainingJobError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TrainingJobError';
  }
}

export interface TrainingWorkerHandle {
  /** Resolves with the result; rejects with JobCancelledError or TrainingJobError. */
  readonly done: Promise<JobResult>;
  /** Ask the job to stop after the current iteration; the worker is terminated after `graceMs`. */
  cancel(graceMs?: number): void;
  /** Worker thread id (for logs). */
  readonly threadId: number;
}

const EXT = import.meta.url.endsWith('.js') ? '.js' : '.ts';
export const DEFAULT_MODEL_IO: ModelIOModule = { module: new URL(`./gpt-adapter${EXT}`, import.meta.url).href, exportName: 'createModelIO' };

/**
 * Start a job in a new worker thread.
 * @param onProgress called in the parent for each iteration.
 */
export function startTrainingWorker(request: WorkerJobRequest, onProgress?: (p: JobProgress) => void): TrainingWorkerHandle {
  const start = { type: 'start', request } satisfies ParentToWorker;
  return startJobThread<JobResult, WorkerToParent>('./worker-entry', import.meta.url, start, {
    onMessage(msg) {
      if (msg.type === 'progress') {
        try { onProgress?.(msg.progress); } catch { /* a listener bug must not kill the job */ }
      } else if (msg.type === 'done') return { value: msg.result };
      else if (msg.type === 'cancelled') return { error: new JobCancelledError() };
      else if (msg.type === 'error') {
        const e = new TrainingJobError(`${msg.error.name}: ${msg.error.message}`);
        if (msg.error.stack) e.stack = msg.error.stack;
        return { error: e };
      }
      return null;
    },
    crashed: (err) => new TrainingJobError(`training worker crashed: ${err.message}`, { cause: err }),
    exited: (code, cancelling) =>
      cancelling ? new JobCancelledError() : new TrainingJobError(`training worker exited with code ${code} before finishing`),
  });
}
