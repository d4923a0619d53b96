/**
 * The repositories as both stores can serve them: every operation of ./repositories.ts (sessions,
 * steps, the step hot path, models, jobs, training data, replays) and the export query, returning
 * promises. The server's services use these (`app.repos`, src/plugins/app/db.ts), whichever store
 * the configuration selects.
 * The PostgreSQL store implements them natively (./pg/repositories.ts); the SQLite store through
 * {@link sqliteAsyncRepositories}, an adapter over the synchronous repositories of one open
 * database. test/db/async-repositories.test.ts runs the same cases against both.
 *
 * Rows have the SQLite schema's types (./schema.ts); the PostgreSQL schema reads back the same
 * shapes (test/db/pg/schema.test.ts). Times are ms since the Unix epoch.
 *
 * Errors: the failures an operator or client can act on reject with a DatabaseError (./errors.ts:
 * kinds busy, full, io, readonly, corrupt) on both stores; anything else (constraint violations,
 * programming errors) rejects unchanged.
 */
import type { ReflectionSource } from '../domain.js';
import { databaseErrorOf, guardedWrite, type DatabaseConnection } from './index.js';
import { SessionNotActiveError, StaleSessionError } from './errors.js';
import { exportLines, type ExportFilter, type ExportLine } from './export.js';
import type { JobInsert, JobListQuery, JobsRepo } from './jobs-repo.js';
import type { ModelInsert } from './models-repo.js';
import type { StepCommit } from './queries.js';
import { createRepositories, type Repositories } from './repositories.js';
import type { ReplaySessionFilter } from './replay-filter.js';
import type { ReplaySummaryRow, ReplayedRow, ReplaysRepo } from './replays-repo.js';
import type { ModelRow, ReplayRow, SessionRow, StepRow, TrainingJobRow } from './schema.js';
import type { AttemptTrajectory, SessionFilters, StatsRow } from './sessions-repo.js';
import type { StatsGroup } from '../shared/stats-aggregate.js';
import type { StepPage, StepPosition } from './steps-repo.js';
import type { StepOutput, StepScore, TrainingSessionFilter } from './training-data.js';

/** One reflection as the hot path reads it. */
export interface ReflectionRead {
  sessionId: string;
  attempt: number;
  text: string;
  source: ReflectionSource;
  updatedAt: number;
}

/** `sessions` and `reflections` outside the hot path (./sessions-repo.ts documents each operation). */
export interface AsyncSessions {
  insert(row: SessionRow): Promise<void>;
  /**
   * Insert `row` unless its tenant already holds `cap` active sessions (`cap` <= 0: no cap). The
   * count and the insert are one step: on SQLite one synchronous write of the one process that
   * owns the file; on PostgreSQL one transaction under a transaction advisory lock on the tenant,
   * so that replicas creating sessions at once never pass the cap together.
   * @returns whether it inserted, and the tenant's active sessions counted before (0 without a cap).
   */
  insertUnderCap(row: SessionRow, cap: number): Promise<{ inserted: boolean; open: number }>;
  list(tenant: string, f: SessionFilters, limit: number, cursor?: string): Promise<SessionRow[]>;
  abandon(id: string, attempts: SessionRow['attempts'], now: number): Promise<void>;
  editReflection(sessionId: string, attempt: number, text: string, now: number): Promise<number>;
  idleIds(cutoff: number): Promise<string[]>;
  expire(id: string, attempts: SessionRow['attempts'], cutoff: number, now: number): Promise<boolean>;
  activeCount(tenant?: string): Promise<number>;
  completed(tenant: string, f: Omit<SessionFilters, 'status'>): Promise<StatsRow[]>;
  completedToken(tenant: string): Promise<string>;
  /** The statistics aggregates of the tenant's completed sessions, one per group (src/shared/stats-aggregate.ts), any order. */
  statsGroups(tenant: string): Promise<StatsGroup[]>;
  /** One row per attempt of the newest `maxSessions` matching completed sessions, ordered by session id, then attempt. */
  attemptTrajectories(tenant: string, f: Omit<SessionFilters, 'status'>, maxSessions: number): Promise<AttemptTrajectory[]>;
  /** The rows of attemptTrajectories for those of `ids` that are matching completed sessions, ordered by session id, then attempt. */
  trajectoriesOf(tenant: string, f: Omit<SessionFilters, 'status'>, ids: readonly string[]): Promise<AttemptTrajectory[]>;
  /** The seq of the tenant's latest completion (0 before the first): completions are numbered 1, 2, ... in commit order. */
  completionSeq(tenant: string): Promise<number>;
  /** Ids of the tenant's sessions completed with a seq in (after, upTo], in completion order. */
  completionsBetween(tenant: string, after: number, upTo: number): Promise<string[]>;
}

