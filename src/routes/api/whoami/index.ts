/**
 * `GET /v1/whoami`: the tenant and rights of the request's API key, so that a client (the dashboard
 * at /ui) can check a key at sign-in and show admin controls only to admin keys. The API refuses
 * admin routes to other keys anyway (`app.requireAdmin`).
 */
import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { bearer, errorResponses } from '../common.js';

export const WhoAmI = Type.Object({
  tenant: Type.String({ description: "the key's tenant ('default' when no keys are configured)" }),
  admin: Type.Boolean({ description: 'the key may use the model and training routes that change state' }),
  authRequired: Type.Boolean({ description: 'false when the server has no API keys configured (every request is tenant default, admin)' }),
});

const whoamiRoutes: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    '/v1/whoami',
    {
      schema: {
        tags: ['auth'],
        summary: "The API key's tenant and whether it is an admin key",
        security: bearer,
        response: { 200: WhoAmI, ...errorResponses },
      },
    },
    async (req) => ({ tenant: req.tenant, admin: req.isAdmin, authRequired: app.config.apiKeys.length > 0 }),
  );
};

export default whoamiRoutes;
