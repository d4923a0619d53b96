/**
 * OpenAPI 3.1 document from the route schemas (@fastify/swagger) and the interactive API page at
 * `/docs` (@fastify/swagger-ui). The document is committed at openapi/openapi.json
 * (`npm run openapi`).
 *
 * Every `/docs` answer carries {@link DOCS_CSP} and `X-Frame-Options: DENY`: the page runs only
 * the scripts it serves itself (Swagger UI's bundle and initializer are files; it has no inline
 * script and needs no eval), talks only to this server, and cannot be framed by another site
 * (clickjacking its "Try it out" and "Authorize" controls).
 */
import fp from 'fastify-plugin';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';

/**
 * The Content-Security-Policy of every `/docs` answer. Swagger UI inserts `<style>` elements from
 * its bundle (refused under `style-src 'self'` alone: the page then misses styles) and ships
 * `data:` images (icons, logo), hence `style-src 'unsafe-inline'` and `data:` for images and
 * fonts; scripts are its own files only.
 */
export const DOCS_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "script-src-attr 'none'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

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
          {
            name: 'replays',
            description:
              'recorded sessions replayed against another model version: its actions and the logprobs it gives the recorded ones (docs/replay.md)',
          },
          { name: 'auth', description: "the API key's tenant and rights" },
          { name: 'operations', description: 'health, readiness, metrics' },
          { name: 'openai', description: 'OpenAI-compatible endpoint serving the builtin versions (docs/remote-engines.md)' },
          {
            name: 'agent endpoint',
            description: "A session's own OpenAI-compatible base URL: existing agents play a session's task unmodified, each call recorded as a turn (docs/agent-endpoint.md)",
          },
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
    // An encapsulated context, so that its hook covers every /docs route (the page, the document
    // and the static files) and nothing else.
    await app.register(async (docs) => {
      docs.addHook('onRequest', async (_req, reply) => {
        reply.header('x-frame-options', 'DENY');
      });
      await docs.register(swaggerUi, { routePrefix: '/docs', staticCSP: DOCS_CSP });
    });
  },
  { name: 'swagger' },
);
