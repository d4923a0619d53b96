/**
 * `buildApp(config, deps)`: the Fastify application with every plugin and route (docs/architecture.md "Folder map"),
 * not listening. Dependencies (database, engine) are passed in and reach the routes by decoration.
 *
 * Requests: bodies up to `config.limits.bodyBytes` (batch route: `batchBodyBytes`); JSON in UTF-8
 * only, hardened (src/plugins/app/json-body.ts); TypeBox schemas validate every field (ajv, no extra
 * properties, no type coercion of bodies: src/plugins/app/validation.ts).
 * Request ids: an incoming `x-request-id` (1-128 of [A-Za-z0-9._:-]) is kept, else a UUID; every
 * answer carries it in `x-request-id` and it is in every log line of the request.
 * Every answer (errors from the router and the HTTP parser included) carries
 * `x-content-type-options: nosniff`; `/docs` and the dashboard carry their own CSP and frame protection.
 */
import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import Fastify, { type FastifyHttpOptions, type FastifyInstance } from 'fastify';
import type { Config } from './config.js';
import type { Store } from './db/store.js';
import type { PolicyEngine } from './policy/engine.js';
import swagger from './plugins/external/swagger.js';
import rateLimit from './plugins/external/rate-limit.js';
import errors, { clientErrorProblem, frameworkErrorProblem } from './plugins/app/errors.js';
import validation from './plugins/app/validation.js';
import jsonBody from './plugins/app/json-body.js';
import shutdown from './plugins/app/shutdown.js';
import authentication from './plugins/app/authentication.js';
import hostCheck from './plugins/app/host-check.js';
import metricsPlugin, { createMetrics } from './plugins/app/metrics.js';
import dbPlugin from './plugins/app/db.js';
import enginePlugin from './plugins/app/engine.js';
import trainingPlugin from './plugins/app/training.js';
import replicasPlugin from './plugins/app/replicas.js';
import healthPortPlugin from './plugins/app/health-port.js';
import opsRoutes from './routes/ops.js';
import sessionsRoutes from './routes/api/sessions/index.js';
import stepsRoutes from './routes/api/steps/index.js';
import modelsRoutes from './routes/api/models/index.js';
import statsRoutes from './routes/api/stats/index.js';
import trainingRoutes from './routes/api/training/index.js';
import replaysRoutes from './routes/api/replays/index.js';
import openaiRoutes from './routes/openai/index.js';
import sessionOpenAiRoutes from './routes/openai/session.js';
import whoamiRoutes from './routes/api/whoami/index.js';
import diversityRoutes from './routes/api/stats/diversity.js';
import uiRoutes from './routes/ui/index.js';

declare module 'fastify' {
  interface FastifyInstance {
    config: Config;
  }
}

export interface AppDeps {
  /** The store (SQLite or PostgreSQL, src/db/store.ts); the app closes it on close. */
  store: Store;
  engine: PolicyEngine;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Wraps the client-error handler so that a 408 `request-timeout` verdict waits one event-loop turn
 * and is dropped when the request had in fact arrived.
 *
 * Why: Node starts a new connection's headers clock when it accepts the connection, and its
 * periodic check (`connectionsCheckingInterval`) runs in the timers phase, before the poll phase
 * that reads what arrived meanwhile. When the event loop is blocked for longer than the headers
 * timeout (a synchronous tfjs forward pass on a loaded machine) right after a client connected,
 * the client's request sits complete in the kernel's socket buffer yet is judged "not received in
 * time" (seen: 1 step in 256 sessions of `lamer eval` with 32 in flight). Idle keep-alive
 * connections are not affected (Node does not check them between requests).
 *
 * What: on `ERR_HTTP_REQUEST_TIMEOUT` the verdict is deferred with `setImmediate`, which runs after
 * this turn's poll phase has read every socket. If the socket read bytes meanwhile and Node's
 * parser has restarted its clock (a new message began: its age is under `headersTimeoutMs`) or
 * finished the message (age 0), the request is served normally and Node checks the connection
 * again from that message's start; otherwise (nothing arrived, a dribble that continues an old
 * message, leading blank lines only) the 408 is sent one turn late, as before. Slow clients are
 * therefore still cut off; the grace is one loop turn, not a longer limit.
 * @param handler the problem+json writer for client errors (writes the answer, destroys the socket)
 * @param headersTimeoutMs LAMER_HEADERS_TIMEOUT_MS, milliseconds
 */
