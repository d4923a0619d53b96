/**
 * The training service (docs/protocol.md "Training jobs"): what the HTTP routes, the CLI and
 * eval talk to about training jobs, decorated as `app.training` (src/plugins/app/training.ts). It
 * owns the job rules and answers in the wire shapes of src/training/schemas.ts, so the routes only
 * pass requests through (as the session routes do with src/agent/sessions.ts):
 *
 * - create: the body rules the schema cannot express (sft takes demonstrations and no data filter;
 *   RL takes no demonstrations and no random position offsets; warm-up and final ratio only with
 *   the cosine schedule; `data.since` is a date-time), the demonstrations path check (relative to
 *   `<demosDir>`, no `..`, an existing file), the promotion gate's fields (src/shared/promotion-gate.ts;
 *   inline demonstrations must not hold its tasks) or the writing of inline demonstrations to
 *   `<demosDir>/inline/<uuid>.jsonl`, then the job manager's own checks (base version known,
 *   version name free, not shutting down) and the queue;
 * - list: filters and cursor paging, newest first (cursor `<createdAt ms>~<id>`);
 * - get / cancel: the job by id; cancelling a finished job is a conflict.
 *
 * Each rule is checked here once; refusals are DomainErrors by kind (src/agent/errors.ts), mapped
 * to HTTP only by src/plugins/app/errors.ts.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Static } from 'typebox';
import { DomainError, invalid, notFound } from '../agent/errors.js';
import type { AsyncJobs } from '../db/async-repositories.js';
import type { TrainingJobRow } from '../db/schema.js';
import { ensureDirSync } from '../ensure-dir.js';
import type { IterationMetrics } from './run/job.js';
import type { CreateJobRequest, TrainingJobManager } from './run/manager.js';
import { positionOffsetProblem } from './run/job.js';
import { type CreateJob, type Job, type JobList, type JobSummary, type ListJobsQuery } from './schemas.js';
import type { DataFilter } from './data/select.js';
import type { DataStats } from './data/samples.js';
import { gateOverlap, gateProblem, resolveGate, type GateSpec } from '../shared/promotion-gate.js';
import { pendingReport, type GateReport } from './run/gate.js';

/** The body of `POST /v1/training/jobs` (the CreateJob schema). */
export type CreateJobBody = Static<typeof CreateJob>;
/** The query of `GET /v1/training/jobs` (the ListJobsQuery schema). */
export type ListJobsParams = Static<typeof ListJobsQuery>;
/** A job with its metrics per iteration (the Job schema). */
export type JobView = Static<typeof Job>;
/** A job as listed, without the per-iteration metrics (the JobSummary schema). */
export type JobSummaryView = Static<typeof JobSummary>;
/** One page of jobs (the JobList schema). */
export type JobPage = Static<typeof JobList>;

export interface TrainingServiceOptions {
  /** The job queue and runner (queue, worker thread, new model versions). */
  manager: TrainingJobManager;
  /** The `training_jobs` table, for listings. */
  jobs: AsyncJobs;
  /** Where sft demonstrations are read from and inline ones written to: `<dataDir>/demos`. */
  demosDir: string;
}

