/**
 * Training jobs as a service (docs/protocol.md "Training jobs"), without the HTTP layer: create /
 * list / get / cancel jobs stored in the `training_jobs` table, and on the server holding the
 * store's trainer lease, run the queue: jobs one at a time, oldest first, each claimed in the store
 * first. Running one job (data, training in a worker thread, the new model version, its promotion
 * gate or activation) is ./job-run.ts; the request and its shared types are ./job-request.ts.
 * Errors of a job fail that job (status `failed`, `error` set); they never throw out of the manager.
 */
import { rmSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { DomainError, invalid } from '../../agent/errors.js';
import { soleTrainerLease, type TrainerLease } from '../../db/store.js';
import type { ModelRow, TrainingJobRow } from '../../db/schema.js';
import { trainingTaskIds } from '../data/select.js';
import { gateOverlap } from '../../shared/promotion-gate.js';
import type { GateReport } from './gate.js';
import { gateWorkDir } from './gate-run.js';
import type { CreateJobRequest } from './job-request.js';
import { runJob, type JobRunContext, type RunningJob } from './job-run.js';

export { JobRequestError, type CreateJobRequest, type ManagerLogger, type VersionRegistry } from './job-request.js';

/** The job manager's settings: what running a job needs (./job-run.ts), and the queue's bound, role, lease and poll. */
export interface ManagerOptions extends JobRunContext {
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
}

export class TrainingJobManager {
  /** The job this server runs now; `lostLease`: stopped because the trainer lease was lost. */
  private running: RunningJob | null = null;
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
      const run: RunningJob = { id, handle: null, cancelled: false, lostLease: false };
      this.running = run;
      try {
        await runJob(this.opts, run);
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
}
