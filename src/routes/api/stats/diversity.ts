/**
 * `GET /v1/stats/diversity`: trajectory diversity per model version and env over the tenant's
 * newest completed sessions (src/agent/diversity.ts over the rows of src/db/trajectories.ts). A
 * falling value from one version to the next is exploration collapse.
 *
 * Reading the actions means reading the steps rows past their prompts (a few KB each): about
 * 250 ms for 2,000 sessions on the shared 2-core development VM under load. Answers are therefore kept (the 64 most recent queries)
 * and reused while the tenant's completed sessions are unchanged (`completedSessionsToken`), so a
 * dashboard polling it re-reads nothing until a session completes.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { bearer, errorResponses, Nullable, StringEnum } from '../common.js';
import { SESSION_MODES } from '../../../domain.js';
import { attemptTrajectories, completedSessionsToken } from '../../../db/trajectories.js';
import { diversityByVersion } from '../../../agent/diversity.js';

export const DiversityQuery = Type.Object(
  {
    taskId: Type.Optional(Type.String({ maxLength: 1024 })),
    env: Type.Optional(Type.String({ maxLength: 256 })),
    mode: Type.Optional(StringEnum(SESSION_MODES)),
    modelVersion: Type.Optional(Type.String({ maxLength: 256 })),
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
      sessions: Type.Integer(),
      tasks: Type.Integer({ description: 'distinct task ids' }),
      attempts: Type.Integer({ description: 'trajectories read' }),
      diversity: Type.Number({
        description: "mean over tasks of the entropy (nats) of the task's distinct trajectories (an attempt's recorded actions in order)",
      }),
    }),
  ),
});

const CACHE_ENTRIES = 64;

const diversityRoutes: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  // query key -> { token, answer }; Map order is the LRU order (oldest first).
  const cache = new Map<string, { token: string; answer: ReturnType<typeof diversityByVersion> }>();
  app.get(
    '/v1/stats/diversity',
    {
      schema: {
        tags: ['stats'],
        summary: 'Trajectory diversity per model version and env (exploration collapse shows as a falling value)',
        security: bearer,
        querystring: DiversityQuery,
        response: { 200: Diversity, ...errorResponses },
      },
    },
    async (req) => {
      const { maxSessions = 2000, ...f } = req.query;
      const key = JSON.stringify([req.tenant, f.env, f.mode, f.modelVersion, f.taskId, maxSessions]);
      const token = completedSessionsToken(app.db.sqlite, req.tenant);
      const hit = cache.get(key);
      cache.delete(key);
      const answer = hit && hit.token === token ? hit.answer : diversityByVersion(attemptTrajectories(app.db.sqlite, req.tenant, f, maxSessions));
      cache.set(key, { token, answer });
      if (cache.size > CACHE_ENTRIES) cache.delete(cache.keys().next().value!);
      return answer;
    },
  );
};

export default diversityRoutes;
