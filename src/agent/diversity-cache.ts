/**
 * Answers of `GET /v1/stats/diversity` (src/agent/diversity.ts) kept between calls and brought up
 * to date by reading only what completed since: the statistic is over the newest `maxSessions`
 * completed sessions matching a filter (the *window*, by session id), so it cannot be summed on
 * write like `GET /v1/stats`, but the window only changes when a session completes.
 *
 * Each answer is kept with the window's session ids and the tenant's completion seq it has seen
 * (src/db/schema.ts statsCompletions: completions numbered 1, 2, ... in commit order, shared by every
 * replica of one database). A call reads the tenant's seq (one row): unchanged, the answer stands;
 * changed, it reads the ids completed since, keeps those that match the filter and belong in the
 * window (newer than its oldest, or any while it holds fewer than `maxSessions`), drops the oldest
 * beyond `maxSessions`, and computes the answer again from the window's rows. A session's rows
 * (its attempts' trajectories) never change once it is completed, so they are kept by session id,
 * shared by all windows, and only a session not kept yet is read from the database. The answer is
 * the one a full read of the window gives, row for row in the same order (session id, then attempt).
 */
import type { AttemptTrajectory, SessionFilters } from '../db/sessions-repo.js';
import { diversityByVersion, type DiversityAnswer } from './diversity.js';

/** The reads the cache makes (src/db/sessions-repo.ts documents each). */
export interface DiversityReads {
  completionSeq(tenant: string): number;
  completionsBetween(tenant: string, after: number, upTo: number): string[];
  attemptTrajectories(tenant: string, f: Omit<SessionFilters, 'status'>, maxSessions: number): AttemptTrajectory[];
  trajectoriesOf(tenant: string, f: Omit<SessionFilters, 'status'>, ids: readonly string[]): AttemptTrajectory[];
}

interface Entry {
  /** The tenant's completion seq the window is up to date with. */
  seq: number;
  /** The window: session ids, ascending. */
  ids: string[];
  answer: DiversityAnswer;
}

/** How much the cache keeps: answers (least recently used dropped first), and sessions' rows (oldest kept dropped first). */
export interface DiversityCacheLimits {
  answers: number;
  sessions: number;
}

export class DiversityCache {
  private readonly entries = new Map<string, Entry>();
  private readonly rowsById = new Map<string, AttemptTrajectory[]>();

  constructor(
    private readonly reads: DiversityReads,
    private readonly limits: DiversityCacheLimits = { answers: 64, sessions: 50_000 },
  ) {}

  /** The diversity of the tenant's newest `maxSessions` completed sessions matching `f` (diversityByVersion of attemptTrajectories). */
  answer(tenant: string, f: Omit<SessionFilters, 'status'>, maxSessions: number): DiversityAnswer {
    const key = JSON.stringify([tenant, f.env, f.mode, f.modelVersion, f.taskId, f.memory, maxSessions]);
    const seq = this.reads.completionSeq(tenant);
    let e = this.entries.get(key);
    this.entries.delete(key);
    // more completions than the window holds: one read of the window costs less than following them
    if (!e || seq < e.seq || seq - e.seq > maxSessions) e = this.full(tenant, f, maxSessions, seq);
    else if (seq !== e.seq) e = this.extend(e, tenant, f, maxSessions, seq);
    this.entries.set(key, e);
    if (this.entries.size > this.limits.answers) this.entries.delete(this.entries.keys().next().value!);
    return e.answer;
  }

  private full(tenant: string, f: Omit<SessionFilters, 'status'>, maxSessions: number, seq: number): Entry {
    const rows = this.reads.attemptTrajectories(tenant, f, maxSessions);
    return { seq, ids: this.keep(rows), answer: diversityByVersion(rows) };
  }

  /** The window `e` after the completions with a seq in (e.seq, seq]. */
  private extend(e: Entry, tenant: string, f: Omit<SessionFilters, 'status'>, maxSessions: number, seq: number): Entry {
    const full = e.ids.length >= maxSessions;
    const oldest = e.ids[0] ?? '';
    const candidates = this.reads.completionsBetween(tenant, e.seq, seq).filter((id) => !full || id > oldest);
    const added = candidates.length === 0 ? [] : this.keep(this.reads.trajectoriesOf(tenant, f, candidates));
    if (added.length === 0) return { ...e, seq };
    const ids = mergeIds(e.ids, added).slice(-maxSessions);
    const missing = ids.filter((id) => !this.rowsById.has(id));
    if (missing.length > 0) this.keep(this.reads.trajectoriesOf(tenant, f, missing));
    if (ids.some((id) => !this.rowsById.has(id))) return this.full(tenant, f, maxSessions, seq);
    return { seq, ids, answer: diversityByVersion(ids.flatMap((id) => this.rowsById.get(id) ?? [])) };
  }

  /** Keep the rows of each session (rows in session id, then attempt order); returns the sessions' ids in order. */
  private keep(rows: readonly AttemptTrajectory[]): string[] {
    const ids: string[] = [];
    for (const r of rows) {
      if (ids.at(-1) !== r.sessionId) {
        ids.push(r.sessionId);
        this.rowsById.delete(r.sessionId);
        this.rowsById.set(r.sessionId, []);
      }
      this.rowsById.get(r.sessionId)!.push(r);
    }
    // keep at least the rows just read, so that a window larger than the limit is still answered
    while (this.rowsById.size > Math.max(this.limits.sessions, ids.length)) this.rowsById.delete(this.rowsById.keys().next().value!);
    return ids;
  }
}

/** The union of two ascending id lists, ascending, without repeats. */
function mergeIds(a: readonly string[], b: readonly string[]): string[] {
  const out: string[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    const next = j >= b.length || (i < a.length && a[i]! <= b[j]!) ? a[i++]! : b[j++]!;
    if (out.at(-1) !== next) out.push(next);
  }
  return out;
}
