/**
 * Prometheus metrics (prom-client), one registry per app instance (`app.metrics`), served at
 * `/metrics` (docs/operations.md "Metrics" lists them):
 * - `http_request_duration_seconds{method,route,status_code}`: latency histogram per route, seconds;
 * - `lamer_steps_total{kind,model_version}`: step records committed (rate() = steps/s);
 * - `lamer_step_requests_total{outcome}`: step requests by outcome (recorded | replayed | overloaded
 *   | engine_error | database_error | rejected);
 * - `lamer_sessions_ended_total{status}`, `lamer_sessions_created_total`, `lamer_active_sessions`;
 * - `lamer_engine_batch_rows`: histogram of rows per forward pass; `lamer_engine_forward_seconds`;
 * - `lamer_engine_queue_depth` (requests queued in the engine's batchers) and
 *   `lamer_model_calls_in_flight` (model calls waiting on or running in the engine; bounded by
 *   LAMER_MAX_QUEUED_STEPS);
 * - `lamer_model_loaded{version}` (1 per version loaded in memory), `lamer_engine_info{engine,backend}`
 *   (the tfjs backend in use);
 * - `lamer_training_job_progress{job_id,algorithm}` (0..1, running jobs) and
 *   `lamer_training_jobs{status}` (jobs by status);
 * - `lamer_rate_limited_total`: requests answered 429 by the rate limit.
 * Gauges read their sources when scraped through the `sources` callbacks the plugins set.
 */
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { JOB_STATUSES } from '../../domain.js';

/** A running training job as /metrics shows it. */
type RunningJob = { id: string; algorithm: string; progress: number };

/** What the gauges read when /metrics is scraped; set by the engine and training plugins (the store's counts are read as promises). */
export interface MetricSources {
  activeSessions(): number | Promise<number>;
  engineQueueDepth(): number;
  modelCallsInFlight(): number;
  loadedVersions(): string[];
  engineInfo(): { engine: string; backend: string } | null;
  /** Running jobs and their progress in [0, 1]. */
  runningJobs(): RunningJob[] | Promise<RunningJob[]>;
  /** Number of jobs per status. */
  jobsByStatus(): Record<string, number> | Promise<Record<string, number>>;
}

export interface Metrics {
  registry: Registry;
  httpDuration: Histogram<'method' | 'route' | 'status_code'>;
  stepsTotal: Counter<'kind' | 'model_version'>;
  stepRequests: Counter<'outcome'>;
  sessionsEnded: Counter<'status'>;
  sessionsCreated: Counter;
  activeSessions: Gauge;
  /** Set by the engine plugin: counts active sessions when /metrics is scraped. */
  countActiveSessions: () => number | Promise<number>;
  engineInfo: Gauge<'engine' | 'backend'>;
  batchRows: Histogram;
  forwardSeconds: Histogram;
  rateLimited: Counter;
  sources: MetricSources;
}


declare module 'fastify' {
  interface FastifyInstance {
    metrics: Metrics;
  }
}

/**
 * The gauges read at scrape time from `sources()` (the engine's queue depth and model calls in
 * flight, the loaded versions, running training jobs and jobs by status), registered on `registry`.
 */
