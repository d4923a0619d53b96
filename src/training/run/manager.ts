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
 *      counts and final metrics in `metrics`);
 *   5. with a promotion gate (./gate-run.ts), compares the new version with the active one on
 *      held-out tasks in a worker thread and activates it only when it beats the active one by the
 *      gate's margin; the job stays `running` meanwhile.
 * Errors of a job fail that job (status `failed`, `error` set); they never throw out of the manager.
 */
import { rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { DomainError, invalid } from '../../agent/errors.js';
import type { Repositories } from '../../db/repositories.js';
import type { ModelRow, TrainingJobRow } from '../../db/schema.js';
import { checkpointText, readCheckpointMetadata } from '../../model/checkpoint.js';
import type { PromptFormat } from '../../model/prompt-format.js';
import type { Tokenizer } from '../../model/tokenizers.js';
import { buildRlSamples, buildSftSamples, parseDemoJsonl, type Algorithm, type DataStats, type TrainingSample } from '../data/data.js';
import { JobCancelledError, type IterationMetrics, type JobResult, type TrainingHyper } from './job.js';
import type { ModelIOModule } from '../model-api.js';
import { DEFAULT_RETURNS, type ReturnMode } from '../maths/returns.js';
import type { ReflectionGroup } from '../../domain.js';
import { selectTrainingRecords, trainingTaskIds, writeTurnScores, type DataFilter } from '../data/select.js';
import { buildRemoteBatch, writeRemoteBatch } from '../data/remote-dataset.js';
import { startTrainingWorker } from './worker.js';
import { gateOverlap, type GateSpec } from '../../shared/promotion-gate.js';
import { pendingReport, type GateReport } from './gate.js';
import { gateWorkDir, runGate, type GateSettings } from './gate-run.js';

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
  /** Promotion gate: activate the new version only when it beats the active one on held-out tasks (never together with `activate`). */
  gate?: GateSpec;
  hyper?: TrainingHyper & {
    gammaStep?: number;
    gammaTraj?: number;
    returnMode?: ReturnMode;
    invalidPenalty?: number;
    stepCoef?: number;
    reflectionGroup?: ReflectionGroup;
  };
}

/** The model registry as the manager needs it (src/agent/models.ts ModelRegistry fits). */
export interface VersionRegistry {
  active(): ModelRow;
  get(version: string): ModelRow | undefined;
  activate(version: string): Promise<unknown>;
}

export interface ManagerLogger {
  info(o: object, msg?: string): void;
  warn(o: object, msg?: string): void;
  error(o: object, msg?: string): void;
}

export interface ManagerOptions {
  /** The `training_jobs` and `models` tables and training's session reads (`app.repos`). */
  repos: Pick<Repositories, 'jobs' | 'models' | 'trainingData'>;
  dataDir: string;
  registry: VersionRegistry;
  logger?: ManagerLogger;
  /** Model I/O for the worker; default the builtin GPT adapter. */
  modelIO?: ModelIOModule;
  /** Most jobs waiting in the queue (the running one not counted); one more is refused. Absent or 0: no bound. */
  maxQueuedJobs?: number;
  /** `Retry-After` seconds of that refusal (default 60). */
  queueRetryAfterSeconds?: number;
  /** How promotion gates evaluate; without it a job with a gate is refused. */
  gate?: GateSettings;
}

/** A job's samples, their counts and the task ids they come from. */
interface PreparedData {
  samples: TrainingSample[];
  stats: DataStats;
  taskIds: string[];
}

/** A queued job that cannot run as requested (base version gone, version name taken meanwhile, no training data): the job fails with this message. */
export class JobRequestError extends Error {
  constructor(message: string) { super(message); this.name = 'JobRequestError'; }
}

