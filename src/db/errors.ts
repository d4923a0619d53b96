/**
 * SQLite failures by kind, in one place. better-sqlite3 throws `SqliteError` with `code` set to
 * SQLite's extended result code name (`SQLITE_BUSY`, `SQLITE_IOERR_WRITE`, ...); drizzle may wrap it
 * (`cause`). The database layer turns the ones an operator or client can act on into a
 * {@link DatabaseError} with a {@link DatabaseErrorKind}; src/plugins/app/errors.ts maps kinds to
 * HTTP answers (503 `database-busy`, `storage-full`, `storage-unavailable`).
 */

/**
 * - `busy`: another connection holds the write lock (SQLITE_BUSY*, SQLITE_LOCKED*): transient,
 *   nothing was written, the same request can be sent again.
 * - `full`: the disk (or `max_page_count`) is full (SQLITE_FULL): nothing was written.
 * - `io`: the operating system failed a read or write (SQLITE_IOERR*, SQLITE_CANTOPEN*, SQLITE_NOLFS).
 * - `readonly`: the file can no longer be written (SQLITE_READONLY*: permissions, read-only mount,
 *   file moved or deleted under the server).
 * - `corrupt`: the file is not a sound database (SQLITE_CORRUPT*, SQLITE_NOTADB).
 */
export type DatabaseErrorKind = 'busy' | 'full' | 'io' | 'readonly' | 'corrupt';

/** A SQLite failure with its kind; `code` is SQLite's extended result code name, `cause` the original error. */
export class DatabaseError extends Error {
  constructor(
    readonly kind: DatabaseErrorKind,
    readonly code: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'DatabaseError';
  }
}

/**
 * The kind of a SQLite result code name (primary or extended: `SQLITE_IOERR_FSYNC` is `io`), or
 * null for codes that are not a storage or contention condition (constraint violations, SQL
 * errors, misuse: programming errors, which stay 500 `internal`).
 */
export function sqliteErrorKind(code: string): DatabaseErrorKind | null {
  const primary = /^SQLITE_[A-Z]+/.exec(code)?.[0];
  switch (primary) {
    case 'SQLITE_BUSY':
    case 'SQLITE_LOCKED':
      return 'busy';
    case 'SQLITE_FULL':
      return 'full';
    case 'SQLITE_IOERR':
    case 'SQLITE_CANTOPEN':
    case 'SQLITE_NOLFS':
      return 'io';
    case 'SQLITE_READONLY':
      return 'readonly';
    case 'SQLITE_CORRUPT':
    case 'SQLITE_NOTADB':
      return 'corrupt';
    default:
      return null;
  }
}

/**
 * `err` as a {@link DatabaseError} when it (or an error in its `cause` chain, e.g. drizzle's
 * DrizzleQueryError) is a SQLite failure of a known kind; else null.
 */
export function databaseErrorOf(err: unknown): DatabaseError | null {
  let e: unknown = err;
  for (let depth = 0; depth < 5 && e !== null && typeof e === 'object'; depth++) {
    if (e instanceof DatabaseError) return e;
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && code.startsWith('SQLITE_')) {
      const kind = sqliteErrorKind(code);
      return kind === null ? null : new DatabaseError(kind, code, (e as Error).message ?? code, { cause: e });
    }
    e = (e as { cause?: unknown }).cause;
  }
  return null;
}

/** Kinds after which the database cannot be written until a write succeeds again (readiness false). */
export const STORAGE_FAILURE_KINDS: readonly DatabaseErrorKind[] = ['full', 'io', 'readonly', 'corrupt'];

/** A step commit refused because its session is no longer `active` (nothing was written). */
export class SessionNotActiveError extends Error {
  constructor(readonly sessionId: string) {
    super(`session '${sessionId}' is no longer active`);
    this.name = 'SessionNotActiveError';
  }
}

/**
 * A step commit refused because the session changed since the state it was computed from (its
 * `expectedUpdatedAt`): another server wrote it meanwhile, e.g. a human edit of a reflection.
 * Nothing was written; compute the step again from the session as stored.
 */
export class StaleSessionError extends Error {
  constructor(readonly sessionId: string) {
    super(`session '${sessionId}' changed since its state was read`);
    this.name = 'StaleSessionError';
  }
}
