/**
 * The PostgreSQL store (src/db/store.ts Store) over an open connection (./connection.ts): its
 * repositories (./repositories.ts) and its readiness, a `select 1` answered within a second.
 */
import type { Store } from '../store.js';
import type { PgConnection } from './connection.js';
import { pgRepositories } from './repositories.js';

/** The store over `conn`; closing it ends the pool. */
export function pgStore(conn: PgConnection): Store {
  return {
    kind: 'postgres',
    repos: pgRepositories(conn),
    sqlite: null,
    async readiness() {
      const database = await conn.ping(1000);
      return { database, storage: database ? 'ok' : 'unknown' };
    },
    close: () => conn.close(),
  };
}
