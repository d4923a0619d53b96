/**
 * The completion service (`app.completions`, built by src/plugins/app/engine.ts): what the
 * OpenAI-compatible endpoints do, so that each route of src/routes/openai/ is one call. It owns
 * the chat template, the mapping of OpenAI sampling fields, the engine call, the rewriting of
 * engine errors into request fields, and the answers' bodies (./openai-answers.ts); the routes
 * send a body, or its chunks as server-sent events. Nothing here knows HTTP.
 *
 * Sessionless `/openai/v1` (`chat`, `complete`, `models`, `model`): our own OpenAI-compatible
 * endpoint over the versions this process runs (builtin tfjs, or the test engine), so agents
 * written against an OpenAI SDK can use a trained policy, and another lamer-server can use this
 * one as its remote engine (src/policy/openai-engine.ts, kind `lamer`). Nothing is recorded.
 * - Chat template: the messages' texts joined with "\n" in order, as one prompt
 *   (`[BOS] + tokens` in the version's tokenizer; src/agent/turns.ts `renderChat`); a LaMer server
 *   sending `system: instructions`, `user: the rest` therefore reproduces the builtin prompt byte
 *   for byte. The prompt format is the caller's: a version that reads `compact` prompts gets
 *   whatever text is sent.
 * - Token ids, logprob `token`s and `bytes` are those of the version's tokenizer
 *   (ModelRegistry.tokenizer): one byte each for a byte checkpoint; a game-vocabulary piece
 *   (ids 260 and up) stands for its whole text.
 * - Sampling: temperature (default 1), top_p, top_k, seed, max_tokens (default 256 for chat, 16
 *   for completions, cut to what the engine can generate: half the context for builtin versions;
 *   a larger value sent is a 400 naming the field), stop strings; n = 1 (n > 1 is a 400 saying it
 *   is not supported).
 * - `guided_choice`: the output is one of the strings, chosen like a LaMer step with
 *   `availableActions` (exact candidate logprobs, then sampled); a choice too long for the model
 *   is a 400 naming `body/guided_choice/<i>`.
 * - logprobs: natural-log probabilities of the sampled tokens under the plain softmax (as recorded
 *   for training); `return_token_ids` adds the prompt's and the output's token ids (vLLM's names),
 *   `return_tokens_as_token_ids` writes logprob tokens as `token_id:<id>`.
 * - `stream: true`: the whole answer is computed, then sent as chunks (one role chunk, one content
 *   chunk, one finish chunk; for completions one choice chunk), and the usage chunk when asked.
 * - The model call waits under the agent's bound on queued model calls, as steps do (`overloaded`).
 *
 * Session-scoped `/v1/sessions/{id}/openai/v1` (`sessionChat`, `sessionComplete`, `sessionModels`;
 * docs/agent-endpoint.md): the same fields, served by the session's pinned version and recorded as
 * a turn of its current attempt by the session service (src/agent/turns.ts, which applies the
 * session's sampling defaults and memory). `model` is ignored. Remote versions take chat only and
 * get `tools`, `tool_choice`, `parallel_tool_calls` and `response_format` as sent; their
 * `tool_calls` and logprobs come back as the server wrote them. Every answer carries the extension
 * member `lamer` with the turn's position and latency.
 *
 * Errors are DomainErrors (src/plugins/app/errors.ts writes them as problem+json with OpenAI's
 * `error` member, which the OpenAI SDKs read).
 */
import { randomUUID } from 'node:crypto';
import { DomainError, invalid } from '../agent/errors.js';
import type { ModelRegistry } from '../agent/models.js';
import type { SessionService } from '../agent/sessions.js';
import type { TurnAnswer, TurnInput } from '../agent/session-types.js';
import { renderChat, type AgentMessage } from '../agent/turns.js';
import type { ModelRow } from '../db/schema.js';
import { EngineLimitError, type CompleteRequest, type Completion as EngineCompletion, type PolicyEngine } from '../policy/engine.js';
import { chatChunks, chatCompletion, chatLogprobs, completionLogprobs, sampling, stops, textChunks, textCompletion } from './openai-answers.js';
import type {
  ChatCompletionAnswer, ChatCompletionBody, CompletionAnswer, CompletionBody, OpenAiModelListing, OpenAiModelObject,
  SessionChatCompletionAnswer, SessionChatCompletionBody, SessionCompletionAnswer, SessionCompletionBody,
} from './openai-schemas.js';

