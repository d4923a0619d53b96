/**
 * Replay routes (docs/replay.md): replay a recorded session, or the sessions a filter selects,
 * against another model version; read stored reports. Dependencies come by decoration:
 * `app.replays` (ReplayService). Same keys and tenant scoping as the session routes.
 */
import type { FastifyInstance, FastifyPluginAsync, FastifyReply } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { SessionParams } from '../../../agent/schemas.js';
import { makeReplaySchemas, Replay, ReplayList, ReplayListQuery, ReplayParams } from '../../../agent/replay-schemas.js';
import { bearer, errorResponses, stepErrorResponses } from '../common.js';

const tags = ['replays'];

const refusals =
  "Nothing is added to the replayed sessions. 404 for an unknown session (or another tenant's); 400 validation for an " +
  'unknown version, a remote version with logprobs true, or a selection of more recorded calls than maxSteps; 409 conflict ' +
  'for a selection without any recorded call; ' +
  '503 overloaded while another replay runs (one at a time) or the model-call queue is full; nothing is stored then.';

/** An AbortSignal that fires when the client goes away before the answer is sent (the replay then stops). */
function clientGone(reply: FastifyReply): AbortSignal {
  const ac = new AbortController();
  reply.raw.on('close', () => {
    if (!reply.raw.writableFinished) ac.abort();
  });
  return ac.signal;
}

type Schemas = ReturnType<typeof makeReplaySchemas>;

/** POST /v1/sessions/:id/replay. */
function sessionReplayRoute(fastify: FastifyInstance, schemas: Schemas): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.post(
    '/v1/sessions/:id/replay',
    {
      schema: {
        tags,
        summary:
          'Replay a recorded session against another model version: its action for each recorded step and turn, ' +
          'and the logprob it gives the recorded action',
        description:
          'For every recorded model call of the session (steps that acted, turns of its OpenAI-compatible endpoint), in order: ' +
          "the other version's own action for the same prompt (decoding greedy or sampled) and, for builtin versions, " +
          'the log-probability it gives the recorded answer (sum ' +
          'and per token, nats) beside the recorded one. The report is stored (GET /v1/replays/{id}). ' +
          refusals,
        security: bearer,
        params: SessionParams,
        body: schemas.SessionReplayBody,
        response: { 201: Replay, ...stepErrorResponses },
      },
    },
    async (req, reply) => {
      const r = await app.replays.replaySession(req.tenant, req.params.id, req.body, clientGone(reply));
      reply.code(201).header('location', `/v1/replays/${r.id}`);
      return r;
    },
  );
}

/** POST /v1/replays: the sessions a filter selects. */
function batchReplayRoute(fastify: FastifyInstance, schemas: Schemas): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.post(
    '/v1/replays',
    {
      schema: {
        tags,
        summary: 'Replay the sessions a filter selects (newest first, at most filter.limit) against another model version',
        description:
          'As POST /v1/sessions/{id}/replay over every session matching the filter (env, the recorded modelVersion, ' +
          'taskId, mode, status, created ' +
          'since / until), newest first, at most filter.limit (default 20, at most 100) sessions and maxSteps recorded calls. ' +
          refusals,
        security: bearer,
        body: schemas.BatchReplayBody,
        response: { 201: Replay, ...stepErrorResponses },
      },
    },
    async (req, reply) => {
      const r = await app.replays.replayBatch(req.tenant, req.body, clientGone(reply));
      reply.code(201).header('location', `/v1/replays/${r.id}`);
      return r;
    },
  );
}

/** GET /v1/replays: stored reports without their steps. */
function listRoute(fastify: FastifyInstance): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    '/v1/replays',
    {
      schema: {
        tags,
        summary: 'List stored replay reports (without their steps), newest first, with cursor pagination',
        security: bearer,
        querystring: ReplayListQuery,
        response: { 200: ReplayList, ...errorResponses },
      },
    },
    async (req) =>
      app.replays.list(req.tenant, { modelVersion: req.query.modelVersion, limit: req.query.limit ?? 20, cursor: req.query.cursor }),
  );
}

/** GET /v1/replays/:id. */
function getRoute(fastify: FastifyInstance): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    '/v1/replays/:id',
    {
      schema: {
        tags,
        summary: 'A stored replay report: summary, sessions and every replayed call',
        security: bearer,
        params: ReplayParams,
        response: { 200: Replay, ...errorResponses },
      },
    },
    async (req) => app.replays.get(req.tenant, req.params.id),
  );
}

const replaysRoutes: FastifyPluginAsync = async (fastify) => {
  const schemas = makeReplaySchemas(fastify.config.limits.maxReplaySteps);
  sessionReplayRoute(fastify, schemas);
  batchReplayRoute(fastify, schemas);
  listRoute(fastify);
  getRoute(fastify);
};

export default replaysRoutes;
