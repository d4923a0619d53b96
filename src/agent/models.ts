/**
 * Model versions (DESIGN §3 `models`): the registry over the `models` table. One version is
 * `active` (new sessions pin it); activation loads the version in the engine before flipping, so a
 * failed load leaves the active version unchanged.
 */
import { eq } from 'drizzle-orm';
import type { Db } from '../db/index.js';
import { models, type ModelRow } from '../db/schema.js';
import { EngineError, type PolicyEngine } from '../policy/engine.js';
import { ApiProblem, notFound } from './problems.js';

export class ModelRegistry {
  private activeRow: ModelRow | null = null;
  private readonly loading = new Map<string, Promise<void>>();

  constructor(
    private readonly db: Db,
    private readonly engine: PolicyEngine,
  ) {}

  /**
   * When the table is empty, register `version` at `checkpointDir` as active (first start). When
   * it is registered already, its folder is updated to `checkpointDir` (the configuration says
   * where the base checkpoint lives, e.g. after a move or in a new image). Then load the active
   * version in the engine.
   */
  async init(version: string, checkpointDir: string): Promise<void> {
    const any = this.db.select({ v: models.version }).from(models).limit(1).all();
    if (any.length === 0) {
      this.db
        .insert(models)
        .values({ version, parent: null, jobId: null, checkpointDir, status: 'active', metrics: {}, createdAt: Date.now() })
        .run();
    } else {
      this.db.update(models).set({ checkpointDir }).where(eq(models.version, version)).run();
    }
    this.activeRow = this.db.select().from(models).where(eq(models.status, 'active')).get() ?? null;
    if (!this.activeRow) throw new Error('no active model version in the models table');
    await this.ensureLoaded(this.activeRow.version);
  }

  active(): ModelRow {
    if (!this.activeRow) throw new Error('ModelRegistry.init() was not called');
    return this.activeRow;
  }

  list(): ModelRow[] {
    return this.db.select().from(models).orderBy(models.createdAt, models.version).all();
  }

  get(version: string): ModelRow | undefined {
    return this.db.select().from(models).where(eq(models.version, version)).get();
  }

  /** Load `version` in the engine if needed (one load at a time per version). */
  async ensureLoaded(version: string): Promise<void> {
    if (this.engine.isLoaded(version)) return;
    let p = this.loading.get(version);
    if (!p) {
      const row = this.get(version);
      if (!row) throw notFound(`model version '${version}'`);
      p = this.engine.load(version, row.checkpointDir).finally(() => this.loading.delete(version));
      this.loading.set(version, p);
    }
    try {
      await p;
    } catch (err) {
      throw new ApiProblem(
        503,
        'engine-unavailable',
        'Engine Unavailable',
        `model version '${version}' could not be loaded: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
  }

  /**
   * Make `version` the active one: load it, then mark it active and the previous one retired.
   * @throws ApiProblem 404 for an unknown version, 503 when the engine cannot load it.
   */
  async activate(version: string): Promise<ModelRow> {
    const row = this.get(version);
    if (!row) throw notFound(`model version '${version}'`);
    await this.ensureLoaded(version);
    this.db.transaction((tx) => {
      tx.update(models).set({ status: 'retired' }).where(eq(models.status, 'active')).run();
      tx.update(models).set({ status: 'active' }).where(eq(models.version, version)).run();
    });
    this.activeRow = this.get(version)!;
    return this.activeRow;
  }
}

export { EngineError };
