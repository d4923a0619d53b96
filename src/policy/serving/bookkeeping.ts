/**
 * The serving pool's bookkeeping (src/policy/serving-pool.ts), apart from its threads
 * (./workers.ts):
 * - sticky sessions: a session's first call picks the live worker with the fewest sessions (then
 *   the fewest calls in flight, then the lowest index), and every later call of it goes to that
 *   worker, so its KV cache stays there, until `release` or until that worker dies (the session
 *   then moves to another). Sessionless calls pick the live worker with the fewest calls in flight
 *   (then the fewest sessions, then the lowest index).
 * - version recency: versions in order of last use across all workers, which each worker applies
 *   before a call so that its LRU evicts the version the in-process engine would evict.
 */
import { EngineError } from '../engine.js';

/** What the bookkeeping reads and counts on a worker. */
export interface WorkerLoad {
  readonly index: number;
  /** Sessions assigned to this worker. */
  sessions: number;
  /** Model calls (act, reflect, score, complete) sent and not answered. */
  inFlight: number;
  /** Why the thread is gone, or null while it runs. */
  readonly dead: string | null;
}

/** Sticky assignment of sessions to workers; keeps each worker's `sessions` count. */
export class SessionAssignments<W extends WorkerLoad> {
  private readonly assigned = new Map<string, W>();

  /** @param workers every worker of the pool, live or dead, by index (read at each pick). */
  constructor(private readonly workers: readonly W[]) {}

  /**
   * The live worker with the fewest sessions, then the fewest calls in flight, then the lowest
   * index (`bySessions`); else by calls in flight first, then sessions, then index.
   * @throws EngineError when no worker is live.
   */
  leastLoaded(bySessions: boolean): W {
    const live = this.workers.filter((s) => s.dead === null);
    if (live.length === 0) throw new EngineError('every serving worker stopped; the server restarts');
    let best = live[0]!;
    for (const s of live) {
      const a = bySessions ? [s.sessions, s.inFlight] : [s.inFlight, s.sessions];
      const b = bySessions ? [best.sessions, best.inFlight] : [best.inFlight, best.sessions];
      if (a[0]! < b[0]! || (a[0] === b[0] && a[1]! < b[1]!)) best = s;
    }
    return best;
  }

  /**
   * The session's worker, assigned at its first call (a session of a dead worker moves).
   * @throws EngineError when no worker is live.
   */
  workerFor(sessionId: string): W {
    const cur = this.assigned.get(sessionId);
    if (cur && cur.dead === null) return cur;
    if (cur) cur.sessions--;
    const s = this.leastLoaded(true);
    s.sessions++;
    this.assigned.set(sessionId, s);
    return s;
  }

  /** The worker `sessionId` is assigned to, or undefined (not seen, or released). */
  workerOf(sessionId: string): W | undefined {
    return this.assigned.get(sessionId);
  }

  /** Frees the session's assignment; returns the worker it had (whose cache to free), if any. */
  release(sessionId: string): W | undefined {
    const s = this.assigned.get(sessionId);
    if (!s) return undefined;
    this.assigned.delete(sessionId);
    s.sessions--;
    return s;
  }

  /** Forgets every assignment (dispose). */
  clear(): void {
    this.assigned.clear();
  }
}

/** Versions by last use across all workers, oldest first (only loaded versions ever enter). */
export class VersionRecency {
  private readonly order: string[] = [];

  /**
   * Marks `version` most recently used (when `add`, also a version not seen yet) and returns a
   * copy of the order, oldest first; a version not seen and not added leaves the order as is.
   */
  use(version: string, add = false): string[] {
    const i = this.order.indexOf(version);
    if (i >= 0) this.order.splice(i, 1);
    if (i >= 0 || add) this.order.push(version);
    return [...this.order];
  }
}
