/**
 * Trajectory diversity per model version and env, read from the recorded steps (shared/LAMER.md §4;
 * the same measure as `lamer eval`'s, src/eval/metrics.ts `trajectoryDiversity`).
 *
 * A trajectory is the sequence of an attempt's recorded actions (the `action` of its `action` rows
 * in step order, the final observation having none). For each (version, env) group and each task in
 * it, the Shannon entropy (nats) of the empirical distribution over the distinct trajectories of the
 * task's attempts; the group's diversity is the mean over its tasks. Exploration collapse (every
 * attempt replays the same moves) shows as diversity falling towards 0 from one version to the next.
 */
import type Database from 'better-sqlite3';
import { empiricalEntropy } from '../eval/metrics.js';

export interface DiversityFilters {
  env?: string;
  mode?: 'train' | 'eval';
  modelVersion?: string;
  taskId?: string;
}

export interface DiversityGroup {
  modelVersion: string;
  env: string | null;
  /** Completed sessions read. */
  sessions: number;
  /** Distinct task ids among them. */
  tasks: number;
  /** Attempts (trajectories) read. */
  attempts: number;
  /** Mean over tasks of the entropy of the task's trajectories, nats. */
  diversity: number;
}

/**
 * Diversity of the tenant's newest `maxSessions` completed sessions matching `f`, per
 * (modelVersion, env), groups sorted by version then env.
 * @param sqlite the server's connection (read only here)
 * @param maxSessions how many sessions at most are read, newest first (bounds the work: each session
 *   costs one indexed range of its steps)
 * @returns the groups and `scanned`, the number of sessions read (`scanned === maxSessions` means
 *   older sessions were left out)
 */
export function trajectoryDiversity(
  sqlite: Database.Database,
  tenant: string,
  f: DiversityFilters,
  maxSessions: number,
): { groups: DiversityGroup[]; scanned: number } {
  const where = ['tenant = @tenant', "status = 'completed'"];
  if (f.env !== undefined) where.push('env = @env');
  if (f.mode !== undefined) where.push('mode = @mode');
  if (f.modelVersion !== undefined) where.push('model_version = @modelVersion');
  if (f.taskId !== undefined) where.push('task_id = @taskId');
  // group_concat(... ORDER BY step) needs SQLite 3.44 (better-sqlite3 12 ships 3.5x).
  const rows = sqlite
    .prepare(
      `WITH s AS (SELECT id, model_version, env, task_id FROM sessions WHERE ${where.join(' AND ')} ORDER BY id DESC LIMIT @limit)
       SELECT s.id AS sessionId, s.model_version AS modelVersion, s.env AS env, s.task_id AS taskId,
              group_concat(coalesce(st.action, ''), char(10) ORDER BY st.step) AS trajectory
       FROM s LEFT JOIN steps st ON st.session_id = s.id AND st.kind = 'action' AND st.action IS NOT NULL
       GROUP BY s.id, st.attempt`,
    )
    .all({ tenant, limit: maxSessions, ...f }) as { sessionId: string; modelVersion: string; env: string | null; taskId: string; trajectory: string | null }[];

  const groups = new Map<string, { modelVersion: string; env: string | null; sessions: Set<string>; byTask: Map<string, string[]>; attempts: number }>();
  for (const r of rows) {
    const key = JSON.stringify([r.modelVersion, r.env]);
    let g = groups.get(key);
    if (!g) groups.set(key, (g = { modelVersion: r.modelVersion, env: r.env, sessions: new Set(), byTask: new Map(), attempts: 0 }));
    g.sessions.add(r.sessionId);
    if (r.trajectory === null) continue; // a session without recorded actions: no trajectory
    g.attempts++;
    const list = g.byTask.get(r.taskId) ?? [];
    list.push(r.trajectory);
    g.byTask.set(r.taskId, list);
  }
  const out: DiversityGroup[] = [];
  for (const g of groups.values()) {
    let sum = 0;
    for (const t of g.byTask.values()) sum += empiricalEntropy(t);
    out.push({
      modelVersion: g.modelVersion,
      env: g.env,
      sessions: g.sessions.size,
      tasks: g.byTask.size,
      attempts: g.attempts,
      diversity: g.byTask.size === 0 ? 0 : sum / g.byTask.size,
    });
  }
  out.sort((a, b) => a.modelVersion.localeCompare(b.modelVersion) || String(a.env).localeCompare(String(b.env)));
  const scanned = new Set(rows.map((r) => r.sessionId)).size;
  return { groups: out, scanned };
}
