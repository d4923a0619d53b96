/**
 * Statements of the write paths sent as named prepared statements, and transactions on one pooled
 * connection. On loopback TCP a statement's cost to a replica is mostly its round trip (pool
 * checkout, driver, promises: docs/performance.md), so the write paths send few statements, each
 * built once from the schema (drizzle's `sql` with placeholders), parsed by PostgreSQL once per
 * pooled connection and then sent with its parameters only.
 */
import type pg from 'pg';
import { is, Param, Placeholder, sql, type DriverValueEncoder, type SQL } from 'drizzle-orm';
import { PgDialect, type PgColumn } from 'drizzle-orm/pg-core';

/** An encoder that sends a value as it is (a JSON text already serialised, a JS array for a `text[]`). */
export const asIs: DriverValueEncoder<unknown, unknown> = { mapToDriverValue: (v) => v };

/**
 * A parameter of a statement: `name`, cast to `type` (a column: its SQL type, encoded as the
 * column encodes its values; or an SQL type name, sent as it is unless `encoder` is given).
 */
export type ParamOf<P extends string> = (name: P, type: PgColumn | string, encoder?: DriverValueEncoder<unknown, unknown>) => SQL;

/** A statement built once: its name on each connection, its text, and each `$n`'s parameter name and encoder. */
export interface NamedStatement<P extends string> {
  name: string;
  text: string;
  slots: ReadonlyArray<{ name: P; encoder: DriverValueEncoder<unknown, unknown> }>;
}

/** `value` (a value or a placeholder) cast to `type` and encoded as its column encodes it. */
function typed(value: unknown, type: PgColumn | string, encoder?: DriverValueEncoder<unknown, unknown>): SQL {
  const sqlType = typeof type === 'string' ? type : type.getSQLType();
  const enc = encoder ?? (typeof type === 'string' ? asIs : type);
  return sql`${sql.param(value, enc)}::${sql.raw(sqlType)}`;
}

/**
 * Build statement `name` from `build` (called once, with placeholders). A change of a statement's
 * text needs a new name: connections keep the statements they prepared under their names.
 * @throws Error when a parameter of the built statement is not one of `build`'s placeholders.
 */
export function namedStatement<P extends string>(name: string, build: (param: ParamOf<P>) => SQL): NamedStatement<P> {
  const q = new PgDialect().sqlToQuery(build((p, type, encoder) => typed(sql.placeholder(p), type, encoder)));
  const slots = q.params.map((p) => {
    if (!is(p, Param) || !is(p.value, Placeholder)) throw new Error(`statement ${name}: a parameter is not a placeholder`);
    return { name: p.value.name as P, encoder: p.encoder as DriverValueEncoder<unknown, unknown> };
  });
  return { name, text: q.sql, slots };
}

/**
 * Run `statement` with `params` on `client` (a pool: its own transaction; a checked-out client:
 * inside the caller's transaction, if any). null and undefined are sent as SQL NULL.
 * @returns its rows. @throws the driver's error.
 */
export async function runNamed<P extends string, R extends pg.QueryResultRow>(
  client: pg.Pool | pg.PoolClient,
  statement: NamedStatement<P>,
  params: Readonly<Record<P, unknown>>,
): Promise<R[]> {
  const values = statement.slots.map(({ name, encoder }) => {
    const v = params[name];
    return v === null || v === undefined ? null : encoder.mapToDriverValue(v);
  });
  return (await client.query<R>({ name: statement.name, text: statement.text, values })).rows;
}

/**
 * `fn` in one transaction on a connection of `pool` (BEGIN, `fn`'s statements, COMMIT): committed
 * when this resolves; rolled back when `fn` or the commit throws (a connection whose rollback failed
 * is closed, not returned to the pool).
 * @throws what `fn` or the driver threw.
 */
export async function inTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    const out = await fn(client);
    await client.query('COMMIT');
    return out;
  } catch (err) {
    await client.query('ROLLBACK').catch((e: unknown) => {
      broken = e instanceof Error ? e : new Error(String(e));
    });
    throw err;
  } finally {
    client.release(broken);
  }
}
