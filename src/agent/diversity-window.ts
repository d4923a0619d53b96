/**
 * A window of completed sessions' trajectories that answers the diversity statistic
 * (src/agent/diversity.ts diversityByVersion) as sessions enter and leave it, recomputing only the
 * entropy of the tasks they belong to.
 *
 * The answer is diversityByVersion's over the window's rows in (session id, attempt) order, bit for
 * bit: a task's entropy is empiricalEntropy over its trajectories in that order, and a group's
 * diversity sums its tasks' entropies in the order diversityByVersion meets the tasks (the order
 * of each task's first session with a trajectory), then divides by their number.
 */
import type { AttemptTrajectory } from '../db/sessions-repo.js';
import type { StatsMemory } from '../domain.js';
import { compareDiversityGroups, empiricalEntropy, type DiversityAnswer, type DiversityGroup } from './diversity.js';

interface TaskState {
  /** Sessions with at least one trajectory, ascending. */
  ids: string[];
  bySession: Map<string, string[]>;
  entropy: number;
  dirty: boolean;
}

interface GroupState {
  modelVersion: string;
  env: string | null;
  memory: StatsMemory;
  sessions: number;
  attempts: number;
  tasks: Map<string, TaskState>;
}

/** Where `id` goes in the ascending `ids` (binary search); `found` when it is there. */
function place(ids: readonly string[], id: string): { at: number; found: boolean } {
  let lo = 0;
  let hi = ids.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (ids[mid]! < id) lo = mid + 1;
    else hi = mid;
  }
  return { at: lo, found: ids[lo] === id };
}

export class DiversityWindow {
  /** The sessions in the window, ascending. */
  readonly ids: string[] = [];
  private readonly rowsOf = new Map<string, readonly AttemptTrajectory[]>();
  private readonly groups = new Map<string, GroupState>();

  /** Sessions in the window. */
  get size(): number {
    return this.ids.length;
  }

  /** Add one session (its rows, in attempt order); no-op when it is in the window already. */
  add(rows: readonly AttemptTrajectory[]): void {
    const first = rows[0];
    if (!first) return;
    const { at, found } = place(this.ids, first.sessionId);
    if (found) return;
    this.ids.splice(at, 0, first.sessionId);
    this.rowsOf.set(first.sessionId, rows);
    const key = JSON.stringify([first.modelVersion, first.env, first.memory]);
    let g = this.groups.get(key);
    if (!g) {
      g = { modelVersion: first.modelVersion, env: first.env, memory: first.memory, sessions: 0, attempts: 0, tasks: new Map() };
      this.groups.set(key, g);
    }
    g.sessions++;
    const trajectories = rows.map((r) => r.trajectory).filter((t): t is string => t !== null);
    if (trajectories.length === 0) return;
    g.attempts += trajectories.length;
    let t = g.tasks.get(first.taskId);
    if (!t) g.tasks.set(first.taskId, (t = { ids: [], bySession: new Map(), entropy: 0, dirty: true }));
    t.ids.splice(place(t.ids, first.sessionId).at, 0, first.sessionId);
    t.bySession.set(first.sessionId, trajectories);
    t.dirty = true;
  }

  /** Remove session `id` from the window; no-op when it is not there. */
  remove(id: string): void {
    const rows = this.rowsOf.get(id);
    if (!rows) return;
    const first = rows[0]!;
    this.ids.splice(place(this.ids, id).at, 1);
    this.rowsOf.delete(id);
    const key = JSON.stringify([first.modelVersion, first.env, first.memory]);
    const g = this.groups.get(key)!;
    if (--g.sessions === 0) {
      this.groups.delete(key);
      return;
    }
    const t = g.tasks.get(first.taskId);
    const trajectories = t?.bySession.get(id);
    if (!t || !trajectories) return;
    g.attempts -= trajectories.length;
    t.ids.splice(place(t.ids, id).at, 1);
    t.bySession.delete(id);
    t.dirty = true;
    if (t.ids.length === 0) g.tasks.delete(first.taskId);
  }

  /** diversityByVersion of the window's rows. */
  answer(): DiversityAnswer {
    const out: DiversityGroup[] = [];
    for (const g of this.groups.values()) {
      const tasks = [...g.tasks.values()].sort((a, b) => (a.ids[0]! < b.ids[0]! ? -1 : 1));
      let sum = 0;
      for (const t of tasks) {
        if (t.dirty) {
          t.entropy = empiricalEntropy(t.ids.flatMap((id) => t.bySession.get(id)!));
          t.dirty = false;
        }
        sum += t.entropy;
      }
      const { modelVersion, env, memory, sessions, attempts } = g;
      const diversity = tasks.length === 0 ? 0 : sum / tasks.length;
      out.push({ modelVersion, env, memory, sessions, tasks: tasks.length, attempts, diversity });
    }
    out.sort(compareDiversityGroups);
    return { groups: out, scanned: this.ids.length };
  }
}
