/**
 * Answers of `GET /v1/stats/diversity` (src/agent/diversity.ts) kept between calls and brought up
 * to date by reading only what completed since: the statistic is over the newest `maxSessions`
 * completed sessions matching a filter (the *window*, by session id), so it cannot be summed on
 * write like `GET /v1/stats`, but the window only changes when a session completes.
 *
 * Each answer is kept with its window (./diversity-window.ts: the sessions' trajectories, by group
 * and task) and the tenant's completion seq it has seen (src/db/schema.ts statsCompletions:
 * completions numbered 1, 2, ... in commit order, shared by every replica of one database). A call
 * reads the tenant's seq (one row): unchanged, the answer stands; changed, it reads the ids
 * completed since, and the rows of those that belong in the window (newer than its oldest, or any
 * while it holds fewer than `maxSessions`) and match the filter, adds them, drops the oldest beyond
 * `maxSessions`, and recomputes the entropy of the tasks that changed. A completed session's
 * trajectories never change, so the answer is the one a full read of the window gives.
 *
 * The reads are async (either store). An answer is taken out of the cache while a call brings it
 * up to date, so concurrent calls never change one window together (a call that comes meanwhile
 * reads its own). A full read may already hold sessions completed after the seq read before it;
 * the window adds a session once (./diversity-window.ts), so following those completions later
 * changes nothing.
 *
 * Memory: the windows hold their sessions' trajectories; answers beyond `limits.answers`, or
 * beyond `limits.sessions` sessions in all windows together, are dropped least recently used first.
 */
import type { AttemptTrajectory, SessionFilters } from '../db/sessions-repo.js';
import type { DiversityAnswer } from './diversity.js';
import { DiversityWindow } from './diversity-window.js';

/** The reads the cache makes (src/db/sessions-repo.ts documents each). */
export interface DiversityReads {
  completionSeq(tenant: string): Promise<number>;
  completionsBetween(tenant: string, after: number, upTo: number): Promise<string[]>;
  attemptTrajectories(tenant: string, f: Omit<SessionFilters, 'status'>, maxSessions: number): Promise<AttemptTrajectory[]>;
  trajectoriesOf(tenant: string, f: Omit<SessionFilters, 'status'>, ids: readonly string[]): Promise<AttemptTrajectory[]>;
}

interface Entry {
  /** The tenant's completion seq the window is up to date with. */
  seq: number;
  window: DiversityWindow;
  answer: DiversityAnswer;
}

/** How much the cache keeps: answers, and sessions in all their windows together (least recently used answers dropped first). */
export interface DiversityCacheLimits {
  answers: number;
  sessions: number;
}

export class DiversityCache {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly reads: DiversityReads,
    private readonly limits: DiversityCacheLimits = { answers: 64, sessions: 200_000 },
  ) {}

  /** The diversity of the tenant's newest `maxSessions` completed sessions matching `f` (diversityByVersion of attemptTrajectories). */
  async answer(tenant: string, f: Omit<SessionFilters, 'status'>, maxSessions: number): Promise<DiversityAnswer> {
    const key = JSON.stringify([tenant, f.env, f.mode, f.modelVersion, f.taskId, f.memory, maxSessions]);
    const seq = await this.reads.completionSeq(tenant);
    // taken out of the map while it is brought up to date: a call that comes meanwhile reads its own
    let e = this.entries.get(key);
    this.entries.delete(key);
    // more completions than the window holds: one read of the window costs less than following them
    if (!e || seq < e.seq || seq - e.seq > maxSessions) e = await this.full(tenant, f, maxSessions, seq);
    else if (seq !== e.seq) await this.extend(e, tenant, f, maxSessions, seq);
    // of this call's entry and one a call that came meanwhile stored, the later one is kept
    const other = this.entries.get(key);
    const kept = other && other.seq > e.seq ? other : e;
    this.entries.delete(key);
    this.entries.set(key, kept);
    let held = 0;
    for (const x of this.entries.values()) held += x.window.size;
    for (const [k, x] of this.entries) {
      if (this.entries.size <= this.limits.answers && held <= this.limits.sessions) break;
      if (x === kept) continue;
      this.entries.delete(k);
      held -= x.window.size;
    }
    return e.answer;
  }

  private async full(tenant: string, f: Omit<SessionFilters, 'status'>, maxSessions: number, seq: number): Promise<Entry> {
    const window = new DiversityWindow();
    for (const rows of bySession(await this.reads.attemptTrajectories(tenant, f, maxSessions))) window.add(rows);
    return { seq, window, answer: window.answer() };
  }

  /** Bring `e` up to the completions with a seq in (e.seq, seq]. */
  private async extend(e: Entry, tenant: string, f: Omit<SessionFilters, 'status'>, maxSessions: number, seq: number): Promise<void> {
    const { window } = e;
    const full = window.size >= maxSessions;
    const oldest = window.ids[0] ?? '';
    const candidates = (await this.reads.completionsBetween(tenant, e.seq, seq)).filter((id) => !full || id > oldest);
    e.seq = seq;
    if (candidates.length === 0) return;
    const before = window.size;
    const added = bySession(await this.reads.trajectoriesOf(tenant, f, candidates));
    for (const rows of added) window.add(rows);
    if (window.size === before) return;
    while (window.size > maxSessions) window.remove(window.ids[0]!);
    e.answer = window.answer();
  }
}

/** Rows in (session id, attempt) order split by session. */
function bySession(rows: readonly AttemptTrajectory[]): AttemptTrajectory[][] {
  const out: AttemptTrajectory[][] = [];
  for (const r of rows) {
    const last = out.at(-1);
    if (last && last[0]!.sessionId === r.sessionId) last.push(r);
    else out.push([r]);
  }
  return out;
}
