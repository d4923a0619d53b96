/**
 * The store the server runs on, whichever it is: the SQLite file of the data directory (the
 * default, one server per directory) or a PostgreSQL database that several replicas share
 * (LAMER_DATABASE_URL). The services see only {@link Store.repos} (AsyncRepositories); readiness
 * and closing are answered here for both.
 */
import type { AsyncRepositories } from './async-repositories.js';
import { sqliteAsyncRepositories } from './async-repositories.js';
import type { DatabaseConnection } from './index.js';

/** What `/readyz` reports of the store. */
export interface StoreReadiness {
  /** The database answers a trivial read. */
  database: boolean;
  /**
   * 'ok', or why writes fail: 'full', 'io', 'readonly', 'corrupt' (SQLite: the last failed write,
   * until a write succeeds again); 'unknown' when the database does not answer.
   */
  storage: string;
}

/**
 * The right to run training jobs: held by one server of a database at a time, so that at most one
 * runs a job (src/training/run/manager.ts).
 */
export interface TrainerLease {
  /** Take it if it is free (never waits for it); resolves true while it is held. Never rejects. */
  acquire(): Promise<boolean>;
  /** Whether it is held now (false again once lost). */
  held(): boolean;
  /** `cb` is called each time a held lease is lost (the connection that holds it broke). */
  onLost(cb: () => void): void;
  /** Give it back (nothing when not held). */
  release(): Promise<void>;
}

/** The lease of a store that one server owns (SQLite under its owner lock): held once asked for, never lost. */
export function soleTrainerLease(): TrainerLease {
  let held = false;
  return {
    acquire: async () => (held = true),
    held: () => held,
    onLost: () => {},
    release: async () => {
      held = false;
    },
  };
}

export interface Store {
  /** Which store this is. */
  kind: 'sqlite' | 'postgres';
  /** The repositories every service reads and writes through. */
  repos: AsyncRepositories;
  /** The SQLite connection (kind `sqlite`: WAL maintenance, tuning, tests), else null. */
  sqlite: DatabaseConnection | null;
  /**
   * Other servers on the same database (PostgreSQL): `onChange` is called soon after any of them
   * activates a model version (and once after a lost connection to the database comes back, as a
   * notification may have been missed); `onError` hears of lost connections. Returns a function
   * that stops it. Null on SQLite, where one server owns the file.
   */
  watchModels: ((onChange: () => void, onError: (err: Error) => void) => () => Promise<void>) | null;
  /** A new trainer lease on this store (one per job manager). */
  trainerLease(): TrainerLease;
  /** Readiness of the database (never throws). */
  readiness(): Promise<StoreReadiness>;
  /** Close the connection(s). Idempotent. */
  close(): Promise<void>;
}

/**
 * The store over an open SQLite database. Readiness: the connection answers `SELECT 1`; after a
 * failed write (disk full, I/O error) a small probe write, at most once a second and never waiting
 * for a lock, finds out whether writes succeed again.
 */
export function sqliteStore(conn: DatabaseConnection): Store {
  let closed = false;
  return {
    kind: 'sqlite',
    repos: sqliteAsyncRepositories(conn),
    sqlite: conn,
    watchModels: null,
    trainerLease: soleTrainerLease,
    async readiness() {
      const database = conn.ping();
      const st = database ? conn.probeStorage(1000) : conn.storage.state();
      return { database, storage: st.writable ? 'ok' : (st.kind ?? 'unknown') };
    },
    async close() {
      if (closed) return;
      closed = true;
      conn.close();
    },
  };
}
