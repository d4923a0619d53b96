/**
 * Decorates `app.db` (the open database connection: drizzle over better-sqlite3, src/db) and
 * `app.repos` (the repositories over it, src/db/repositories.ts: what the services, routes and
 * workers read and write tables through), and closes the connection last on shutdown.
 * Applies `config.database` to the connection: the busy timeout and WAL size limit, and the timer
 * (and worker thread) that checkpoints an oversized WAL (LAMER_SQLITE_CHECKPOINT_INTERVAL_MS;
 * stopped, its connection closed, before the database closes).
 */
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import type { DatabaseConnection } from '../../db/index.js';
import { createRepositories, type Repositories } from '../../db/repositories.js';

declare module 'fastify' {
  interface FastifyInstance {
    db: DatabaseConnection;
    repos: Repositories;
  }
}

export default fp(
  async function db(app: FastifyInstance, opts: { database: DatabaseConnection }) {
    const cfg = app.config.database;
    opts.database.tune({ busyTimeoutMs: cfg.busyTimeoutMs, walLimitBytes: cfg.walLimitBytes });
    const stopMaintenance =
      cfg.checkpointIntervalMs > 0
        ? opts.database.startWalMaintenance(cfg.checkpointIntervalMs, (err) => app.log.warn({ err }, 'WAL checkpoint failed'))
        : async () => {};
    app.decorate('db', opts.database);
    app.decorate('repos', createRepositories(opts.database));
    app.addHook('onClose', async () => {
      await stopMaintenance();
      opts.database.close();
    });
  },
  { name: 'db' },
);
