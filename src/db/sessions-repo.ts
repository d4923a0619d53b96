/**
 * Queries of the `sessions` and `reflections` tables outside the step hot path (which uses the
 * prepared statements of src/db/queries.ts): create, list, close, expire, count, statistics rows,
 * human edits of reflections. The rules (who may do what, when) live in src/agent/sessions.ts.
 */
import type Database from 'better-sqlite3';
import { and, desc, eq, getTableColumns, gt, inArray, is, lt, SQL, sql } from 'drizzle-orm';
import type { StatsMemory } from '../domain.js';
import type { SQLiteColumn } from 'drizzle-orm/sqlite-core';
import type { Db } from './index.js';
import { reflections, sessions, steps, type SessionRow } from './schema.js';
import type { StatsGroup } from '../shared/stats-aggregate.js';
import { statsAggregates, type SqliteStatsAggregates } from './stats-aggregates.js';

/** Filters of a session listing (every given field must match). */
export interface SessionFilters {
  status?: SessionRow['status'];
  taskId?: string;
  env?: string;
  mode?: SessionRow['mode'];
  modelVersion?: string;
  /** 'none': single-attempt sessions (maxAttempts 1); a memory mode: multi-attempt sessions with that memory (domain.ts STATS_MEMORY). */
  memory?: StatsMemory;
}

/** One attempt of a completed session as the diversity statistic reads it (src/agent/diversity.ts). */
export interface AttemptTrajectory {
  sessionId: string;
  modelVersion: string;
  env: string | null;
  taskId: string;
  /** The session's memory as statistics read it (domain.ts STATS_MEMORY). */
  memory: StatsMemory;
  /** The attempt's actions joined by '\n' in step order; null for a session without any action. */
  trajectory: string | null;
}

/** The columns of a completed session that statistics read. */
export type StatsRow = Pick<SessionRow, 'id' | 'taskId' | 'attempts' | 'maxAttempts' | 'modelVersion' | 'env' | 'mode' | 'memory'>;

/** Conditions of `f` on the sessions table, after `first`. */
function filterConds(first: SQL[], f: SessionFilters): SQL[] {
  const conds = [...first];
  if (f.status) conds.push(eq(sessions.status, f.status));
  if (f.taskId) conds.push(eq(sessions.taskId, f.taskId));
  if (f.env) conds.push(eq(sessions.env, f.env));
  if (f.mode) conds.push(eq(sessions.mode, f.mode));
  if (f.modelVersion) conds.push(eq(sessions.modelVersion, f.modelVersion));
  if (f.memory === 'none') conds.push(eq(sessions.maxAttempts, 1));
  else if (f.memory) conds.push(eq(sessions.memory, f.memory), gt(sessions.maxAttempts, 1));
  return conds;
}

/**
 * The columns of the sessions table by their SessionRow key (schema order). SessionsRepo.insert
 * binds a column's value or its plain default, so a default that drizzle computes at insert time
 * (SQL, `$defaultFn`, `$onUpdateFn`) is refused here, at load, rather than left out silently.
 */
const SESSION_COLUMNS = Object.entries(getTableColumns(sessions)) as Array<[keyof SessionRow, SQLiteColumn]>;
for (const [key, column] of SESSION_COLUMNS) {
  if (is(column.default, SQL) || column.defaultFn !== undefined || column.onUpdateFn !== undefined) {
    throw new Error(`sessions.${key}: a default computed at insert time is not supported by SessionsRepo.insert`);
  }
}

export class SessionsRepo {
  private readonly stats: SqliteStatsAggregates;

  /** The insert of a session row, prepared once: every column of the schema, in SESSION_COLUMNS order. */
  private readonly insertRow: Database.Statement;

  constructor(private readonly db: Db) {
    this.stats = statsAggregates(db.$client);
    const names = SESSION_COLUMNS.map(([, c]) => `"${c.name}"`).join(', ');
    this.insertRow = db.$client.prepare(`INSERT INTO sessions (${names}) VALUES (${SESSION_COLUMNS.map(() => '?').join(', ')})`);
  }