/** An answer of the service: a body, or (`stream: true`) the chunks to send as server-sent events. */
export type OpenAiAnswer<T> = { stream: false; body: T } | { stream: true; chunks: unknown[] };

/** The answer of `body` as asked: its chunks when the request streams, else the body. */
const answer = <T>(stream: boolean | null | undefined, body: () => T, chunks: () => unknown[]): OpenAiAnswer<T> =>
  stream ? { stream: true, chunks: chunks() } : { stream: false, body: body() };

/** @throws DomainError `validation` naming `body/n` for n other than 1. */
function checkN(n: number | null | undefined): void {
  if (n !== undefined && n !== null && n !== 1) {
    throw invalid('body/n', `is ${n}: several choices per request (n > 1) are not supported here; send n = 1 (or omit it) and make ${n} requests`);
  }
}

/** @throws DomainError `validation` naming `body/echo` when echo is asked for. */
function checkEcho(echo: boolean | null | undefined): void {
  if (echo) throw invalid('body/echo', 'must be false (echo is not supported)');
}

/** The one prompt of a completions body (a string, or a list of one). */
const promptOf = (p: string | string[]): string => (typeof p === 'string' ? p : p[0]!);

/** The engine request of a sessionless body with prompt text `prompt`. @throws DomainError `validation` for n other than 1. */
function engineRequest(model: string, prompt: string, b: ChatCompletionBody | CompletionBody, cap: MaxTokens): CompleteRequest {
  checkN(b.n);
  const r: CompleteRequest = { modelVersion: model, prompt: { head: prompt, steps: [], tail: '' }, sampling: sampling(b), stop: stops(b.stop), ...cap };
  if (b.guided_choice) r.choices = b.guided_choice;
  return r;
}

/** A request's token cap and the field that set it (absent for the default). */
interface MaxTokens {
  maxTokens: number;
  maxTokensField?: string;
}

/**
 * The token cap of a request: `max_completion_tokens` (chat), else `max_tokens`, else `byDefault`
 * (256 for chat, 16 for completions). A cap the request set is checked by the engine against what
 * it can generate (the builtin engine: half the version's context; more is a 400 naming the
 * field); the default is cut to that bound.
 */
function maxTokensOf(b: { max_tokens?: number | null; max_completion_tokens?: number | null }, byDefault: number): MaxTokens {
  if (b.max_completion_tokens !== undefined && b.max_completion_tokens !== null) {
    return { maxTokens: b.max_completion_tokens, maxTokensField: 'body/max_completion_tokens' };
  }
  if (b.max_tokens !== undefined && b.max_tokens !== null) return { maxTokens: b.max_tokens, maxTokensField: 'body/max_tokens' };
  return { maxTokens: byDefault };
}

/** The passthrough fields of a session chat body that are set (remote versions send them on). */
function passthrough(b: SessionChatCompletionBody): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of ['tools', 'tool_choice', 'parallel_tool_calls', 'response_format'] as const) if (b[k] !== undefined && b[k] !== null) out[k] = b[k];
  return out;
}

/** The extension member `lamer` of a session answer: where the turn was recorded and the model call's wall time. */
const position = (t: TurnAnswer) => ({ session_id: t.sessionId, attempt: t.attempt, step: t.step, latency_ms: t.latencyMs });

/** A fresh answer id (`chatcmpl-` or `cmpl-` and a UUID) and the time, Unix seconds. */
const stamp = (prefix: string) => ({ id: `${prefix}-${randomUUID()}`, created: Math.floor(Date.now() / 1000) });

/** Whether a version is served by this process (builtin, or the test engine's), not by a remote server. */
const servedHere = (m: ModelRow): boolean => (m.engine ?? 'builtin') === 'builtin';

/** The OpenAI model object of a version served here. */
const modelObject = (m: { version: string; createdAt: number; parent: string | null }): OpenAiModelObject => ({
  id: m.version, object: 'model' as const, created: Math.floor(m.createdAt / 1000), owned_by: 'lamer-server', parent: m.parent,
});

