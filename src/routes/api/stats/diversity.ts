/**
 * `GET /v1/stats/diversity`: trajectory diversity per model version, env and memory over the tenant's
 * newest completed sessions (`app.agent.diversity`, src/agent/diversity.ts; answers kept and brought
 * up to date with the sessions completed since, src/agent/diversity-cache.ts). A falling value from
 * one version to the next is exploration collapse.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { bearer, errorResponses } from '../common.js';
import { Nullable, StringEnum } from '../../../schema-helpers.js';
import { SESSION_MODES } from '../../../domain.js';
import { StatsMemoryField } from './schemas.js';

export const DiversityQuery = Type.Object(
  {
    taskId: Type.Optional(Type.String({ maxLength: 1024 })),
    env: Type.Optional(Type.String({ maxLength: 256 })),
    mode: Type.Optional(StringEnum(SESSION_MODES)),
    modelVersion: Type.Optional(Type.String({ maxLength: 256 })),
    memory: Type.Optional(StatsMemoryField),
    maxSessions: Type.Optional(Type.Integer({ minimum: 1, maximum: 20000, default: 2000, description: 'newest completed sessions read' })),
  },
  { additionalProperties: false },
);

export const Diversity = Type.Object({
  scanned: Type.Integer({ description: 'completed sessions read (equal to maxSessions: older ones were left out)' }),
  groups: Type.Array(
    Type.Object({
      modelVersion: Type.String(),
      env: Nullable(Type.String()),
      memory: StatsMemoryField,
      sessions: Type.Integer(),
      tasks: Type.Integer({ description: 'distinct task ids' }),
      attempts: Type.Integer({ description: 'trajectories read' }),
      diversity: Type.Number({
        description: "mean over tasks of the entropy (nats) of the task's distinct trajectories (an attempt's recorded actions in order)",
      }),
    }),
  ),
});

const diversityRoutes: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    '/v1/stats/diversity',
    {
      schema: {
        tags: ['stats'],
        summary: 'Trajectory diversity per model version, env and memory (exploration collapse shows as a falling value)',
        security: bearer,
        querystring: DiversityQuery,
        response: { 200: Diversity, ...errorResponses },
      },
    },
    async (req) => {
      const { maxSessions = 2000, ...f } = req.query;
      return app.agent.diversity(req.tenant, f, maxSessions);
    },
  );
};

export default diversityRoutes;
