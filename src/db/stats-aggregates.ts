/**
 * The statistics aggregates of the SQLite store (tables `stats_groups`, `stats_retries`,
 * `stats_tenants` and `stats_completions`, src/db/schema.ts; what the first two hold:
 * src/shared/stats-aggregate.ts): kept in the transaction that completes a session (the step commit
 * of ./queries.ts, or an insert of a completed session in ./sessions-repo.ts), read by
 * `GET /v1/stats` instead of every completed session and by the diversity cache
 * (src/agent/diversity-cache.ts) for the sessions completed since it last looked, and rebuilt from
 * the sessions at open when they do not count the same sessions (a database from before these
 * tables, or sessions written by other means than the server's).
 *
 * Statements are prepared once per connection ({@link statsAggregates}).
 */
import type Database from 'better-sqlite3';
import type { AttemptSummary } from './schema.js';
import {
  buildAggregates, countCompleted, emptyGroup, retryChainKey, statsGroupKey, statsMemory,
  type RetryOutcome, type StatsGroup, type StatsGroupDoc, type StatsSession,
} from '../shared/stats-aggregate.js';

interface RawStatsSession {
  id: string;
  tenant: string;
  task_id: string;
  model_version: string;
  env: string | null;
  mode: StatsSession['mode'];
  memory: StatsSession['memory'];
  max_attempts: number;
  attempts: string;
  updated_at: number;
}

interface RawGroup {
  model_version: string;
  env: string | null;
  mode: StatsGroup['mode'];
  memory: StatsGroup['memory'];
  sessions: number;
  updated_at: number;
  doc: string;
}

interface RawRetry {
  session_id: string;
  attempted: number;
  success: number;
  played: number;
  return: number;
  streak: number | null;
}

const SESSION_COLUMNS = 'id, tenant, task_id, model_version, env, mode, memory, max_attempts, attempts, updated_at';

const statsSession = (r: RawStatsSession): StatsSession & { tenant: string; updatedAt: number } => ({
  id: r.id,
  tenant: r.tenant,
  taskId: r.task_id,
  modelVersion: r.model_version,
  env: r.env,
  mode: r.mode,
  memory: r.memory,
  maxAttempts: r.max_attempts,
  attempts: JSON.parse(r.attempts) as AttemptSummary[],
  updatedAt: r.updated_at,
});

const group = (r: RawGroup): StatsGroup => ({
  modelVersion: r.model_version,
  env: r.env,
  mode: r.mode,
  memory: r.memory,
  sessions: r.sessions,
  updatedAt: r.updated_at,
  doc: JSON.parse(r.doc) as StatsGroupDoc,
});

const outcome = (r: RawRetry): RetryOutcome => ({
  sessionId: r.session_id,
  attempted: r.attempted === 1,
  success: r.success === 1,
  played: r.played === 1,
  return: r.return,
  streak: r.streak,
});

export class SqliteStatsAggregates {
  private readonly sessionById: Database.Statement<[string], RawStatsSession>;
  private readonly groupAt: Database.Statement<[string, string], RawGroup>;
  private readonly groupsOf: Database.Statement<[string], RawGroup>;
  private readonly tokenOf: Database.Statement<[string], { n: number; at: number | null }>;
  private readonly putGroup: Database.Statement;
  private readonly prevAttempted: Database.Statement<[string, string, string], RawRetry>;
  private readonly after: Database.Statement<[string, string, string], RawRetry>;
  private readonly putRetry: Database.Statement;
  private readonly setStreak: Database.Statement;
  private readonly nextSeq: Database.Statement<[string], { completed: number }>;
  private readonly putCompletion: Database.Statement<[string, number, string]>;
  private readonly seqOf: Database.Statement<[string], { completed: number }>;
  private readonly completionsIn: Database.Statement<[string, number, number], { sessionId: string }>;

