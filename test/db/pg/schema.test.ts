/**
 * The two dialects of the one schema (src/db/schema.ts for SQLite, src/db/pg/schema.ts for
 * PostgreSQL) hold the same tables, columns, indexes, primary and foreign keys, with the column
 * types mapped as src/db/pg/schema.ts documents, and read back the same row types; each dialect's
 * migrations are what drizzle-kit generates from its schema (`npm run db:generate` leaves nothing to add).
 */
import fs from 'node:fs';
import path from 'node:path';
import { getTableConfig as pgTableConfig, type PgTable } from 'drizzle-orm/pg-core';
import { getTableConfig as sqliteTableConfig, type SQLiteTable } from 'drizzle-orm/sqlite-core';
import { describe, expect, expectTypeOf, it } from 'vitest';
import * as sqlite from '../../../src/db/schema.js';
import * as pg from '../../../src/db/pg/schema.js';

/** Each table of the schema in both dialects, by its export name. */
const TABLES: Record<string, [SQLiteTable, PgTable]> = {
  sessions: [sqlite.sessions, pg.sessions],
  steps: [sqlite.steps, pg.steps],
  reflections: [sqlite.reflections, pg.reflections],
  models: [sqlite.models, pg.models],
  trainingJobs: [sqlite.trainingJobs, pg.trainingJobs],
  replays: [sqlite.replays, pg.replays],
  statsGroups: [sqlite.statsGroups, pg.statsGroups],
  statsRetries: [sqlite.statsRetries, pg.statsRetries],
  statsTenants: [sqlite.statsTenants, pg.statsTenants],
  statsCompletions: [sqlite.statsCompletions, pg.statsCompletions],
};

/** Columns holding ms since the epoch or row ids: SQLite `integer`, PostgreSQL `bigint`. */
const isBigint = (table: string, column: string) => column.endsWith('_at') || (table === 'steps' && column === 'id');

/** The PostgreSQL type a SQLite column maps to (src/db/pg/schema.ts "Type mapping"). */
function mappedType(table: string, c: { name: string; columnType: string }): string {
  switch (c.columnType) {
    case 'SQLiteText':
      return 'text';
    case 'SQLiteTextJson':
      return 'json';
    case 'SQLiteBoolean':
      return 'boolean';
    case 'SQLiteReal':
      return 'double precision';
    case 'SQLiteInteger':
      return isBigint(table, c.name) ? 'bigint' : 'integer';
    default:
      throw new Error(`no PostgreSQL mapping for ${c.columnType} (${table}.${c.name})`);
  }
}

interface Shape {
  name: string;
  columns: Array<{ name: string; type: string; notNull: boolean; primary: boolean; default: unknown; enum: readonly string[] | null }>;
  indexes: Array<{ name: string; columns: string[]; unique: boolean }>;
  primaryKeys: string[][];
  foreignKeys: Array<{ columns: string[]; table: string; foreign: string[] }>;
}

function sqliteShape(key: string, t: SQLiteTable): Shape {
  const c = sqliteTableConfig(t);
  return {
    name: c.name,
    columns: c.columns.map((col) => ({
      name: col.name,
      type: mappedType(key, col),
      notNull: col.notNull,
      primary: col.primary,
      default: col.default,
      enum: col.enumValues?.length ? col.enumValues : null,
    })),
    indexes: c.indexes.map((i) => ({ name: i.config.name, columns: i.config.columns.map((x) => (x as { name: string }).name), unique: i.config.unique })),
    primaryKeys: c.primaryKeys.map((k) => k.columns.map((x) => x.name)),
    foreignKeys: c.foreignKeys.map((f) => {
      const r = f.reference();
      return { columns: r.columns.map((x) => x.name), table: sqliteTableConfig(r.foreignTable).name, foreign: r.foreignColumns.map((x) => x.name) };
    }),
  };
}

function pgShape(t: PgTable): Shape {
  const c = pgTableConfig(t);
  return {
    name: c.name,
    columns: c.columns.map((col) => ({
      name: col.name,
      type: col.getSQLType(),
      notNull: col.notNull,
      primary: col.primary,
      default: col.default,
      enum: col.enumValues?.length ? col.enumValues : null,
    })),
    indexes: c.indexes.map((i) => ({ name: i.config.name!, columns: i.config.columns.map((x) => (x as { name: string }).name), unique: i.config.unique })),
    primaryKeys: c.primaryKeys.map((k) => k.columns.map((x) => x.name)),
    foreignKeys: c.foreignKeys.map((f) => {
      const r = f.reference();
      return { columns: r.columns.map((x) => x.name), table: pgTableConfig(r.foreignTable).name, foreign: r.foreignColumns.map((x) => x.name) };
    }),
  };
}

