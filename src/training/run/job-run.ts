/**
 * Running one training job that the manager (./manager.ts) claimed from the queue:
 *   1. reads its data (./job-data.ts): RL (`lamer`, `gigpo`, `grpo`, `rloo`) from completed
 *      training sessions (src/training/data/select.ts filter), SFT from a demonstration JSONL file;
 *   2. computes returns and advantages and writes them back to the step rows; groups whose
 *      advantages are all 0 are trained too (counted in the job's `config.dataStats`);
 *   3. trains in a worker thread (src/training/run/worker.ts) from the base version's checkpoint,
 *      recording progress and per-iteration metrics on the job row as they arrive;
 *   4. writes `<dataDir>/checkpoints/<version>/` and inserts the model version (parent, job id, data
 *      counts and final metrics in `metrics`);
 *   5. with a promotion gate (./gate-run.ts), compares the new version with the active one on
 *      held-out tasks in a worker thread and activates it only when it beats the active one by the
 *      gate's margin; the job stays `running` meanwhile. Without one, activates it when asked.
 * A job on a remote base version writes a training batch for an external trainer instead.
 * Errors of a job fail that job (status `failed`, `error` set); they never throw out of here.
 */
import path from 'node:path';
import type { AsyncRepositories } from '../../db/async-repositories.js';
import type { ModelRow, TrainingJobRow } from '../../db/schema.js';
import type { GateSpec } from '../../shared/promotion-gate.js';
import type { ModelIOModule } from '../model-api.js';
import { pendingReport } from './gate.js';
import { runGate, type GateSettings } from './gate-run.js';
import { JobCancelledError, type IterationMetrics, type JobResult } from './job.js';
import { prepareJobData, writeRemoteJobBatch } from './job-data.js';
import { JobRequestError, type CreateJobRequest, type ManagerLogger, type VersionRegistry } from './job-request.js';
import { startTrainingWorker } from './worker.js';

/** What running a job needs of the server (the job manager's options, ./manager.ts ManagerOptions). */
export interface JobRunContext {
  /** The `training_jobs` and `models` tables and training's session reads (`app.repos`). */
  repos: Pick<AsyncRepositories, 'jobs' | 'models' | 'trainingData'>;
  dataDir: string;
  registry: VersionRegistry;
  logger?: ManagerLogger;
  /** Model I/O for the worker; default the builtin GPT adapter. */
  modelIO?: ModelIOModule;
  /** How promotion gates evaluate; without it a job with a gate is refused. */
  gate?: GateSettings;
}

/**
 * The job a server runs now, shared with its manager: `handle` cancels the worker of the current
 * step (training or gate); `cancelled` is set when the job is to stop; `lostLease` when it stops
 * because the trainer lease was lost.
 */
export interface RunningJob {
  id: string;
  handle: { cancel(): void } | null;
  cancelled: boolean;
  lostLease: boolean;
}

/** Record job `id`'s end: `set` and `finishedAt` now. */
function finish(
  ctx: JobRunContext, id: string, set: Partial<Pick<TrainingJobRow, 'status' | 'error' | 'resultVersion' | 'progress'>>,
): Promise<void> {
  return ctx.repos.jobs.update(id, { ...set, finishedAt: Date.now() });
}

/**
 * Run the claimed job `run.id` to its end, recorded on its row: `succeeded` (with its new version,
 * or its training batch for a remote base version), `cancelled` (when `run.cancelled` is set), or
 * `failed` with its error (also when `run.lostLease` is set). Job errors never throw out of here.
 * @throws DatabaseError when the store refuses a bookkeeping write of the job's row.
 */
