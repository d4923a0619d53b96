/** Decorates `app.db` (drizzle over better-sqlite3, src/db) and closes it last on shutdown. */
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import type { Database_ } from '../../db/index.js';

declare module 'fastify' {
  interface FastifyInstance {
    db: Database_;
  }
}

export default fp(
  async function db(app: FastifyInstance, opts: { database: Database_ }) {
    app.decorate('db', opts.database);
    app.addHook('onClose', async () => {
      opts.database.close();
    });
  },
  { name: 'db' },
);