  constructor(private readonly sqlite: Database.Database) {
    this.sessionById = sqlite.prepare(`SELECT ${SESSION_COLUMNS} FROM sessions WHERE id = ?`);
    const groupColumns = 'model_version, env, mode, memory, sessions, updated_at, doc';
    this.groupAt = sqlite.prepare(`SELECT ${groupColumns} FROM stats_groups WHERE tenant = ? AND group_key = ?`);
    this.groupsOf = sqlite.prepare(`SELECT ${groupColumns} FROM stats_groups WHERE tenant = ?`);
    this.tokenOf = sqlite.prepare('SELECT coalesce(sum(sessions), 0) AS n, max(updated_at) AS at FROM stats_groups WHERE tenant = ?');
    this.putGroup = sqlite.prepare(
      `INSERT INTO stats_groups (tenant, group_key, model_version, env, mode, memory, sessions, updated_at, doc)
       VALUES (@tenant, @groupKey, @modelVersion, @env, @mode, @memory, @sessions, @updatedAt, @doc)
       ON CONFLICT (tenant, group_key) DO UPDATE SET sessions = excluded.sessions, updated_at = excluded.updated_at, doc = excluded.doc`,
    );
    const retryColumns = 'session_id, attempted, success, played, return, streak';
    this.prevAttempted = sqlite.prepare(
      `SELECT ${retryColumns} FROM stats_retries WHERE tenant = ? AND chain_key = ? AND session_id < ? AND attempted = 1
       ORDER BY session_id DESC LIMIT 1`,
    );
    this.after = sqlite.prepare(
      `SELECT ${retryColumns} FROM stats_retries WHERE tenant = ? AND chain_key = ? AND session_id > ? ORDER BY session_id`,
    );
    this.putRetry = sqlite.prepare(
      `INSERT INTO stats_retries (tenant, chain_key, session_id, attempted, success, played, return, streak)
       VALUES (@tenant, @chainKey, @sessionId, @attempted, @success, @played, @return, @streak)`,
    );
    this.setStreak = sqlite.prepare('UPDATE stats_retries SET streak = ? WHERE tenant = ? AND chain_key = ? AND session_id = ?');
    this.nextSeq = sqlite.prepare(
      `INSERT INTO stats_tenants (tenant, completed) VALUES (?, 1)
       ON CONFLICT (tenant) DO UPDATE SET completed = completed + 1 RETURNING completed`,
    );
    this.putCompletion = sqlite.prepare('INSERT INTO stats_completions (tenant, seq, session_id) VALUES (?, ?, ?)');
    this.seqOf = sqlite.prepare('SELECT completed FROM stats_tenants WHERE tenant = ?');
    this.completionsIn = sqlite.prepare(
      'SELECT session_id AS sessionId FROM stats_completions WHERE tenant = ? AND seq > ? AND seq <= ? ORDER BY seq',
    );
  }

  /**
   * Count session `id`, which has just become completed, in its group (inside the caller's
   * transaction; call it once per session). No-op for an unknown id.
   */
  recordCompletion(id: string): void {
    const raw = this.sessionById.get(id);
    if (!raw) return;
    const s = statsSession(raw);
    const groupKey = statsGroupKey(s);
    const stored = this.groupAt.get(s.tenant, groupKey);
    const g = stored ? group(stored) : emptyGroup({ ...s, memory: statsMemory(s) });
    const chainKey = retryChainKey(s);
    let reads: { prev: RetryOutcome | null; tail: RetryOutcome[] } = { prev: null, tail: [] };
    if (g.memory === 'none') {
      const prevRaw = this.prevAttempted.get(s.tenant, chainKey, s.id);
      const prev = prevRaw ? outcome(prevRaw) : null;
      reads = { prev, tail: this.after.all(s.tenant, chainKey, prev?.sessionId ?? '').map(outcome) };
    }
    const placed = countCompleted(g, s, s.updatedAt, reads);
    this.writeGroup(s.tenant, groupKey, g);
    this.logCompletion(s.tenant, s.id);
    if (!placed) return;
    this.writeRetry(s.tenant, chainKey, placed.x);
    for (const c of placed.changed) this.setStreak.run(c.streak, s.tenant, chainKey, c.sessionId);
  }

  /** Append session `id` to the tenant's completions with the next seq. */
  private logCompletion(tenant: string, id: string): void {
    this.putCompletion.run(tenant, this.nextSeq.get(tenant)!.completed, id);
  }

