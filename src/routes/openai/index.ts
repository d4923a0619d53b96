/**
 * Our own OpenAI-compatible endpoint: `POST /openai/v1/chat/completions`,
 * `POST /openai/v1/completions`, `GET /openai/v1/models` and `GET /openai/v1/models/{model}` serve the versions this process runs
 * (builtin tfjs, or the test engine), so agents written against an OpenAI SDK can use a trained
 * policy, and another lamer-server can use this one as its remote engine (src/policy/openai-engine.ts,
 * kind `lamer`).
 *
 * - Chat template: the messages' texts joined with "\n" in order, as one prompt
 *   (`[BOS] + tokens` in the version's tokenizer); a LaMer server sending `system: instructions`,
 *   `user: the rest` therefore reproduces the builtin prompt byte for byte. The prompt format is
 *   the caller's: a version that reads `compact` prompts gets whatever text is sent.
 * - Token ids, logprob `token`s and `bytes` are those of the version's tokenizer
 *   (ModelRegistry.tokenizer): one byte each for a byte checkpoint; a game-vocabulary piece
 *   (ids 260 and up) stands for its whole text.
 * - Sampling: temperature (default 1), top_p, top_k, seed, max_tokens (capped at half the
 *   context), stop strings; n = 1 (n > 1 is a 400 saying it is not supported).
 * - Errors: problem+json with, besides, OpenAI's `error: {message, type, param, code}` member
 *   (src/plugins/app/errors.ts), which the OpenAI SDKs read.
 * - `guided_choice`: the output is one of the strings, chosen like a LaMer step with
 *   `availableActions` (exact candidate logprobs, then sampled).
 * - logprobs: natural-log probabilities of the sampled tokens under the plain softmax (as recorded
 *   for training); `return_token_ids` adds the prompt's and the output's token ids (vLLM's names),
 *   `return_tokens_as_token_ids` writes logprob tokens as `token_id:<id>`.
 * - `stream: true`: the whole answer is computed, then sent as server-sent events (one role chunk,
 *   one content chunk, one finish chunk, `data: [DONE]`).
 * - Same API keys (any tenant), rate limit and bound on queued model calls as the `/v1` routes;
 *   nothing is recorded.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Static } from 'typebox';
import { DomainError, invalid, notFound } from '../../agent/errors.js';
import { EngineLimitError, type CompleteRequest, type Completion as EngineCompletion } from '../../policy/engine.js';
import { renderChat } from '../../agent/turns.js';
import { chatChunks, chatCompletion, chatLogprobs, completionLogprobs, sampling, sse, stops, usage } from './shared.js';
import { bearer, errorResponses, stepErrorResponses } from '../api/common.js';
import {
  ChatCompletion, ChatCompletionRequest, Completion, CompletionRequest, OpenAiModel, OpenAiModelList, OpenAiModelParams,
} from './schemas.js';

type ChatBody = Static<typeof ChatCompletionRequest>;
type CompletionBody = Static<typeof CompletionRequest>;

const tags = ['openai'];

/** The version a request names, loaded. @throws DomainError `not-found` when it is unknown or not served by this process. */
async function served(app: FastifyInstance, model: string): Promise<string> {
  const row = app.models.get(model);
  if (!row || (row.engine ?? 'builtin') !== 'builtin') {
    throw notFound(`model '${model}' (GET /openai/v1/models lists the versions served here)`);
  }
  await app.models.ensureLoaded(model);
  return model;
}

/**
 * One completion under the agent's bound on queued model calls.
 * @throws DomainError `engine-unavailable`, `overloaded`; `validation` naming `body/guided_choice/<i>`
 *   for a choice too long for the model.
 */
async function run(app: FastifyInstance, req: CompleteRequest): Promise<EngineCompletion> {
  const engine = app.engine;
  if (!engine.complete) throw new DomainError('engine-unavailable', 'this engine does not serve completions');
  return app.agent.modelCall(() =>
    engine.complete!(req).catch((err: unknown) => {
      // The engine checks `choices` as a step's candidates; here they are the request's guided_choice.
      if (err instanceof EngineLimitError && err.field.startsWith('body/availableActions')) {
        throw new EngineLimitError(err.field.replace('body/availableActions', 'body/guided_choice'), err.message.replace(' per action', ' per choice'));
      }
      throw err;
    }),
  );
}

/** The engine request of a body with prompt text `prompt`. @throws DomainError `validation` for n other than 1. */
function request(model: string, prompt: string, b: ChatBody | CompletionBody, maxTokens: number): CompleteRequest {
  if (b.n !== undefined && b.n !== null && b.n !== 1) {
    throw invalid('body/n', `is ${b.n}: several choices per request (n > 1) are not supported here; send n = 1 (or omit it) and make ${b.n} requests`);
  }
  const r: CompleteRequest = { modelVersion: model, prompt: { head: prompt, steps: [], tail: '' }, sampling: sampling(b), maxTokens, stop: stops(b.stop) };
  if (b.guided_choice) r.choices = b.guided_choice;
  return r;
}

