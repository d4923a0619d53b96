/**
 * Session routes (docs/protocol.md): create, list, get, close, post a step (the hot path), trajectory,
 * memory (read; edit a reflection). Dependencies come by decoration: `app.agent` (SessionService).
 */
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { bearer, checkJsonBytes, errorResponses, stepErrorResponses } from '../common.js';
import {
  ListQuery,
  Memory,
  Reflection,
  ReflectionParams,
  Session,
  SessionList,
  SessionParams,
  StepAnswer,
  Trajectory,
  TrajectoryQuery,
  makeSessionSchemas,
} from '../../../agent/schemas.js';

const tags = ['sessions'];

/** The request-size limits the routes check and the body schemas made from them. */
type Ctx = { limits: FastifyInstance['config']['limits']; schemas: ReturnType<typeof makeSessionSchemas> };

/** POST /v1/sessions: open a session (201 with Location). */
function createRoute(fastify: FastifyInstance, ctx: Ctx): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { limits } = ctx;
  const { CreateSession } = ctx.schemas;
  app.post(
    '/v1/sessions',
    {
      schema: {
        tags,
        summary: 'Open a session (a LaMer trial) for one task instance',
        security: bearer,
        body: CreateSession,
        response: { 201: Session, ...errorResponses },
      },
    },
    async (req, reply) => {
      checkJsonBytes(req.body.metadata, limits.metadataBytes, 'body/metadata', 'LAMER_MAX_METADATA_BYTES');
      const s = await app.agent.create(req.tenant, req.body);
      app.metrics.sessionsCreated.inc();
      reply.code(201).header('location', `/v1/sessions/${s.id}`);
      return s;
    },
  );
}

/** GET /v1/sessions: newest first, filters, cursor pagination. */
function listRoute(fastify: FastifyInstance, ctx: Ctx): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    '/v1/sessions',
    {
      schema: {
        tags,
        summary: 'List sessions, newest first, with filters and cursor pagination',
        security: bearer,
        querystring: ListQuery,
        response: { 200: SessionList, ...errorResponses },
      },
    },
    async (req) => {
      const { limit, cursor, ...filters } = req.query;
      return app.agent.list(req.tenant, filters, limit ?? 50, cursor);
    },
  );
}

/** GET /v1/sessions/:id. */
function getRoute(fastify: FastifyInstance, ctx: Ctx): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    '/v1/sessions/:id',
    {
      schema: {
        tags,
        summary: 'Get a session: status, attempts, pass@k so far, memory',
        security: bearer,
        params: SessionParams,
        response: { 200: Session, ...errorResponses },
      },
    },
    async (req) => app.agent.get(req.tenant, req.params.id),
  );
}

/** DELETE /v1/sessions/:id: abandon (the session and its records are kept). */
function closeRoute(fastify: FastifyInstance, ctx: Ctx): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.delete(
    '/v1/sessions/:id',
    {
      schema: {
        tags,
        summary: 'Abandon a session: it takes no more steps; nothing recorded is deleted',
        description:
          'Sets the status to `abandoned`; it does not remove the session. The session stops accepting steps (a new step is 409 session-not-active; an identical retry of a recorded step still gets its stored answer) ' +
          'and no longer counts as active; an attempt still running ends `failed` with `endReason: "abandoned"`. The session stays readable ' +
          '(GET, listed with `status=abandoned`) and its recorded steps and reflections are kept (trajectory, `lamer export`); training jobs ' +
          'read completed sessions only. A second DELETE returns the abandoned session unchanged; a completed or expired session is 409 session-not-active.',
        security: bearer,
        params: SessionParams,
        response: { 200: Session, ...errorResponses },
      },
    },
    async (req) => app.agent.close(req.tenant, req.params.id),
  );
}

/** POST /v1/sessions/:id/steps: the hot path. */
function stepRoute(fastify: FastifyInstance, ctx: Ctx): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { limits } = ctx;
  const { StepBody } = ctx.schemas;
  app.post(
    '/v1/sessions/:id/steps',
    {
      schema: {
        tags,
        summary: 'Post an observation (and the reward of the previous action); get the next action',
        description:
          'Retries are safe: the same (attempt, step) with the same body returns the stored answer; a different body is 409 step-conflict; ' +
          "an attempt at or beyond the session's maxAttempts is 400 validation naming body/attempt; a step out of order is 409 step-out-of-order with `expected`.",
        security: bearer,
        params: SessionParams,
        body: StepBody,
        response: { 200: StepAnswer, ...stepErrorResponses },
      },
    },
    async (req) => {
      checkJsonBytes(req.body.info, limits.infoBytes, 'body/info', 'LAMER_MAX_INFO_BYTES');
      return app.agent.step(req.tenant, req.params.id, req.body);
    },
  );
}

/** GET /v1/sessions/:id/trajectory: recorded steps in pages. */
function trajectoryRoute(fastify: FastifyInstance, ctx: Ctx): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { limits } = ctx;
  app.get(
    '/v1/sessions/:id/trajectory',
    {
      schema: {
        tags,
        summary: 'Every recorded step with prompt, output, token ids, logprobs, rewards, returns and advantages, in pages',
        description:
          'Rows in (attempt, step) order, at most `limit` (default 100) and at most LAMER_TRAJECTORY_PAGE_BYTES of JSON per page (at least one row); pass `nextCursor` as `cursor` for the next page until it is null.',
        security: bearer,
        params: SessionParams,
        querystring: TrajectoryQuery,
        response: { 200: Trajectory, ...errorResponses },
      },
    },
    async (req) =>
      app.agent.trajectory(req.tenant, req.params.id, { limit: req.query.limit ?? 100, cursor: req.query.cursor, maxBytes: limits.trajectoryPageBytes }),
  );
}

/** GET /v1/sessions/:id/memory: the session's reflections. */
function memoryRoute(fastify: FastifyInstance, ctx: Ctx): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    '/v1/sessions/:id/memory',
    {
      schema: {
        tags,
        summary: "The session's memory: its reflections",
        security: bearer,
        params: SessionParams,
        response: { 200: Memory, ...errorResponses },
      },
    },
    async (req) => app.agent.memory(req.tenant, req.params.id),
  );
}

/** PUT /v1/sessions/:id/memory/:attempt: a human edit of a reflection. */
function editReflectionRoute(fastify: FastifyInstance, ctx: Ctx): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { EditReflection } = ctx.schemas;
  app.put(
    '/v1/sessions/:id/memory/:attempt',
    {
      schema: {
        tags,
        summary: 'Replace the reflection written after an attempt (a human correcting the agent)',
        security: bearer,
        params: ReflectionParams,
        body: EditReflection,
        response: { 200: Reflection, ...errorResponses },
      },
    },
    async (req) => app.agent.editReflection(req.tenant, req.params.id, req.params.attempt, req.body.text),
  );
}

const sessionsRoutes: FastifyPluginAsync = async (fastify) => {
  const limits = fastify.config.limits;
  const ctx: Ctx = { limits, schemas: makeSessionSchemas(limits) };
  for (const route of [createRoute, listRoute, getRoute, closeRoute, stepRoute, trajectoryRoute, memoryRoute, editReflectionRoute]) route(fastify, ctx);
};

export default sessionsRoutes;