/** Jobs listed per page when the query gives no `limit`. */
export const DEFAULT_JOB_PAGE = 50;

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export class TrainingService {
  constructor(private readonly opts: TrainingServiceOptions) {}

  /**
   * Check `body` and queue the job.
   * @returns the queued job.
   * @throws DomainError `validation` naming the field at fault (body rules, demonstrations path,
   *   unknown base version); `conflict` for a version name already taken; `overloaded` once the
   *   server is shutting down. Nothing is stored when it throws (inline demonstrations are written
   *   only after the body rules passed).
   */
  async create(body: CreateJobBody): Promise<JobView> {
    const request = this.jobRequestOf(body);
    let row: TrainingJobRow;
    try {
      row = await this.opts.manager.create(request);
    } catch (err) {
      // a refused job leaves nothing behind: the inline demonstrations written for it go too
      if (request.demosPath?.startsWith(path.join(this.opts.demosDir, 'inline') + path.sep)) rmSync(request.demosPath, { force: true });
      throw err;
    }
    return this.viewOf(row);
  }

  /** Jobs matching the query, newest first, one page of `limit` (default 50) after `cursor`. */
  async list(q: ListJobsParams): Promise<JobPage> {
    const { status, algorithm, cursor } = q;
    const limit = q.limit ?? DEFAULT_JOB_PAGE;
    // one row more than the page tells whether another page follows
    const rows = await this.opts.jobs.list({ ...(status ? { status } : {}), ...(algorithm ? { algorithm } : {}), ...(cursor ? { cursor } : {}), limit });
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return { items: page.map((r) => this.summaryOf(r)), nextCursor: rows.length > limit && last ? `${last.createdAt}~${last.id}` : null };
  }

  /** The job `id` with its metrics. @throws DomainError `not-found`. */
  async get(id: string): Promise<JobView> {
    return this.viewOf(await this.find(id));
  }

  /**
   * Cancel job `id`: a queued one becomes `cancelled` at once; a running one stops after its
   * current iteration (`running: true`, the job as it is now); a cancelled one is returned unchanged.
   * @throws DomainError `not-found`; `conflict` for a job that already succeeded or failed.
   */
  async cancel(id: string): Promise<{ job: JobView; running: boolean }> {
    const before = await this.find(id);
    if (before.status === 'succeeded' || before.status === 'failed') {
      throw new DomainError('conflict', `training job '${before.id}' already ${before.status}`);
    }
    const after = (await this.opts.manager.cancel(before.id)) ?? before;
    return { job: this.viewOf(after), running: after.status === 'running' };
  }

  /** Whether a job is queued or running. */
  busy(): boolean {
    return this.opts.manager.busy();
  }

  /** Resolves when no job is queued or running. */
  whenIdle(): Promise<void> {
    return this.opts.manager.whenIdle();
  }

  /** Stop taking jobs, cancel the running one and wait for it (server shutdown). */
  close(): Promise<void> {
    return this.opts.manager.close();
  }

  /** The job row `id`. @throws DomainError `not-found`. */
  private async find(id: string): Promise<TrainingJobRow> {
    const r = await this.opts.manager.get(id);
    if (!r) throw notFound(`training job '${id}'`);
    return r;
  }

  /** The manager's request for a create body. @throws DomainError `validation` (see create). */
  private jobRequestOf(b: CreateJobBody): CreateJobRequest {
    const isSft = b.algorithm === 'sft';
    if (!isSft && b.demonstrations !== undefined) throw invalid('body/demonstrations', `only sft jobs take demonstrations, not ${b.algorithm}`);
    const hp = b.hyperparameters;
    const offsetProblem = positionOffsetProblem(b.algorithm, hp?.positionOffset);
    if (offsetProblem !== null) throw invalid('body/hyperparameters/positionOffset', offsetProblem);
    // warm-up and final ratio shape the cosine schedule; with a constant lr they would be silently ignored
    for (const k of ['warmupSteps', 'minLrRatio'] as const) {
      if (hp?.[k] !== undefined && hp.lrSchedule !== 'cosine') throw invalid(`body/hyperparameters/${k}`, `applies to lrSchedule 'cosine' only (lrSchedule is ${hp.lrSchedule ?? "'constant' by default"})`);
    }
    if (isSft && b.data !== undefined) throw invalid('body/data', 'sft jobs train on demonstrations, not on recorded sessions');
    // only lamer jobs train reflections: elsewhere the setting would change nothing
    if (hp?.reflectionGroup !== undefined && b.algorithm !== 'lamer') {
      throw invalid('body/hyperparameters/reflectionGroup', `applies to lamer jobs only (${b.algorithm} trains no reflections)`);
    }
    const gate = b.gate ? gateOf(b) : undefined;
    const data = dataFilterOf(b.data);
    return {
      algorithm: b.algorithm,
      ...(data ? { data } : {}),
      ...(isSft ? { demosPath: this.demosFile(b.demonstrations) } : {}),
      ...(b.baseVersion !== undefined ? { baseVersion: b.baseVersion } : {}),
      ...(b.version !== undefined ? { version: b.version } : {}),
      activate: b.activateWhenDone ?? false,
      ...(hp ? { hyper: hp } : {}),
      ...(gate ? { gate } : {}),
    };
  }

  /**
   * The JSONL file an sft job reads: an existing file under `<demosDir>`, or the inline sessions
   * written to `<demosDir>/inline/<uuid>.jsonl`.
   * @throws DomainError `validation` naming the demonstrations field at fault.
   */
  private demosFile(d: CreateJobBody['demonstrations']): string {
    const { demosDir } = this.opts;
    if (!d || (d.path === undefined) === (d.sessions === undefined)) {
      throw invalid('body/demonstrations', 'an sft job needs exactly one of demonstrations.path or demonstrations.sessions');
    }
    if (d.path !== undefined) {
      const rel = d.path;
      if (rel.startsWith('/') || rel.split('/').includes('..')) throw invalid('body/demonstrations/path', 'must be relative to the demos folder, without ..');
      const file = path.join(demosDir, rel);
      if (!existsSync(file) || !statSync(file).isFile()) throw invalid('body/demonstrations/path', `no file '${rel}' in the data directory's demos/ folder`);
      return file;
    }
    ensureDirSync(path.join(demosDir, 'inline'));
    const file = path.join(demosDir, 'inline', `${randomUUID()}.jsonl`);
    writeFileSync(file, d.sessions!.map((s) => JSON.stringify(s)).join('\n') + '\n');
    return file;
  }

  /** A job as listed: everything but the per-iteration metrics. */
  private summaryOf(r: TrainingJobRow): JobSummaryView {
    const c = r.config as Partial<CreateJobRequest> & { baseVersion?: string; dataStats?: unknown; dataset?: { path: string; samples: number } };
    const metrics = (r.metrics ?? []) as IterationMetrics[];
    const data = c.data ? { ...c.data, ...(c.data.since !== undefined ? { since: iso(c.data.since) } : {}) } : null;
    return {
      id: r.id,
      algorithm: r.algorithm,
      status: r.status,
      progress: r.progress,
      baseVersion: c.baseVersion ?? '',
      version: c.version ?? null,
      resultVersion: r.resultVersion,
      activateWhenDone: c.activate === true,
      data: r.algorithm === 'sft' ? null : data,
      demonstrations: c.demosPath ? path.relative(this.opts.demosDir, c.demosPath) : null,
      hyperparameters: (c.hyper ?? {}) as Record<string, unknown>,
      dataStats: dataStatsView(c.dataStats) as never,
      // remote base versions: the batch written for an external trainer, relative to the data directory
      dataset: c.dataset ? { path: path.relative(path.dirname(this.opts.demosDir), c.dataset.path), samples: c.dataset.samples } : null,
      iterations: metrics.length,
      lastMetrics: metrics.length > 0 ? metrics[metrics.length - 1]! : null,
      gate: (c as { gateReport?: GateReport }).gateReport ?? (c.gate ? pendingReport(c.gate) : null),
      error: r.error,
      createdAt: iso(r.createdAt)!,
      startedAt: iso(r.startedAt),
      finishedAt: iso(r.finishedAt),
    };
  }

  /** A job with its metrics per iteration. */
  private viewOf(r: TrainingJobRow): JobView {
    return { ...this.summaryOf(r), metrics: (r.metrics ?? []) as IterationMetrics[] };
  }
}