function registerSourceGauges(registry: Registry, sources: () => Metrics['sources']): void {
  new Gauge({
    name: 'lamer_engine_queue_depth',
    help: "Requests queued in the engine's batchers, waiting for a forward pass",
    registers: [registry],
    collect() {
      this.set(sources().engineQueueDepth());
    },
  });
  new Gauge({
    name: 'lamer_model_calls_in_flight',
    help: 'Model calls (act/reflect) waiting on or running in the engine (bounded by LAMER_MAX_QUEUED_STEPS)',
    registers: [registry],
    collect() {
      this.set(sources().modelCallsInFlight());
    },
  });
  new Gauge({
    name: 'lamer_model_loaded',
    help: 'Model versions loaded in memory (value 1 per version)',
    labelNames: ['version'],
    registers: [registry],
    collect() {
      this.reset();
      for (const v of sources().loadedVersions()) this.set({ version: v }, 1);
    },
  });
  new Gauge({
    name: 'lamer_training_job_progress',
    help: 'Progress of each running training job, 0..1',
    labelNames: ['job_id', 'algorithm'],
    registers: [registry],
    async collect() {
      const jobs = await sources().runningJobs();
      this.reset();
      for (const j of jobs) this.set({ job_id: j.id, algorithm: j.algorithm }, j.progress);
    },
  });
  new Gauge({
    name: 'lamer_training_jobs',
    help: 'Training jobs by status',
    labelNames: ['status'],
    registers: [registry],
    async collect() {
      const counts = await sources().jobsByStatus();
      for (const s of JOB_STATUSES) this.set({ status: s }, counts[s] ?? 0);
    },
  });
}

/**
 * A fresh Prometheus registry with the server's metrics (HTTP latency by route, steps, sessions,
 * engine batches and forward seconds, rate limiting, training jobs); gauges read their values
 * from `sources` at scrape time, which the server fills in once the db and engine exist.
 */
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
      async collect() {
        this.set(await m.countActiveSessions());
      },
    }),
    countActiveSessions: () => m.sources.activeSessions(),
    engineInfo: new Gauge({
      name: 'lamer_engine_info',
      help: 'Policy engine and tfjs backend in use (value 1)',
      labelNames: ['engine', 'backend'],
      registers: [registry],
      collect() {
        const i = m.sources.engineInfo();
        if (i) {
          this.reset();
          this.set({ engine: i.engine, backend: i.backend }, 1);
        }
      },
    }),
    stepRequests: new Counter({
      name: 'lamer_step_requests_total',
      help: 'Step requests by outcome (recorded | replayed | overloaded | engine_error | database_error | rejected)',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    sessionsCreated: new Counter({ name: 'lamer_sessions_created_total', help: 'Sessions opened', registers: [registry] }),
    batchRows: new Histogram({
      name: 'lamer_engine_batch_rows',
      help: 'Rows (requests) per forward pass of the model (dynamic batching)',
      buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512],
      registers: [registry],
    }),
    forwardSeconds: new Histogram({
      name: 'lamer_engine_forward_seconds',
      help: 'Duration of one forward pass of the model (one synchronous section of the event loop), seconds',
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    }),
    rateLimited: new Counter({ name: 'lamer_rate_limited_total', help: 'Requests answered 429 by the rate limit', registers: [registry] }),
    sources: {
      activeSessions: () => 0,
      engineQueueDepth: () => 0,
      modelCallsInFlight: () => 0,
      loadedVersions: () => [],
      engineInfo: () => null,
      runningJobs: () => [],
      jobsByStatus: () => ({}),
    },
  };
  registerSourceGauges(registry, () => m.sources);
  return m;
}

/** Routes whose requests `lamer_step_requests_total` counts. */
const STEP_ROUTES = new Set(['/v1/sessions/:id/steps', '/v1/steps:batch']);

export default fp(
  async function metrics(app: FastifyInstance, opts: { metrics: Metrics }) {
    app.decorate('metrics', opts.metrics);
    app.addHook('onResponse', (req, reply, done) => {
      // Fastify spells the batch route with an escaped colon ('/v1/steps::batch').
      const route = (req.routeOptions.url ?? 'unmatched').replace('::', ':');
      opts.metrics.httpDuration.observe({ method: req.method, route, status_code: String(reply.statusCode) }, reply.elapsedTime / 1000);
      // Every 4xx answer of a step route is a rejected step request (validation 400, 409, 413,
      // 415, ...); a batch item's own 4xx is counted by the batch route.
      if (STEP_ROUTES.has(route) && reply.statusCode >= 400 && reply.statusCode < 500) {
        opts.metrics.stepRequests.inc({ outcome: 'rejected' });
      }
      done();
    });
  },
  { name: 'metrics' },
);
