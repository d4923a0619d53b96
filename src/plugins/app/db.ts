/**
 * Decorates `app.store` (the store the server runs on, src/db/store.ts: SQLite in the data
 * directory, or PostgreSQL) and `app.repos` (its repositories, src/db/async-repositories.ts: what
 * the services read and write tables through), and closes the store last on shutdown.
 * On SQLite, applies `config.database` to the connection: the busy timeout and WAL size limit,
 * and the timer (and worker thread) that checkpoints an oversized WAL
 * (LAMER_SQLITE_CHECKPOINT_INTERVAL_MS; stopped, its connection closed, before the database closes).
 */
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import type { AsyncRepositories } from '../../db/async-repositories.js';
import type { Store } from '../../db/store.js';

declare module 'fastify' {
  interface FastifyInstance {
    store: Store;
    repos: AsyncRepositories;
  }
}

export default fp(
  async function db(app: FastifyInstance, opts: { store: Store }) {
    const cfg = app.config.database;
    const sqlite = opts.store.sqlite;
    sqlite?.tune({ busyTimeoutMs: cfg.busyTimeoutMs, walLimitBytes: cfg.walLimitBytes });
    const stopMaintenance =
      sqlite && cfg.checkpointIntervalMs > 0
        ? sqlite.startWalMaintenance(cfg.checkpointIntervalMs, (err) => app.log.warn({ err }, 'WAL checkpoint failed'))
        : async () => {};
    app.decorate('store', opts.store);
    app.decorate('repos', opts.store.repos);
    app.addHook('onClose', async () => {
      await stopMaintenance();
      await opts.store.close();
    });
  },
  { name: 'db' },
);
