/**
 * Database connection: better-sqlite3 file `<dataDir>/lamer.db`, WAL journal, foreign keys on,
 * migrations from `migrations/` applied at open (drizzle migrator).
 *
 * Durability: `synchronous = NORMAL` in WAL mode makes every committed transaction survive a
 * process crash (`kill -9`); only a power loss can drop the last transactions. Set
 * `LAMER_SQLITE_SYNC=full` for power-loss durability at a throughput cost.
 *
 * Contention and growth (docs/operations.md "Database busy, disk full, WAL size", docs/deploy.md "3. Persistence"):
 * - `busy_timeout` is short (default 100 ms): better-sqlite3 waits for a lock synchronously, so a
 *   long wait would stall every request of the process. A write that cannot get the lock in time
 *   fails with a `busy` {@link DatabaseError} (HTTP 503 `database-busy`) and writes nothing. Steps
 *   (src/db/queries.ts group commit) wait for the lock on timers instead, without blocking.
 * - `journal_size_limit` (default 64 MiB) truncates the `-wal` file to that size whenever SQLite
 *   restarts the log, and {@link startWalMaintenance} checkpoints the log on a timer so a WAL grown
 *   behind a long reader shrinks once the reader is gone, even without further writes.
 * - {@link StorageHealth}: after a write fails for lack of space or an I/O error the storage is
 *   reported failed (readiness false) until a write succeeds again.
 */
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { drizzle, type BetterSQLite3Database } from 'drizzle-orm/better-sqlite3';
import { migrate } from 'drizzle-orm/better-sqlite3/migrator';
import { ensureDirSync } from '../ensure-dir.js';
import * as schema from './schema.js';
import { databaseErrorOf, STORAGE_FAILURE_KINDS, type DatabaseErrorKind } from './errors.js';
import { statsAggregates } from './stats-aggregates.js';

export type Db = BetterSQLite3Database<typeof schema> & { $client: Database.Database };

/** Tunables of an open connection (src/config.ts DatabaseConfig). */
export interface ConnectionTuning {
  /** Longest synchronous wait for another connection's lock, ms (`PRAGMA busy_timeout`). */
  busyTimeoutMs: number;
  /** Size the `-wal` file is truncated to when the log restarts, bytes (`PRAGMA journal_size_limit`). */
  walLimitBytes: number;
}

export const defaultTuning: ConnectionTuning = { busyTimeoutMs: 100, walLimitBytes: 64 * 1024 * 1024 };

/** What `PRAGMA wal_checkpoint` reports: `busy` 1 when it could not finish, frames in the log, frames copied. */
export interface CheckpointResult {
  busy: number;
  log: number;
  checkpointed: number;
}

/** State of the storage as writes last found it. */
export interface StorageState {
  /** False after a write failed for lack of space, an I/O error, a read-only or corrupt file. */
  writable: boolean;
  /** Kind of the last such failure (null while writable). */
  kind: DatabaseErrorKind | null;
  /** SQLite result code of that failure, e.g. `SQLITE_FULL` (null while writable). */
  code: string | null;
  /** When it failed, ms since the epoch (null while writable). */
  since: number | null;
}

/**
 * Tracks whether the database can be written: a storage failure (kinds in STORAGE_FAILURE_KINDS)
 * marks it failed, the next successful write clears it. `busy` does not change it (contention is
 * not a storage fault).
 */
export class StorageHealth {
  private failure: { kind: DatabaseErrorKind; code: string; since: number } | null = null;

  /** Note a failed write; returns `err` as a DatabaseError when it is a SQLite failure of a known kind, else `err`. */
  failed(err: unknown): unknown {
    const de = databaseErrorOf(err);
    if (de && STORAGE_FAILURE_KINDS.includes(de.kind) && this.failure?.code !== de.code) {
      this.failure = { kind: de.kind, code: de.code, since: Date.now() };
    }
    return de ?? err;
  }

  /** Note a committed write. */
  succeeded(): void {
    this.failure = null;
  }