export class TrainingJobManager {
  private readonly queue: string[] = [];
  private running: { id: string; handle: { cancel(): void } | null; cancelled: boolean } | null = null;
  private idle: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(private readonly opts: ManagerOptions) {
    // jobs left by a previous process: running ones failed with it, queued ones run again
    const { jobs } = opts.repos;
    this.endInterruptedGates();
    jobs.failRunning('server stopped while the job was running', Date.now());
    this.queue.push(...jobs.queuedIds());
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
  create(req: CreateJobRequest): TrainingJobRow {
    if (this.closed) throw new DomainError('overloaded', 'the server is shutting down');
    const base = req.baseVersion ?? this.opts.registry.active().version;
    const baseRow = this.opts.registry.get(base);
    if (!baseRow) throw invalid('body/baseVersion', `unknown base version '${base}'`);
    if (req.algorithm === 'sft' && !req.demosPath) throw invalid('body', 'an sft job needs demosPath');
    if (req.algorithm === 'sft' && baseRow.engine === 'openai') {
      throw invalid(req.baseVersion !== undefined ? 'body/baseVersion' : 'body/algorithm',
        `base version '${base}' is remote (its weights are not on this server): sft demonstrations are trained elsewhere from the demos file itself; RL jobs on it write a training batch instead`);
    }
    if (req.version !== undefined && this.opts.registry.get(req.version)) throw new DomainError('conflict', `model version '${req.version}' already exists`);
    if (req.gate) this.checkGate(req, baseRow);
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
    this.opts.repos.jobs.insert(row);
    this.queue.push(id);
    this.pump();
    return this.get(id)!;
  }

  get(id: string): TrainingJobRow | undefined {
    return this.opts.repos.jobs.get(id);
  }

  list(limit = 50): TrainingJobRow[] {
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
  cancel(id: string): TrainingJobRow | undefined {
    const row = this.get(id);
    if (!row) return undefined;
    if (row.status === 'queued') {
      const i = this.queue.indexOf(id);
      if (i >= 0) this.queue.splice(i, 1);
      this.finish(id, { status: 'cancelled' });
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
    if (this.running) this.cancel(this.running.id);
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

  private finish(id: string, set: Partial<Pick<TrainingJobRow, 'status' | 'error' | 'resultVersion' | 'progress'>>): void {
    this.opts.repos.jobs.update(id, { ...set, finishedAt: Date.now() });
  }

  private async runJob(id: string): Promise<void> {
    const { logger } = this.opts;
    const { jobs } = this.opts.repos;
    const row = this.get(id);
    if (!row) return;
    const req = row.config as unknown as CreateJobRequest & { baseVersion: string };
    jobs.update(id, { status: 'running', startedAt: Date.now() });
    logger?.info({ jobId: id, algorithm: req.algorithm, baseVersion: req.baseVersion }, 'training job started');
    try {
      const base = this.opts.registry.get(req.baseVersion);
      if (!base) throw new JobRequestError(`base version '${req.baseVersion}' no longer exists`);
      if (base.engine === 'openai') {
        await this.exportRemoteBatch(id, req, base);
        return;
      }
      const { samples, stats, taskIds } = await this.prepare(req, base.checkpointDir);
      jobs.update(id, { config: { ...row.config, dataStats: stats } });
      logger?.info({ jobId: id, ...stats }, 'training data ready');
      if (samples.length === 0) {
        throw new JobRequestError(`no training samples: ${stats.sessions} sessions, ${stats.turns} turns with a model output, ${stats.droppedTurns} dropped`);
      }
      if (this.running?.cancelled) throw new JobCancelledError();
      const version = req.version ?? `${req.algorithm}-${id.slice(4, 12)}`;
      if (this.opts.registry.get(version)) throw new JobRequestError(`model version '${version}' already exists`);
      const outputDir = path.join(this.opts.dataDir, 'checkpoints', version);
      const metrics: IterationMetrics[] = [];
      const handle = startTrainingWorker({
        spec: { algorithm: req.algorithm, baseCheckpointDir: base.checkpointDir, outputDir, hyper: req.hyper, dataStats: stats, meta: { version, parent: base.version, jobId: id } },
        samples,
        modelIO: this.opts.modelIO,
      }, (p) => {
        metrics.push(p.metrics);
        jobs.update(id, { progress: p.progress, metrics });
        logger?.info({ jobId: id, iteration: p.iteration, of: p.totalIterations, loss: p.metrics.loss, entropy: p.metrics.entropy, clipFrac: p.metrics.clipFrac, approxKl: p.metrics.approxKl, tokensPerSec: Math.round(p.metrics.tokensPerSec) }, 'training iteration');
      });
      if (this.running) this.running.handle = handle;
      if (this.running?.cancelled) handle.cancel();
      const result: JobResult = await handle.done;
      this.opts.repos.models.insert({
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
        ? await this.gate(id, req.gate, version, outputDir, taskIds)
        : { cancelled: false, error: await this.activateTrained(id, version, req.activate) };
      if (after.cancelled) {
        this.finish(id, { status: 'cancelled', resultVersion: version });
        logger?.info({ jobId: id, version }, 'training job cancelled during its promotion gate; the version stays a candidate');
        return;
      }
      this.finish(id, { status: 'succeeded', resultVersion: version, progress: 1, ...(after.error ? { error: after.error } : {}) });
      logger?.info({ jobId: id, version, seconds: result.seconds }, 'training job succeeded');
    } catch (err) {
      if (err instanceof JobCancelledError) {
        this.finish(id, { status: 'cancelled' });
        logger?.info({ jobId: id }, 'training job cancelled');
      } else {
        const message = err instanceof Error ? err.message : String(err);
        this.finish(id, { status: 'failed', error: message });
        logger?.error({ jobId: id, err: message }, 'training job failed');
      }
    }
  }

  /** Activate `version` when the job asked for it. @returns the job's error text when activation failed, else null. */
  private async activateTrained(id: string, version: string, activate: boolean | undefined): Promise<string | null> {
    if (!activate) return null;
    try {
      await this.opts.registry.activate(version);
      this.opts.logger?.info({ jobId: id, version }, 'model version activated');
      return null;
    } catch (err) {
      this.opts.logger?.error({ jobId: id, version, err: String(err) }, 'activation after training failed');
      return `trained, but activation failed: ${String(err)}`;
    }
  }

  /** Run job `id`'s promotion gate on its new version (./gate-run.ts). */
  private gate(
    id: string, spec: GateSpec, version: string, checkpointDir: string, taskIds: readonly string[],
  ): Promise<{ cancelled: boolean; error: string | null }> {
    const settings = this.opts.gate;
    if (!settings) return Promise.resolve({ cancelled: false, error: 'trained, but this server runs no promotion gates' });
    return runGate({
      repos: this.opts.repos, registry: this.opts.registry, dataDir: this.opts.dataDir, settings, logger: this.opts.logger,
      onHandle: (handle) => {
        if (!this.running) return;
        this.running.handle = handle;
        if (this.running.cancelled) handle.cancel();
      },
    }, id, spec, version, checkpointDir, taskIds);
  }

  /**
   * The rules a gated job must meet at creation (the gate's own fields are checked by the service,
   * src/shared/promotion-gate.ts): gates run on this server, the new version and the active one are
   * served here, and none of the gate's tasks is in the training data the job would read now.
   * @throws DomainError `validation` naming the field.
   */
  private checkGate(req: CreateJobRequest, base: ModelRow): void {
    const gate = req.gate!;
    if (!this.opts.gate || this.opts.gate.engine.kind === 'openai') {
      throw invalid('body/gate', 'this server runs no promotion gates (its versions are served by remote servers)');
    }
    if (req.activate) {
      throw invalid('body/activateWhenDone', 'a gate activates the new version only when it passes: leave activateWhenDone out');
    }
    if (base.engine === 'openai') {
      throw invalid('body/gate', `base version '${base.version}' is remote: the job produces a training batch, not a version to gate`);
    }
    const active = this.opts.registry.active();
    if (active.engine === 'openai') {
      const why = `the active version '${active.version}' is served by a remote server; the gate compares versions served here`;
      throw invalid('body/gate', why);
    }
    if (req.algorithm === 'sft') return; // demonstrations are checked when the job reads them
    const overlap = gateOverlap(gate, trainingTaskIds(this.opts.repos.trainingData, req.data ?? {}));
    if (overlap !== null) {
      const seeds = `seeds ${gate.seedStart}..${gate.seedStart + gate.tasks - 1}`;
      const why = `the training data holds task '${overlap}', one of the gate's held-out tasks (${seeds}): `
        + 'choose seeds no session trained on';
      throw invalid('body/gate/seedStart', why);
    }
  }

  /**
   * Gates that a previous process left pending or running end as `error` on their version and job
   * (the job itself is failed by failRunning).
   */
  private endInterruptedGates(): void {
    const { jobs, models } = this.opts.repos;
    const why = 'the server stopped while the gate ran: the version stays a candidate';
    const ended = (r: GateReport): GateReport => ({ ...r, status: 'error', reason: why, finishedAt: new Date().toISOString() });
    for (const m of models.list()) {
      const g = m.metrics.gate as GateReport | undefined;
      if (g && (g.status === 'pending' || g.status === 'running')) models.setMetrics(m.version, { ...m.metrics, gate: ended(g) });
    }
    for (const { id } of jobs.running()) {
      const row = jobs.get(id);
      const g = row?.config.gateReport as GateReport | undefined;
      if (row && g && (g.status === 'pending' || g.status === 'running')) {
        jobs.update(id, { config: { ...row.config, gateReport: ended(g) } });
      }
      rmSync(gateWorkDir(this.opts.dataDir, id), { recursive: true, force: true });
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
    const { lines, stats, scores } = buildRemoteBatch(this.opts.repos.trainingData, {
      algorithm: req.algorithm, data: { modelVersion: base.version, ...(req.data ?? {}) }, returns,
      invalidPenalty: h.invalidPenalty, stepCoef: h.stepCoef, reflectionGroup: h.reflectionGroup,
    });
    if (lines.length === 0) throw new JobRequestError(`no training samples: ${stats.sessions} sessions, ${stats.turns} turns with a model output, ${stats.droppedTurns} dropped`);
    writeTurnScores(this.opts.repos.trainingData, scores);
    const remote = { ...(base.engineConfig ?? {}) } as Record<string, unknown>;
    delete remote.apiKey;
    const dir = path.join(this.opts.dataDir, 'datasets', id);
    const file = await writeRemoteBatch(dir, lines, { jobId: id, algorithm: req.algorithm, baseVersion: base.version, remote, returns, invalidPenalty: h.invalidPenalty ?? null, stepCoef: h.stepCoef ?? null,
      reflectionGroup: h.reflectionGroup ?? 'task', data: stats,
    });
    const row = this.get(id)!;
    this.opts.repos.jobs.update(id, { config: { ...row.config, dataStats: stats, dataset: { path: file, samples: lines.length } } });
    this.finish(id, { status: 'succeeded', resultVersion: null, progress: 1 });
    this.opts.logger?.info({ jobId: id, path: file, samples: lines.length }, 'remote base version: training batch written for an external trainer');
  }

  /** The job's samples, their counts and the task ids they come from (the gate checks its tasks are not among them). */
  private async prepare(req: CreateJobRequest, checkpointDir: string): Promise<PreparedData> {
    const h = req.hyper ?? {};
    if (req.algorithm === 'sft') {
      const demos = parseDemoJsonl(await readFile(req.demosPath!, 'utf8'));
      const blockSize = await this.blockSize(checkpointDir);
      const built = buildSftSamples(demos, { blockSize, pack: h.pack ?? true, ...(await this.text(checkpointDir)) });
      return { ...built, taskIds: [...new Set(demos.map((d) => d.taskId))] };
    }
    // Sessions of remote versions hold another model's token ids: never train the local model on them.
    const remote = new Set(this.opts.repos.models.remoteVersions());
    const records = selectTrainingRecords(this.opts.repos.trainingData, req.data ?? {}).filter((r) => !remote.has(r.modelVersion));
    const built = buildRlSamples(records, {
      algorithm: req.algorithm,
      returns: { gammaStep: h.gammaStep ?? DEFAULT_RETURNS.gammaStep, gammaTraj: h.gammaTraj ?? DEFAULT_RETURNS.gammaTraj, mode: h.returnMode ?? DEFAULT_RETURNS.mode },
      invalidPenalty: h.invalidPenalty,
      stepCoef: h.stepCoef,
      reflectionGroup: h.reflectionGroup,
      // each attempt's acting turns, then its reflection, in one sample where the served prompts
      // extend each other (the job unpacks any that do not fit the loaded model's block)
      pack: h.pack ?? true,
      blockSize: await this.blockSize(checkpointDir),
      tokenizer: (await this.text(checkpointDir)).tokenizer,
    });
    writeTurnScores(this.opts.repos.trainingData, built.scores);
    return { ...built, taskIds: [...new Set(records.map((r) => r.taskId))] };
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
