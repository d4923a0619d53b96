/**
 * Queries of the `training_jobs` table: the training service's listing, the /metrics reads, and
 * the reads and writes of the job manager (src/training/run/manager.ts decides what is written when).
 */
import { and, desc, eq, lt, or, sql, type SQL } from 'drizzle-orm';
import type { Db } from './index.js';
import { trainingJobs, type TrainingJobRow } from './schema.js';

/** Filters and page of a job listing. `cursor` is `<createdAt ms>~<id>` of the last job of the previous page. */
export interface JobListQuery {
  status?: TrainingJobRow['status'];
  algorithm?: TrainingJobRow['algorithm'];
  cursor?: string;
  limit: number;
}

/** A job row to insert (times in ms since the epoch). */
export type JobInsert = typeof trainingJobs.$inferInsert;

/** The `training_jobs` table: listing, /metrics reads, and the job manager's reads and writes. */
export class JobsRepo {
  constructor(private readonly db: Db) {}

  /**
   * Jobs matching `q`, newest first (createdAt, then id, descending), after `q.cursor`: at most
   * `q.limit + 1` rows, so the caller can tell whether another page follows.
   */
  list(q: JobListQuery): TrainingJobRow[] {
    const conds: SQL[] = [];
    if (q.status) conds.push(eq(trainingJobs.status, q.status));
    if (q.algorithm) conds.push(eq(trainingJobs.algorithm, q.algorithm));
    if (q.cursor) {
      const [t, id] = q.cursor.split('~') as [string, string];
      conds.push(or(lt(trainingJobs.createdAt, Number(t)), and(eq(trainingJobs.createdAt, Number(t)), lt(trainingJobs.id, id)))!);
    }
    return this.db.select().from(trainingJobs).where(conds.length ? and(...conds) : undefined)
      .orderBy(desc(trainingJobs.createdAt), desc(trainingJobs.id)).limit(q.limit + 1).all();
  }

  /** Jobs with status `running`: id, algorithm and progress in [0, 1] (for /metrics). */
  running(): Array<{ id: string; algorithm: TrainingJobRow['algorithm']; progress: number }> {
    return this.db
      .select({ id: trainingJobs.id, algorithm: trainingJobs.algorithm, progress: trainingJobs.progress })
      .from(trainingJobs)
      .where(eq(trainingJobs.status, 'running'))
      .all();
  }

  /** Number of jobs of each status present in the table (statuses with no job are absent). */
  countsByStatus(): Record<string, number> {
    const rows = this.db.select({ status: trainingJobs.status, n: sql<number>`count(*)` }).from(trainingJobs).groupBy(trainingJobs.status).all();
    return Object.fromEntries(rows.map((r) => [r.status, r.n]));
  }

  /** Insert one job row. */
  insert(row: JobInsert): void {
    this.db.insert(trainingJobs).values(row).run();
  }

  /** The job `id`, if any. */
  get(id: string): TrainingJobRow | undefined {
    return this.db.select().from(trainingJobs).where(eq(trainingJobs.id, id)).get();
  }

  /** The `limit` newest jobs (createdAt descending). */
  recent(limit: number): TrainingJobRow[] {
    return this.db.select().from(trainingJobs).orderBy(desc(trainingJobs.createdAt)).limit(limit).all();
  }

  /** Set the given columns of job `id`. */
  update(id: string, set: Partial<JobInsert>): void {
    this.db.update(trainingJobs).set(set).where(eq(trainingJobs.id, id)).run();
  }

  /** Every `running` job becomes `failed` with `error`, finished at `finishedAt` (ms). */
  failRunning(error: string, finishedAt: number): void {
    this.db.update(trainingJobs).set({ status: 'failed', error, finishedAt }).where(eq(trainingJobs.status, 'running')).run();
  }

  /** Ids of the `queued` jobs, oldest first (createdAt, then id). */
  queuedIds(): string[] {
    return this.db
      .select({ id: trainingJobs.id })
      .from(trainingJobs)
      .where(eq(trainingJobs.status, 'queued'))
      .orderBy(trainingJobs.createdAt, trainingJobs.id)
      .all()
      .map((r) => r.id);
  }

  /** Job `id` becomes `running`, started at `startedAt` (ms), if it is still `queued`; returns whether it did. */
  claim(id: string, startedAt: number): boolean {
    const set = { status: 'running' as const, startedAt };
    return this.db.update(trainingJobs).set(set).where(and(eq(trainingJobs.id, id), eq(trainingJobs.status, 'queued'))).run().changes === 1;
  }

  /** Job `id` becomes `cancelled`, finished at `finishedAt` (ms), if it is still `queued`; returns whether it did. */
  cancelQueued(id: string, finishedAt: number): boolean {
    const set = { status: 'cancelled' as const, finishedAt };
    return this.db.update(trainingJobs).set(set).where(and(eq(trainingJobs.id, id), eq(trainingJobs.status, 'queued'))).run().changes === 1;
  }

  /** Record at `at` (ms) that running job `id` is to stop (its trainer reads it); returns whether it was running. */
  requestCancel(id: string, at: number): boolean {
    const set = { cancelRequestedAt: at };
    return this.db.update(trainingJobs).set(set).where(and(eq(trainingJobs.id, id), eq(trainingJobs.status, 'running'))).run().changes === 1;
  }
}