function timeoutVerdictAfterReads(handler: (err: NodeJS.ErrnoException, socket: Duplex) => void, headersTimeoutMs: number) {
  return (err: NodeJS.ErrnoException, socket: Duplex): void => {
    // biome-ignore lint/correctness/noVoidTypeReturn: hands the error to Node's own handler, whose result is void
    if (err.code !== 'ERR_HTTP_REQUEST_TIMEOUT' || socket.destroyed) return handler(err, socket);
    const s = socket as Socket & { parser?: { duration?: () => number } | null };
    const readBefore = s.bytesRead;
    setImmediate(() => {
      if (s.destroyed) return;
      // `parser.duration()`: ms since the current message began, 0 between messages (Node's
      // HTTPParser; without it, no grace).
      const age = typeof s.parser?.duration === 'function' ? s.parser.duration() : Infinity;
      if (s.bytesRead > readBefore && age < headersTimeoutMs) return;
      handler(err, socket);
    });
  };
}

/** Fastify's server options from the configuration: body limit, request ids, timeouts, proxies. */
function serverOptions(config: Config): FastifyHttpOptions<Server> {
  return {
    logger: { level: config.logLevel },
    bodyLimit: config.limits.bodyBytes,
    genReqId: (req) => {
      const h = req.headers['x-request-id'];
      return typeof h === 'string' && REQUEST_ID.test(h) ? h : randomUUID();
    },
    // Our onRequest hook answers 503 `shutting-down` (problem+json, Retry-After) while closing.
    return503OnClosing: false,
    // X-Forwarded-* only from the configured gateway addresses (LAMER_TRUST_PROXY; docs/deploy.md).
    trustProxy: config.trustProxy.length > 0 ? config.trustProxy : false,
    routerOptions: { maxParamLength: 256 },
    // Router and HTTP-parser errors (414 long path parameter, 431 huge headers) as problem+json too.
    frameworkErrors: frameworkErrorProblem,
    clientErrorHandler: timeoutVerdictAfterReads(clientErrorProblem, config.http.headersTimeoutMs),
    // Slow or stalled clients (one byte a second) must not hold connections open: the headers must
    // arrive within LAMER_HEADERS_TIMEOUT_MS and the whole request within LAMER_REQUEST_TIMEOUT_MS,
    // else 408 `request-timeout` and the connection is closed. Node checks the open connections
    // every `connectionsCheckingInterval` (its default, 30 s, would let a 1 s limit run 31 s).
    requestTimeout: config.http.requestTimeoutMs,
    keepAliveTimeout: config.http.keepAliveTimeoutMs,
    http: {
      headersTimeout: config.http.headersTimeoutMs,
      requestTimeout: config.http.requestTimeoutMs,
      connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(config.http.headersTimeoutMs / 4))),
    },
  };
}

/** The model version the engine loads first: the test engine's, the remote base, or the builtin base checkpoint. */
function initialVersion(config: Config) {
  if (config.engine === 'test') return { version: 'test', checkpointDir: '' };
  if (config.engine === 'openai' && config.openai) {
    return { version: 'base', checkpointDir: '', spec: { engine: 'openai' as const, remote: config.openai } };
  }
  return { version: 'base', checkpointDir: config.baseModelDir };
}

