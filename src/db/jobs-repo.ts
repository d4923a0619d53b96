/**
 * Queries of the `training_jobs` table for the HTTP layer (the job manager, src/training/manager.ts,
 * owns the writes).
 */
import { and, desc, eq, lt, or, type SQL } from 'drizzle-orm';
import type { Db } from './index.js';
import { trainingJobs, type TrainingJobRow } from './schema.js';

/** Filters and page of a job listing. `cursor` is `<createdAt ms>~<id>` of the last job of the previous page. */
export interface JobListQuery {
  status?: TrainingJobRow['status'];
  algorithm?: TrainingJobRow['algorithm'];
  cursor?: string;
  limit: number;
}

/**
 * Jobs matching `q`, newest first (createdAt, then id, descending), after `q.cursor`: at most
 * `q.limit + 1` rows, so the caller can tell whether another page follows.
 */
export function listJobs(db: Db, q: JobListQuery): TrainingJobRow[] {
  const conds: SQL[] = [];
  if (q.status) conds.push(eq(trainingJobs.status, q.status));
  if (q.algorithm) conds.push(eq(trainingJobs.algorithm, q.algorithm));
  if (q.cursor) {
    const [t, id] = q.cursor.split('~') as [string, string];
    conds.push(or(lt(trainingJobs.createdAt, Number(t)), and(eq(trainingJobs.createdAt, Number(t)), lt(trainingJobs.id, id)))!);
  }
  return db.select().from(trainingJobs).where(conds.length ? and(...conds) : undefined)
    .orderBy(desc(trainingJobs.createdAt), desc(trainingJobs.id)).limit(q.limit + 1).all();
}
