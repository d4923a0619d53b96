/**
 * The `models` and `training_jobs` queries of src/db/models-repo.ts and src/db/jobs-repo.ts on
 * PostgreSQL (AsyncModels, AsyncJobs).
 *
 * Unlike the SQLite repository, `models.get` keeps no rows in memory: several replicas write the
 * table, and a row cached on one would hide another's change. Activation takes a transaction-scoped
 * advisory lock, so two replicas activating at once leave exactly one version `active`, and
 * notifies the other replicas (./listen.ts CHANNELS.models) when it commits.
 */
import { and, desc, eq, lt, or, sql, type SQL } from 'drizzle-orm';
import type { AsyncJobs, AsyncModels } from '../async-repositories.js';
import { LOCK_CLASS, LOCKS, type PgDb } from './connection.js';
import { CHANNELS } from './listen.js';
import { models, trainingJobs } from './schema.js';

/** AsyncModels over a PostgreSQL store (errors unmapped: src/db/pg/repositories.ts maps them). */
export function pgModels(db: PgDb): AsyncModels {
  return {
    async isEmpty() {
      return (await db.select({ v: models.version }).from(models).limit(1)).length === 0;
    },
    async insert(row) {
      await db.insert(models).values(row);
    },
    async setCheckpointDir(version, checkpointDir) {
      await db.update(models).set({ checkpointDir }).where(eq(models.version, version));
    },
    async setEngineConfig(version, engineConfig) {
      await db.update(models).set({ engineConfig }).where(eq(models.version, version));
    },
    async setMetrics(version, metrics) {
      await db.update(models).set({ metrics }).where(eq(models.version, version));
    },
    async active() {
      const [row] = await db.select().from(models).where(eq(models.status, 'active')).limit(1);
      return row;
    },
    list() {
      return db.select().from(models).orderBy(models.createdAt, models.version);
    },
    async remoteVersions() {
      return (await db.select({ v: models.version }).from(models).where(eq(models.engine, 'openai'))).map((r) => r.v);
    },
    async get(version) {
      const [row] = await db.select().from(models).where(eq(models.version, version)).limit(1);
      return row;
    },
    async activate(version) {
      await db.transaction(async (tx) => {
        await tx.execute(sql`select pg_advisory_xact_lock(${LOCK_CLASS}::int, ${LOCKS.modelActivation}::int)`);
        await tx.update(models).set({ status: 'retired' }).where(eq(models.status, 'active'));
        await tx.update(models).set({ status: 'active' }).where(eq(models.version, version));
        // delivered to the other replicas' listeners when this transaction commits (./listen.ts)
        await tx.execute(sql`select pg_notify(${CHANNELS.models}, ${version})`);
      });
    },
  };
}

/** Job `id` while it has `status`. */
const jobIn = (id: string, status: 'queued' | 'running') => and(eq(trainingJobs.id, id), eq(trainingJobs.status, status));

/** AsyncJobs over a PostgreSQL store (errors unmapped: src/db/pg/repositories.ts maps them). */
export function pgJobs(db: PgDb): AsyncJobs {
  return {
    list(q) {
      const conds: SQL[] = [];
      if (q.status) conds.push(eq(trainingJobs.status, q.status));
      if (q.algorithm) conds.push(eq(trainingJobs.algorithm, q.algorithm));
      if (q.cursor) {
        const [t, id] = q.cursor.split('~') as [string, string];
        conds.push(or(lt(trainingJobs.createdAt, Number(t)), and(eq(trainingJobs.createdAt, Number(t)), lt(trainingJobs.id, id)))!);
      }
      return db.select().from(trainingJobs).where(conds.length ? and(...conds) : undefined)
        .orderBy(desc(trainingJobs.createdAt), desc(trainingJobs.id)).limit(q.limit + 1);
    },
    running() {
      return db
        .select({ id: trainingJobs.id, algorithm: trainingJobs.algorithm, progress: trainingJobs.progress })
        .from(trainingJobs)
        .where(eq(trainingJobs.status, 'running'));
    },
    async countsByStatus() {
      const rows = await db
        .select({ status: trainingJobs.status, n: sql<number>`count(*)::int` })
        .from(trainingJobs)
        .groupBy(trainingJobs.status);
      return Object.fromEntries(rows.map((r) => [r.status, r.n]));
    },
    async insert(row) {
      await db.insert(trainingJobs).values(row);
    },
    async get(id) {
      const [row] = await db.select().from(trainingJobs).where(eq(trainingJobs.id, id)).limit(1);
      return row;
    },
    recent(limit) {
      return db.select().from(trainingJobs).orderBy(desc(trainingJobs.createdAt)).limit(limit);
    },
    async update(id, set) {
      await db.update(trainingJobs).set(set).where(eq(trainingJobs.id, id));
    },
    async failRunning(error, finishedAt) {
      await db.update(trainingJobs).set({ status: 'failed', error, finishedAt }).where(eq(trainingJobs.status, 'running'));
    },
    async queuedIds() {
      const rows = await db
        .select({ id: trainingJobs.id })
        .from(trainingJobs)
        .where(eq(trainingJobs.status, 'queued'))
        .orderBy(trainingJobs.createdAt, trainingJobs.id);
      return rows.map((r) => r.id);
    },
    async claim(id, startedAt) {
      const r = await db.update(trainingJobs).set({ status: 'running', startedAt }).where(jobIn(id, 'queued'));
      return r.rowCount === 1;
    },
    async cancelQueued(id, finishedAt) {
      const r = await db.update(trainingJobs).set({ status: 'cancelled', finishedAt }).where(jobIn(id, 'queued'));
      return r.rowCount === 1;
    },
    async requestCancel(id, at) {
      const r = await db.update(trainingJobs).set({ cancelRequestedAt: at }).where(jobIn(id, 'running'));
      return r.rowCount === 1;
    },
  };
}
