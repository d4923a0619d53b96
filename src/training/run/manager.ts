/**
 * Training jobs as a service (docs/protocol.md "Training jobs"), without the
 * HTTP layer: create / list / get / cancel jobs stored in the `training_jobs` table, run them one at
 * a time in a worker thread, and register each result as a new model version (status `candidate`,
 * or `active` when the job asked for activation).
 *
 * A job:
 *   1. reads its data: RL (`lamer`, `gigpo`, `grpo`, `rloo`) from completed training sessions
 *      (src/training/data/select.ts filter), SFT from a demonstration JSONL file;
 *   2. computes returns and advantages and writes them back to the step rows; groups whose
 *      advantages are all 0 are trained too (counted in the job's `config.dataStats`);
 *   3. trains in a worker thread (src/training/run/worker.ts) from the base version's checkpoint,
 *      recording progress and per-iteration metrics on the job row as they arrive;
 *   4. writes `<dataDir>/checkpoints/<version>/` and inserts the model version (parent, job id, data
 *      counts and final metrics in `metrics`).
 * Errors of a job fail that job (status `failed`, `error` set); they never throw out of the manager.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { DomainError, invalid } from '../../agent/errors.js';
import type { AsyncRepositories } from '../../db/async-repositories.js';
import type { ModelRow, TrainingJobRow } from '../../db/schema.js';
import { checkpointText, readCheckpointMetadata } from '../../model/checkpoint.js';
import type { PromptFormat } from '../../model/prompt-format.js';
import type { Tokenizer } from '../../model/tokenizers.js';
import { buildRlSamples, buildSftSamples, parseDemoJsonl, type Algorithm, type DataStats, type TrainingSample } from '../data/data.js';
import { JobCancelledError, type IterationMetrics, type JobResult, type TrainingHyper } from './job.js';
import type { ModelIOModule } from '../model-api.js';
import { DEFAULT_RETURNS, type ReturnMode } from '../maths/returns.js';
import { selectTrainingRecords, writeTurnScores, type DataFilter } from '../data/select.js';
import { buildRemoteBatch, writeRemoteBatch } from '../data/remote-dataset.js';
import { startTrainingWorker, type TrainingWorkerHandle } from './worker.js';

/** What a client asks for (the body of `POST /v1/training/jobs`). */
export interface CreateJobRequest {
  algorithm: Algorithm;
  /** RL data filter; ignored for SFT. */
  data?: DataFilter;
  /** SFT: path of a DemoSession JSONL file (src/envs/demos.ts). */
  demosPath?: string;
  /** Version to start from; default: the active version. */
  baseVersion?: string;
  /** Name of the new version; default `<algorithm>-<job id prefix>`. */
  version?: string;
  /** Activate the new version when the job succeeds. Default false. */
  activate?: boolean;
  hyper?: TrainingHyper & {
    gammaStep?: number;
    gammaTraj?: number;
    returnMode?: ReturnMode;
    invalidPenalty?: number;
    stepCoef?: number;
  };
}

/** The model registry as the manager needs it (src/agent/models.ts ModelRegistry fits). */
export interface VersionRegistry {
  active(): ModelRow;
  get(version: string): Promise<ModelRow | undefined>;
  activate(version: string): Promise<unknown>;
}

export interface ManagerLogger {
  info(o: object, msg?: string): void;
  warn(o: object, msg?: string): void;
  error(o: object, msg?: string): void;
}

export interface ManagerOptions {
  /** The `training_jobs` and `models` tables and training's session reads (`app.repos`). */
  repos: Pick<AsyncRepositories, 'jobs' | 'models' | 'trainingData'>;
  dataDir: string;
  registry: VersionRegistry;
  logger?: ManagerLogger;
  /** Model I/O for the worker; default the builtin GPT adapter. */
  modelIO?: ModelIOModule;
  /** Most jobs waiting in the queue (the running one not counted); one more is refused. Absent or 0: no bound. */
  maxQueuedJobs?: number;
  /** `Retry-After` seconds of that refusal (default 60). */
  queueRetryAfterSeconds?: number;
}

/** A queued job that cannot run as requested (base version gone, version name taken meanwhile, no training data): the job fails with this message. */
export class JobRequestError extends Error {
  constructor(message: string) { super(message); this.name = 'JobRequestError'; }
}

export class TrainingJobManager {
  private readonly queue: string[] = [];
  private running: { id: string; handle: TrainingWorkerHandle | null; cancelled: boolean } | null = null;
  private idle: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(private readonly opts: ManagerOptions) {}

