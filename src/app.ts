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
import { ApiProblem, invalid } from './agent/problems.js';
import type { Database_ } from './db/index.js';
import type { PolicyEngine } from './policy/engine.js';
import swagger from './plugins/external/swagger.js';
import errors, { clientErrorProblem, frameworkErrorProblem } from './plugins/app/errors.js';
import shutdown from './plugins/app/shutdown.js';
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
import openaiRoutes from './routes/openai/index.js';

declare module 'fastify' {
  interface FastifyInstance {
    config: Config;
    /** The ajv instance that validates bodies (no coercion, no removal, defaults applied). */
    bodyAjv: Ajv;
  }
}

export interface AppDeps {
  database: Database_;
  engine: PolicyEngine;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
/** A `\uD800`-`\uDFFF` escape: the only way JSON.parse yields a lone UTF-16 surrogate. */
const SURROGATE_CANDIDATE = /\\u[dD][89a-fA-F]/;

/** What {@link bodyProblem} checks besides depth. */
interface BodyChecks {
  /** Most nesting levels of objects/arrays; the body itself is level 1. */
  maxDepth: number;
  /** Look for numbers that overflowed to +-Infinity (`1e400`, or an integer literal of 309+ digits). */
  numbers: boolean;
  /** Look for strings (values and keys) that are not well-formed UTF-16 (a lone surrogate). */
  strings: boolean;
  /** Look for `__proto__` keys and `constructor` objects with a `prototype` key. */
  forbiddenKeys: boolean;
}

const isWellFormed = (s: string): boolean => (s as unknown as { isWellFormed(): boolean }).isWellFormed();

/**
 * The first problem of a parsed JSON body, as a 400 validation problem naming its path
 * ('body/info/x'), or null. Walks iteratively (an explicit stack), so a body nested deeper than
 * the call stack allows is reported, not a RangeError: nesting beyond `maxDepth` levels, a
 * non-finite number, a lone surrogate, a forbidden prototype key.
 */
function bodyProblem(root: unknown, checks: BodyChecks): ApiProblem | null {
  const stack: Array<[value: unknown, path: string, depth: number]> = [[root, 'body', 1]];
  while (stack.length > 0) {
    const [v, path, depth] = stack.pop()!;
    if (typeof v === 'number') {
      if (checks.numbers && !Number.isFinite(v)) return invalid(path, 'must be a finite number');
      continue;
    }
    if (typeof v === 'string') {
      if (checks.strings && !isWellFormed(v)) return invalid(path, 'contains a lone UTF-16 surrogate (not valid Unicode text)');
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (depth > checks.maxDepth) return invalid(path, `is nested deeper than ${checks.maxDepth} levels (LAMER_MAX_JSON_DEPTH)`);
    const entries = Array.isArray(v) ? v.map((x, i) => [String(i), x] as const) : Object.entries(v as Record<string, unknown>);
    for (let i = entries.length - 1; i >= 0; i--) {
      const [k, x] = entries[i]!;
      const p = `${path}/${k}`;
      if (checks.strings && !isWellFormed(k)) return invalid(p, 'key contains a lone UTF-16 surrogate (not valid Unicode text)');
      if (checks.forbiddenKeys && (k === '__proto__' || (k === 'constructor' && x !== null && typeof x === 'object' && 'prototype' in x))) {
        return new ApiProblem(400, 'bad-request', 'Bad Request', `${p} is a forbidden key (prototype poisoning)`, {
          errors: [{ field: p, message: 'is a forbidden key' }],
        });
      }
      stack.push([x, p, depth + 1]);
    }
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
    // Our onRequest hook answers 503 `shutting-down` (problem+json, Retry-After) while closing.
    return503OnClosing: false,
    // X-Forwarded-* only from the configured gateway addresses (LAMER_TRUST_PROXY; docs/deploy.md).
    trustProxy: config.trustProxy.length > 0 ? config.trustProxy : false,
    routerOptions: { maxParamLength: 256 },
    // Router and HTTP-parser errors (414 long path parameter, 431 huge headers) as problem+json too.
    frameworkErrors: frameworkErrorProblem,
    clientErrorHandler: clientErrorProblem,
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
  });
  // Bodies are validated as sent (a string "1" is not an integer); path and query strings are
  // coerced to the schema's types (they are always strings on the wire).
  const ajvOptions = { removeAdditional: false, useDefaults: true, allErrors: false, strict: false } as const;
  const ajvBody = new Ajv({ ...ajvOptions, coerceTypes: false });
  const ajvCoerce = new Ajv({ ...ajvOptions, coerceTypes: 'array' });
  app.decorate('bodyAjv', ajvBody);
  app.setValidatorCompiler(({ schema, httpPart }) =>
    (httpPart === 'body' ? ajvBody : ajvCoerce).compile(schema as object),
  );
  // JSON bodies: Fastify's parser (rejects __proto__/constructor poisoning), then one iterative
  // walk: nesting depth (LAMER_MAX_JSON_DEPTH), numbers that are not finite after parsing (1e400,
  // a 400-digit integer: JSON.parse gives Infinity, which would be stored as null), lone UTF-16
  // surrogates ("\ud800"), anywhere, also inside free-form `info`/`metadata` and batch items.
  // An empty body with a JSON content type is no body on a DELETE/OPTIONS or a route that takes
  // none (clients often send the header on every request); elsewhere it is a 400.
  const jsonParser = app.getDefaultJsonParser('error', 'error');
  const maxDepth = config.limits.jsonDepth;
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, raw, done) => {
    const body = typeof raw === 'string' ? raw : raw.toString('utf8');
    if (body === '' && (req.method === 'DELETE' || req.method === 'OPTIONS' || req.routeOptions.schema?.body === undefined)) {
      return done(null, undefined);
    }
    jsonParser(req, body, (err: Error | null, value?: unknown) => {
      if (err) {
        // Valid JSON refused by the parser: a forbidden key; say which.
        if ((err as { code?: string }).code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
          let plain: unknown;
          try {
            plain = JSON.parse(body);
          } catch {
            return done(err, undefined);
          }
          const p = bodyProblem(plain, { maxDepth: Infinity, numbers: false, strings: false, forbiddenKeys: true });
          if (p) return done(p, undefined);
        }
        return done(err, undefined);
      }
      const p = bodyProblem(value, {
        maxDepth,
        numbers: true,
        strings: SURROGATE_CANDIDATE.test(body),
        forbiddenKeys: false,
      });
      if (p) return done(p, undefined);
      done(null, value);
    });
  });
  app.decorate('config', config);
  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id);
  });
  // Graceful shutdown: 503 `shutting-down` for new requests, drain without resets (app.drainAndClose).
  await app.register(shutdown, { retryAfterSeconds: config.protection.overloadRetryAfterSeconds });
  // Content-encoded bodies (gzip, br, ...) are not decoded: refuse them instead of parsing bytes.
  app.addHook('preParsing', async (req) => {
    const enc = req.headers['content-encoding'];
    if (enc !== undefined && enc.trim().toLowerCase() !== 'identity') {
      throw new ApiProblem(415, 'unsupported-media-type', 'Unsupported Media Type', `content-encoding ${enc} is not supported; send the body uncompressed`);
    }
  });
  // text/plain is not JSON: 415 like any other non-JSON type (Fastify parses it as a string by default).
  app.removeContentTypeParser('text/plain');

  await app.register(errors);
  await app.register(metricsPlugin, { metrics: createMetrics() });
  await app.register(authentication, { apiKeys: config.apiKeys });
  await app.register(protection, { protection: config.protection });
  await app.register(swagger);
  await app.register(dbPlugin, { database: deps.database });
  await app.register(enginePlugin, {
    engine: deps.engine,
    initialVersion:
      config.engine === 'test'
        ? { version: 'test', checkpointDir: '' }
        : config.engine === 'openai' && config.openai
          ? { version: 'base', checkpointDir: '', spec: { engine: 'openai', remote: config.openai } }
          : { version: 'base', checkpointDir: config.baseModelDir },
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
  await app.register(openaiRoutes);
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