  /**
   * Insert a session; one inserted as completed is counted in the statistics aggregates in the
   * same transaction. The values are those drizzle's insert would bind (each column's driver
   * value; its default, else NULL, where the row has none), through a statement prepared once:
   * a session create builds no SQL.
   */
  insert(row: SessionRow): void {
    const values: unknown[] = new Array(SESSION_COLUMNS.length);
    for (let i = 0; i < SESSION_COLUMNS.length; i++) {
      const [key, column] = SESSION_COLUMNS[i]!;
      const v = row[key];
      if (v === undefined) values[i] = column.default === undefined ? null : column.mapToDriverValue(column.default);
      else values[i] = v === null ? null : column.mapToDriverValue(v);
    }
    if (row.status !== 'completed') {
      this.insertRow.run(values);
      return;
    }
    this.db.$client.transaction(() => {
      this.insertRow.run(values);
      this.stats.recordCompletion(row.id);
    })();
  }

  /** The tenant's sessions matching `f`, newest id first, with ids below `cursor`: at most `limit + 1` rows. */
  list(tenant: string, f: SessionFilters, limit: number, cursor?: string): SessionRow[] {
    const conds = filterConds([eq(sessions.tenant, tenant)], f);
    if (cursor) conds.push(lt(sessions.id, cursor));
    return this.db.select().from(sessions).where(and(...conds)).orderBy(desc(sessions.id)).limit(limit + 1).all();
  }

  /** Mark session `id` abandoned at `now` (ms), with its attempt summaries as they end (src/agent/step-transition.ts attemptsAbandoned). */
  abandon(id: string, attempts: SessionRow['attempts'], now: number): void {
    this.db.update(sessions).set({ status: 'abandoned', attempts, updatedAt: now }).where(eq(sessions.id, id)).run();
  }

  /**
   * Replace the reflection of `attempt` with a human text; returns the rows changed (0: no such
   * reflection). The session's `updatedAt` moves on with it (to `now`, or 1 ms past its value when
   * that is not earlier), so that a step computed from the reflection before the edit is refused
   * (src/db/queries.ts StepCommit `expectedUpdatedAt`).
   */
  editReflection(sessionId: string, attempt: number, text: string, now: number): number {
    return this.db.transaction((tx) => {
      const changes = tx
        .update(reflections)
        .set({ text, source: 'human', updatedAt: now })
        .where(and(eq(reflections.sessionId, sessionId), eq(reflections.attempt, attempt)))
        .run().changes;
      if (changes > 0) {
        tx.update(sessions).set({ updatedAt: sql`max(${now}, ${sessions.updatedAt} + 1)` }).where(eq(sessions.id, sessionId)).run();
      }
      return changes;
    });
  }

  /** Ids of active sessions last changed before `cutoff` (ms). */
  idleIds(cutoff: number): string[] {
    return this.db
      .select({ id: sessions.id })
      .from(sessions)
      .where(and(eq(sessions.status, 'active'), lt(sessions.updatedAt, cutoff)))
      .all()
      .map((r) => r.id);
  }

  /**
   * Mark `id` expired at `now`, with its attempt summaries as they end (attemptsAbandoned), if it is
   * still active and idle since before `cutoff`; true when it was.
   */
  expire(id: string, attempts: SessionRow['attempts'], cutoff: number, now: number): boolean {
    const res = this.db
      .update(sessions)
      .set({ status: 'expired', attempts, updatedAt: now })
      .where(and(eq(sessions.id, id), eq(sessions.status, 'active'), lt(sessions.updatedAt, cutoff)))
      .run();
    return res.changes === 1;
  }

  /** Number of active sessions of `tenant`, or of all tenants. */
  activeCount(tenant?: string): number {
    const where = tenant === undefined ? eq(sessions.status, 'active') : and(eq(sessions.tenant, tenant), eq(sessions.status, 'active'));
    const r = this.db.select({ n: sql<number>`count(*)` }).from(sessions).where(where).get();
    return r?.n ?? 0;
  }