  state(): StorageState {
    const f = this.failure;
    return { writable: f === null, kind: f?.kind ?? null, code: f?.code ?? null, since: f?.since ?? null };
  }
}

const healthOf = new WeakMap<Database.Database, StorageHealth>();
const tuningOf = new WeakMap<Database.Database, ConnectionTuning>();

/** The tuning last applied to a connection by openDatabase / DatabaseConnection.tune (defaultTuning if none). */
export function connectionTuning(sqlite: Database.Database): ConnectionTuning {
  return tuningOf.get(sqlite) ?? defaultTuning;
}

/** The StorageHealth of a connection (one per connection, created on first use). */
export function storageHealth(sqlite: Database.Database): StorageHealth {
  let h = healthOf.get(sqlite);
  if (!h) {
    h = new StorageHealth();
    healthOf.set(sqlite, h);
  }
  return h;
}

/**
 * Run one synchronous write `fn` on `sqlite` and record its outcome in the connection's
 * StorageHealth.
 * @throws DatabaseError (kind busy, full, io, readonly, corrupt) for SQLite failures of those
 *   kinds; anything else `fn` throws, unchanged.
 */
export function guardedWrite<T>(sqlite: Database.Database, fn: () => T): T {
  const health = storageHealth(sqlite);
  let out: T;
  try {
    out = fn();
  } catch (err) {
    throw health.failed(err);
  }
  health.succeeded();
  return out;
}

/**
 * One open SQLite database file (`<dataDir>/lamer.db`): its drizzle and better-sqlite3 handles, the
 * storage health its writes record, connection tuning, readiness probes and WAL maintenance. The
 * tables are read and written through the repositories built on it (./repositories.ts).
 */
export interface DatabaseConnection {
  db: Db;
  sqlite: Database.Database;
  file: string;
  /** Storage state as writes last found it (readiness). */
  storage: StorageHealth;
  /** Apply busy timeout and WAL size limit to the open connection. */
  tune(t: ConnectionTuning): void;
  /** Size of the `-wal` file now, bytes (0 when there is none). */
  walBytes(): number;
  /** Readiness: true when the connection is open and answers a trivial read (`SELECT 1`); never throws. */
  ping(): boolean;
  /**
   * While the storage is failed, try a small write that allocates a page and commits (at most once
   * per `minIntervalMs`); on success the storage is writable again. Never waits for a lock.
   * @returns the storage state after the probe.
   */
  probeStorage(minIntervalMs?: number): StorageState;
  /**
   * Watch the `-wal` size every `intervalMs` and bring an oversized log (over `walLimitBytes`, e.g.
   * grown behind a long reader) back under the limit without blocking this thread: while it is
   * oversized, SQLite's own checkpoint at commit is switched off (it would copy the whole backlog
   * inside a request) and a worker thread with its own connection runs PASSIVE checkpoints (copy
   * what no reader still needs; never waits, never blocks writers); once every frame is copied a
   * TRUNCATE checkpoint here empties the file (nothing left to copy; it waits at most the busy
   * timeout for readers), and the commit checkpoints are switched back on. The timer and the
   * worker do not keep the process alive.
   * @returns a function that stops the timer and the worker (resolves once the worker's connection is closed).
   */
  startWalMaintenance(intervalMs: number, onError?: (err: unknown) => void): () => Promise<void>;
  /** Run one maintenance pass now (see startWalMaintenance); null when the WAL was within the limit. */
  maintainWal(): CheckpointResult | null;
  close(): void;
}

const require = createRequire(import.meta.url);

export const migrationsFolder = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'migrations');

/**
 * Open (creating if needed) the database in `dataDir`, apply pending migrations, and rebuild the
 * statistics aggregates when they do not count every completed session (./stats-aggregates.ts).
 * Migrations wait up to 5 s for a lock (start-up only); then the busy timeout is `opts.busyTimeoutMs`.
 * @throws DirectoryError (src/ensure-dir.ts) when the directory cannot be created; SQLite's error
 *   when a migration fails.
 */
