/**
 * The PostgreSQL store (src/db/store.ts Store) over an open connection (./connection.ts): its
 * repositories (./repositories.ts), its readiness (a `select 1` answered within a second), and
 * the notifications of model activations by other replicas (./listen.ts), and the trainer lease
 * (./trainer-lease.ts).
 */
import type { Store } from '../store.js';
import type { PgConnection } from './connection.js';
import { CHANNELS, listenPg } from './listen.js';
import { pgRepositories } from './repositories.js';
import { pgTrainerLease } from './trainer-lease.js';

/** The store over `conn` (opened from `url`); closing it ends the pool. */
export function pgStore(conn: PgConnection, url: string): Store {
  const { connectTimeoutMs } = conn.settings;
  return {
    kind: 'postgres',
    repos: pgRepositories(conn),
    sqlite: null,
    watchModels: (onChange, onError) => listenPg(url, CHANNELS.models, onChange, { connectTimeoutMs, onError }),
    trainerLease: () => pgTrainerLease(url, connectTimeoutMs),
    async readiness() {
      const database = await conn.ping(1000);
      return { database, storage: database ? 'ok' : 'unknown' };
    },
    close: () => conn.close(),
  };
}