export async function buildApp(config: Config, deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify(serverOptions(config));
  app.decorate('config', config);
  await app.register(validation);
  await app.register(jsonBody, { maxDepth: config.limits.jsonDepth });
  // Hooks on every request are callback-style (no promise and microtask hop per hook).
  app.addHook('onRequest', (req, reply, done) => {
    // nosniff: browsers must take every answer as its declared type (a JSON or problem+json body
    // that echoes client text is never sniffed into HTML or script).
    reply.header('x-request-id', req.id).header('x-content-type-options', 'nosniff');
    done();
  });
  // Graceful shutdown: 503 `shutting-down` for new requests, drain without resets (app.drainAndClose).
  await app.register(shutdown, { retryAfterSeconds: config.protection.overloadRetryAfterSeconds });

  // A plugin that fails to register (the base model does not load, say) must not leave the ones
  // before it running (the WAL checkpoint worker keeps the process alive): close what started.
  try {
    // Before the 404/405 answers of the errors plugin: a refused Host learns nothing about routes.
    await app.register(hostCheck, { keyless: config.apiKeys.length === 0, allowedHosts: config.allowedHosts ?? [] });
    await app.register(errors);
    await app.register(metricsPlugin, { metrics: createMetrics() });
    await app.register(authentication, { apiKeys: config.apiKeys });
    await app.register(rateLimit, { protection: config.protection });
    await app.register(swagger);
    await app.register(dbPlugin, { store: deps.store });
    await app.register(enginePlugin, {
      engine: deps.engine,
      initialVersion: initialVersion(config),
      limits: config.limits,
      sessionIdleTtlSeconds: config.sessionIdleTtlSeconds,
      protection: config.protection,
    });
    await app.register(replicasPlugin, { pollMs: config.postgres?.pollMs ?? 2000 });
    await app.register(trainingPlugin, { config });
    // LAMER_HEALTH_PORT: /healthz and /readyz on their own port, answered by a worker thread.
    await app.register(healthPortPlugin, {
      health: config.health ?? null, host: config.host, retryAfterSeconds: config.protection.overloadRetryAfterSeconds,
    });

    await app.register(opsRoutes);
    // A trainer (LAMER_ROLE=trainer) serves no sessions: its routes are operations, whoami, models, training, the dashboard.
    const serves = (config.role ?? 'both') !== 'trainer';
    const sessionRoutes = new Set([sessionsRoutes, stepsRoutes, statsRoutes, replaysRoutes, openaiRoutes, sessionOpenAiRoutes]);
    sessionRoutes.add(diversityRoutes);
    const all = [sessionsRoutes, stepsRoutes, modelsRoutes, statsRoutes, trainingRoutes, replaysRoutes, openaiRoutes, sessionOpenAiRoutes];
    for (const routes of [...all, whoamiRoutes, diversityRoutes, uiRoutes]) {
      if (serves || !sessionRoutes.has(routes)) await app.register(routes);
    }
  } catch (err) {
    await app.close().catch(() => {});
    throw err;
  }
  return app;
}

/**
 * The OpenAPI 3.1 document of the API under the default configuration (no API keys, default
 * limits), as committed at openapi/openapi.json. Builds the app on a throwaway database.
 */
export async function buildOpenApiDocument(): Promise<Record<string, unknown>> {
  const fs = await import('node:fs');
  const os = await import('node:os');
  const path = await import('node:path');
  const { loadConfig } = await import('./config.js');
  const { openDatabase } = await import('./db/index.js');
  const { sqliteStore } = await import('./db/store.js');
  const { TestEngine } = await import('./policy/test-engine.js');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lamer-openapi-'));
  const config = { ...loadConfig({}), engine: 'test' as const, logLevel: 'silent' as const, dataDir: dir };
  const app = await buildApp(config, { store: sqliteStore(openDatabase(dir)), engine: new TestEngine() });
  try {
    await app.ready();
    return JSON.parse(JSON.stringify(app.swagger())) as Record<string, unknown>;
  } finally {
    await app.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** The committed text of openapi/openapi.json: 2-space JSON and a trailing newline. */
export function formatOpenApi(doc: Record<string, unknown>): string {
  return JSON.stringify(doc, null, 2) + '\n';
}