/** Paged reads of `steps` (./steps-repo.ts). */
export interface AsyncSteps {
  page(sessionId: string, after: StepPosition | undefined, limit: number, maxBytes: number): Promise<StepPage>;
}

/** What a step commit found at its position. */
export interface StepCommitResult {
  /**
   * true: this commit recorded the position (its rows, reflection and session update are stored).
   * false: the position was already recorded, by a commit that won a race for it (another replica,
   * or another commit in flight): nothing of this commit was written.
   */
  recorded: boolean;
  /** The request hash stored at the position (this commit's own when `recorded`). */
  requestHash: string;
  /** The answer (JSON text) stored at the position (this commit's own when `recorded`). */
  answer: string | null;
}

/** The step hot path on `sessions`, `steps` and `reflections` (./queries.ts). */
export interface AsyncHot {
  session(id: string): Promise<SessionRow | undefined>;
  /** The recorded action step at a position: its request hash and stored answer (JSON text). */
  stepAtPosition(sessionId: string, attempt: number, step: number): Promise<{ requestHash: string; answer: string | null } | undefined>;
  stepsOfAttempt(sessionId: string, attempt: number): Promise<Array<{ observation: string; action: string | null }>>;
  reflections(sessionId: string): Promise<ReflectionRead[]>;
  activeCount(tenant: string): Promise<number>;
  /**
   * Commit one step atomically (its rows, the reflection if any, the session update), exactly once
   * per position: the position is that of `commit.rows[0]` (session, attempt, step, kind). Of two
   * commits of one position, however concurrent, one records it and both resolve with the stored
   * request hash and answer (the `steps_position` unique index decides; the loser writes nothing).
   * Only an active session takes a step: a commit for a session that is no longer `active` (ended
   * meanwhile, e.g. abandoned or expired by another replica) writes nothing, and so does one whose
   * session changed since `commit.session.expectedUpdatedAt` (when given).
   * @throws TypeError when `commit.rows` is empty; SessionNotActiveError when the session is not
   *   active; StaleSessionError when it changed; DatabaseError for storage failures; other failures (e.g. an unknown session) reject
   *   and write nothing.
   */
  commitStep(commit: StepCommit): Promise<StepCommitResult>;
}

/** `models` (./models-repo.ts). */
export interface AsyncModels {
  isEmpty(): Promise<boolean>;
  insert(row: ModelInsert): Promise<void>;
  setCheckpointDir(version: string, checkpointDir: string): Promise<void>;
  setEngineConfig(version: string, engineConfig: Record<string, unknown>): Promise<void>;
  /** Replace the metrics of `version` (a training job's promotion gate writes its figures there). */
  setMetrics(version: string, metrics: Record<string, unknown>): Promise<void>;
  active(): Promise<ModelRow | undefined>;
  list(): Promise<ModelRow[]>;
  remoteVersions(): Promise<string[]>;
  get(version: string): Promise<ModelRow | undefined>;
  /** The active version becomes `retired` and `version` becomes `active`, atomically (and, on PostgreSQL, one activation at a time). */
  activate(version: string): Promise<void>;
}

/** `training_jobs` (./jobs-repo.ts). */
export interface AsyncJobs {
  list(q: JobListQuery): Promise<TrainingJobRow[]>;
  running(): Promise<Array<{ id: string; algorithm: TrainingJobRow['algorithm']; progress: number }>>;
  countsByStatus(): Promise<Record<string, number>>;
  insert(row: JobInsert): Promise<void>;
  get(id: string): Promise<TrainingJobRow | undefined>;
  recent(limit: number): Promise<TrainingJobRow[]>;
  update(id: string, set: Partial<JobInsert>): Promise<void>;
  failRunning(error: string, finishedAt: number): Promise<void>;
  /** Ids of the queued jobs, oldest first (createdAt, then id). */
  queuedIds(): Promise<string[]>;
  /** Job `id` becomes `running` if it is still `queued` (one trainer takes it); resolves whether it did. */
  claim(id: string, startedAt: number): Promise<boolean>;
  /** Job `id` becomes `cancelled` if it is still `queued`; resolves whether it did. */
  cancelQueued(id: string, finishedAt: number): Promise<boolean>;
  /** Record that running job `id` is to stop (`cancelRequestedAt`); resolves whether it was running. */
  requestCancel(id: string, at: number): Promise<boolean>;
}