  /**
   * Take over the jobs a previous process left: running ones failed with it (marked `failed`),
   * queued ones run again, in order. Call it once before the first job.
   * @throws DatabaseError when the store refuses the reads or the write.
   */
  async start(): Promise<void> {
    const { jobs } = this.opts.repos;
    await jobs.failRunning('server stopped while the job was running', Date.now());
    this.queue.push(...(await jobs.queuedIds()));
    this.pump();
  }

  /**
   * Queue a job.
   * @throws DomainError `overloaded` once the manager is closed (the server is shutting down);
   *   `validation` for an unknown base version (body/baseVersion), an SFT job without demosPath, or
   *   an SFT job on a remote base version (its weights are not here: nothing to train);
   *   `conflict` for a version name already taken; `too-many-jobs` (with Retry-After) when
   *   `maxQueuedJobs` jobs already wait.
   */
  async create(req: CreateJobRequest): Promise<TrainingJobRow> {
    if (this.closed) throw new DomainError('overloaded', 'the server is shutting down');
    const base = req.baseVersion ?? this.opts.registry.active().version;
    const baseRow = await this.opts.registry.get(base);
    if (!baseRow) throw invalid('body/baseVersion', `unknown base version '${base}'`);
    if (req.algorithm === 'sft' && !req.demosPath) throw invalid('body', 'an sft job needs demosPath');
    if (req.algorithm === 'sft' && baseRow.engine === 'openai') {
      throw invalid(req.baseVersion !== undefined ? 'body/baseVersion' : 'body/algorithm',
        `base version '${base}' is remote (its weights are not on this server): sft demonstrations are trained elsewhere from the demos file itself; RL jobs on it write a training batch instead`);
    }
    if (req.version !== undefined && (await this.opts.registry.get(req.version))) throw new DomainError('conflict', `model version '${req.version}' already exists`);
    const bound = this.opts.maxQueuedJobs ?? 0;
    if (bound > 0 && this.queue.length >= bound) {
      throw new DomainError('too-many-jobs', `${this.queue.length} training jobs are queued (limit ${bound}, LAMER_TRAIN_MAX_QUEUED_JOBS); wait for them or cancel some, then send the job again`, {
        retryAfterSeconds: this.opts.queueRetryAfterSeconds ?? 60,
      });
    }
    const id = `job_${randomUUID().replace(/-/g, '').slice(0, 16)}`;
    const row = {
      id, algorithm: req.algorithm, status: 'queued' as const, config: { ...req, baseVersion: base } as Record<string, unknown>,
      progress: 0, metrics: [] as unknown[], resultVersion: null, error: null, createdAt: Date.now(), startedAt: null, finishedAt: null,
    };
    await this.opts.repos.jobs.insert(row);
    const created = (await this.get(id))!;
    this.queue.push(id);
    this.pump();
    return created;
  }

  get(id: string): Promise<TrainingJobRow | undefined> {
    return this.opts.repos.jobs.get(id);
  }

  list(limit = 50): Promise<TrainingJobRow[]> {
    return this.opts.repos.jobs.recent(limit);
  }

  /** Whether a job is queued or running. */
  busy(): boolean {
    return this.running !== null || this.queue.length > 0;
  }

  /**
   * Cancel a queued or running job (a running one stops after its current iteration).
   * @returns the row, or undefined for an unknown id. Finished jobs are returned unchanged.
   */
  async cancel(id: string): Promise<TrainingJobRow | undefined> {
    const row = await this.get(id);
    if (!row) return undefined;
    if (row.status === 'queued') {
      const i = this.queue.indexOf(id);
      if (i >= 0) this.queue.splice(i, 1);
      await this.finish(id, { status: 'cancelled' });
    } else if (row.status === 'running' && this.running?.id === id) {
      this.running.cancelled = true;
      this.running.handle?.cancel();
    }
    return this.get(id);
  }

  /** Resolves when no job is queued or running. */
  async whenIdle(): Promise<void> {
    while (this.busy()) await this.idle;
  }

  /** Stop taking jobs, cancel the running one and wait for it. */
  async close(): Promise<void> {
    this.closed = true;
    this.queue.length = 0;
    if (this.running) {
      this.running.cancelled = true;
      this.running.handle?.cancel();
    }
    await this.idle;
  }

  private pump(): void {
    if (this.running || this.queue.length === 0 || this.closed) return;
    const id = this.queue.shift()!;
    this.running = { id, handle: null, cancelled: false };
    this.idle = this.runJob(id)
      .catch((err: unknown) => {
        // A bookkeeping write refused by the database (locked by another process, disk full):
        // the job's row keeps its last state (a `running` row is marked failed at the next start).
        // Logged, never an unhandled rejection that would stop the server.
        this.opts.logger?.error({ jobId: id, err: String(err) }, 'training job could not record its state in the database');
      })
      .finally(() => {
        this.running = null;
        this.pump();
      });
  }

