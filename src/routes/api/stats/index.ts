/**
 * `GET /v1/stats`: pass@1..k, success and mean return by attempt, per model version, env, mode and
 * memory ('none' for single-attempt sessions, read as independent retries), from the groups'
 * aggregates kept as sessions complete (src/agent/session-stats.ts statsFromGroups).
 */
import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { bearer, errorResponses } from '../common.js';
import { Stats, StatsQuery } from './schemas.js';

const statsRoutes: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    '/v1/stats',
    {
      schema: {
        tags: ['stats'],
        summary: "Statistics over the tenant's completed sessions",
        security: bearer,
        querystring: StatsQuery,
        response: { 200: Stats, ...errorResponses },
      },
    },
    async (req) => {
      const { retries = 3, ...f } = req.query;
      return app.agent.stats(req.tenant, f, retries);
    },
  );
};

export default statsRoutes;
