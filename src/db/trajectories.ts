/**
 * Attempt trajectories for the diversity statistic (src/agent/diversity.ts): one row per attempt of
 * the tenant's newest completed sessions, the attempt's recorded actions in step order.
 */
import type Database from 'better-sqlite3';

export interface TrajectoryFilters {
  env?: string;
  mode?: 'train' | 'eval';
  modelVersion?: string;
  taskId?: string;
}

/** One attempt of a session: its actions joined by '\n' in step order (null for a session without any recorded action). */
export interface AttemptTrajectory {
  sessionId: string;
  modelVersion: string;
  env: string | null;
  taskId: string;
  trajectory: string | null;
}

/**
 * The attempts of the tenant's newest `maxSessions` completed sessions matching `f` (newest by id,
 * which is time-ordered). Each session costs one indexed range of its steps (`steps_position`).
 * The final observation of an attempt has no action and is left out.
 */
export function attemptTrajectories(sqlite: Database.Database, tenant: string, f: TrajectoryFilters, maxSessions: number): AttemptTrajectory[] {
  const where = ['tenant = @tenant', "status = 'completed'"];
  if (f.env !== undefined) where.push('env = @env');
  if (f.mode !== undefined) where.push('mode = @mode');
  if (f.modelVersion !== undefined) where.push('model_version = @modelVersion');
  if (f.taskId !== undefined) where.push('task_id = @taskId');
  // group_concat(... ORDER BY step) needs SQLite 3.44 (better-sqlite3 12 ships 3.5x).
  return sqlite
    .prepare(
      `WITH s AS (SELECT id, model_version, env, task_id FROM sessions WHERE ${where.join(' AND ')} ORDER BY id DESC LIMIT @limit)
       SELECT s.id AS sessionId, s.model_version AS modelVersion, s.env AS env, s.task_id AS taskId,
              group_concat(coalesce(st.action, ''), char(10) ORDER BY st.step) AS trajectory
       FROM s LEFT JOIN steps st ON st.session_id = s.id AND st.kind = 'action' AND st.action IS NOT NULL
       GROUP BY s.id, st.attempt`,
    )
    .all({ tenant, limit: maxSessions, ...f }) as AttemptTrajectory[];
}

/**
 * A token that changes whenever the set of the tenant's completed sessions may have changed: their
 * number and latest update time (ms). Completed sessions' actions never change afterwards, so equal
 * tokens mean equal `attemptTrajectories` answers (used to cache the diversity statistic).
 */
export function completedSessionsToken(sqlite: Database.Database, tenant: string): string {
  const r = sqlite
    .prepare("SELECT count(*) AS n, max(updated_at) AS at FROM sessions WHERE tenant = ? AND status = 'completed'")
    .get(tenant) as { n: number; at: number | null };
  return `${r.n}:${r.at ?? 0}`;
}