  private finish(id: string, set: Partial<Pick<TrainingJobRow, 'status' | 'error' | 'resultVersion' | 'progress'>>): Promise<void> {
    return this.opts.repos.jobs.update(id, { ...set, finishedAt: Date.now() });
  }

  private async runJob(id: string): Promise<void> {
    const { logger } = this.opts;
    const { jobs } = this.opts.repos;
    const row = await this.get(id);
    if (!row) return;
    const req = row.config as unknown as CreateJobRequest & { baseVersion: string };
    await jobs.update(id, { status: 'running', startedAt: Date.now() });
    logger?.info({ jobId: id, algorithm: req.algorithm, baseVersion: req.baseVersion }, 'training job started');
    try {
      const base = await this.opts.registry.get(req.baseVersion);
      if (!base) throw new JobRequestError(`base version '${req.baseVersion}' no longer exists`);
      if (base.engine === 'openai') {
        await this.exportRemoteBatch(id, req, base);
        return;
      }
      const { samples, stats } = await this.prepare(req, base.checkpointDir);
      await jobs.update(id, { config: { ...row.config, dataStats: stats } });
      logger?.info({ jobId: id, ...stats }, 'training data ready');
      if (samples.length === 0) {
        throw new JobRequestError(`no training samples: ${stats.sessions} sessions, ${stats.turns} turns with a model output, ${stats.droppedTurns} dropped`);
      }
      if (this.running?.cancelled) throw new JobCancelledError();
      const version = req.version ?? `${req.algorithm}-${id.slice(4, 12)}`;
      if (await this.opts.registry.get(version)) throw new JobRequestError(`model version '${version}' already exists`);
      const outputDir = path.join(this.opts.dataDir, 'checkpoints', version);
      const metrics: IterationMetrics[] = [];
      const handle = startTrainingWorker({
        spec: { algorithm: req.algorithm, baseCheckpointDir: base.checkpointDir, outputDir, hyper: req.hyper, dataStats: stats, meta: { version, parent: base.version, jobId: id } },
        samples,
        modelIO: this.opts.modelIO,
      }, (p) => {
        metrics.push(p.metrics);
        jobs.update(id, { progress: p.progress, metrics }).catch((err: unknown) => {
          logger?.warn({ jobId: id, err: String(err) }, 'training progress could not be recorded');
        });
        logger?.info({ jobId: id, iteration: p.iteration, of: p.totalIterations, loss: p.metrics.loss, entropy: p.metrics.entropy, clipFrac: p.metrics.clipFrac, approxKl: p.metrics.approxKl, tokensPerSec: Math.round(p.metrics.tokensPerSec) }, 'training iteration');
      });
      if (this.running) this.running.handle = handle;
      if (this.running?.cancelled) handle.cancel();
      const result: JobResult = await handle.done;
      await this.opts.repos.models.insert({
        version, parent: base.version, jobId: id, checkpointDir: outputDir, status: 'candidate',
        metrics: { algorithm: req.algorithm, data: stats, iterations: result.iterations, final: result.metrics[result.metrics.length - 1] ?? null, seconds: result.seconds, behaviorLogprobGap: result.behaviorLogprobGap },
        createdAt: Date.now(),
      });
      // activate before the job reads as succeeded, so a client that waits for the job sees the
      // new version active
      let activationError: string | null = null;
      if (req.activate) {
        try {
          await this.opts.registry.activate(version);
          logger?.info({ jobId: id, version }, 'model version activated');
        } catch (err) {
          logger?.error({ jobId: id, version, err: String(err) }, 'activation after training failed');
          activationError = `trained, but activation failed: ${String(err)}`;
        }
      }
      await this.finish(id, { status: 'succeeded', resultVersion: version, progress: 1, ...(activationError ? { error: activationError } : {}) });
      logger?.info({ jobId: id, version, seconds: result.seconds }, 'training job succeeded');
    } catch (err) {
      if (err instanceof JobCancelledError) {
        await this.finish(id, { status: 'cancelled' });
        logger?.info({ jobId: id }, 'training job cancelled');
      } else {
        const message = err instanceof Error ? err.message : String(err);
        await this.finish(id, { status: 'failed', error: message });
        logger?.error({ jobId: id, err: message }, 'training job failed');
      }
    }
  }

