/**
 * Reads of recorded sessions and steps for training: how many training sessions completed since a
 * time (the training schedule's trigger, src/training/scheduler.ts), and the model output and
 * engine record of each step of some sessions (the remote-engine training batch,
 * src/training/remote-dataset.ts).
 */
import { and, count, eq, gte, inArray } from 'drizzle-orm';
import type { Db } from './index.js';
import { sessions, steps, type StepRow } from './schema.js';

/** Sessions bound in one `IN (...)` list: stays under SQLite's bound-parameter limit. */
const IN_CHUNK = 500;

/** Number of sessions with mode `train` and status `completed` created at or after `since` (ms since the epoch). */
export function countCompletedTrainSessions(db: Db, since: number): number {
  const r = db
    .select({ n: count() })
    .from(sessions)
    .where(and(eq(sessions.mode, 'train'), eq(sessions.status, 'completed'), gte(sessions.createdAt, since)))
    .get();
  return r?.n ?? 0;
}

/** One step row's position with its model output text and remote engine record (null for none). */
export type StepOutput = Pick<StepRow, 'sessionId' | 'attempt' | 'step' | 'kind' | 'output' | 'engineRecord'>;

/** The output and engine record of every step row of `sessionIds` (any order), read 500 sessions per query. */
export function stepOutputs(db: Db, sessionIds: readonly string[]): StepOutput[] {
  const out: StepOutput[] = [];
  for (let i = 0; i < sessionIds.length; i += IN_CHUNK) {
    const rows = db
      .select({ sessionId: steps.sessionId, attempt: steps.attempt, step: steps.step, kind: steps.kind, output: steps.output, engineRecord: steps.engineRecord })
      .from(steps)
      .where(inArray(steps.sessionId, sessionIds.slice(i, i + IN_CHUNK)))
      .all();
    out.push(...rows);
  }
  return out;
}
