/**
 * Prometheus metrics (prom-client), one registry per app instance (`app.metrics`), served at
 * `/metrics`: request latency per route (seconds), steps recorded, active sessions, engine info.
 * Other modules add their own metrics to `app.metrics.registry`.
 */
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export interface Metrics {
  registry: Registry;
  httpDuration: Histogram<'method' | 'route' | 'status_code'>;
  stepsTotal: Counter<'kind' | 'model_version'>;
  sessionsEnded: Counter<'status'>;
  activeSessions: Gauge;
  /** Set by the engine plugin: counts active sessions when /metrics is scraped. */
  countActiveSessions: () => number;
  engineInfo: Gauge<'engine' | 'backend'>;
}

declare module 'fastify' {
  interface FastifyInstance {
    metrics: Metrics;
  }
}

export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const m: Metrics = {
    registry,
    httpDuration: new Histogram({
      name: 'http_request_duration_seconds',
      help: 'HTTP request latency in seconds, by route',
      labelNames: ['method', 'route', 'status_code'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    stepsTotal: new Counter({
      name: 'lamer_steps_total',
      help: 'Recorded steps (kind action | reflection)',
      labelNames: ['kind', 'model_version'],
      registers: [registry],
    }),
    sessionsEnded: new Counter({
      name: 'lamer_sessions_ended_total',
      help: 'Sessions that ended, by final status',
      labelNames: ['status'],
      registers: [registry],
    }),
    activeSessions: new Gauge({
      name: 'lamer_active_sessions',
      help: 'Sessions with status active',
      registers: [registry],
      collect() {
        this.set(m.countActiveSessions());
      },
    }),
    countActiveSessions: () => 0,
    engineInfo: new Gauge({
      name: 'lamer_engine_info',
      help: 'Policy engine and tfjs backend in use (value 1)',
      labelNames: ['engine', 'backend'],
      registers: [registry],
    }),
  };
  return m;
}

export default fp(
  async function metrics(app: FastifyInstance, opts: { metrics: Metrics }) {
    app.decorate('metrics', opts.metrics);
    app.addHook('onResponse', async (req, reply) => {
      opts.metrics.httpDuration.observe(
        { method: req.method, route: req.routeOptions.url ?? 'unmatched', status_code: String(reply.statusCode) },
        reply.elapsedTime / 1000,
      );
    });
  },
  { name: 'metrics' },
);
