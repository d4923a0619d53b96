/**
 * The session-scoped OpenAI-compatible endpoint: an existing agent (OpenAI SDK, LangChain.js, ...)
 * plays a session's task unmodified by using `<server>/v1/sessions/{id}/openai/v1` as its base URL
 * (docs/agent-endpoint.md says why a base URL rather than a header).
 *
 * - `POST .../chat/completions` and `POST .../completions` take the fields `/openai/v1` takes
 *   (src/serving/openai-schemas.ts); `model` is ignored: the session's pinned version serves. Each call
 *   is one turn of the session's current attempt (src/agent/turns.ts; recorded before the answer
 *   is sent). The answer carries an extension member `lamer` with the turn's position and latency.
 * - Remote versions: chat only; `tools`, `tool_choice`, `parallel_tool_calls` and
 *   `response_format` go to the remote server as sent, and its `tool_calls` come back. Builtin
 *   versions answer 400 naming the field.
 * - `stream: true`: the turn is served and recorded, then sent as server-sent events (as on
 *   `/openai/v1`), so a client that disconnects mid-stream leaves the turn recorded.
 * - `GET .../models` lists the pinned version (some frameworks ask at start).
 * - `POST /v1/sessions/{id}/attempts/{attempt}/end` ends the running attempt with a reward and a
 *   success flag; the answer is a step answer (attempt result, reflection, session status).
 * - Same keys, tenant scoping and rate limit as the `/v1` routes (another tenant's session is 404);
 *   errors are problem+json with OpenAI's `error` member.
 *
 * The completion service (`app.completions`, src/serving/completions.ts) does the work of the
 * three OpenAI routes; the handlers call it.
 */
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { MAX_REWARD, ReflectionParams, StepAnswer } from '../../agent/schemas.js';
import { bearer, errorResponses, stepErrorResponses } from '../api/common.js';
import {
  OpenAiModelList, SessionChatCompletion, SessionChatCompletionRequest, SessionCompletion, SessionCompletionRequest, SessionOpenAiParams,
} from '../../serving/openai-schemas.js';
import { send } from './shared.js';

const tags = ['agent endpoint'];
const BASE = '/v1/sessions/:id/openai/v1';

/** POST /v1/sessions/:id/openai/v1/chat/completions. */
function chatRoute(fastify: FastifyInstance): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.post(
    `${BASE}/chat/completions`,
    {
      schema: {
        tags,
        summary: "OpenAI-compatible chat completion served by the session's pinned version and recorded as a turn of its current attempt",
        description:
          'Use `<server>/v1/sessions/{id}/openai/v1` as the base URL of an OpenAI client. `model` is ignored. On attempts after the first the ' +
          "session's memory is added (a system message, or a prefix of the first user message: the session's memoryPlacement). Remote versions " +
          'pass tools, tool_choice, parallel_tool_calls and response_format through; builtin versions answer 400 for them. 409 session-not-active ' +
          'once the session ended; 409 conflict when the attempt already holds maxSteps turns.',
        security: bearer,
        params: SessionOpenAiParams,
        body: SessionChatCompletionRequest,
        response: { 200: SessionChatCompletion, ...stepErrorResponses },
      },
    },
    async (req, reply) => send(reply, await app.completions.sessionChat(req.tenant, req.params.id, req.body)),
  );
}

/** POST /v1/sessions/:id/openai/v1/completions. */
function completionsRoute(fastify: FastifyInstance): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.post(
    `${BASE}/completions`,
    {
      schema: {
        tags,
        summary: "OpenAI-compatible text completion served by the session's pinned builtin version and recorded as a turn",
        description: "On attempts after the first the session's memory and a blank line precede the prompt. Remote versions answer 400 (chat only).",
        security: bearer,
        params: SessionOpenAiParams,
        body: SessionCompletionRequest,
        response: { 200: SessionCompletion, ...stepErrorResponses },
      },
    },
    async (req, reply) => send(reply, await app.completions.sessionComplete(req.tenant, req.params.id, req.body)),
  );
}

/** GET /v1/sessions/:id/openai/v1/models: the session's pinned version. */
function modelsRoute(fastify: FastifyInstance): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    `${BASE}/models`,
    {
      schema: {
        tags,
        summary: "OpenAI-compatible: the session's pinned model version (the only one its endpoint serves)",
        security: bearer,
        params: SessionOpenAiParams,
        response: { 200: OpenAiModelList, ...errorResponses },
      },
    },
    async (req) => app.completions.sessionModels(req.tenant, req.params.id),
  );
}

const EndAttemptBody = Type.Object(
  {
    reward: Type.Optional(Type.Number({ minimum: -MAX_REWARD, maximum: MAX_REWARD, description: "the attempt's reward (its return); default 0" })),
    success: Type.Optional(Type.Boolean({ description: 'the task was solved; default false (a failed attempt with attempts left gets a reflection)' })),
    observation: Type.Optional(Type.String({ maxLength: 65536, description: 'the final observation, shown to the reflection; default ""' })),
  },
  { additionalProperties: false },
);

/** POST /v1/sessions/:id/attempts/:attempt/end. */
function endAttemptRoute(fastify: FastifyInstance): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.post(
    '/v1/sessions/:id/attempts/:attempt/end',
    {
      schema: {
        tags,
        summary: 'End the running attempt of a session driven through its OpenAI-compatible endpoint, with a reward and a success flag',
        description:
          "Recorded as the attempt's final step (done). After a failure with attempts left the session's version writes the reflection, which " +
          "reaches the model on the next attempt; the session completes on success or after its last attempt. 409 conflict for an attempt that " +
          'already ended, has not started or has no turn yet; 409 session-not-active once the session ended; 400 for an attempt beyond maxAttempts.',
        security: bearer,
        params: ReflectionParams,
        body: EndAttemptBody,
        response: { 200: StepAnswer, ...stepErrorResponses },
      },
    },
    async (req) => app.agent.endAttempt(req.tenant, req.params.id, { attempt: req.params.attempt, ...req.body }),
  );
}

const sessionOpenAiRoutes: FastifyPluginAsync = async (app) => {
  chatRoute(app);
  completionsRoute(app);
  modelsRoute(app);
  endAttemptRoute(app);
};

export default sessionOpenAiRoutes;
