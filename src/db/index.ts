/**
 * Database connection: better-sqlite3 file `<dataDir>/lamer.db`, WAL journal, foreign keys on,
 * migrations from `migrations/` applied at open (drizzle migrator).
 *
 * Durability: `synchronous = NORMAL` in WAL mode makes every committed transaction survive a
 * process crash (`kill -9`); only a power loss can drop the last transactions. Set
 * `LAMER_SQLITE_SYNC=full` for power-loss durability at a throughput cost.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { drizzle, type BetterSQLite3Database } from 'drizzle-orm/better-sqlite3';
import { migrate } from 'drizzle-orm/better-sqlite3/migrator';
import * as schema from './schema.js';

export type Db = BetterSQLite3Database<typeof schema>;

export interface Database_ {
  db: Db;
  sqlite: Database.Database;
  file: string;
  close(): void;
}

export const migrationsFolder = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'migrations');

/**
 * Open (creating if needed) the database in `dataDir` and apply pending migrations.
 * @throws when the directory cannot be created or a migration fails.
 */
export function openDatabase(dataDir: string, opts: { synchronous?: 'normal' | 'full' } = {}): Database_ {
  fs.mkdirSync(dataDir, { recursive: true });
  const file = path.join(dataDir, 'lamer.db');
  const sqlite = new Database(file);
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma(`synchronous = ${opts.synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('busy_timeout = 5000');
  const db = drizzle(sqlite, { schema });
  migrate(db, { migrationsFolder });
  let open = true;
  return {
    db,
    sqlite,
    file,
    close() {
      if (!open) return;
      open = false;
      sqlite.close();
    },
  };
}

export { schema };