export class CompletionService {
  /**
   * @param models the model registry (`app.models`): versions, loading, tokenizers
   * @param engine the engine every version is served through (`app.engine`)
   * @param agent the session service (`app.agent`): its bound on queued model calls, and turns
   */
  constructor(
    private readonly models: ModelRegistry,
    private readonly engine: PolicyEngine,
    private readonly agent: SessionService,
  ) {}

  /** `GET /openai/v1/models`: the versions served here. */
  async list(): Promise<OpenAiModelListing> {
    return { object: 'list' as const, data: (await this.models.list()).filter(servedHere).map(modelObject) };
  }

  /** `GET /openai/v1/models/{model}`. @throws DomainError `not-found` for a version not served by this process. */
  async model(name: string): Promise<OpenAiModelObject> {
    return modelObject(await this.servedRow(name));
  }

  /**
   * `POST /openai/v1/chat/completions`: the messages in the chat template, one completion.
   * @throws DomainError `not-found` (model), `validation` (n, guided_choice), `engine-unavailable`, `overloaded`.
   */
  async chat(b: ChatCompletionBody): Promise<OpenAiAnswer<ChatCompletionAnswer>> {
    const model = await this.served(b.model);
    const g = await this.run(engineRequest(model, renderChat(b.messages), b, maxTokensOf(b, 256)));
    const tok = await this.models.tokenizer(model);
    const logprobs = b.logprobs ? chatLogprobs(g, b.return_tokens_as_token_ids === true, tok) : null;
    const parts = { ...stamp('chatcmpl'), model, g, content: g.output, toolCalls: null, logprobs, withIds: b.return_token_ids === true };
    return answer(b.stream, () => chatCompletion(parts), () => chatChunks(parts, b.stream_options?.include_usage === true));
  }

  /**
   * `POST /openai/v1/completions`: the prompt as sent, one completion.
   * @throws DomainError `validation` (echo, n, guided_choice), `not-found` (model), `engine-unavailable`, `overloaded`.
   */
  async complete(b: CompletionBody): Promise<OpenAiAnswer<CompletionAnswer>> {
    checkEcho(b.echo);
    const model = await this.served(b.model);
    const g = await this.run(engineRequest(model, promptOf(b.prompt), b, maxTokensOf(b, 16)));
    const tok = await this.models.tokenizer(model);
    const logprobs = b.logprobs !== undefined && b.logprobs !== null ? completionLogprobs(g, b.return_tokens_as_token_ids === true, tok) : null;
    const parts = { ...stamp('cmpl'), model, g, logprobs, withIds: b.return_token_ids === true };
    return answer(b.stream, () => textCompletion(parts), () => textChunks(parts, b.stream_options?.include_usage === true));
  }

  /**
   * `POST /v1/sessions/{id}/openai/v1/chat/completions`: one turn of the session's current attempt.
   * @throws DomainError as SessionService.turn (not-found, session-not-active, conflict, validation, ...); `validation` for n.
   */
  async sessionChat(tenant: string, id: string, b: SessionChatCompletionBody): Promise<OpenAiAnswer<SessionChatCompletionAnswer>> {
    checkN(b.n);
    const t = await this.agent.turn(tenant, id, {
      api: 'chat',
      body: b as unknown as Record<string, unknown>,
      messages: b.messages as AgentMessage[],
      sampling: b,
      ...maxTokensOf(b, 256),
      stop: stops(b.stop),
      passthrough: passthrough(b),
      stream: b.stream === true,
      ...(b.guided_choice ? { choices: b.guided_choice } : {}),
    });
    const g = t.generation;
    let logprobs: unknown = null;
    if (b.logprobs) {
      // A remote version's logprobs are its server's object; a builtin version's are built from its tokenizer.
      logprobs = t.remote
        ? (g as { rawLogprobs?: unknown }).rawLogprobs ?? null
        : chatLogprobs(g, b.return_tokens_as_token_ids === true, await this.models.tokenizer(t.modelVersion));
    }
    const toolCalls = g.toolCalls && g.toolCalls.length > 0 ? (g.toolCalls as Array<Record<string, unknown>>) : null;
    const content = toolCalls && g.output === '' ? null : g.output;
    const parts = { ...stamp('chatcmpl'), model: t.modelVersion, g, content, toolCalls, logprobs, withIds: b.return_token_ids === true };
    const lamer = position(t);
    return answer(
      b.stream,
      () => ({ ...chatCompletion(parts), lamer }),
      () => chatChunks(parts, b.stream_options?.include_usage === true, { lamer }),
    );
  }

