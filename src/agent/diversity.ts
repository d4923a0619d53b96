/**
 * Trajectory diversity per model version and env (docs/method.md#metrics), the measure `lamer eval`
 * reports (src/eval/metrics.ts `trajectoryDiversity`), over recorded sessions.
 *
 * For each (version, env, memory) group and each task in it: the Shannon entropy (nats) of the empirical
 * distribution over the distinct trajectories of the task's attempts (a trajectory is an attempt's
 * actions in order); the group's diversity is the mean over its tasks. Exploration collapse (every
 * attempt replays the same moves) shows as diversity falling towards 0 from one version to the next.
 */
import type { AttemptTrajectory } from '../db/sessions-repo.js';
import { empiricalEntropy } from '../shared/diversity.js';
import { STATS_MEMORY, type StatsMemory } from '../domain.js';

export { empiricalEntropy };


export interface DiversityGroup {
  modelVersion: string;
  env: string | null;
  /** 'none' for single-attempt sessions, else the memory mode (domain.ts STATS_MEMORY). */
  memory: StatsMemory;
  /** Sessions read. */
  sessions: number;
  /** Distinct task ids with at least one trajectory. */
  tasks: number;
  /** Attempts (trajectories) read. */
  attempts: number;
  /** Mean over tasks of the entropy of the task's trajectories, nats; 0 without tasks. */
  diversity: number;
}

/** The diversity groups, sorted by version, env, then memory (in STATS_MEMORY order), and `scanned`, the number of distinct sessions read. */
export interface DiversityAnswer {
  groups: DiversityGroup[];
  scanned: number;
}

/** Groups attempt trajectories by (modelVersion, env, memory) and computes each group's diversity. */
export function diversityByVersion(rows: readonly AttemptTrajectory[]): DiversityAnswer {
  const groups = new Map<string, { modelVersion: string; env: string | null; memory: StatsMemory; sessions: Set<string>; byTask: Map<string, string[]>; attempts: number }>();
  const scanned = new Set<string>();
  for (const r of rows) {
    scanned.add(r.sessionId);
    const key = JSON.stringify([r.modelVersion, r.env, r.memory]);
    let g = groups.get(key);
    if (!g) groups.set(key, (g = { modelVersion: r.modelVersion, env: r.env, memory: r.memory, sessions: new Set(), byTask: new Map(), attempts: 0 }));
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
      memory: g.memory,
      sessions: g.sessions.size,
      tasks: g.byTask.size,
      attempts: g.attempts,
      diversity: g.byTask.size === 0 ? 0 : sum / g.byTask.size,
    });
  }
  out.sort(compareDiversityGroups);
  return { groups: out, scanned: scanned.size };
}

/** The order of the answer's groups: version, env, then memory in STATS_MEMORY order. */
export function compareDiversityGroups(a: DiversityGroup, b: DiversityGroup): number {
  return (
    a.modelVersion.localeCompare(b.modelVersion) || String(a.env).localeCompare(String(b.env)) || STATS_MEMORY.indexOf(a.memory) - STATS_MEMORY.indexOf(b.memory)
  );
}
