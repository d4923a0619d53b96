/**
 * Model-version routes (DESIGN §3): list, get, activate (hot swap for new sessions; running
 * sessions keep their pinned version; roll back by activating an older one). Admin key required
 * when API keys are configured.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { ModelRow } from '../../../db/schema.js';
import { invalid, notFound } from '../../../agent/errors.js';
import { bearer, errorResponses } from '../common.js';
import { REMOTE_DEFAULTS } from '../../../policy/openai-engine.js';
import type { RemoteVersionConfig } from '../../../policy/engine.js';
import { Model, ModelList, ModelParams, RegisterModel } from './schemas.js';

const modelsRoutes: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['models'];
  const view = (m: ModelRow) => ({
    version: m.version,
    parent: m.parent,
    jobId: m.jobId,
    status: m.status,
    metrics: m.metrics,
    createdAt: new Date(m.createdAt).toISOString(),
    loaded: app.engine.isLoaded(m.version),
    engine: m.engine,
    remote: m.engine === 'openai' && m.engineConfig ? remoteView(m.engineConfig as unknown as RemoteVersionConfig) : null,
  });
  const remoteView = (c: RemoteVersionConfig) => ({
    baseUrl: c.baseUrl, model: c.model, kind: c.kind, hasApiKey: c.apiKey !== undefined, concurrency: c.concurrency,
    timeoutMs: c.timeoutMs, maxRetries: c.maxRetries, maxActionTokens: c.maxActionTokens, maxReflectionTokens: c.maxReflectionTokens,
  });
  app.addHook('onRequest', app.requireAdmin);

  app.get(
    '/v1/models',
    { schema: { tags, summary: 'List model versions', security: bearer, response: { 200: ModelList, ...errorResponses } } },
    async () => ({ items: app.models.list().map(view), active: app.models.active().version }),
  );

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
      const remote: RemoteVersionConfig = {
        baseUrl: b.baseUrl,
        model: b.model,
        ...(b.apiKey !== undefined ? { apiKey: b.apiKey } : {}),
        kind: b.kind ?? REMOTE_DEFAULTS.kind,
        concurrency: b.concurrency ?? REMOTE_DEFAULTS.concurrency,
        timeoutMs: b.timeoutMs ?? REMOTE_DEFAULTS.timeoutMs,
        maxRetries: b.maxRetries ?? REMOTE_DEFAULTS.maxRetries,
        maxActionTokens: b.maxActionTokens ?? REMOTE_DEFAULTS.maxActionTokens,
        maxReflectionTokens: b.maxReflectionTokens ?? REMOTE_DEFAULTS.maxReflectionTokens,
      };
      const m = app.models.register({ version: b.version, parent: b.parent ?? null, remote, ...(b.metrics ? { metrics: b.metrics } : {}) });
      req.log.info({ version: m.version, baseUrl: remote.baseUrl, model: remote.model }, 'remote model version registered');
      return reply.code(201).send(view(m));
    },
  );

  app.get(
    '/v1/models/:version',
    {
      schema: { tags, summary: 'Get a model version', security: bearer, params: ModelParams, response: { 200: Model, ...errorResponses } },
    },
    async (req) => {
      const m = app.models.get(req.params.version);
      if (!m) throw notFound(`model version '${req.params.version}'`);
      return view(m);
    },
  );

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
      return view(m);
    },
  );
};

export default modelsRoutes;
