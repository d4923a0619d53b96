/**
 * `buildApp(config, deps)`: the Fastify application with every plugin and route (DESIGN §5-6),
 * not listening. Dependencies (database, engine) are passed in and reach the routes by decoration.
 *
 * Requests: bodies up to `config.limits.bodyBytes` (batch route: `batchBodyBytes`); JSON only;
 * TypeBox schemas validate every field (ajv, no extra properties, no type coercion of bodies).
 * Request ids: an incoming `x-request-id` (1-128 of [A-Za-z0-9._:-]) is kept, else a UUID; every
 * answer carries it in `x-request-id` and it is in every log line of the request.
 */
import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import { Ajv } from 'ajv';
import type { Config } from './config.js';
import { invalid } from './agent/problems.js';
import type { Database_ } from './db/index.js';
import type { PolicyEngine } from './policy/engine.js';
import swagger from './plugins/external/swagger.js';
import errors from './plugins/app/errors.js';
import authentication from './plugins/app/authentication.js';
import metricsPlugin, { createMetrics } from './plugins/app/metrics.js';
import protection from './plugins/app/protection.js';
import dbPlugin from './plugins/app/db.js';
import enginePlugin from './plugins/app/engine.js';
import trainingPlugin from './plugins/app/training.js';
import opsRoutes from './routes/ops.js';
import sessionsRoutes from './routes/api/sessions/index.js';
import stepsRoutes from './routes/api/steps/index.js';
import modelsRoutes from './routes/api/models/index.js';
import statsRoutes from './routes/api/stats/index.js';
import trainingRoutes from './routes/api/training/index.js';

declare module 'fastify' {
  interface FastifyInstance {
    config: Config;
  }
}

export interface AppDeps {
  database: Database_;
  engine: PolicyEngine;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
/** A number literal with a 3-digit exponent: the only way JSON.parse yields Infinity. */
const OVERFLOW_CANDIDATE = /\d[eE][+]?\d{3}/;

/** Path ('body/info/x') of the first non-finite number in a parsed JSON value, or null. */
function nonFinitePath(v: unknown, path: string): string | null {
  if (typeof v === 'number') return Number.isFinite(v) ? null : path;
  if (v === null || typeof v !== 'object') return null;
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
    const p = nonFinitePath(x, `${path}/${k}`);
    if (p !== null) return p;
  }
  return null;
}

export async function buildApp(config: Config, deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    logger: { level: config.logLevel },
    bodyLimit: config.limits.bodyBytes,
    genReqId: (req) => {
      const h = req.headers['x-request-id'];
      return typeof h === 'string' && REQUEST_ID.test(h) ? h : randomUUID();
    },
    return503OnClosing: true,
    // X-Forwarded-* only from the configured gateway addresses (LAMER_TRUST_PROXY; docs/deploy.md).
    trustProxy: config.trustProxy.length > 0 ? config.trustProxy : false,
    routerOptions: { maxParamLength: 256 },
  });
  // Bodies are validated as sent (a string "1" is not an integer); path and query strings are
  // coerced to the schema's types (they are always strings on the wire).
  const ajvOptions = { removeAdditional: false, useDefaults: true, allErrors: false, strict: false } as const;
  const ajvBody = new Ajv({ ...ajvOptions, coerceTypes: false });
  const ajvCoerce = new Ajv({ ...ajvOptions, coerceTypes: 'array' });
  app.setValidatorCompiler(({ schema, httpPart }) =>
    (httpPart === 'body' ? ajvBody : ajvCoerce).compile(schema as object),
  );
  // JSON bodies: Fastify's parser (rejects __proto__/constructor poisoning), then a check that no
  // number overflowed to Infinity (e.g. 1e400 anywhere, also inside free-form `info`/`metadata`).
  const jsonParser = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, raw, done) => {
    const body = typeof raw === 'string' ? raw : raw.toString('utf8');
    jsonParser(req, body, (err: Error | null, value?: unknown) => {
      if (err) return done(err, undefined);
      if (OVERFLOW_CANDIDATE.test(body)) {
        const where = nonFinitePath(value, 'body');
        if (where !== null) return done(invalid(where, 'must be a finite number'), undefined);
      }
      done(null, value);
    });
  });
  app.decorate('config', config);
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id);
    // While shutting down, ask keep-alive clients to reconnect (elsewhere) after this answer.
    if (closing) reply.header('connection', 'close');
  });

  await app.register(errors);
  await app.register(metricsPlugin, { metrics: createMetrics() });
  await app.register(authentication, { apiKeys: config.apiKeys });
  await app.register(protection, { protection: config.protection });
  await app.register(swagger);
  await app.register(dbPlugin, { database: deps.database });
  await app.register(enginePlugin, {
    engine: deps.engine,
    initialVersion:
      config.engine === 'test' ? { version: 'test', checkpointDir: '' } : { version: 'base', checkpointDir: config.baseModelDir },
    limits: config.limits,
    sessionIdleTtlSeconds: config.sessionIdleTtlSeconds,
    protection: config.protection,
  });
  await app.register(trainingPlugin, { config });

  await app.register(opsRoutes);
  await app.register(sessionsRoutes);
  await app.register(stepsRoutes);
  await app.register(modelsRoutes);
  await app.register(statsRoutes);
  await app.register(trainingRoutes);
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
  const { TestEngine } = await import('./policy/test-engine.js');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lamer-openapi-'));
  const config = { ...loadConfig({}), engine: 'test' as const, logLevel: 'silent' as const, dataDir: dir };
  const app = await buildApp(config, { database: openDatabase(dir), engine: new TestEngine() });
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
