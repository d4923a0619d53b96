/**
 * One data directory, one server: `acquireOwnerLock(dataDir)` takes an operating-system lock that
 * only one process (and one server within a process) can hold, for as long as the server runs.
 *
 * The lock is SQLite's EXCLUSIVE lock (a POSIX advisory `fcntl` lock) on `<dataDir>/lamer.lock`,
 * a small SQLite file holding no data, taken with `BEGIN EXCLUSIVE` and no busy wait. The operating
 * system releases it when the process ends in any way, kill -9 included, so a stale lock never
 * blocks the next start. The owner's pid is written to `<dataDir>/lamer.pid` once the lock is
 * held, so that a refused start can name it. Read-only users of the directory (`lamer export`)
 * do not take the lock.
 *
 * Limits: POSIX locks hold between processes of one machine (and containers sharing a local
 * volume); on network file systems (NFS, SMB) they depend on the server's lock support.
 */
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { ensureDirSync } from './ensure-dir.js';

/** The lock is held by another live process (or another server in this process). */
export class OwnerLockError extends Error {
  constructor(
    readonly dataDir: string,
    /** The owner's pid, or null when it could not be read (the owner is just starting). */
    readonly ownerPid: number | null,
  ) {
    super(`${dataDir} is in use by another lamer server (pid ${ownerPid ?? 'unknown'}); one data directory serves one server at a time`);
    this.name = 'OwnerLockError';
  }
}

export interface OwnerLock {
  /** `<dataDir>/lamer.lock`. */
  file: string;
  /** Give the directory up: remove lamer.pid, release the lock. Idempotent. */
  release(): void;
}

export const LOCK_FILE = 'lamer.lock';
export const PID_FILE = 'lamer.pid';

/** The pid in `<dataDir>/lamer.pid`, or null (missing, empty, not a number). */
export function readOwnerPid(dataDir: string): number | null {
  try {
    const n = Number(fs.readFileSync(path.join(dataDir, PID_FILE), 'utf8').trim());
    return Number.isSafeInteger(n) && n > 0 ? n : null;
  } catch {
    return null;
  }
}

/**
 * Take the owner lock of `dataDir` (created if needed) for this process.
 * @throws OwnerLockError when another process or server holds it.
 * @throws DirectoryError (src/ensure-dir.ts, with the file system's code: ENOTDIR, EACCES, ...)
 *   when the directory cannot be created; the file system's error or SQLite's when the lock file
 *   cannot be created or opened.
 */
export function acquireOwnerLock(dataDir: string): OwnerLock {
  ensureDirSync(dataDir);
  const file = path.join(dataDir, LOCK_FILE);
  const db = new Database(file);
  try {
    db.pragma('busy_timeout = 0');
    db.pragma('journal_mode = MEMORY'); // nothing is written: no -journal file next to it
    db.exec('BEGIN EXCLUSIVE');
  } catch (err) {
    db.close();
    if ((err as { code?: string }).code === 'SQLITE_BUSY') throw new OwnerLockError(dataDir, readOwnerPid(dataDir));
    throw err;
  }
  const pidFile = path.join(dataDir, PID_FILE);
  try {
    fs.writeFileSync(pidFile, `${process.pid}\n`);
  } catch (err) {
    db.close();
    throw err;
  }
  let held = true;
  return {
    file,
    release() {
      if (!held) return;
      held = false;
      // The pid file goes first, while the lock is still ours: a next owner writes its own after.
      try {
        if (readOwnerPid(dataDir) === process.pid) fs.rmSync(pidFile, { force: true });
      } catch {
        /* best effort: a stale pid file is harmless, the lock decides */
      }
      db.close();
    },
  };
}