/** Training's reads and writes (./training-data.ts). */
export interface AsyncTrainingData {
  completedTrainSessions(filter: TrainingSessionFilter): Promise<Array<Pick<SessionRow, 'id' | 'taskId' | 'createdAt' | 'sampling'>>>;
  countCompletedTrainSessions(since: number): Promise<number>;
  stepOutputs(sessionIds: readonly string[]): Promise<StepOutput[]>;
  stepRowsOf(sessionIds: readonly string[]): Promise<StepRow[]>;
  writeStepScores(scores: readonly StepScore[]): Promise<void>;
}

/** The export query (./export.ts): lines in (session id, attempt, step, kind) order, read `chunkRows` at a time. */
export interface AsyncExport {
  lines(filter?: ExportFilter, chunkRows?: number): AsyncIterable<ExportLine>;
}

/** `replays`: stored reports and the reads of recorded sessions a replay needs (./replays-repo.ts). */
export interface AsyncReplays {
  insert(row: ReplayRow): Promise<void>;
  get(tenant: string, id: string): Promise<ReplayRow | undefined>;
  has(tenant: string, id: string): Promise<boolean>;
  list(tenant: string, f: { modelVersion?: string }, limit: number, cursor?: string): Promise<ReplaySummaryRow[]>;
  sessions(tenant: string, f: ReplaySessionFilter, limit: number): Promise<SessionRow[]>;
  modelCalls(sessionIds: readonly string[]): Promise<Map<string, number>>;
  actionRows(sessionId: string): Promise<ReplayedRow[]>;
  reflections(sessionId: string): Promise<Map<number, string>>;
}

/** Every repository of one store. */
export interface AsyncRepositories {
  /** Which store serves them. */
  store: 'sqlite' | 'postgres';
  sessions: AsyncSessions;
  steps: AsyncSteps;
  hot: AsyncHot;
  models: AsyncModels;
  jobs: AsyncJobs;
  trainingData: AsyncTrainingData;
  replays: AsyncReplays;
  export: AsyncExport;
}

export { SessionNotActiveError, StaleSessionError };