  /** The tenant's completed sessions matching `f` (status ignored), as statistics read them, oldest id (creation) first. */
  completed(tenant: string, f: Omit<SessionFilters, 'status'>): StatsRow[] {
    const conds = filterConds([eq(sessions.tenant, tenant), eq(sessions.status, 'completed')], f);
    return this.db
      .select({
        id: sessions.id,
        taskId: sessions.taskId,
        attempts: sessions.attempts,
        maxAttempts: sessions.maxAttempts,
        modelVersion: sessions.modelVersion,
        env: sessions.env,
        mode: sessions.mode,
        memory: sessions.memory,
      })
      .from(sessions)
      .where(and(...conds))
      .orderBy(sessions.id)
      .all();
  }
  /**
   * A token that changes whenever the set of the tenant's completed sessions may have changed: their
   * number and latest update time (ms), read from the statistics aggregates (one row per group, so
   * it costs the same however many sessions there are). A completed session's actions never change
   * afterwards, so equal tokens mean equal `attemptTrajectories` answers (the diversity statistic is
   * cached on it).
   */
  completedToken(tenant: string): string {
    return this.stats.token(tenant);
  }

  /** The statistics aggregates of the tenant's completed sessions, one per (modelVersion, env, mode, memory) group (any order). */
  statsGroups(tenant: string): StatsGroup[] {
    return this.stats.groups(tenant);
  }

  /**
   * One row per attempt of the tenant's newest `maxSessions` completed sessions matching `f` (newest
   * by id, which is time-ordered): the attempt's recorded actions joined by '\n' in step order (the
   * final observation of an attempt has none); `trajectory` null for a session without any action.
   * Each session costs one indexed range of its steps (`steps_position`), but reading `action`
   * walks past each row's prompt (a few KB). `group_concat(... ORDER BY)` needs SQLite 3.44.
   */
  attemptTrajectories(tenant: string, f: Omit<SessionFilters, 'status'>, maxSessions: number): AttemptTrajectory[] {
    const where = and(...filterConds([eq(sessions.tenant, tenant), eq(sessions.status, 'completed')], f));
    return this.trajectories(sql`WHERE ${where} ORDER BY ${sessions.id} DESC LIMIT ${maxSessions}`);
  }

  /**
   * attemptTrajectories's rows of the sessions `ids` that are completed sessions of `tenant` matching
   * `f` (others are left out), ordered by session id, then attempt.
   */
  trajectoriesOf(tenant: string, f: Omit<SessionFilters, 'status'>, ids: readonly string[]): AttemptTrajectory[] {
    const out: AttemptTrajectory[] = [];
    for (let i = 0; i < ids.length; i += 5000) {
      const chunk = ids.slice(i, i + 5000);
      const where = and(...filterConds([eq(sessions.tenant, tenant), eq(sessions.status, 'completed'), inArray(sessions.id, chunk)], f));
      out.push(...this.trajectories(sql`WHERE ${where}`));
    }
    return out.sort((a, b) => (a.sessionId < b.sessionId ? -1 : a.sessionId > b.sessionId ? 1 : 0));
  }

  /** The trajectory rows of the sessions that `chosen` (a WHERE clause, with ORDER and LIMIT if any) selects, in (id, attempt) order. */
  private trajectories(chosen: SQL): AttemptTrajectory[] {
    return this.db.all<AttemptTrajectory>(sql`
      WITH s AS (SELECT ${sessions.id} AS id, ${sessions.modelVersion} AS mv, ${sessions.env} AS env, ${sessions.taskId} AS task,
                        CASE WHEN ${sessions.maxAttempts} = 1 THEN 'none' ELSE ${sessions.memory} END AS memory
                 FROM ${sessions} ${chosen})
      SELECT s.id AS sessionId, s.mv AS modelVersion, s.env AS env, s.task AS taskId, s.memory AS memory,
             group_concat(coalesce(st.action, ''), char(10) ORDER BY st.step) AS trajectory
      FROM s LEFT JOIN ${steps} st ON st.session_id = s.id AND st.kind = 'action' AND st.action IS NOT NULL
      GROUP BY s.id, st.attempt
      ORDER BY s.id, st.attempt`);
  }

  /** The tenant's completions so far: the seq of its latest (0 before the first; src/db/schema.ts statsCompletions). */
  completionSeq(tenant: string): number {
    return this.stats.completionSeq(tenant);
  }

  /** Ids of the tenant's sessions completed with a seq in (after, upTo], in completion order. */
  completionsBetween(tenant: string, after: number, upTo: number): string[] {
    return this.stats.completionsBetween(tenant, after, upTo);
  }
}
