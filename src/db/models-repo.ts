/**
 * The `models` table (docs/protocol.md "Model versions"): model versions, one `active`. Queries only; the rules
 * (load before activating, registration checks) live in src/agent/models.ts.
 */
import { eq } from 'drizzle-orm';
import type { Db } from './index.js';
import { models, type ModelRow } from './schema.js';

/** A row to insert (createdAt in ms since the epoch). */
export type ModelInsert = typeof models.$inferInsert;

export class ModelsRepo {
  constructor(private readonly db: Db) {}

  /** True when no version is registered (first start). */
  isEmpty(): boolean {
    return this.db.select({ v: models.version }).from(models).limit(1).all().length === 0;
  }

  insert(row: ModelInsert): void {
    this.db.insert(models).values(row).run();
  }

  /** Set the checkpoint folder of a builtin version. */
  setCheckpointDir(version: string, checkpointDir: string): void {
    this.db.update(models).set({ checkpointDir }).where(eq(models.version, version)).run();
  }

  /** Set the remote server configuration of an `openai` version. */
  setEngineConfig(version: string, engineConfig: Record<string, unknown>): void {
    this.db.update(models).set({ engineConfig }).where(eq(models.version, version)).run();
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

  get(version: string): ModelRow | undefined {
    return this.db.select().from(models).where(eq(models.version, version)).get();
  }

  /** In one transaction: the active version becomes `retired`, `version` becomes `active`. */
  activate(version: string): void {
    this.db.transaction((tx) => {
      tx.update(models).set({ status: 'retired' }).where(eq(models.status, 'active')).run();
      tx.update(models).set({ status: 'active' }).where(eq(models.version, version)).run();
    });
  }
}
