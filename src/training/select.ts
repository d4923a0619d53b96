/**
 * Reading training data from the database and writing computed returns/advantages back
 * (shared/DESIGN.md §3: a session's trajectory shows returns and advantages once computed).
 *
 * A job trains on recorded sessions with `mode = 'train'` and `status = 'completed'`, optionally
 * filtered by creation time, env label, task ids and the model version the session pinned.
 */
import { and, asc, eq, gte, inArray, type SQL } from 'drizzle-orm';
import type { Db } from '../db/index.js';
import { sessions, steps } from '../db/schema.js';
import type { SamplerSettings, StepRecord, TurnScore } from './data.js';

export interface DataFilter {
  /** Sessions created at or after this time, ms since the Unix epoch. */
  since?: number;
  env?: string;
  taskIds?: string[];
  modelVersion?: string;
  /** Cap on sessions, newest first. */
  maxSessions?: number;
}

/**
 * Step records of the completed training sessions matching `filter`, ordered by session, attempt,
 * step and kind (action before reflection).
 */
export function selectTrainingRecords(db: Db, filter: DataFilter = {}): StepRecord[] {
  const where: SQL[] = [eq(sessions.mode, 'train'), eq(sessions.status, 'completed')];
  if (filter.since !== undefined) where.push(gte(sessions.createdAt, filter.since));
  if (filter.env !== undefined) where.push(eq(sessions.env, filter.env));
  if (filter.taskIds !== undefined) {
    if (filter.taskIds.length === 0) return [];
    where.push(inArray(sessions.taskId, filter.taskIds));
  }
  if (filter.modelVersion !== undefined) where.push(eq(sessions.modelVersion, filter.modelVersion));
  let ids = db.select({ id: sessions.id, taskId: sessions.taskId, createdAt: sessions.createdAt, sampling: sessions.sampling }).from(sessions).where(and(...where)).all();
  if (filter.maxSessions !== undefined) {
    ids = ids.sort((a, b) => b.createdAt - a.createdAt).slice(0, filter.maxSessions);
  }
  if (ids.length === 0) return [];
  const taskOf = new Map(ids.map((r) => [r.id, r.taskId]));
  const samplingOf = new Map(ids.map((r) => {
    const s = r.sampling as Partial<SamplerSettings> | null;
    return [r.id, s ? { temperature: s.temperature ?? 1, topP: s.topP ?? 1, topK: s.topK ?? 0 } : null];
  }));
  const out: StepRecord[] = [];
  const idList = [...taskOf.keys()];
  for (let i = 0; i < idList.length; i += 500) { // stay under SQLite's bound-parameter limit
    const rows = db.select().from(steps).where(inArray(steps.sessionId, idList.slice(i, i + 500)))
      .orderBy(asc(steps.sessionId), asc(steps.attempt), asc(steps.step), asc(steps.kind)).all();
    for (const r of rows) {
      out.push({
        sessionId: r.sessionId, taskId: taskOf.get(r.sessionId)!, attempt: r.attempt, step: r.step, kind: r.kind,
        observation: r.observation, reward: r.reward, done: r.done, success: r.success, invalidAction: r.invalidAction,
        promptTokenIds: r.promptTokenIds ?? null, outputTokenIds: r.outputTokenIds ?? null, logprobs: r.logprobs ?? null,
        modelVersion: r.modelVersion, sampling: samplingOf.get(r.sessionId) ?? null, availableActions: r.availableActions ?? null,
      });
    }
  }
  return out;
}

/** Store each turn's return and advantage on its step row (skipped turns too, with advantage 0). */
export function writeTurnScores(db: Db, scores: readonly TurnScore[]): void {
  db.transaction((tx) => {
    for (const s of scores) {
      tx.update(steps).set({ return: s.return, advantage: s.advantage })
        .where(and(eq(steps.sessionId, s.sessionId), eq(steps.attempt, s.attempt), eq(steps.step, s.step), eq(steps.kind, s.kind)))
        .run();
    }
  });
}
