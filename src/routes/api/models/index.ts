/**
 * Model-version routes (docs/protocol.md "Model versions"): list, get, activate (hot swap for new sessions; running
 * sessions keep their pinned version; roll back by activating an older one). Admin key required
 * when API keys are configured.
 */
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { ModelRow } from '../../../db/schema.js';
import { invalid, notFound } from '../../../agent/errors.js';
import { bearer, errorResponses } from '../common.js';
import { REMOTE_DEFAULTS } from '../../../policy/openai-engine.js';
import type { RemoteVersionConfig } from '../../../policy/engine.js';
import type { Static } from 'typebox';
import { Model, ModelList, ModelParams, RegisterModel } from './schemas.js';
import type { GateReport } from '../../../training/schemas.js';

const tags = ['models'];

/** A remote server's configuration as shown: the API key only as `hasApiKey`. */
const remoteView = (c: RemoteVersionConfig) => ({
  baseUrl: c.baseUrl, model: c.model, kind: c.kind, hasApiKey: c.apiKey !== undefined, concurrency: c.concurrency,
  timeoutMs: c.timeoutMs, maxRetries: c.maxRetries, maxActionTokens: c.maxActionTokens, maxReflectionTokens: c.maxReflectionTokens,
  maxResponseBytes: c.maxResponseBytes ?? REMOTE_DEFAULTS.maxResponseBytes, callTimeoutMs: c.callTimeoutMs ?? REMOTE_DEFAULTS.callTimeoutMs,
});

/** The model resource of a row (loaded: whether the engine holds it now). */
const modelView = (app: FastifyInstance, m: ModelRow) => ({
  version: m.version,
  parent: m.parent,
  jobId: m.jobId,
  status: m.status,
  metrics: m.metrics,
  createdAt: new Date(m.createdAt).toISOString(),
  loaded: app.engine.isLoaded(m.version),
  engine: m.engine,
  remote: m.engine === 'openai' && m.engineConfig ? remoteView(m.engineConfig as unknown as RemoteVersionConfig) : null,
  gate: (m.metrics.gate ?? null) as Static<typeof GateReport> | null,
});

/** The remote configuration of a registration body, defaults filled in (REMOTE_DEFAULTS). */
function remoteConfigOf(b: Static<typeof RegisterModel>): RemoteVersionConfig {
  return {
    baseUrl: b.baseUrl,
    model: b.model,
    ...(b.apiKey !== undefined ? { apiKey: b.apiKey } : {}),
    kind: b.kind ?? REMOTE_DEFAULTS.kind,
    concurrency: b.concurrency ?? REMOTE_DEFAULTS.concurrency,
    timeoutMs: b.timeoutMs ?? REMOTE_DEFAULTS.timeoutMs,
    maxRetries: b.maxRetries ?? REMOTE_DEFAULTS.maxRetries,
    maxActionTokens: b.maxActionTokens ?? REMOTE_DEFAULTS.maxActionTokens,
    maxReflectionTokens: b.maxReflectionTokens ?? REMOTE_DEFAULTS.maxReflectionTokens,
    maxResponseBytes: b.maxResponseBytes ?? REMOTE_DEFAULTS.maxResponseBytes,
    callTimeoutMs: b.callTimeoutMs ?? REMOTE_DEFAULTS.callTimeoutMs,
  };
}

/** GET /v1/models. */
function listRoute(fastify: FastifyInstance): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    '/v1/models',
    { schema: { tags, summary: 'List model versions', security: bearer, response: { 200: ModelList, ...errorResponses } } },
    async () => ({ items: app.models.list().map((m) => modelView(app, m)), active: app.models.active().version }),
  );
}

/** POST /v1/models: register a remote version (201). */
function registerRoute(fastify: FastifyInstance): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.post(
    '/v1/models',
    {
      schema: {
        tags,
        summary: 'Register a version served by a remote OpenAI-compatible server (candidate; activate it like any version)',
        security: bearer,
        body: RegisterModel,
        response: { 201: Model, ...errorResponses },
      },
    },
    async (req, reply) => {
      const b = req.body;
      if (!URL.canParse(b.baseUrl)) throw invalid('body/baseUrl', 'is not a URL');
      const u = new URL(b.baseUrl);
      // fetch refuses URLs with credentials, and a URL is shown in listings and logs: the key goes in apiKey.
      if (u.username !== '' || u.password !== '') throw invalid('body/baseUrl', 'must not contain a user name or password (send the key as apiKey)');
      const remote = remoteConfigOf(b);
      const m = app.models.register({ version: b.version, parent: b.parent ?? null, remote, ...(b.metrics ? { metrics: b.metrics } : {}) });
      req.log.info({ version: m.version, baseUrl: remote.baseUrl, model: remote.model }, 'remote model version registered');
      return reply.code(201).send(modelView(app, m));
    },
  );
}

/** GET /v1/models/:version. */
function getRoute(fastify: FastifyInstance): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    '/v1/models/:version',
    {
      schema: { tags, summary: 'Get a model version', security: bearer, params: ModelParams, response: { 200: Model, ...errorResponses } },
    },
    async (req) => {
      const m = app.models.get(req.params.version);
      if (!m) throw notFound(`model version '${req.params.version}'`);
      return modelView(app, m);
    },
  );
}

/** POST /v1/models/:version/activate. */
function activateRoute(fastify: FastifyInstance): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.post(
    '/v1/models/:version/activate',
    {
      schema: {
        tags,
        summary: 'Make a version active for new sessions (loads it first; running sessions keep theirs)',
        security: bearer,
        params: ModelParams,
        response: { 200: Model, ...errorResponses },
      },
    },
    async (req) => {
      const m = await app.models.activate(req.params.version);
      req.log.info({ version: m.version }, 'model version activated');
      return modelView(app, m);
    },
  );
}

const modelsRoutes: FastifyPluginAsync = async (app) => {
  app.addHook('onRequest', app.requireAdmin);
  listRoute(app);
  registerRoute(app);
  getRoute(app);
  activateRoute(app);
};

export default modelsRoutes;
