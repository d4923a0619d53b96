/**
 * Decorates `app.engine` (PolicyEngine), `app.models` (ModelRegistry) and `app.agent`
 * (SessionService, the LaMer state machine). On close: wait for in-flight steps to commit, then
 * dispose the engine.
 */
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import type { Limits } from '../../config.js';
import type { PolicyEngine } from '../../policy/engine.js';
import { ModelRegistry } from '../../agent/models.js';
import { SessionService } from '../../agent/sessions.js';
import { HotQueries } from '../../db/queries.js';

declare module 'fastify' {
  interface FastifyInstance {
    engine: PolicyEngine;
    models: ModelRegistry;
    agent: SessionService;
  }
}

export interface EnginePluginOptions {
  engine: PolicyEngine;
  /** Version registered (active) when the models table is empty, and its checkpoint folder. */
  initialVersion: { version: string; checkpointDir: string };
  limits: Limits;
  /** Idle sessions expire after this many seconds (0: never); checked every minute. */
  sessionIdleTtlSeconds: number;
}

export default fp(
  async function engine(app: FastifyInstance, opts: EnginePluginOptions) {
    const models = new ModelRegistry(app.db.db, opts.engine);
    await models.init(opts.initialVersion.version, opts.initialVersion.checkpointDir);
    const info = opts.engine.info();
    app.metrics.engineInfo.set({ engine: info.engine, backend: info.backend }, 1);
    const agent = new SessionService(app.db.db, new HotQueries(app.db.sqlite), opts.engine, models, opts.limits, {
      onStep: (kind, version) => app.metrics.stepsTotal.inc({ kind, model_version: version }),
      onSessionEnd: (status) => app.metrics.sessionsEnded.inc({ status }),
    });
    app.metrics.countActiveSessions = () => agent.activeCount();
    app.decorate('engine', opts.engine);
    app.decorate('models', models);
    app.decorate('agent', agent);
    let sweep: NodeJS.Timeout | null = null;
    if (opts.sessionIdleTtlSeconds > 0) {
      const ttlMs = opts.sessionIdleTtlSeconds * 1000;
      sweep = setInterval(() => {
        agent.expireIdle(ttlMs).then(
          (ids) => {
            if (ids.length > 0) app.log.info({ count: ids.length }, 'idle sessions expired');
          },
          (err: unknown) => app.log.error({ err }, 'expiring idle sessions failed'),
        );
      }, Math.min(60_000, ttlMs));
      sweep.unref();
    }
    app.addHook('onClose', async () => {
      if (sweep) clearInterval(sweep);
      await agent.drain();
      await opts.engine.dispose();
    });
  },
  { name: 'engine', dependencies: ['db', 'metrics'] },
);