/** A SQLite constraint failure (better-sqlite3 `SQLITE_CONSTRAINT*`, possibly wrapped by drizzle). */
function isConstraint(err: unknown): boolean {
  let e: unknown = err;
  for (let depth = 0; depth < 5 && e !== null && typeof e === 'object'; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code.startsWith('SQLITE_CONSTRAINT');
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * Step commits of the SQLite store with the exactly-once answer of AsyncHot.commitStep: a commit
 * refused by the `steps_position` unique index (its savepoint rolled back, nothing written)
 * resolves with what is stored at its position. A commit for a session that is not active is
 * refused inside its own transaction (./queries.ts), so the hot path reads nothing more.
 */
async function commitOnce(r: Repositories, commit: StepCommit): Promise<StepCommitResult> {
  const first = commit.rows[0];
  if (!first) throw new TypeError('a step commit needs at least one row');
  try {
    await r.hot.commitStep(commit);
    return { recorded: true, requestHash: first.requestHash, answer: first.answer };
  } catch (err) {
    if (!isConstraint(err)) throw err;
    const stored = r.hot.storedAt(first.sessionId, first.attempt, first.step, first.kind);
    if (!stored) throw err;
    return { recorded: false, ...stored };
  }
}

/** AsyncJobs over the SQLite JobsRepo, through the adapter's `read` and `write`. */
function sqliteJobs(j: JobsRepo, read: <T>(fn: () => T) => Promise<T>, write: <T>(fn: () => T) => Promise<T>): AsyncJobs {
  return {
    list: (q) => read(() => j.list(q)),
    running: () => read(() => j.running()),
    countsByStatus: () => read(() => j.countsByStatus()),
    insert: (row) => write(() => j.insert(row)),
    get: (id) => read(() => j.get(id)),
    recent: (limit) => read(() => j.recent(limit)),
    update: (id, set) => write(() => j.update(id, set)),
    failRunning: (error, at) => write(() => j.failRunning(error, at)),
    queuedIds: () => read(() => j.queuedIds()),
    claim: (id, at) => write(() => j.claim(id, at)),
    cancelQueued: (id, at) => write(() => j.cancelQueued(id, at)),
    requestCancel: (id, at) => write(() => j.requestCancel(id, at)),
  };
}

/** AsyncReplays over the SQLite ReplaysRepo, through the adapter's `read` and `write`. */
function sqliteReplays(rp: ReplaysRepo, read: <T>(fn: () => T) => Promise<T>, write: <T>(fn: () => T) => Promise<T>): AsyncReplays {
  return {
    insert: (row) => write(() => rp.insert(row)),
    get: (tenant, id) => read(() => rp.get(tenant, id)),
    has: (tenant, id) => read(() => rp.has(tenant, id)),
    list: (tenant, f, limit, cursor) => read(() => rp.list(tenant, f, limit, cursor)),
    sessions: (tenant, f, limit) => read(() => rp.sessions(tenant, f, limit)),
    modelCalls: (ids) => read(() => rp.modelCalls(ids)),
    actionRows: (id) => read(() => rp.actionRows(id)),
    reflections: (id) => read(() => rp.reflections(id)),
  };
}

/**
 * The async repositories of an open SQLite database: the synchronous repositories (built here, or
 * `repos` when given), each call answered by a settled promise; writes outside the hot path record
 * their outcome in the connection's StorageHealth (as the services do through `hot.write`).
 */
export function sqliteAsyncRepositories(conn: DatabaseConnection, repos: Repositories = createRepositories(conn)): AsyncRepositories {
  const { sessions: s, steps, hot, models: m, jobs: j, trainingData: t, replays: rp } = repos;
  const read = async <T>(fn: () => T): Promise<T> => {
    try {
      return fn();
    } catch (err) {
      throw databaseErrorOf(err) ?? err;
    }
  };
  const write = async <T>(fn: () => T): Promise<T> => guardedWrite(conn.sqlite, fn);
  return {
    store: 'sqlite',
    sessions: {
      insert: (row) => write(() => s.insert(row)),
      // One process owns the file and runs this synchronously: nothing comes between the count and the insert.
      insertUnderCap: (row, cap) =>
        write(() => {
          const open = cap > 0 ? hot.activeCount(row.tenant) : 0;
          if (cap > 0 && open >= cap) return { inserted: false, open };
          s.insert(row);
          return { inserted: true, open };
        }),
      list: (tenant, f, limit, cursor) => read(() => s.list(tenant, f, limit, cursor)),
      abandon: (id, attempts, now) => write(() => s.abandon(id, attempts, now)),
      editReflection: (id, attempt, text, now) => write(() => s.editReflection(id, attempt, text, now)),
      idleIds: (cutoff) => read(() => s.idleIds(cutoff)),
      expire: (id, attempts, cutoff, now) => write(() => s.expire(id, attempts, cutoff, now)),
      activeCount: (tenant) => read(() => s.activeCount(tenant)),
      completed: (tenant, f) => read(() => s.completed(tenant, f)),
      completedToken: (tenant) => read(() => s.completedToken(tenant)),
      statsGroups: (tenant) => read(() => s.statsGroups(tenant)),
      attemptTrajectories: (tenant, f, max) => read(() => s.attemptTrajectories(tenant, f, max)),
      trajectoriesOf: (tenant, f, ids) => read(() => s.trajectoriesOf(tenant, f, ids)),
      completionSeq: (tenant) => read(() => s.completionSeq(tenant)),
      completionsBetween: (tenant, after, upTo) => read(() => s.completionsBetween(tenant, after, upTo)),
    },
    steps: { page: (id, after, limit, maxBytes) => read(() => steps.page(id, after, limit, maxBytes)) },
    hot: {
      session: (id) => read(() => hot.session(id)),
      stepAtPosition: (id, attempt, step) => read(() => hot.stepAtPosition(id, attempt, step)),
      stepsOfAttempt: (id, attempt) => read(() => hot.stepsOfAttempt(id, attempt)),
      reflections: (id) => read(() => hot.reflections(id)),
      activeCount: (tenant) => read(() => hot.activeCount(tenant)),
      commitStep: (commit) => commitOnce(repos, commit),
    },
    models: {
      isEmpty: () => read(() => m.isEmpty()),
      insert: (row) => write(() => m.insert(row)),
      setCheckpointDir: (v, dir) => write(() => m.setCheckpointDir(v, dir)),
      setEngineConfig: (v, cfg) => write(() => m.setEngineConfig(v, cfg)),
      setMetrics: (v, metrics) => write(() => m.setMetrics(v, metrics)),
      active: () => read(() => m.active()),
      list: () => read(() => m.list()),
      remoteVersions: () => read(() => m.remoteVersions()),
      get: (v) => read(() => m.get(v)),
      activate: (v) => write(() => m.activate(v)),
    },
    jobs: sqliteJobs(j, read, write),
    trainingData: {
      completedTrainSessions: (f) => read(() => t.completedTrainSessions(f)),
      countCompletedTrainSessions: (since) => read(() => t.countCompletedTrainSessions(since)),
      stepOutputs: (ids) => read(() => t.stepOutputs(ids)),
      stepRowsOf: (ids) => read(() => t.stepRowsOf(ids)),
      writeStepScores: (scores) => write(() => t.writeStepScores(scores)),
    },
    replays: sqliteReplays(rp, read, write),
    export: {
      async *lines(filter = {}, chunkRows) {
        yield* exportLines(conn.file, filter, chunkRows);
      },
    },
  };
}
