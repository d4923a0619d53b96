/**
 * The `models` table (docs/protocol.md "Model versions"): model versions, one `active`. Queries only; the rules
 * (load before activating, registration checks) live in src/agent/models.ts.
 *
 * `get(version)` is on every step's path (a session's pinned version says how prompts are laid
 * out), so rows read by version are kept in memory, one cache per SQLite connection (shared by
 * every ModelsRepo over it), and every write of this repository drops the rows it may change
 * (`activate` drops them all). Versions not found are not cached, so a version inserted by other
 * means is seen at once; a row updated in place by other means than this repository (another
 * process, raw SQL) is not seen until the process restarts. One server owns a data directory
 * (src/owner-lock.ts), and it writes the table only through here.
 */
import { eq } from 'drizzle-orm';
import type { Db } from './index.js';
import { models, type ModelRow } from './schema.js';

/** A row to insert (createdAt in ms since the epoch). */
export type ModelInsert = typeof models.$inferInsert;

/** Rows read by version, per drizzle handle (one per open connection, DatabaseConnection.db). */
const rowCaches = new WeakMap<object, Map<string, ModelRow>>();

export class ModelsRepo {
  private readonly rows: Map<string, ModelRow>;

  constructor(private readonly db: Db) {
    let rows = rowCaches.get(db);
    if (!rows) {
      rows = new Map();
      rowCaches.set(db, rows);
    }
    this.rows = rows;
  }

  /**
   * Run the write `fn`, dropping the cached row of `version` (null: every cached row) before it and
   * again after it, whether it succeeds or throws, so no read can keep a row from before the write.
   */
  private changing(version: string | null, fn: () => unknown): void {
    const drop = () => (version === null ? this.rows.clear() : this.rows.delete(version));
    drop();
    try {
      fn();
    } finally {
      drop();
    }
  }

  /** True when no version is registered (first start). */
  isEmpty(): boolean {
    return this.db.select({ v: models.version }).from(models).limit(1).all().length === 0;
  }

  insert(row: ModelInsert): void {
    this.changing(row.version, () => this.db.insert(models).values(row).run());
  }

  /** Set the checkpoint folder of a builtin version. */
  setCheckpointDir(version: string, checkpointDir: string): void {
    this.changing(version, () => this.db.update(models).set({ checkpointDir }).where(eq(models.version, version)).run());
  }

  /** Set the remote server configuration of an `openai` version. */
  setEngineConfig(version: string, engineConfig: Record<string, unknown>): void {
    this.changing(version, () => this.db.update(models).set({ engineConfig }).where(eq(models.version, version)).run());
  }

  /** Replace the metrics of `version` (a training job's promotion gate writes its figures there). */
  setMetrics(version: string, metrics: Record<string, unknown>): void {
    this.changing(version, () => this.db.update(models).set({ metrics }).where(eq(models.version, version)).run());
  }

  /** The `active` version, if any. */
  active(): ModelRow | undefined {
    return this.db.select().from(models).where(eq(models.status, 'active')).get();
  }

  /** All versions, oldest first (createdAt, then version). */
  list(): ModelRow[] {
    return this.db.select().from(models).orderBy(models.createdAt, models.version).all();
  }

  /** Names of the versions served by a remote OpenAI-compatible server (engine `openai`). */
  remoteVersions(): string[] {
    return this.db.select({ v: models.version }).from(models).where(eq(models.engine, 'openai')).all().map((r) => r.v);
  }

  /**
   * The row of `version` (undefined when none): from memory after the first read (see the top of
   * this file). Returns a shallow copy, so a caller's change to it does not reach the cache.
   */
  get(version: string): ModelRow | undefined {
    let row = this.rows.get(version);
    if (!row) {
      row = this.db.select().from(models).where(eq(models.version, version)).get();
      if (!row) return undefined;
      this.rows.set(version, row);
    }
    return { ...row };
  }

  /** In one transaction: the active version becomes `retired`, `version` becomes `active`. */
  activate(version: string): void {
    this.changing(null, () =>
      this.db.transaction((tx) => {
        tx.update(models).set({ status: 'retired' }).where(eq(models.status, 'active')).run();
        tx.update(models).set({ status: 'active' }).where(eq(models.version, version)).run();
      }),
    );
  }
}
