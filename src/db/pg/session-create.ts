/**
 * The statements that insert a session on PostgreSQL, each one named prepared statement
 * (./statements.ts): a plain insert, and the insert under the tenant's open-session cap, which
 * counts and inserts in one statement (one round trip instead of five: BEGIN, the tenant's lock,
 * the count, the insert, COMMIT):
 *
 * ```sql
 * WITH counted AS (SELECT lamer_open_sessions_locked($lockClass, $tenant) AS n),
 *      ins     AS (INSERT INTO sessions (...) SELECT $values... FROM counted WHERE counted.n < $cap RETURNING 1)
 * SELECT (SELECT n FROM counted) AS open, (SELECT count(*) FROM ins) AS inserted
 * ```
 *
 * `lamer_open_sessions_locked` (migrations-pg/0004_open_sessions_lock.sql) takes the tenant's
 * transaction advisory lock (TENANT_LOCK_CLASS, hashtext(tenant)), so creates of one tenant take
 * turns until their transaction ends, on every replica; then it counts the tenant's active sessions
 * in a statement of its own, whose snapshot is taken after the lock was granted and so shows every
 * create that held the lock before (a count in the calling statement would use that statement's
 * snapshot, taken before the wait, and miss them). Outside a transaction the statement is its own
 * transaction: the lock is held until the inserted row is committed.
 */
import type pg from 'pg';
import { getTableColumns, sql, type SQL } from 'drizzle-orm';
import type { SessionRow } from '../schema.js';
import { TENANT_LOCK_CLASS } from './connection.js';
import { sessions } from './schema.js';
import { namedStatement, runNamed, type ParamOf } from './statements.js';

const COLUMNS = getTableColumns(sessions);
type Field = keyof typeof COLUMNS;
const FIELDS = Object.keys(COLUMNS) as Field[];

/** The session's columns and their values' placeholders, in the same order. */
function columnsAndValues(param: ParamOf<string>): { columns: SQL; values: SQL } {
  return {
    columns: sql.join(FIELDS.map((f) => sql.identifier(COLUMNS[f].name)), sql`, `),
    values: sql.join(FIELDS.map((f) => param(f, COLUMNS[f])), sql`, `),
  };
}

const insertPlain = namedStatement<string>('lamer_session_insert_1', (param) => {
  const { columns, values } = columnsAndValues(param);
  return sql`INSERT INTO ${sessions} (${columns}) VALUES (${values})`;
});

const insertCapped = namedStatement<string>('lamer_session_insert_capped_1', (param) => {
  const { columns, values } = columnsAndValues(param);
  const open = sql`lamer_open_sessions_locked(${param('lockClass', 'integer')}, ${param('tenant', sessions.tenant)})`;
  return sql`WITH counted AS (SELECT ${open} AS n),
    ins AS (INSERT INTO ${sessions} (${columns}) SELECT ${values} FROM counted WHERE counted.n < ${param('cap', 'integer')} RETURNING 1)
    SELECT (SELECT n FROM counted) AS "open", (SELECT count(*) FROM ins)::int AS "inserted"`;
});

/** `row`'s values by field; a field left undefined takes its column's default, as drizzle's inserts do. */
function valuesOf(row: SessionRow): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of FIELDS) out[f] = row[f] === undefined && COLUMNS[f].hasDefault ? COLUMNS[f].default : row[f];
  return out;
}

/**
 * Insert session `row` on `client` (a pool: its own transaction; a checked-out client: inside the caller's).
 * @throws the driver's error (a duplicate id: unique violation; nothing written).
 */
export async function insertSessionRow(client: pg.Pool | pg.PoolClient, row: SessionRow): Promise<void> {
  await runNamed(client, insertPlain, valuesOf(row));
}

/**
 * Insert session `row` when its tenant holds fewer than `cap` (> 0) active sessions, counted under
 * the tenant's lock (see the top of this file), on `client` as insertSessionRow.
 * @returns whether it was inserted, and the tenant's active sessions before it.
 * @throws the driver's error (nothing written).
 */
export async function insertSessionUnderCap(
  client: pg.Pool | pg.PoolClient,
  row: SessionRow,
  cap: number,
): Promise<{ inserted: boolean; open: number }> {
  const [r] = await runNamed<string, { open: number; inserted: number }>(client, insertCapped, {
    ...valuesOf(row), lockClass: TENANT_LOCK_CLASS, cap,
  });
  if (!r) throw new Error('session insert statement returned no row');
  return { inserted: r.inserted === 1, open: r.open };
}
