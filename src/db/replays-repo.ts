/**
 * Queries of replays (src/agent/replays.ts, docs/replay.md): the `replays` table of stored reports,
 * and the reads of recorded sessions a replay needs (which sessions a filter selects, how many model
 * calls they hold, their rows and reflections). A replay only reads `sessions`, `steps` and
 * `reflections`; it writes nothing but its own report row.
 */
import { and, asc, desc, eq, inArray, isNotNull, lt, sql, type SQL } from 'drizzle-orm';
import type { Db } from './index.js';
import { replaySessionConditions, type ReplaySessionFilter } from './replay-filter.js';
import { reflections, replays, sessions, steps, type ReplayRow, type SessionRow, type StepRow } from './schema.js';

/** The columns of a recorded row that a replay reads (the prompt text is not read: it is rebuilt). */
export type ReplayedRow = Pick<
  StepRow,
  | 'attempt'
  | 'step'
  | 'kind'
  | 'observation'
  | 'done'
  | 'success'
  | 'availableActions'
  | 'output'
  | 'action'
  | 'promptTokenIds'
  | 'outputTokenIds'
  | 'logprobs'
  | 'engineRecord'
  | 'turn'
  | 'modelVersion'
>;

/** A stored report without its steps (listings). */
export type ReplaySummaryRow = Omit<ReplayRow, 'steps'>;

export class ReplaysRepo {
  constructor(private readonly db: Db) {}

  /** Insert one report. */
  insert(row: ReplayRow): void {
    this.db.insert(replays).values(row).run();
  }

  /** The tenant's report `id`, or undefined (another tenant's report reads as missing). */
  get(tenant: string, id: string): ReplayRow | undefined {
    return this.db
      .select()
      .from(replays)
      .where(and(eq(replays.tenant, tenant), eq(replays.id, id)))
      .get();
  }

  /** Whether the tenant has report `id` (its steps are not read). */
  has(tenant: string, id: string): boolean {
    return this.db.select({ id: replays.id }).from(replays).where(and(eq(replays.tenant, tenant), eq(replays.id, id))).get() !== undefined;
  }

  /** The tenant's reports, newest id first, with ids below `cursor`, without their steps: at most `limit + 1` rows. */
  list(tenant: string, f: { modelVersion?: string }, limit: number, cursor?: string): ReplaySummaryRow[] {
    const conds: SQL[] = [eq(replays.tenant, tenant)];
    if (f.modelVersion) conds.push(eq(replays.modelVersion, f.modelVersion));
    if (cursor) conds.push(lt(replays.id, cursor));
    return this.db
      .select({
        id: replays.id,
        tenant: replays.tenant,
        modelVersion: replays.modelVersion,
        decoding: replays.decoding,
        request: replays.request,
        summary: replays.summary,
        sessions: replays.sessions,
        createdAt: replays.createdAt,
      })
      .from(replays)
      .where(and(...conds))
      .orderBy(desc(replays.id))
      .limit(limit + 1)
      .all();
  }

  /** The tenant's sessions matching `f`, newest first (ids are time-ordered): at most `limit`. */
  sessions(tenant: string, f: ReplaySessionFilter, limit: number): SessionRow[] {
    return this.db
      .select()
      .from(sessions)
      .where(and(...replaySessionConditions(sessions, tenant, f)))
      .orderBy(desc(sessions.id))
      .limit(limit)
      .all();
  }

  /** Recorded model calls (action rows with an output: steps that acted, and turns) per session id; absent ids hold none. */
  modelCalls(sessionIds: readonly string[]): Map<string, number> {
    const out = new Map<string, number>();
    if (sessionIds.length === 0) return out;
    const rows = this.db
      .select({ id: steps.sessionId, n: sql<number>`count(*)` })
      .from(steps)
      .where(and(inArray(steps.sessionId, [...sessionIds]), eq(steps.kind, 'action'), isNotNull(steps.output)))
      .groupBy(steps.sessionId)
      .all();
    for (const r of rows) out.set(r.id, r.n);
    return out;
  }

  /** Every action row of session `sessionId` in position order (attempt, step), the columns a replay reads. */
  actionRows(sessionId: string): ReplayedRow[] {
    return this.db
      .select({
        attempt: steps.attempt,
        step: steps.step,
        kind: steps.kind,
        observation: steps.observation,
        done: steps.done,
        success: steps.success,
        availableActions: steps.availableActions,
        output: steps.output,
        action: steps.action,
        promptTokenIds: steps.promptTokenIds,
        outputTokenIds: steps.outputTokenIds,
        logprobs: steps.logprobs,
        engineRecord: steps.engineRecord,
        turn: steps.turn,
        modelVersion: steps.modelVersion,
      })
      .from(steps)
      .where(and(eq(steps.sessionId, sessionId), eq(steps.kind, 'action')))
      .orderBy(asc(steps.attempt), asc(steps.step))
      .all();
  }

  /** The reflection texts of session `sessionId` by attempt (as they are now: a human edit shows). */
  reflections(sessionId: string): Map<number, string> {
    const rows = this.db
      .select({ attempt: reflections.attempt, text: reflections.text })
      .from(reflections)
      .where(eq(reflections.sessionId, sessionId))
      .all();
    return new Map(rows.map((r) => [r.attempt, r.text] as const));
  }
}