export function openDatabase(dataDir: string, opts: { synchronous?: 'normal' | 'full' } & Partial<ConnectionTuning> = {}): DatabaseConnection {
  ensureDirSync(dataDir);
  const file = path.join(dataDir, 'lamer.db');
  const walFile = `${file}-wal`;
  const sqlite = new Database(file);
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma(`synchronous = ${opts.synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('busy_timeout = 5000');
  const db = drizzle(sqlite, { schema });
  migrate(db, { migrationsFolder });
  // sessions completed before the aggregates existed, or written by other means than the server's
  statsAggregates(sqlite).rebuildIfStale();
  let tuning: ConnectionTuning = { ...defaultTuning };
  const tune = (t: ConnectionTuning): void => {
    tuning = { ...t };
    tuningOf.set(sqlite, tuning);
    sqlite.pragma(`busy_timeout = ${Math.max(0, Math.floor(t.busyTimeoutMs))}`);
    sqlite.pragma(`journal_size_limit = ${Math.max(0, Math.floor(t.walLimitBytes))}`);
  };
  tune({ busyTimeoutMs: opts.busyTimeoutMs ?? defaultTuning.busyTimeoutMs, walLimitBytes: opts.walLimitBytes ?? defaultTuning.walLimitBytes });
  const storage = storageHealth(sqlite);
  let open = true;
  let lastProbe = 0;

  const walBytes = (): number => {
    try {
      return fs.statSync(walFile).size;
    } catch {
      return 0;
    }
  };

  const checkpoint = (mode: 'PASSIVE' | 'TRUNCATE'): CheckpointResult =>
    (sqlite.pragma(`wal_checkpoint(${mode})`) as CheckpointResult[])[0]!;

  const maintainWal = (): CheckpointResult | null => {
    if (!open || walBytes() <= tuning.walLimitBytes) return null;
    const passive = checkpoint('PASSIVE');
    if (passive.busy !== 0 || passive.checkpointed < passive.log) return passive;
    return checkpoint('TRUNCATE');
  };

  const probeStorage = (minIntervalMs = 1000): StorageState => {
    const now = Date.now();
    if (!open || storage.state().writable || now - lastProbe < minIntervalMs) return storage.state();
    lastProbe = now;
    probeWrite(sqlite, tuning.busyTimeoutMs);
    return storage.state();
  };

  return {
    db,
    sqlite,
    file,
    storage,
    tune,
    walBytes,
    ping: () => pingSqlite(sqlite),
    probeStorage,
    maintainWal,
    startWalMaintenance: (intervalMs, onError) =>
      startWalMaintenance(
        { sqlite, file, isOpen: () => open, overLimit: () => walBytes() > tuning.walLimitBytes, checkpoint, maintainWal },
        intervalMs,
        onError,
      ),
    close() {
      if (!open) return;
      open = false;
      sqlite.close();
    },
  };
}

/** What the WAL maintenance of one open database uses (see DatabaseConnection.startWalMaintenance). */
interface WalContext {
  sqlite: Database.Database;
  file: string;
  isOpen(): boolean;
  /** The `-wal` file is over the configured limit now. */
  overLimit(): boolean;
  checkpoint(mode: 'PASSIVE' | 'TRUNCATE'): CheckpointResult;
  maintainWal(): CheckpointResult | null;
}

/** DatabaseConnection.startWalMaintenance of one database (documented there). */
function startWalMaintenance(ctx: WalContext, intervalMs: number, onError?: (err: unknown) => void): () => Promise<void> {
  let worker: Worker | null = new Worker(CHECKPOINT_WORKER, { eval: true, workerData: { file: ctx.file } });
  worker.unref();
  let inFlight = false;
  let backlog = false;
  const endBacklog = (): void => {
    if (backlog && ctx.isOpen()) ctx.sqlite.pragma(`wal_autocheckpoint = ${AUTOCHECKPOINT_PAGES}`);
    backlog = false;
  };
  worker.on('message', (r: CheckpointResult | { error: string }) => {
    inFlight = false;
    if (!ctx.isOpen()) return;
    if ('error' in r) return onError?.(new Error(`WAL checkpoint worker: ${r.error}`));
    try {
      // Every frame copied: truncate the file (no copying left); a reader may still hold it (busy).
      if (r.busy === 0 && r.checkpointed >= r.log && ctx.checkpoint('TRUNCATE').busy === 0) endBacklog();
    } catch (err) {
      onError?.(err);
    }
  });
  worker.on('error', (err) => {
    // Without the worker, checkpoint here (blocking) rather than let the WAL grow.
    onError?.(err);
    worker = null;
    inFlight = false;
    endBacklog();
  });
  const timer = setInterval(() => {
    if (!ctx.isOpen() || inFlight) return;
    try {
      if (!ctx.overLimit()) return endBacklog();
      if (!worker) {
        ctx.maintainWal();
        return;
      }
      if (!backlog) {
        backlog = true;
        ctx.sqlite.pragma('wal_autocheckpoint = 0');
      }
      inFlight = true;
      worker.postMessage('checkpoint');
    } catch (err) {
      onError?.(err);
    }
  }, intervalMs);
  timer.unref();
  return async () => {
    clearInterval(timer);
    endBacklog();
    const w = worker;
    worker = null;
    if (w) await w.terminate();
  };
}

/** Readiness: true when the connection is open and answers `SELECT 1`; never throws. */
function pingSqlite(sqlite: Database.Database): boolean {
  try {
    return sqlite.open && sqlite.prepare('SELECT 1 AS ok').get() !== undefined;
  } catch {
    return false;
  }
}

/**
 * The storage probe's write (see DatabaseConnection.probeStorage): allocate pages and undo them, then commit
 * one rewritten header page, without waiting for a lock; a failure is recorded by guardedWrite and
 * otherwise ignored. The busy timeout is `busyTimeoutMs` again afterwards.
 */
function probeWrite(sqlite: Database.Database, busyTimeoutMs: number): void {
  sqlite.pragma('busy_timeout = 0');
  try {
    guardedWrite(sqlite, () => {
      const version = sqlite.pragma('user_version', { simple: true }) as number;
      sqlite.transaction(() => {
        // Allocate pages (SQLITE_FULL when there is no room), undone before the commit...
        try {
          sqlite.transaction(() => {
            sqlite.exec('CREATE TABLE lamer_storage_probe (pad BLOB); INSERT INTO lamer_storage_probe VALUES (zeroblob(16384))');
            throw new ProbeRollback();
          })();
        } catch (err) {
          if (!(err instanceof ProbeRollback)) throw err;
        }
        // ...then commit one rewritten page (the header, same user_version) through the WAL.
        sqlite.pragma(`user_version = ${version}`);
      }).immediate();
    });
  } catch {
    // Still failing (guardedWrite recorded it), busy (try again later) or another error.
  } finally {
    sqlite.pragma(`busy_timeout = ${busyTimeoutMs}`);
  }
}

/** SQLite's default `wal_autocheckpoint`, pages (a PASSIVE checkpoint at the commit that passes it). */
const AUTOCHECKPOINT_PAGES = 1000;

/**
 * Source of the WAL checkpoint worker (run with `eval`, so it needs no file of its own under tsx or
 * in the build): its own connection to `workerData.file`; each message runs one
 * `wal_checkpoint(PASSIVE)` and answers its row, or `{ error }`.
 */
const CHECKPOINT_WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(${JSON.stringify(require.resolve('better-sqlite3'))});
let db = null;
parentPort.on('message', () => {
  try {
    if (db === null) db = new Database(workerData.file, { fileMustExist: true });
    parentPort.postMessage(db.pragma('wal_checkpoint(PASSIVE)')[0]);
  } catch (err) {
    parentPort.postMessage({ error: String(err && err.message || err) });
  }
});
`;

/** Thrown inside the storage probe's savepoint to undo its allocation. */
class ProbeRollback extends Error {}

export { schema };
export { DatabaseError, databaseErrorOf, sqliteErrorKind, type DatabaseErrorKind } from './errors.js';
