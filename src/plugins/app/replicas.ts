/**
 * On a store that other servers share (PostgreSQL, LAMER_DATABASE_URL), this server follows the
 * model version they activate: it reads the active version every `pollMs`
 * (LAMER_DATABASE_POLL_MS) and at once when a notification announces an activation (LISTEN/NOTIFY,
 * src/db/pg/listen.ts). An activation or rollback made on any replica is therefore held by every
 * other within `pollMs` of its commit, usually within a few milliseconds: new sessions there pin
 * it, and the version is loaded in the engine in the background (`/readyz` is 503 until it is).
 * Sessions keep the version they pinned wherever they are served. On SQLite (one server) this
 * plugin does nothing.
 */
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';

export default fp(
  async function replicas(app: FastifyInstance, opts: { pollMs: number }) {
    if (app.store.kind !== 'postgres') return;
    let running = false;
    let again = false;
    const follow = async (): Promise<void> => {
      if (running) {
        again = true;
        return;
      }
      running = true;
      try {
        do {
          again = false;
          const row = await app.models.follow();
          if (!row) continue;
          app.log.info({ version: row.version }, 'active model version changed on another server');
          app.models.ensureLoaded(row.version).catch((err: unknown) => {
            app.log.error({ err, version: row.version }, 'the active model version could not be loaded');
          });
        } while (again);
      } catch (err) {
        app.log.warn({ err: String(err) }, 'the active model version could not be read');
      } finally {
        running = false;
      }
    };
    const timer = setInterval(() => void follow(), opts.pollMs);
    timer.unref();
    const stopWatching = app.store.watchModels?.(
      () => void follow(),
      (err) => app.log.warn({ err: err.message }, 'model activation notifications: connection lost; polling goes on'),
    );
    app.addHook('onClose', async () => {
      clearInterval(timer);
      await stopWatching?.();
    });
  },
  { name: 'replicas', dependencies: ['db', 'engine'] },
);