export async function runJob(ctx: JobRunContext, run: RunningJob): Promise<void> {
  const { id } = run;
  const { logger } = ctx;
  const { jobs } = ctx.repos;
  const row = await jobs.get(id);
  if (!row) return;
  const req = row.config as unknown as CreateJobRequest & { baseVersion: string };
  logger?.info({ jobId: id, algorithm: req.algorithm, baseVersion: req.baseVersion }, 'training job started');
  try {
    const base = await ctx.registry.get(req.baseVersion);
    if (!base) throw new JobRequestError(`base version '${req.baseVersion}' no longer exists`);
    if (base.engine === 'openai') {
      await exportRemoteBatch(ctx, id, req, base);
      return;
    }
    const { samples, stats, taskIds } = await prepareJobData(ctx.repos, req, base.checkpointDir);
    await jobs.update(id, { config: { ...row.config, dataStats: stats } });
    logger?.info({ jobId: id, ...stats }, 'training data ready');
    if (samples.length === 0) {
      throw new JobRequestError(`no training samples: ${stats.sessions} sessions, ${stats.turns} turns with a model output, ${stats.droppedTurns} dropped`);
    }
    if (run.cancelled) throw new JobCancelledError();
    const version = req.version ?? `${req.algorithm}-${id.slice(4, 12)}`;
    if (await ctx.registry.get(version)) throw new JobRequestError(`model version '${version}' already exists`);
    const outputDir = path.join(ctx.dataDir, 'checkpoints', version);
    const metrics: IterationMetrics[] = [];
    const handle = startTrainingWorker({
      spec: { algorithm: req.algorithm, baseCheckpointDir: base.checkpointDir, outputDir, hyper: req.hyper, dataStats: stats, meta: { version, parent: base.version, jobId: id } },
      samples,
      modelIO: ctx.modelIO,
    }, (p) => {
      metrics.push(p.metrics);
      jobs.update(id, { progress: p.progress, metrics }).catch((err: unknown) => {
        logger?.warn({ jobId: id, err: String(err) }, 'training progress could not be recorded');
      });
      logger?.info({ jobId: id, iteration: p.iteration, of: p.totalIterations, loss: p.metrics.loss, entropy: p.metrics.entropy, clipFrac: p.metrics.clipFrac, approxKl: p.metrics.approxKl, tokensPerSec: Math.round(p.metrics.tokensPerSec) }, 'training iteration');
    });
    run.handle = handle;
    if (run.cancelled) handle.cancel();
    const result: JobResult = await handle.done;
    await ctx.repos.models.insert({
      version, parent: base.version, jobId: id, checkpointDir: outputDir, status: 'candidate',
      metrics: {
        algorithm: req.algorithm, data: stats, iterations: result.iterations, final: result.metrics[result.metrics.length - 1] ?? null,
        seconds: result.seconds, behaviorLogprobGap: result.behaviorLogprobGap,
        ...(req.gate ? { gate: { ...pendingReport(req.gate), candidate: version } } : {}),
      },
      createdAt: Date.now(),
    });
    // activate (or gate) before the job reads as succeeded, so a client that waits for the job
    // sees the new version active
    const after = req.gate
      ? await runJobGate(ctx, run, req.gate, version, outputDir, taskIds)
      : { cancelled: false, error: await activateTrained(ctx, id, version, req.activate) };
    if (after.cancelled && run.lostLease) throw new JobCancelledError();
    if (after.cancelled) {
      await finish(ctx, id, { status: 'cancelled', resultVersion: version });
      logger?.info({ jobId: id, version }, 'training job cancelled during its promotion gate; the version stays a candidate');
      return;
    }
    await finish(ctx, id, { status: 'succeeded', resultVersion: version, progress: 1, ...(after.error ? { error: after.error } : {}) });
    logger?.info({ jobId: id, version, seconds: result.seconds }, 'training job succeeded');
  } catch (err) {
    if (err instanceof JobCancelledError && run.lostLease) {
      const error = 'this server lost the trainer lease (its database connection broke) while the job ran';
      await finish(ctx, id, { status: 'failed', error });
      logger?.error({ jobId: id }, 'training job stopped: trainer lease lost');
    } else if (err instanceof JobCancelledError) {
      await finish(ctx, id, { status: 'cancelled' });
      logger?.info({ jobId: id }, 'training job cancelled');
    } else {
      const message = err instanceof Error ? err.message : String(err);
      await finish(ctx, id, { status: 'failed', error: message });
      logger?.error({ jobId: id, err: message }, 'training job failed');
    }
  }
}

/** Activate `version` when the job asked for it. @returns the job's error text when activation failed, else null. */
async function activateTrained(ctx: JobRunContext, id: string, version: string, activate: boolean | undefined): Promise<string | null> {
  if (!activate) return null;
  try {
    await ctx.registry.activate(version);
    ctx.logger?.info({ jobId: id, version }, 'model version activated');
    return null;
  } catch (err) {
    ctx.logger?.error({ jobId: id, version, err: String(err) }, 'activation after training failed');
    return `trained, but activation failed: ${String(err)}`;
  }
}

/** Run job `run.id`'s promotion gate on its new version (./gate-run.ts). */
function runJobGate(
  ctx: JobRunContext, run: RunningJob, spec: GateSpec, version: string, checkpointDir: string, taskIds: readonly string[],
): Promise<{ cancelled: boolean; error: string | null }> {
  const settings = ctx.gate;
  if (!settings) return Promise.resolve({ cancelled: false, error: 'trained, but this server runs no promotion gates' });
  return runGate({
    repos: ctx.repos, registry: ctx.registry, dataDir: ctx.dataDir, settings, logger: ctx.logger,
    onHandle: (handle) => {
      run.handle = handle;
      if (run.cancelled) handle.cancel();
    },
  }, run.id, spec, version, checkpointDir, taskIds);
}
/**
 * A job on a remote base version (./job-data.ts writeRemoteJobBatch): writes the training batch,
 * records its path on the job row and succeeds without a new version (register the externally
 * trained one with POST /v1/models, parent = this base).
 */
async function exportRemoteBatch(ctx: JobRunContext, id: string, req: CreateJobRequest, base: ModelRow): Promise<void> {
  const { file, samples, stats } = await writeRemoteJobBatch(ctx.repos.trainingData, ctx.dataDir, id, req, base);
  const row = (await ctx.repos.jobs.get(id))!;
  await ctx.repos.jobs.update(id, { config: { ...row.config, dataStats: stats, dataset: { path: file, samples } } });
  await finish(ctx, id, { status: 'succeeded', resultVersion: null, progress: 1 });
  ctx.logger?.info({ jobId: id, path: file, samples }, 'remote base version: training batch written for an external trainer');
}
