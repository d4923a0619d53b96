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
import type { AsyncRepositories } from '../../db/async-repositories.js';
import { soleTrainerLease, type TrainerLease } from '../../db/store.js';
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
  /** Whether this server runs jobs (LAMER_ROLE `trainer` or `both`); false: it only queues them. Default true. */
  runsJobs?: boolean;
  /** The right to run jobs, held by one server of the database at a time (default: held, for a store one server owns). */
  lease?: TrainerLease;
  /**
   * How often a server that runs jobs tries the lease, looks for queued jobs and for a cancel
   * request of its running job, ms (default 2000).
   */
  pollMs?: number;
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
  /** The job this server runs now; `lostLease`: stopped because the trainer lease was lost. */
  private running: { id: string; handle: { cancel(): void } | null; cancelled: boolean; lostLease: boolean } | null = null;
  /** The loop that runs queued jobs one after another, while it runs. */
  private draining: Promise<void> | null = null;
  /** A job was queued while the loop ran: it looks at the queue once more before it ends. */
  private again = false;
  private closed = false;
  private timer: NodeJS.Timeout | null = null;
  /** The poll in progress (the next waits for it). */
  private ticking: Promise<void> | null = null;
  private readonly lease: TrainerLease;

  constructor(private readonly opts: ManagerOptions) {
    this.lease = opts.lease ?? soleTrainerLease();
  }

  /** Whether this server runs jobs (else it only queues them for the server that does). */
  private get runsJobs(): boolean {
    return this.opts.runsJobs ?? true;
  }

  /**
   * Begin: a server that runs jobs tries to take the trainer lease now and every `pollMs` until it
   * holds it; holding it, it looks for queued jobs (and a cancel request for its running job) every
   * `pollMs`, and at once for jobs queued here. Call it once before the first job.
   * @throws DatabaseError when the store refuses the first reads or writes.
   */
  async start(): Promise<void> {
    if (!this.runsJobs) return;
    this.lease.onLost(() => this.leaseLost());
    await this.takeLease();
    this.timer = setInterval(() => {
      // one tick at a time: a lease taken twice at once would fail a job the first taking claimed
      if (this.ticking) return;
      this.ticking = this.tick()
        .catch((err: unknown) => this.opts.logger?.warn({ err: String(err) }, 'the training queue could not be read'))
        .finally(() => {
          this.ticking = null;
        });
    }, this.opts.pollMs ?? 2000);
    this.timer.unref();
  }

  /**
   * Take the trainer lease if it is free; then the jobs its previous holder left running (it died,
   * or this server's previous run did) are marked failed, as a restart of one server does, and the
   * queue runs here.
   */
  private async takeLease(): Promise<void> {
    if (this.closed || this.lease.held() || !(await this.lease.acquire())) return;
    await this.endInterruptedGates();
    await this.opts.repos.jobs.failRunning('the server running the job stopped while it was running', Date.now());
    this.opts.logger?.info({}, 'trainer lease taken: this server runs the training jobs');
    this.pump();
  }

  private async tick(): Promise<void> {
    if (this.closed) return;
    if (!this.lease.held()) return this.takeLease();
    const r = this.running;
    if (!r) return this.pump();
    // a cancel asked for on another server
    if (!r.cancelled && (await this.get(r.id))?.cancelRequestedAt != null) {
      r.cancelled = true;
      r.handle?.cancel();
    }
  }

  /** The lease's connection broke: another server may take the queue, so the running job stops here. */
  private leaseLost(): void {
    const jobId = this.running?.id ?? null;
    this.opts.logger?.error({ jobId }, 'trainer lease lost (its database connection broke): the running job stops');
    if (!this.running) return;
    this.running.cancelled = true;
    this.running.lostLease = true;
    this.running.handle?.cancel();
  }

  /**
   * Queue a job (any server: the one holding the trainer lease runs it).
   * @throws DomainError `overloaded` once the manager is closed (the server is shutting down);
   *   `validation` for an unknown base version (body/baseVersion), an SFT job without demosPath, or
   *   an SFT job on a remote base version (its weights are not here: nothing to train);
   *   `conflict` for a version name already taken; `too-many-jobs` (with Retry-After) when
   *   `maxQueuedJobs` jobs already wait (all servers' together).
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
    if (req.gate) await this.checkGate(req, baseRow);
    await this.checkQueueBound();
    const id = `job_${randomUUID().replace(/-/g, '').slice(0, 16)}`;
    const row = {
      id, algorithm: req.algorithm, status: 'queued' as const, config: { ...req, baseVersion: base } as Record<string, unknown>,
      progress: 0, metrics: [] as unknown[], resultVersion: null, error: null, createdAt: Date.now(), startedAt: null, finishedAt: null,
    };
    await this.opts.repos.jobs.insert(row);
    const created = (await this.get(id))!;
    this.pump();
    return created;
  }

  /** @throws DomainError `too-many-jobs` when `maxQueuedJobs` jobs are queued. */
  private async checkQueueBound(): Promise<void> {
    const bound = this.opts.maxQueuedJobs ?? 0;
    if (bound <= 0) return;
    const queued = (await this.opts.repos.jobs.countsByStatus()).queued ?? 0;
    if (queued < bound) return;
    const why = `${queued} training jobs are queued (limit ${bound}, LAMER_TRAIN_MAX_QUEUED_JOBS); wait for them or cancel some, then send the job again`;
    throw new DomainError('too-many-jobs', why, {
      retryAfterSeconds: this.opts.queueRetryAfterSeconds ?? 60,
    });
  }

  get(id: string): Promise<TrainingJobRow | undefined> {
    return this.opts.repos.jobs.get(id);
  }

  list(limit = 50): Promise<TrainingJobRow[]> {
    return this.opts.repos.jobs.recent(limit);
  }

  /** Whether this server is running jobs of the queue now. */
  busy(): boolean {
    return this.draining !== null;
  }

  /** Whether this server holds the trainer lease (it runs the queue). */
  holdsQueue(): boolean {
    return this.runsJobs && this.lease.held();
  }

  /**
   * Cancel a queued or running job: a queued one is `cancelled` at once; a running one stops after
   * its current iteration, here or, through its row (`cancelRequestedAt`), on the server that runs
   * it within its `pollMs`.
   * @returns the row, or undefined for an unknown id. Finished jobs are returned unchanged.
   */
  async cancel(id: string): Promise<TrainingJobRow | undefined> {
    const row = await this.get(id);
    if (!row) return undefined;
    const now = Date.now();
    if (row.status === 'queued' && !(await this.opts.repos.jobs.cancelQueued(id, now))) return this.cancel(id);
    if (row.status === 'running') {
      if (this.running?.id === id) {
        this.running.cancelled = true;
        this.running.handle?.cancel();
      }
      await this.opts.repos.jobs.requestCancel(id, now);
    }
    return this.get(id);
  }

  /** Resolves when this server runs no job and its loop found the queue empty. */
  async whenIdle(): Promise<void> {
    while (this.draining) await this.draining;
  }

  /** Stop taking jobs, cancel the running one and wait for it, give the trainer lease back. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    if (this.running) {
      this.running.cancelled = true;
      this.running.handle?.cancel();
    }
    await this.whenIdle();
    await this.lease.release();
  }

  /** Run the queue here, unless it runs already (then it looks once more), or this server does not hold the lease. */
  private pump(): void {
    if (this.closed || !this.runsJobs || !this.lease.held()) return;
    if (this.draining) {
      this.again = true;
      return;
    }
    this.draining = this.drain()
      .catch((err: unknown) => this.opts.logger?.warn({ err: String(err) }, 'the training queue could not be read'))
      .finally(() => {
        this.draining = null;
      });
  }

  /** Run queued jobs, oldest first, one at a time, each claimed in the store first (one server takes it). */
  private async drain(): Promise<void> {
    const { jobs } = this.opts.repos;
    while (!this.closed && this.lease.held()) {
      this.again = false;
      const [id] = await jobs.queuedIds();
      if (id === undefined) {
        if (this.again) continue;
        return;
      }
      if (!(await jobs.claim(id, Date.now()))) continue;
      this.running = { id, handle: null, cancelled: false, lostLease: false };
      try {
        await this.runJob(id);
      } catch (err) {
        // A bookkeeping write refused by the database (locked by another process, disk full):
        // the job's row keeps its last state (a `running` row is marked failed when a server next
        // takes the trainer lease). Logged, never an unhandled rejection that would stop the server.
        this.opts.logger?.error({ jobId: id, err: String(err) }, 'training job could not record its state in the database');
      } finally {
        this.running = null;
      }
    }
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
    logger?.info({ jobId: id, algorithm: req.algorithm, baseVersion: req.baseVersion }, 'training job started');
    try {
      const base = await this.opts.registry.get(req.baseVersion);
      if (!base) throw new JobRequestError(`base version '${req.baseVersion}' no longer exists`);
      if (base.engine === 'openai') {
        await this.exportRemoteBatch(id, req, base);
        return;
      }
      const { samples, stats, taskIds } = await this.prepare(req, base.checkpointDir);
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
      if (after.cancelled && this.running?.lostLease) throw new JobCancelledError();
      if (after.cancelled) {
        await this.finish(id, { status: 'cancelled', resultVersion: version });
        logger?.info({ jobId: id, version }, 'training job cancelled during its promotion gate; the version stays a candidate');
        return;
      }
      await this.finish(id, { status: 'succeeded', resultVersion: version, progress: 1, ...(after.error ? { error: after.error } : {}) });
      logger?.info({ jobId: id, version, seconds: result.seconds }, 'training job succeeded');
    } catch (err) {
      if (err instanceof JobCancelledError && this.running?.lostLease) {
        const error = 'this server lost the trainer lease (its database connection broke) while the job ran';
        await this.finish(id, { status: 'failed', error });
        logger?.error({ jobId: id }, 'training job stopped: trainer lease lost');
      } else if (err instanceof JobCancelledError) {
        await this.finish(id, { status: 'cancelled' });
        logger?.info({ jobId: id }, 'training job cancelled');
      } else {
        const message = err instanceof Error ? err.message : String(err);
        await this.finish(id, { status: 'failed', error: message });
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
  private async checkGate(req: CreateJobRequest, base: ModelRow): Promise<void> {
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
    const overlap = gateOverlap(gate, await trainingTaskIds(this.opts.repos.trainingData, req.data ?? {}));
    if (overlap !== null) {
      const seeds = `seeds ${gate.seedStart}..${gate.seedStart + gate.tasks - 1}`;
      const why = `the training data holds task '${overlap}', one of the gate's held-out tasks (${seeds}): `
        + 'choose seeds no session trained on';
      throw invalid('body/gate/seedStart', why);
    }
  }

  /**
   * Gates that the previous holder of the trainer lease left pending or running (it died, or this
   * server's previous run did) end as `error` on their version and job (the job itself is failed
   * by failRunning); their scratch folders are removed.
   */
  private async endInterruptedGates(): Promise<void> {
    const { jobs, models } = this.opts.repos;
    const why = 'the server stopped while the gate ran: the version stays a candidate';
    const ended = (r: GateReport): GateReport => ({ ...r, status: 'error', reason: why, finishedAt: new Date().toISOString() });
    for (const m of await models.list()) {
      const g = m.metrics.gate as GateReport | undefined;
      if (g && (g.status === 'pending' || g.status === 'running')) await models.setMetrics(m.version, { ...m.metrics, gate: ended(g) });
    }
    for (const { id } of await jobs.running()) {
      const row = await jobs.get(id);
      const g = row?.config.gateReport as GateReport | undefined;
      if (row && g && (g.status === 'pending' || g.status === 'running')) {
        await jobs.update(id, { config: { ...row.config, gateReport: ended(g) } });
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
    const { lines, stats, scores } = await buildRemoteBatch(this.opts.repos.trainingData, {
      algorithm: req.algorithm, data: { modelVersion: base.version, ...(req.data ?? {}) }, returns,
      invalidPenalty: h.invalidPenalty, stepCoef: h.stepCoef, reflectionGroup: h.reflectionGroup,
    });
    if (lines.length === 0) throw new JobRequestError(`no training samples: ${stats.sessions} sessions, ${stats.turns} turns with a model output, ${stats.droppedTurns} dropped`);
    await writeTurnScores(this.opts.repos.trainingData, scores);
    const remote = { ...(base.engineConfig ?? {}) } as Record<string, unknown>;
    delete remote.apiKey;
    const dir = path.join(this.opts.dataDir, 'datasets', id);
    const file = await writeRemoteBatch(dir, lines, { jobId: id, algorithm: req.algorithm, baseVersion: base.version, remote, returns, invalidPenalty: h.invalidPenalty ?? null, stepCoef: h.stepCoef ?? null,
      reflectionGroup: h.reflectionGroup ?? 'task', data: stats,
    });
    const row = (await this.get(id))!;
    await this.opts.repos.jobs.update(id, { config: { ...row.config, dataStats: stats, dataset: { path: file, samples: lines.length } } });
    await this.finish(id, { status: 'succeeded', resultVersion: null, progress: 1 });
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
    const remote = new Set(await this.opts.repos.models.remoteVersions());
    const records = (await selectTrainingRecords(this.opts.repos.trainingData, req.data ?? {})).filter((r) => !remote.has(r.modelVersion));
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
    await writeTurnScores(this.opts.repos.trainingData, built.scores);
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
