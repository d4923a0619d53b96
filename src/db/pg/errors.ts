/**
 * PostgreSQL failures by kind: start-up errors an operator must act on (PgStartupError, one line
 * each, naming host:port and never the password), and the failures of running queries mapped to
 * the kinds of src/db/errors.ts (DatabaseError), so the HTTP layer answers them as it answers
 * SQLite's (503 `database-busy`, `storage-full`, `storage-unavailable`). node-postgres throws
 * `DatabaseError` with `code` set to the SQLSTATE (https://www.postgresql.org/docs/15/errcodes-appendix.html)
 * for server errors, and Node's network errors (`ECONNREFUSED`, ...) or plain `Error`s for lost
 * connections; drizzle may wrap either (`cause`).
 */
import { DatabaseError, type DatabaseErrorKind } from '../errors.js';

/**
 * Why a PostgreSQL store could not start:
 * - `config`: the database URL is not a `postgres://` / `postgresql://` URL, or a pool setting is out of range.
 * - `unreachable`: nothing answered at host:port (refused, unknown host, no answer within the connect timeout).
 * - `auth`: the server refused the user or password (SQLSTATE 28P01, 28000).
 * - `no-database`: the database named in the URL does not exist (3D000).
 * - `schema-too-new`: the database holds migrations this build does not know (a newer build migrated it).
 * - `migration`: a migration failed, or the migration lock was not granted within its wait.
 */
export type PgStartupReason = 'config' | 'unreachable' | 'auth' | 'no-database' | 'schema-too-new' | 'migration';

/** A start-up failure of the PostgreSQL store: `message` is one line for the operator; `cause` the driver's error. */
export class PgStartupError extends Error {
  constructor(
    readonly reason: PgStartupReason,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'PgStartupError';
  }
}

/** Network error codes meaning nothing answered at the address. */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNRESET', 'EPIPE',
]);

/** What a failed connection attempt (or the first query on it) means, as a PgStartupError; `where` is `host:port`. */
export function startupErrorOf(err: unknown, where: string, user: string, database: string): PgStartupError {
  if (err instanceof PgStartupError) return err;
  const e = err as { code?: unknown; message?: unknown; errors?: unknown };
  const code = typeof e?.code === 'string' ? e.code : '';
  const message = oneLine(typeof e?.message === 'string' ? e.message : String(err));
  if (code === '28P01' || code === '28000') {
    return new PgStartupError('auth', `database authentication failed for user "${user}" at ${where}: ${message}`, { cause: err });
  }
  if (code === '3D000') return new PgStartupError('no-database', `database "${database}" does not exist at ${where}`, { cause: err });
  const unreachable = (why: string) => new PgStartupError('unreachable', `database unreachable at ${where} (${why})`, { cause: err });
  if (UNREACHABLE_CODES.has(code)) return unreachable(code);
  if (/timeout/i.test(message)) return unreachable('no answer within the connect timeout');
  if (/Connection terminated/i.test(message)) return unreachable(message);
  return new PgStartupError('migration', `database at ${where}: ${message}${code ? ` (${code})` : ''}`, { cause: err });
}

/** `s` with its line breaks folded into spaces (a start-up error is one line). */
export function oneLine(s: string): string {
  return s.replace(/\s*\n\s*/g, ' ').trim();
}

/**
 * The kind of a SQLSTATE, or null for codes that are programming errors (constraint violations,
 * syntax, types), which stay 500 `internal`:
 * - `busy`: statement timeout or cancel (57014), lock not available (55P03), serialization failure
 *   (40001), deadlock (40P01), too many connections (53300): transient, nothing was written.
 * - `full`: disk full (53100), out of memory (53200).
 * - `io`: I/O error (58030), the server shutting down or gone (57P01-57P03), connection failures (08*).
 * - `readonly`: read-only transaction (25006), e.g. a standby.
 * - `corrupt`: data corrupted (XX001), index corrupted (XX002).
 */
export function pgErrorKind(code: string): DatabaseErrorKind | null {
  if (['57014', '55P03', '40001', '40P01', '53300'].includes(code)) return 'busy';
  if (code === '53100' || code === '53200') return 'full';
  if (code === '58030' || /^57P0[123]$/.test(code) || code.startsWith('08')) return 'io';
  if (code === '25006') return 'readonly';
  if (code === 'XX001' || code === 'XX002') return 'corrupt';
  return null;
}

/** Driver messages of a connection lost or never made (no SQLSTATE). */
const LOST = /Connection terminated|Client has encountered a connection error|ECONNRESET|ECONNREFUSED/i;

/**
 * `err` as a DatabaseError when it (or an error in its `cause` chain) is a PostgreSQL failure of a
 * known kind: a SQLSTATE of pgErrorKind, a network error code, or a lost connection (kind `io`);
 * the pool's wait for a free connection timing out is `busy`. Else null.
 */
export function pgDatabaseErrorOf(err: unknown): DatabaseError | null {
  let e: unknown = err;
  for (let depth = 0; depth < 5 && e !== null && typeof e === 'object'; depth++) {
    if (e instanceof DatabaseError) return e;
    const code = (e as { code?: unknown }).code;
    const message = String((e as { message?: unknown }).message ?? '');
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) {
      const kind = pgErrorKind(code);
      return kind === null ? null : new DatabaseError(kind, code, message, { cause: e });
    }
    if (typeof code === 'string' && UNREACHABLE_CODES.has(code)) return new DatabaseError('io', code, message, { cause: e });
    if (/timeout exceeded when trying to connect/i.test(message)) return new DatabaseError('busy', 'POOL_TIMEOUT', message, { cause: e });
    if (LOST.test(message)) return new DatabaseError('io', 'CONNECTION_LOST', message, { cause: e });
    e = (e as { cause?: unknown }).cause;
  }
  return null;
}

/** Run `fn`; a PostgreSQL failure of a known kind is rethrown as its DatabaseError, anything else unchanged. */
export async function mapPgErrors<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw pgDatabaseErrorOf(err) ?? err;
  }
}
