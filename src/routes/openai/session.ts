/**
 * The session-scoped OpenAI-compatible endpoint: an existing agent (OpenAI SDK, LangChain.js, ...)
 * plays a session's task unmodified by using `<server>/v1/sessions/{id}/openai/v1` as its base URL
 * (docs/agent-endpoint.md says why a base URL rather than a header).
 *
 * - `POST .../chat/completions` and `POST .../completions` take the fields `/openai/v1` takes
 *   (src/routes/openai/index.ts); `model` is ignored: the session's pinned version serves. Each call
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
 */
import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type, type Static } from 'typebox';
import { invalid } from '../../agent/errors.js';
import { MAX_REWARD, ReflectionParams, StepAnswer } from '../../agent/schemas.js';
import type { TurnAnswer, TurnInput } from '../../agent/session-types.js';
import type { AgentMessage } from '../../agent/turns.js';
import { bearer, errorResponses, stepErrorResponses } from '../api/common.js';
import { chatChunks, chatCompletion, chatLogprobs, completionLogprobs, sse, stops, usage } from './shared.js';
import {
  OpenAiModelList, SessionChatCompletion, SessionChatCompletionRequest, SessionCompletion, SessionCompletionRequest, SessionOpenAiParams,
} from './schemas.js';

const tags = ['agent endpoint'];
const BASE = '/v1/sessions/:id/openai/v1';

type ChatBody = Static<typeof SessionChatCompletionRequest>;

/** The turn position member of an answer. */
const position = (t: TurnAnswer) => ({ session_id: t.sessionId, attempt: t.attempt, step: t.step, latency_ms: t.latencyMs });

/** @throws DomainError `validation` for n other than 1. */
function checkN(n: number | null | undefined): void {
  if (n !== undefined && n !== null && n !== 1) {
    throw invalid('body/n', `is ${n}: several choices per request (n > 1) are not supported here; send n = 1 (or omit it) and make ${n} requests`);
  }
}

/** The passthrough fields of a chat body that are set (remote versions send them on). */
function passthrough(b: ChatBody): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of ['tools', 'tool_choice', 'parallel_tool_calls', 'response_format'] as const) if (b[k] !== undefined && b[k] !== null) out[k] = b[k];
  return out;
}

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
    async (req, reply) => {
      const b = req.body;
      checkN(b.n);
      const input: TurnInput = {
        api: 'chat',
        body: b as unknown as Record<string, unknown>,
        messages: b.messages as AgentMessage[],
        sampling: b,
        maxTokens: b.max_completion_tokens ?? b.max_tokens ?? 256,
        stop: stops(b.stop),
        passthrough: passthrough(b),
        stream: b.stream === true,
        ...(b.guided_choice ? { choices: b.guided_choice } : {}),
      };
      const t = await app.agent.turn(req.tenant, req.params.id, input);
      const g = t.generation;
      const asIds = b.return_tokens_as_token_ids === true;
      const withIds = b.return_token_ids === true;
      let logprobs: unknown = null;
      if (b.logprobs) logprobs = t.remote ? (g as { rawLogprobs?: unknown }).rawLogprobs ?? null : chatLogprobs(g, asIds, await app.models.tokenizer(t.modelVersion));
      const id = `chatcmpl-${randomUUID()}`;
      const created = Math.floor(Date.now() / 1000);
      const toolCalls = g.toolCalls && g.toolCalls.length > 0 ? g.toolCalls : null;
      const content = toolCalls && g.output === '' ? null : g.output;
      const parts = { id, created, model: t.modelVersion, g, content, toolCalls: toolCalls as Array<Record<string, unknown>> | null, logprobs, withIds };
      if (b.stream) {
        const chunks = chatChunks(parts, b.stream_options?.include_usage === true, { lamer: position(t) });
        return sse(reply as unknown as FastifyReply, chunks) as never;
      }
      return { ...chatCompletion(parts), lamer: position(t) };
    },
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
    async (req, reply) => {
      const b = req.body;
      checkN(b.n);
      if (b.echo) throw invalid('body/echo', 'must be false (echo is not supported)');
      const input: TurnInput = {
        api: 'completions',
        body: b as unknown as Record<string, unknown>,
        prompt: typeof b.prompt === 'string' ? b.prompt : b.prompt[0]!,
        sampling: b,
        maxTokens: b.max_tokens ?? 16,
        stop: stops(b.stop),
        stream: b.stream === true,
        ...(b.guided_choice ? { choices: b.guided_choice } : {}),
      };
      const t = await app.agent.turn(req.tenant, req.params.id, input);
      const g = t.generation;
      const tok = await app.models.tokenizer(t.modelVersion);
      const logprobs = b.logprobs !== undefined && b.logprobs !== null ? completionLogprobs(g, b.return_tokens_as_token_ids === true, tok) : null;
      const withIds = b.return_token_ids === true;
      const id = `cmpl-${randomUUID()}`;
      const created = Math.floor(Date.now() / 1000);
      const choice = { index: 0, text: g.output, logprobs, finish_reason: g.finishReason, ...(withIds ? { token_ids: g.outputTokenIds } : {}) };
      if (b.stream) {
        const base = { id, object: 'text_completion', created, model: t.modelVersion, system_fingerprint: null };
        const chunks: unknown[] = [{ ...base, choices: [choice], lamer: position(t) }];
        if (b.stream_options?.include_usage) chunks.push({ ...base, choices: [], usage: usage(g) });
        return sse(reply as unknown as FastifyReply, chunks) as never;
      }
      return {
        id,
        object: 'text_completion' as const,
        created,
        model: t.modelVersion,
        system_fingerprint: null,
        choices: [choice],
        ...(withIds ? { prompt_token_ids: g.promptTokenIds } : {}),
        usage: usage(g),
        lamer: position(t),
      };
    },
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
    async (req) => {
      const s = app.agent.get(req.tenant, req.params.id);
      const m = app.models.get(s.modelVersion);
      const created = Math.floor((m?.createdAt ?? Date.parse(s.createdAt)) / 1000);
      return { object: 'list' as const, data: [{ id: s.modelVersion, object: 'model' as const, created, owned_by: 'lamer-server', parent: m?.parent ?? null }] };
    },
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