describe('the PostgreSQL schema mirrors the SQLite one', () => {
  it('exports the same tables', () => {
    const tablesOf = (m: Record<string, unknown>) => Object.keys(m).filter((k) => typeof m[k] === 'object' && m[k] !== null && 'getSQL' in (m[k] as object)).sort();
    expect(tablesOf(pg)).toEqual(tablesOf(sqlite));
    expect(tablesOf(sqlite)).toEqual(Object.keys(TABLES).sort());
  });

  for (const [key, [sqliteTable, pgTable]] of Object.entries(TABLES)) {
    it(`${key}: same columns (names, order, mapped types, nullability, keys, defaults, enums), indexes and foreign keys`, () => {
      const s = sqliteShape(key, sqliteTable);
      const p = pgShape(pgTable);
      expect(p.name).toBe(s.name);
      expect(p.columns).toEqual(s.columns);
      expect(p.indexes).toEqual(s.indexes);
      expect(p.primaryKeys).toEqual(s.primaryKeys);
      expect(p.foreignKeys).toEqual(s.foreignKeys);
    });
  }

  it('the type mapping is not vacuous: a SQLite type without a mapping is refused', () => {
    expect(() => mappedType('t', { name: 'x', columnType: 'SQLiteBlobJson' })).toThrow(/no PostgreSQL mapping/);
    expect(mappedType('steps', { name: 'id', columnType: 'SQLiteInteger' })).toBe('bigint');
    expect(mappedType('steps', { name: 'step', columnType: 'SQLiteInteger' })).toBe('integer');
  });

  it('rows read back with the same TypeScript types', () => {
    expectTypeOf<typeof pg.sessions.$inferSelect>().toEqualTypeOf<sqlite.SessionRow>();
    expectTypeOf<typeof pg.steps.$inferSelect>().toEqualTypeOf<sqlite.StepRow>();
    expectTypeOf<typeof pg.reflections.$inferSelect>().toEqualTypeOf<sqlite.ReflectionRow>();
    expectTypeOf<typeof pg.models.$inferSelect>().toEqualTypeOf<sqlite.ModelRow>();
    expectTypeOf<typeof pg.trainingJobs.$inferSelect>().toEqualTypeOf<sqlite.TrainingJobRow>();
  });
});

describe('the migrations of both dialects', () => {
  const root = path.resolve(import.meta.dirname, '..', '..', '..');
  /** The snapshot drizzle-kit wrote with the newest migration of `folder`. */
  const lastSnapshot = (folder: string) => {
    const journal = JSON.parse(fs.readFileSync(path.join(root, folder, 'meta', '_journal.json'), 'utf8')) as { entries: Array<{ idx: number }> };
    const idx = String(journal.entries.at(-1)!.idx).padStart(4, '0');
    return JSON.parse(fs.readFileSync(path.join(root, folder, 'meta', `${idx}_snapshot.json`), 'utf8'));
  };

  it('are up to date with their schemas (drizzle-kit finds nothing to generate)', async () => {
    const kit = await import('drizzle-kit/api');
    const pgPrev = lastSnapshot('migrations-pg');
    expect(pgPrev.dialect).toBe('postgresql');
    expect(await kit.generateMigration(pgPrev, kit.generateDrizzleJson(pg, pgPrev.id))).toEqual([]);
    const sqlitePrev = lastSnapshot('migrations');
    expect(sqlitePrev.dialect).toBe('sqlite');
    expect(await kit.generateSQLiteMigration(sqlitePrev, await kit.generateSQLiteDrizzleJson(sqlite, sqlitePrev.id))).toEqual([]);
    // and the check can fail: a snapshot missing a column asks for it
    const { steps: _steps, ...withoutSteps } = pg;
    expect((await kit.generateMigration(kit.generateDrizzleJson(withoutSteps, pgPrev.id), kit.generateDrizzleJson(pg, pgPrev.id))).join('\n')).toMatch(
      /CREATE TABLE "steps"/,
    );
  });
});
