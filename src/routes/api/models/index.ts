/**
 * Model-version routes (docs/protocol.md "Model versions"): list, get, activate (hot swap for new sessions; running
 * sessions keep their pinned version; roll back by activating an older one). Admin key required
 * when API keys are configured.
 */
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { notFound } from '../../../agent/errors.js';
import { Model, ModelList, ModelParams, RegisterModel } from '../../../agent/model-schemas.js';
import { bearer, errorResponses } from '../common.js';

const tags = ['models'];

/** GET /v1/models. */
function listRoute(fastify: FastifyInstance): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    '/v1/models',
    { schema: { tags, summary: 'List model versions', security: bearer, response: { 200: ModelList, ...errorResponses } } },
    async () => ({ items: (await app.models.list()).map((m) => app.models.view(m)), active: app.models.active().version }),
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
      const m = await app.models.register(req.body);
      req.log.info({ version: m.version, baseUrl: req.body.baseUrl, model: req.body.model }, 'remote model version registered');
      return reply.code(201).send(app.models.view(m));
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
      const m = await app.models.current(req.params.version);
      if (!m) throw notFound(`model version '${req.params.version}'`);
      return app.models.view(m);
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
      return app.models.view(m);
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
