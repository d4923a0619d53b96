/**
 * Automatic training (LAMER_TRAIN_* variables): start a job from a template every N completed training
 * sessions and/or on a cron expression (croner; 5 or 6 fields, seconds first when 6).
 * Only one job runs at a time: a trigger while the manager is busy is skipped (logged once per
 * busy spell, not at every poll: a job with a promotion gate can run for long). Of several servers
 * on one database, only the one holding the trainer lease starts jobs. A job template may carry a
 * promotion gate (LAMER_TRAIN_GATE_*, src/training/run/gate-run.ts).
 * RL jobs started by the schedule train on the sessions created since the previous trigger,
 * unless the template sets its own `data.since`.
 */
import { Cron } from 'croner';
import type { AsyncTrainingData } from '../../db/async-repositories.js';
import type { CreateJobRequest, ManagerLogger } from './job-request.js';

export interface ScheduleConfig {
  /** Start a job after this many newly completed training sessions (>= 1). */
  everySessions?: number;
  /** Cron expression, e.g. '0 * * * *' (hourly). */
  cron?: string;
  /** The job to start (its `version` is ignored: each scheduled version is named by its job). */
  job: CreateJobRequest;
  /** How often the session count is checked, ms. Default 5000. */
  pollMs?: number;
}

/** The part of TrainingJobManager the scheduler uses. */
export interface JobStarter {
  create(req: CreateJobRequest): Promise<{ id: string }>;
  busy(): boolean;
  /** Whether this server runs the training queue (holds the trainer lease); absent: it does. Other servers' schedules start nothing. */
  holdsQueue?(): boolean;
}

export class TrainingScheduler {
  private cron: Cron | null = null;
  private timer: NodeJS.Timeout | null = null;
  /** Start of the data window of the next job (ms since the epoch). */
  private windowStart: number;
  /** Completed training sessions counted at the last trigger (or at start); null before `start`. */
  private baseline: number | null = null;
  /** A check or trigger in progress (the poll timer skips a check while one runs). */
  private pending: Promise<unknown> | null = null;
  /** Ids of jobs this scheduler started, oldest first. */
  readonly started: string[] = [];
  /** Whether a skipped trigger was logged since the last job this scheduler started. */
  private skipLogged = false;

  /** @throws RangeError for everySessions < 1 or an invalid cron expression. */
  constructor(private readonly data: AsyncTrainingData, private readonly starter: JobStarter, private readonly cfg: ScheduleConfig, private readonly logger?: ManagerLogger, now = Date.now()) {
    if (cfg.everySessions !== undefined && !(Number.isInteger(cfg.everySessions) && cfg.everySessions >= 1)) {
      throw new RangeError(`everySessions must be an integer >= 1, got ${cfg.everySessions}`);
    }
    this.windowStart = now;
    if (cfg.cron) {
      try {
        this.cron = new Cron(cfg.cron, { paused: true, protect: true }, () => {
          void this.trigger('cron');
        });
      } catch (err) {
        throw new RangeError(`invalid cron expression '${cfg.cron}': ${(err as Error).message}`);
      }
    }
  }

  /**
   * Count the completed training sessions there are now (the baseline of `everySessions`), then
   * start the cron and the count checks.
   * @throws DatabaseError when the count cannot be read.
   */
  async start(): Promise<void> {
    this.baseline ??= await this.completedSince(0);
    this.cron?.resume();
    if (this.cfg.everySessions !== undefined && !this.timer) {
      this.timer = setInterval(() => {
        if (this.pending) return;
        this.pending = this.check()
          .catch((err: unknown) => this.logger?.error({ err: String(err) }, 'scheduled training: the session count could not be read'))
          .finally(() => { this.pending = null; });
      }, this.cfg.pollMs ?? 5000);
      this.timer.unref();
    }
  }

  stop(): void {
    this.cron?.stop();
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Next cron run, or null. */
  nextRun(): Date | null {
    return this.cron?.nextRun() ?? null;
  }

  /** Count check for `everySessions` (called by the poll timer; public for tests). @returns the job id started, if any. */
  async check(): Promise<string | null> {
    if (this.cfg.everySessions === undefined) return null;
    this.baseline ??= await this.completedSince(0);
    const total = await this.completedSince(0);
    if (total - this.baseline < this.cfg.everySessions) return null;
    return this.trigger('sessions');
  }

  /** Start the template job now unless one is running. @returns the job id, or null when skipped. */
  async trigger(reason: 'sessions' | 'cron'): Promise<string | null> {
    // Of several servers on one database, the one running the queue starts the scheduled jobs.
    if (this.starter.holdsQueue && !this.starter.holdsQueue()) return null;
    if (this.starter.busy()) {
      if (!this.skipLogged) {
        this.logger?.warn({ reason }, 'scheduled training skipped: a job is running (said once until the next job starts)');
      }
      this.skipLogged = true;
      return null;
    }
    const now = Date.now();
    const { version: _fixedName, ...tpl } = this.cfg.job; // each scheduled job gets its own version name
    const req: CreateJobRequest = tpl.algorithm === 'sft' ? { ...tpl } : { ...tpl, data: { since: this.windowStart, ...tpl.data } };
    try {
      const { id } = await this.starter.create(req);
      this.started.push(id);
      this.skipLogged = false;
      this.windowStart = now;
      this.baseline = await this.completedSince(0);
      this.logger?.info({ reason, jobId: id }, 'scheduled training job created');
      return id;
    } catch (err) {
      this.logger?.error({ reason, err: String(err) }, 'scheduled training job could not be created');
      return null;
    }
  }

  private completedSince(since: number): Promise<number> {
    return this.data.countCompletedTrainSessions(since);
  }
}
