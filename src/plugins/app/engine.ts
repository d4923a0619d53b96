/**
 * Decorates `app.engine` (PolicyEngine), `app.models` (ModelRegistry, the model service),
 * `app.agent` (SessionService, the LaMer state machine), `app.completions` (CompletionService,
 * the OpenAI-compatible endpoints) and `app.replays` (ReplayService: recorded sessions replayed
 * against another version). On close: wait for in-flight steps to commit, then dispose the engine.
 */
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import type { Limits, ProtectionConfig } from '../../config.js';
import type { EngineSpec, PolicyEngine } from '../../policy/engine.js';
import { RoutingEngine } from '../../policy/routing-engine.js';
import { ModelRegistry } from '../../agent/models.js';
import { SessionService } from '../../agent/sessions.js';
import { CompletionService } from '../../serving/completions.js';
import { ReplayService } from '../../agent/replays.js';

declare module 'fastify' {
  interface FastifyInstance {
    engine: PolicyEngine;
    models: ModelRegistry;
    agent: SessionService;
    completions: CompletionService;
    replays: ReplayService;
  }
}

export interface EnginePluginOptions {
  engine: PolicyEngine;
  /**
   * Version registered (active) when the models table is empty, its checkpoint folder and, for a
   * remote version (LAMER_ENGINE=openai), its server.
   */
  initialVersion: { version: string; checkpointDir: string; spec?: EngineSpec };
  limits: Limits;
  /** Idle sessions expire after this many seconds (0: never); checked every minute. */
  sessionIdleTtlSeconds: number;
  /** Bounds on queued model calls and open sessions per tenant (default: none). */
  protection?: Pick<ProtectionConfig, 'maxQueuedSteps' | 'maxOpenSessionsPerTenant' | 'overloadRetryAfterSeconds'>;
}

export default fp(
  async function engine(app: FastifyInstance, opts0: EnginePluginOptions) {
    // Every version kind through one engine: remote versions go to their server, the rest to the given engine.
    const routed = opts0.engine instanceof RoutingEngine ? opts0.engine : new RoutingEngine(opts0.engine, { logger: app.log });
    const opts = { ...opts0, engine: routed };
    const models = new ModelRegistry(app.repos.models, opts.engine);
    await models.init(opts.initialVersion.version, opts.initialVersion.checkpointDir, opts.initialVersion.spec);
    const m = app.metrics;
    const info = opts.engine.info();
    m.engineInfo.set({ engine: info.engine, backend: info.backend }, 1);
    const agent = new SessionService(
      app.repos,
      opts.engine,
      models,
      opts.limits,
      {
        onStep: (kind, version) => m.stepsTotal.inc({ kind, model_version: version }),
        onSessionEnd: (status) => m.sessionsEnded.inc({ status }),
        onStepOutcome: (outcome) => m.stepRequests.inc({ outcome }),
      },
      opts.protection,
    );
    opts.engine.setObserver?.({
      forward: (rows, ms) => {
        m.batchRows.observe(rows);
        m.forwardSeconds.observe(ms / 1000);
      },
    });
    m.sources.activeSessions = () => agent.activeCount();
    m.sources.modelCallsInFlight = () => agent.modelCallsInFlight();
    m.sources.engineQueueDepth = () => opts.engine.queueDepth?.() ?? 0;
    m.sources.loadedVersions = () => opts.engine.info().loadedVersions;
    m.sources.engineInfo = () => {
      const i = opts.engine.info();
      return { engine: i.engine, backend: i.backend };
    };
    app.decorate('engine', opts.engine);
    app.decorate('models', models);
    app.decorate('agent', agent);
    app.decorate('completions', new CompletionService(models, opts.engine, agent));
    const replayLimits = { maxReplaySteps: opts.limits.maxReplaySteps, actionChars: opts.limits.actionChars };
    const retryAfter = opts.protection?.overloadRetryAfterSeconds ?? 1;
    app.decorate('replays', new ReplayService(app.repos, opts.engine, models, agent, replayLimits, retryAfter));
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