/** The OpenAI model object of a version served here. */
const modelObject = (m: { version: string; createdAt: number; parent: string | null }) => ({
  id: m.version, object: 'model' as const, created: Math.floor(m.createdAt / 1000), owned_by: 'lamer-server', parent: m.parent,
});

/** GET /openai/v1/models (the builtin versions) and GET /openai/v1/models/{model} (`models.retrieve`). */
function modelsRoute(fastify: FastifyInstance): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    '/openai/v1/models/:model',
    {
      schema: {
        tags,
        summary: 'OpenAI-compatible: one model version served here (404 for a version not served by this process)',
        security: bearer,
        params: OpenAiModelParams,
        response: { 200: OpenAiModel, ...errorResponses },
      },
    },
    async (req) => {
      const row = app.models.get(req.params.model);
      if (!row || (row.engine ?? 'builtin') !== 'builtin') {
        throw notFound(`model '${req.params.model}' (GET /openai/v1/models lists the versions served here)`);
      }
      return modelObject(row);
    },
  );
  app.get(
    '/openai/v1/models',
    { schema: { tags, summary: 'OpenAI-compatible: the model versions served here', security: bearer, response: { 200: OpenAiModelList, ...errorResponses } } },
    async () => ({
      object: 'list' as const,
      data: app.models
        .list()
        .filter((m) => (m.engine ?? 'builtin') === 'builtin')
        .map(modelObject),
    }),
  );
}

/** POST /openai/v1/chat/completions. */
function chatRoute(fastify: FastifyInstance): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.post(
    '/openai/v1/chat/completions',
    {
      schema: {
        tags,
        summary: 'OpenAI-compatible chat completion with a builtin version (logprobs, token ids, seed, stop, guided_choice)',
        security: bearer,
        body: ChatCompletionRequest,
        response: { 200: ChatCompletion, ...stepErrorResponses },
      },
    },
    async (req, reply) => {
      const b = req.body;
      const model = await served(app, b.model);
      const g = await run(app, request(model, renderChat(b.messages), b, b.max_completion_tokens ?? b.max_tokens ?? 256));
      const asIds = b.return_tokens_as_token_ids === true;
      const tok = await app.models.tokenizer(model);
      const id = `chatcmpl-${randomUUID()}`;
      const created = Math.floor(Date.now() / 1000);
      const logprobs = b.logprobs ? chatLogprobs(g, asIds, tok) : null;
      const withIds = b.return_token_ids === true;
      const parts = { id, created, model, g, content: g.output, toolCalls: null, logprobs, withIds };
      if (b.stream) return sse(reply as unknown as FastifyReply, chatChunks(parts, b.stream_options?.include_usage === true)) as never;
      return chatCompletion(parts);
    },
  );
}

/** POST /openai/v1/completions. */
function completionsRoute(fastify: FastifyInstance): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.post(
    '/openai/v1/completions',
    {
      schema: {
        tags,
        summary: 'OpenAI-compatible text completion with a builtin version',
        security: bearer,
        body: CompletionRequest,
        response: { 200: Completion, ...stepErrorResponses },
      },
    },
    async (req, reply) => {
      const b = req.body;
      if (b.echo) throw invalid('body/echo', 'must be false (echo is not supported)');
      const model = await served(app, b.model);
      const prompt = typeof b.prompt === 'string' ? b.prompt : b.prompt[0]!;
      const g = await run(app, request(model, prompt, b, b.max_tokens ?? 16));
      const asIds = b.return_tokens_as_token_ids === true;
      const withIds = b.return_token_ids === true;
      const tok = await app.models.tokenizer(model);
      const logprobs = b.logprobs !== undefined && b.logprobs !== null ? completionLogprobs(g, asIds, tok) : null;
      const id = `cmpl-${randomUUID()}`;
      const created = Math.floor(Date.now() / 1000);
      const choice = { index: 0, text: g.output, logprobs, finish_reason: g.finishReason, ...(withIds ? { token_ids: g.outputTokenIds } : {}) };
      if (b.stream) {
        const base = { id, object: 'text_completion', created, model, system_fingerprint: null };
        const chunks: unknown[] = [{ ...base, choices: [choice] }];
        if (b.stream_options?.include_usage) chunks.push({ ...base, choices: [], usage: usage(g) });
        return sse(reply as unknown as FastifyReply, chunks) as never;
      }
      return {
        id,
        object: 'text_completion' as const,
        created,
        model,
        system_fingerprint: null,
        choices: [choice],
        ...(withIds ? { prompt_token_ids: g.promptTokenIds } : {}),
        usage: usage(g),
      };
    },
  );
}

const openaiRoutes: FastifyPluginAsync = async (app) => {
  modelsRoute(app);
  chatRoute(app);
  completionsRoute(app);
};

export default openaiRoutes;
