/**
 * OpenAPI 3.1 document from the route schemas (@fastify/swagger) and the interactive API page at
 * `/docs` (@fastify/swagger-ui). The document is committed at openapi/openapi.json
 * (`npm run openapi`).
 */
import fp from 'fastify-plugin';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';

export default fp(
  async function swaggerPlugin(app: FastifyInstance) {
    await app.register(swagger, {
      openapi: {
        openapi: '3.1.0',
        info: {
          title: 'lamer-server',
          version: '0.1.0',
          description:
            'An HTTP server that is the agent for text environments: environments post observations and rewards, ' +
            'the LaMer policy answers actions and writes reflections between failed attempts. See docs/protocol.md.',
        },
        tags: [
          { name: 'sessions', description: 'sessions, steps, trajectories, memory' },
          { name: 'models', description: 'model versions (admin)' },
          { name: 'stats', description: 'pass@k, returns and trajectory diversity' },
          { name: 'auth', description: "the API key's tenant and rights" },
          { name: 'operations', description: 'health, readiness, metrics' },
          { name: 'openai', description: 'OpenAI-compatible endpoint serving the builtin versions (docs/remote-engines.md)' },
        ],
        components: {
          securitySchemes: {
            bearerAuth: {
              type: 'http',
              scheme: 'bearer',
              description:
                'API key (LAMER_API_KEYS). Not needed when the server runs without keys (loopback only; then a Host header that is not ' +
                'a loopback name or listed in LAMER_ALLOWED_HOSTS is 403 host-not-allowed).',
            },
          },
        },
      },
    });
    await app.register(swaggerUi, { routePrefix: '/docs' });
  },
  { name: 'swagger' },
);