/**
 * The promotion gate of a create body with its defaults, after the rules of
 * src/shared/promotion-gate.ts and, for inline demonstrations, that none holds one of its tasks.
 * @throws DomainError `validation` naming the gate field at fault.
 */
function gateOf(b: CreateJobBody): GateSpec {
  const g = b.gate!;
  const problem = gateProblem(g);
  if (problem) throw invalid(`body/gate/${problem.field}`, problem.message);
  const spec = resolveGate(g);
  const overlap = gateOverlap(spec, (b.demonstrations?.sessions ?? []).map((d) => d.taskId));
  if (overlap !== null) {
    const seeds = `seeds ${spec.seedStart}..${spec.seedStart + spec.tasks - 1}`;
    throw invalid('body/gate/seedStart', `demonstration task '${overlap}' is one of the gate's held-out tasks (${seeds})`);
  }
  return spec;
}

/** The data filter of a create body (`since` as ms since the epoch). @throws DomainError `validation`. */
function dataFilterOf(data: CreateJobBody['data']): DataFilter | undefined {
  if (!data) return undefined;
  const { since, ...rest } = data;
  const filter: DataFilter = { ...rest };
  if (since !== undefined) {
    const ms = Date.parse(since);
    if (!Number.isFinite(ms)) throw invalid('body/data/since', 'must be a date-time');
    filter.since = ms;
  }
  return filter;
}

/**
 * A job row's stored data counts in the current shape. Rows written before zero-advantage groups
 * were trained hold `skippedGroups` (groups whose advantages were all 0, then dropped) and
 * `skippedTurns` (the turns not trained: those groups' and reflections without a next attempt);
 * they read as `zeroAdvantageGroups` and `droppedTurns`, and `zeroAdvantageTurns` as the turns
 * of those groups, which such rows did not separate from the dropped reflections (an upper bound).
 */
export function dataStatsView(raw: unknown): DataStats | null {
  if (raw === null || typeof raw !== 'object') return null;
  const r = raw as Partial<DataStats> & { skippedGroups?: number; skippedTurns?: number };
  if (r.zeroAdvantageGroups !== undefined || r.skippedGroups === undefined) return r as DataStats;
  const { skippedGroups, skippedTurns, ...rest } = r;
  return { ...rest, zeroAdvantageGroups: skippedGroups, zeroAdvantageTurns: skippedTurns ?? 0, droppedTurns: skippedTurns ?? 0 } as DataStats;
}