  /**
   * `POST /v1/sessions/{id}/openai/v1/completions`: one turn of the session's current attempt (builtin versions).
   * @throws DomainError as SessionService.turn; `validation` for n or echo.
   */
  async sessionComplete(tenant: string, id: string, b: SessionCompletionBody): Promise<OpenAiAnswer<SessionCompletionAnswer>> {
    checkN(b.n);
    checkEcho(b.echo);
    const input: TurnInput = {
      api: 'completions',
      body: b as unknown as Record<string, unknown>,
      prompt: promptOf(b.prompt),
      sampling: b,
      ...maxTokensOf(b, 16),
      stop: stops(b.stop),
      stream: b.stream === true,
      ...(b.guided_choice ? { choices: b.guided_choice } : {}),
    };
    const t = await this.agent.turn(tenant, id, input);
    const g = t.generation;
    const tok = await this.models.tokenizer(t.modelVersion);
    const logprobs = b.logprobs !== undefined && b.logprobs !== null ? completionLogprobs(g, b.return_tokens_as_token_ids === true, tok) : null;
    const parts = { ...stamp('cmpl'), model: t.modelVersion, g, logprobs, withIds: b.return_token_ids === true };
    const lamer = position(t);
    return answer(b.stream, () => ({ ...textCompletion(parts), lamer }), () => textChunks(parts, b.stream_options?.include_usage === true, { lamer }));
  }

  /** `GET /v1/sessions/{id}/openai/v1/models`: the session's pinned version. @throws DomainError `not-found` for an unknown session. */
  async sessionModels(tenant: string, id: string): Promise<OpenAiModelListing> {
    const s = await this.agent.get(tenant, id);
    const m = await this.models.get(s.modelVersion);
    const created = Math.floor((m?.createdAt ?? Date.parse(s.createdAt)) / 1000);
    return { object: 'list' as const, data: [{ id: s.modelVersion, object: 'model' as const, created, owned_by: 'lamer-server', parent: m?.parent ?? null }] };
  }

  /** The row of a version served here. @throws DomainError `not-found` when it is unknown or not served by this process. */
  private async servedRow(model: string): Promise<ModelRow> {
    const row = await this.models.get(model);
    if (!row || !servedHere(row)) {
      const why = row ? `is a remote version, not served by this process` : 'is not a version of this server';
      throw new DomainError('not-found', `model '${model}' not found: it ${why}; GET /openai/v1/models lists the versions served here`);
    }
    return row;
  }

  /** The version a request names, loaded. @throws DomainError `not-found` as `servedRow`; `engine-unavailable` when it cannot load. */
  private async served(model: string): Promise<string> {
    await this.servedRow(model);
    await this.models.ensureLoaded(model);
    return model;
  }

  /**
   * One completion under the agent's bound on queued model calls.
   * @throws DomainError `engine-unavailable`, `overloaded`; EngineLimitError naming `body/guided_choice/<i>`
   *   for a choice too long for the model.
   */
  private async run(req: CompleteRequest): Promise<EngineCompletion> {
    const engine = this.engine;
    if (!engine.complete) throw new DomainError('engine-unavailable', 'this engine does not serve completions');
    return this.agent.modelCall(() =>
      engine.complete!(req).catch((err: unknown) => {
        // The engine checks `choices` as a step's candidates; here they are the request's guided_choice.
        if (err instanceof EngineLimitError && err.field.startsWith('body/availableActions')) {
          throw new EngineLimitError(err.field.replace('body/availableActions', 'body/guided_choice'), err.message.replace(' per action', ' per choice'));
        }
        throw err;
      }),
    );
  }
}