  /** The tenant's completions so far: the seq of its latest completion (0 before the first). */
  completionSeq(tenant: string): number {
    return this.seqOf.get(tenant)?.completed ?? 0;
  }

  /** Ids of the tenant's sessions completed with a seq in (after, upTo], in completion order. */
  completionsBetween(tenant: string, after: number, upTo: number): string[] {
    return this.completionsIn.all(tenant, after, upTo).map((r) => r.sessionId);
  }

  private writeGroup(tenant: string, groupKey: string, g: StatsGroup): void {
    const { doc, ...fields } = g;
    this.putGroup.run({ tenant, groupKey, ...fields, doc: JSON.stringify(doc) });
  }

  private writeRetry(tenant: string, chainKey: string, r: RetryOutcome): void {
    this.putRetry.run({ tenant, chainKey, ...r, attempted: r.attempted ? 1 : 0, success: r.success ? 1 : 0, played: r.played ? 1 : 0 });
  }

  /** Every group of `tenant` (any order). */
  groups(tenant: string): StatsGroup[] {
    return this.groupsOf.all(tenant).map(group);
  }

  /**
   * `<completed sessions>:<latest update time among them>` of `tenant` (0:0 without any), from
   * the groups: it changes whenever a session of the tenant completes (sessions are never deleted).
   */
  token(tenant: string): string {
    const r = this.tokenOf.get(tenant);
    return `${r?.n ?? 0}:${r?.at ?? 0}`;
  }

  /**
   * Rebuild both tables from the completed sessions when the groups do not count as many sessions
   * as are completed, in one IMMEDIATE transaction (the count is checked again inside it).
   * @returns true when it rebuilt them.
   */
  rebuildIfStale(): boolean {
    if (!this.stale()) return false;
    return this.sqlite.transaction(() => {
      if (!this.stale()) return false;
      this.rebuild();
      return true;
    }).immediate();
  }

  private stale(): boolean {
    const count = (q: string) => (this.sqlite.prepare(q).get() as { n: number }).n;
    const done = count("SELECT count(*) AS n FROM sessions WHERE status = 'completed'");
    const grouped = count('SELECT coalesce(sum(sessions), 0) AS n FROM stats_groups');
    return done !== grouped || done !== count('SELECT count(*) AS n FROM stats_completions');
  }

  /**
   * The groups and retry outcomes anew from every completed session, and the completions missing
   * from `stats_completions` appended in id order (those there keep their seq, so that a cache
   * that read up to some seq goes on reading what is new), inside the caller's transaction.
   */
  private rebuild(): void {
    this.sqlite.prepare('DELETE FROM stats_retries').run();
    this.sqlite.prepare('DELETE FROM stats_groups').run();
    const byTenant = new Map<string, Array<StatsSession & { updatedAt: number }>>();
    const completed = this.sqlite.prepare<[], RawStatsSession>(`SELECT ${SESSION_COLUMNS} FROM sessions WHERE status = 'completed'`);
    const rows = completed.iterate();
    for (const raw of rows) {
      const s = statsSession(raw);
      const list = byTenant.get(s.tenant) ?? [];
      list.push(s);
      byTenant.set(s.tenant, list);
    }
    const loggedRows = this.sqlite.prepare<[], { id: string }>('SELECT session_id AS id FROM stats_completions').all();
    const logged = new Set(loggedRows.map((r) => r.id));
    for (const [tenant, sessions] of byTenant) {
      const { groups, retries } = buildAggregates(sessions);
      for (const [key, g] of groups) this.writeGroup(tenant, key, g);
      for (const [chainKey, chain] of retries) for (const r of chain) this.writeRetry(tenant, chainKey, r);
      const missing = sessions.map((s) => s.id).filter((id) => !logged.has(id));
      for (const id of missing.sort()) this.logCompletion(tenant, id);
    }
  }
}

const perConnection = new WeakMap<Database.Database, SqliteStatsAggregates>();

/** The statistics aggregates of one connection (statements prepared on first use). */
export function statsAggregates(sqlite: Database.Database): SqliteStatsAggregates {
  let a = perConnection.get(sqlite);
  if (!a) {
    a = new SqliteStatsAggregates(sqlite);
    perConnection.set(sqlite, a);
  }
  return a;
}
