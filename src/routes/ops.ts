/**
 * Operations routes (no auth): `/healthz` (process up; touches neither the database nor the engine,
 * so it answers at once even while the database is locked), `/readyz` (database open, storage
 * writable and the active model loaded, and, for a remote active version, its server answering a
 * cached probe; reports engine and backend; src/plugins/app/readiness.ts), `/metrics` (Prometheus text),
 * `/openapi.json`.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { readinessReport } from '../plugins/app/readiness.js';

const Ready = Type.Object({
  status: Type.String({ description: "'ready' or 'not-ready'" }),
  database: Type.Boolean(),
  storage: Type.String({
    description:
      "'ok', or why the last write failed: 'full' (no space), 'io', 'readonly', 'corrupt'; not ready until a write succeeds again",
  }),
  model: Type.Object({
    version: Type.String(),
    loaded: Type.Boolean(),
    remote: Type.Optional(
      Type.Object(
        {
          reachable: Type.Boolean(),
          detail: Type.Optional(Type.String({ description: 'why not: HTTP status, timeout, refused connection' })),
          checkedAt: Type.String({ format: 'date-time', description: 'when the (cached) probe ran' }),
        },
        { description: 'a remote active version: whether its server answered GET <baseUrl>/models (probed at most every 5 s, 2 s timeout)' },
      ),
    ),
  }),
  engine: Type.String(),
  backend: Type.String({ description: 'tfjs backend (tensorflow | wasm | cpu) or none' }),
});

const opsRoutes: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['operations'];

  app.get(
    '/healthz',
    { schema: { tags, summary: 'Process is up', response: { 200: Type.Object({ status: Type.String() }) } } },
    async () => ({ status: 'ok' }),
  );

  app.get(
    '/readyz',
    { schema: { tags, summary: 'Database open and writable, the active model loaded (a remote one: its server answers)', response: { 200: Ready, 503: Ready } } },
    async (_req, reply) => {
      const { ready, body } = await readinessReport(app);
      reply.code(ready ? 200 : 503);
      return body;
    },
  );

  app.get(
    '/metrics',
    { schema: { tags, summary: 'Prometheus metrics (text exposition format)', produces: ['text/plain'] } },
    async (_req, reply) => {
      reply.type(app.metrics.registry.contentType);
      return app.metrics.registry.metrics();
    },
  );

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
};

export default opsRoutes;
