/**
 * Recorded sessions and steps as training reads them, and the scores it writes back: the completed
 * training sessions matching a filter and their step rows (src/training/data/select.ts), the returns
 * and advantages stored on step rows, how many training sessions completed since a time (the
 * training schedule's trigger, src/training/run/scheduler.ts), and the model output and engine record
 * of each step of some sessions (the remote-engine training batch, src/training/data/remote-dataset.ts).
 */
import { and, asc, count, eq, gte, inArray, type SQL } from 'drizzle-orm';
import type { Db } from './index.js';
import { sessions, steps, type SessionRow, type StepRow } from './schema.js';

/** Sessions bound in one `IN (...)` list: stays under SQLite's bound-parameter limit. */
const IN_CHUNK = 500;

/** One step row's position with its model output text, remote engine record and turn record (null for none). */
export type StepOutput = Pick<StepRow, 'sessionId' | 'attempt' | 'step' | 'kind' | 'output' | 'engineRecord' | 'turn'>;

/** Which completed training sessions to read (every given field must match). */
export interface TrainingSessionFilter {
  /** Sessions created at or after this time, ms since the Unix epoch. */
  since?: number;
  env?: string;
  /** An empty list matches nothing. */
  taskIds?: string[];
  modelVersion?: string;
}

/** The return and advantage of one step row, by its position. */
export interface StepScore {
  sessionId: string;
  attempt: number;
  step: number;
  kind: StepRow['kind'];
  return: number;
  advantage: number;
}

/** The reads and writes of training on the `sessions` and `steps` tables. */
export class TrainingDataRepo {
  constructor(private readonly db: Db) {}

  /** Sessions with mode `train` and status `completed` matching `filter`: id, task, creation time and sampling settings (any order). */
  completedTrainSessions(filter: TrainingSessionFilter): Array<Pick<SessionRow, 'id' | 'taskId' | 'createdAt' | 'sampling'>> {
    const where: SQL[] = [eq(sessions.mode, 'train'), eq(sessions.status, 'completed')];
    if (filter.since !== undefined) where.push(gte(sessions.createdAt, filter.since));
    if (filter.env !== undefined) where.push(eq(sessions.env, filter.env));
    if (filter.taskIds !== undefined) {
      if (filter.taskIds.length === 0) return [];
      where.push(inArray(sessions.taskId, filter.taskIds));
    }
    if (filter.modelVersion !== undefined) where.push(eq(sessions.modelVersion, filter.modelVersion));
    return this.db.select({ id: sessions.id, taskId: sessions.taskId, createdAt: sessions.createdAt, sampling: sessions.sampling }).from(sessions).where(and(...where)).all();
  }

  /** Number of sessions with mode `train` and status `completed` created at or after `since` (ms since the epoch). */
  countCompletedTrainSessions(since: number): number {
    const r = this.db
      .select({ n: count() })
      .from(sessions)
      .where(and(eq(sessions.mode, 'train'), eq(sessions.status, 'completed'), gte(sessions.createdAt, since)))
      .get();
    return r?.n ?? 0;
  }

  /** The output, engine record and turn record of every step row of `sessionIds` (any order), read 500 sessions per query. */
  stepOutputs(sessionIds: readonly string[]): StepOutput[] {
    const out: StepOutput[] = [];
    for (let i = 0; i < sessionIds.length; i += IN_CHUNK) {
      const rows = this.db
        .select({
          sessionId: steps.sessionId, attempt: steps.attempt, step: steps.step, kind: steps.kind, output: steps.output,
          engineRecord: steps.engineRecord, turn: steps.turn,
        })
        .from(steps)
        .where(inArray(steps.sessionId, sessionIds.slice(i, i + IN_CHUNK)))
        .all();
      out.push(...rows);
    }
    return out;
  }

  /**
   * The step rows of `sessionIds` in (session id, attempt, step, kind) order within each chunk of
   * 500 sessions (chunks in the order of `sessionIds`).
   */
  stepRowsOf(sessionIds: readonly string[]): StepRow[] {
    const out: StepRow[] = [];
    for (let i = 0; i < sessionIds.length; i += IN_CHUNK) {
      out.push(
        ...this.db.select().from(steps).where(inArray(steps.sessionId, sessionIds.slice(i, i + IN_CHUNK)))
          .orderBy(asc(steps.sessionId), asc(steps.attempt), asc(steps.step), asc(steps.kind)).all(),
      );
    }
    return out;
  }

  /** Store each score on its step row, all in one transaction. */
  writeStepScores(scores: readonly StepScore[]): void {
    this.db.transaction((tx) => {
      for (const s of scores) {
        tx.update(steps).set({ return: s.return, advantage: s.advantage })
          .where(and(eq(steps.sessionId, s.sessionId), eq(steps.attempt, s.attempt), eq(steps.step, s.step), eq(steps.kind, s.kind)))
          .run();
      }
    });
  }
}