  /**
   * A job on a remote base version: its weights live elsewhere, so the job writes the LaMer
   * training batch (token ids, old logprobs, returns, advantages; src/training/data/remote-dataset.ts)
   * to `<dataDir>/datasets/<jobId>/` for an external trainer (sessions of that version unless the
   * job's data filter names another) and succeeds without a new version
   * (register the externally trained one with POST /v1/models, parent = this base).
   */
  private async exportRemoteBatch(id: string, req: CreateJobRequest, base: ModelRow): Promise<void> {
    if (req.algorithm === 'sft') throw new JobRequestError(`base version '${base.version}' is remote: SFT demonstrations are trained elsewhere from the demos file itself`);
    const h = req.hyper ?? {};
    const returns = { gammaStep: h.gammaStep ?? DEFAULT_RETURNS.gammaStep, gammaTraj: h.gammaTraj ?? DEFAULT_RETURNS.gammaTraj, mode: h.returnMode ?? DEFAULT_RETURNS.mode };
    const { lines, stats, scores } = await buildRemoteBatch(this.opts.repos.trainingData, { algorithm: req.algorithm, data: { modelVersion: base.version, ...(req.data ?? {}) }, returns, invalidPenalty: h.invalidPenalty, stepCoef: h.stepCoef });
    if (lines.length === 0) throw new JobRequestError(`no training samples: ${stats.sessions} sessions, ${stats.turns} turns with a model output, ${stats.droppedTurns} dropped`);
    await writeTurnScores(this.opts.repos.trainingData, scores);
    const remote = { ...(base.engineConfig ?? {}) } as Record<string, unknown>;
    delete remote.apiKey;
    const dir = path.join(this.opts.dataDir, 'datasets', id);
    const file = await writeRemoteBatch(dir, lines, { jobId: id, algorithm: req.algorithm, baseVersion: base.version, remote, returns, invalidPenalty: h.invalidPenalty ?? null, stepCoef: h.stepCoef ?? null, data: stats });
    const row = (await this.get(id))!;
    await this.opts.repos.jobs.update(id, { config: { ...row.config, dataStats: stats, dataset: { path: file, samples: lines.length } } });
    await this.finish(id, { status: 'succeeded', resultVersion: null, progress: 1 });
    this.opts.logger?.info({ jobId: id, path: file, samples: lines.length }, 'remote base version: training batch written for an external trainer');
  }

  private async prepare(req: CreateJobRequest, checkpointDir: string): Promise<{ samples: TrainingSample[]; stats: DataStats }> {
    const h = req.hyper ?? {};
    if (req.algorithm === 'sft') {
      const demos = parseDemoJsonl(await readFile(req.demosPath!, 'utf8'));
      const blockSize = await this.blockSize(checkpointDir);
      return buildSftSamples(demos, { blockSize, pack: h.pack ?? true, ...(await this.text(checkpointDir)) });
    }
    // Sessions of remote versions hold another model's token ids: never train the local model on them.
    const remote = new Set(await this.opts.repos.models.remoteVersions());
    const records = (await selectTrainingRecords(this.opts.repos.trainingData, req.data ?? {})).filter((r) => !remote.has(r.modelVersion));
    const built = buildRlSamples(records, {
      algorithm: req.algorithm,
      returns: { gammaStep: h.gammaStep ?? DEFAULT_RETURNS.gammaStep, gammaTraj: h.gammaTraj ?? DEFAULT_RETURNS.gammaTraj, mode: h.returnMode ?? DEFAULT_RETURNS.mode },
      invalidPenalty: h.invalidPenalty,
      stepCoef: h.stepCoef,
      // each attempt's acting turns, then its reflection, in one sample where the served prompts
      // extend each other (the job unpacks any that do not fit the loaded model's block)
      pack: h.pack ?? true,
      blockSize: await this.blockSize(checkpointDir),
      tokenizer: (await this.text(checkpointDir)).tokenizer,
    });
    await writeTurnScores(this.opts.repos.trainingData, built.scores);
    return built;
  }

  /** Tokenizer and prompt format of a checkpoint; none (byte, chat) when the folder is not one. */
  private async text(dir: string): Promise<{ tokenizer?: Tokenizer; format?: PromptFormat }> {
    let meta;
    try {
      meta = await readCheckpointMetadata(dir);
    } catch {
      return {};
    }
    const t = checkpointText(meta);
    return { tokenizer: t.tokenizer, format: t.promptFormat };
  }

  /** Context length of a checkpoint: the builtin GPT's block_size, or 1024 when the folder is not one. */
  private async blockSize(dir: string): Promise<number> {
    try {
      return (await readCheckpointMetadata(dir)).config.block_size;
    } catch {
      return 1024;
    }
  }
}
