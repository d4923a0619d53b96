/**
 * Our own OpenAI-compatible endpoint: `POST /openai/v1/chat/completions`,
 * `POST /openai/v1/completions`, `GET /openai/v1/models` and `GET /openai/v1/models/{model}` serve
 * the versions this process runs (builtin tfjs, or the test engine), so agents written against an
 * OpenAI SDK can use a trained policy, and another lamer-server can use this one as its remote
 * engine (src/policy/openai-engine.ts, kind `lamer`).
 *
 * What the endpoint does (chat template, sampling fields, the engine call, errors, logprobs,
 * streams) is the completion service's, `app.completions` (src/serving/completions.ts): each
 * handler here calls it. Same API keys (any tenant), rate limit and bound on queued model calls as
 * the `/v1` routes; errors are problem+json with OpenAI's `error: {message, type, param, code}`
 * member (src/plugins/app/errors.ts); nothing is recorded.
 */
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { bearer, errorResponses, stepErrorResponses } from '../api/common.js';
import {
  ChatCompletion, ChatCompletionRequest, Completion, CompletionRequest, OpenAiModel, OpenAiModelList, OpenAiModelParams,
} from '../../serving/openai-schemas.js';
import { send } from './shared.js';

const tags = ['openai'];

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
    async (req) => app.completions.model(req.params.model),
  );
  app.get(
    '/openai/v1/models',
    { schema: { tags, summary: 'OpenAI-compatible: the model versions served here', security: bearer, response: { 200: OpenAiModelList, ...errorResponses } } },
    async () => app.completions.list(),
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
    async (req, reply) => send(reply, await app.completions.chat(req.body)),
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
    async (req, reply) => send(reply, await app.completions.complete(req.body)),
  );
}

const openaiRoutes: FastifyPluginAsync = async (app) => {
  modelsRoute(app);
  chatRoute(app);
  completionsRoute(app);
};

export default openaiRoutes;
