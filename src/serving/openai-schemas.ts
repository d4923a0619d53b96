/**
 * TypeBox schemas of the OpenAI-compatible endpoint (`/openai/v1`): the subset of the OpenAI
 * Chat Completions and Completions request fields that the builtin versions honour, plus the
 * vLLM-style extensions `top_k`, `guided_choice`, `return_token_ids` and
 * `return_tokens_as_token_ids`. Unknown request fields are accepted and ignored (OpenAI clients
 * send fields such as `user` or `presence_penalty` that have no meaning here). The session-scoped
 * endpoint (`/v1/sessions/{id}/openai/v1`) has its own request and answer shapes below. The
 * completion service (./completions.ts) types its requests and answers from these; the routes
 * (src/routes/openai/) declare them.
 */
import { Type, type Static } from 'typebox';
import { Nullable, StringEnum } from '../schema-helpers.js';
import { MAX_TEMPERATURE } from '../agent/schemas.js';

const Sampling = {
  model: Type.String({ minLength: 1, maxLength: 256, description: 'a model version served by this server (GET /openai/v1/models)' }),
  max_tokens: Type.Optional(
    Nullable(
      Type.Integer({
        minimum: 1,
        description:
          'most tokens to generate; a builtin version generates at most half its context (192 tokens for models/base): ' +
          'more is a 400 naming this field. Omitted: 256 for chat, 16 for completions, cut to that bound',
      }),
    ),
  ),
  temperature: Type.Optional(Nullable(Type.Number({ minimum: 0, maximum: MAX_TEMPERATURE, description: 'default 1; 0 is greedy' }))),
  top_p: Type.Optional(Nullable(Type.Number({ exclusiveMinimum: 0, maximum: 1, description: 'default 1' }))),
  top_k: Type.Optional(Nullable(Type.Integer({ minimum: -1, description: 'extension (vLLM): 0 or -1 disables' }))),
  seed: Type.Optional(Nullable(Type.Integer({ minimum: -2147483648, maximum: 4294967295, description: 'one seed gives one output' }))),
  stop: Type.Optional(
    Nullable(
      Type.Union([Type.String({ maxLength: 256 }), Type.Array(Type.String({ maxLength: 256 }), { maxItems: 4 })], {
        description: 'the output ends before the first occurrence of one of these',
      }),
    ),
  ),
  n: Type.Optional(Nullable(Type.Integer({ minimum: 1, description: 'only 1: several choices per request (n > 1) are not supported, a 400 says so' }))),
  stream: Type.Optional(Nullable(Type.Boolean({ description: 'server-sent events; the whole answer is computed first, then sent as one content chunk' }))),
  stream_options: Type.Optional(Nullable(Type.Object({ include_usage: Type.Optional(Nullable(Type.Boolean())) }))),
  guided_choice: Type.Optional(
    Nullable(
      Type.Array(Type.String({ maxLength: 1024 }), {
        minItems: 1,
        maxItems: 512,
        description: 'extension (vLLM): the output is exactly one of these strings, sampled from their exact sequence logprobs',
      }),
    ),
  ),
  return_token_ids: Type.Optional(Nullable(Type.Boolean({ description: 'extension (vLLM): add prompt_token_ids and choices[].token_ids' }))),
  return_tokens_as_token_ids: Type.Optional(
    Nullable(Type.Boolean({ description: 'extension (vLLM): logprob tokens are written "token_id:<id>"' })),
  ),
};

const ContentPart = Type.Object({ type: Type.String(), text: Type.Optional(Type.String()) });

export const ChatMessage = Type.Object({
  role: StringEnum(['system', 'developer', 'user', 'assistant', 'tool', 'function'], {
    description: 'the roles of OpenAI chat messages (contents are joined with a newline, in order)',
  }),
  content: Type.Union([Type.String(), Type.Array(ContentPart), Type.Null()]),
  name: Type.Optional(Type.String()),
});

export const ChatCompletionRequest = Type.Object({
  ...Sampling,
  messages: Type.Array(ChatMessage, { minItems: 1, maxItems: 256 }),
  max_completion_tokens: Type.Optional(Nullable(Type.Integer({ minimum: 1, description: 'same as max_tokens; wins when both are set' }))),
  logprobs: Type.Optional(Nullable(Type.Boolean({ description: 'return the logprob of each output token' }))),
  top_logprobs: Type.Optional(Nullable(Type.Integer({ minimum: 0, maximum: 0, description: 'only 0 (alternatives are not returned)' }))),
});

export const CompletionRequest = Type.Object({
  ...Sampling,
  prompt: Type.Union([Type.String(), Type.Array(Type.String(), { minItems: 1, maxItems: 1 })], { description: 'one prompt' }),
  logprobs: Type.Optional(Nullable(Type.Integer({ minimum: 0, maximum: 0, description: 'legacy: 0 returns the sampled tokens logprobs' }))),
  echo: Type.Optional(Nullable(Type.Boolean({ description: 'only false' }))),
});

const TokenLogprob = Type.Object({
  token: Type.String(),
  logprob: Type.Number(),
  bytes: Nullable(Type.Array(Type.Integer())),
  top_logprobs: Type.Array(Type.Object({ token: Type.String(), logprob: Type.Number(), bytes: Nullable(Type.Array(Type.Integer())) })),
});

const Usage = Type.Object({ prompt_tokens: Type.Integer(), completion_tokens: Type.Integer(), total_tokens: Type.Integer() });

export const ChatCompletion = Type.Object({
  id: Type.String(),
  object: Type.Literal('chat.completion'),
  created: Type.Integer({ description: 'Unix seconds' }),
  model: Type.String(),
  system_fingerprint: Nullable(Type.String()),
  choices: Type.Array(
    Type.Object({
      index: Type.Integer(),
      message: Type.Object({ role: Type.Literal('assistant'), content: Type.String(), refusal: Nullable(Type.String()) }),
      logprobs: Nullable(Type.Object({ content: Type.Array(TokenLogprob), refusal: Nullable(Type.Array(TokenLogprob)) })),
      finish_reason: Type.String({ description: 'stop or length' }),
      token_ids: Type.Optional(Type.Array(Type.Integer(), { description: 'with return_token_ids: output token ids, the stop token included when sampled' })),
    }),
  ),
  prompt_token_ids: Type.Optional(Type.Array(Type.Integer(), { description: 'with return_token_ids: the prompt as the model saw it' })),
  usage: Usage,
});

export const Completion = Type.Object({
  id: Type.String(),
  object: Type.Literal('text_completion'),
  created: Type.Integer(),
  model: Type.String(),
  system_fingerprint: Nullable(Type.String()),
  choices: Type.Array(
    Type.Object({
      index: Type.Integer(),
      text: Type.String(),
      logprobs: Nullable(
        Type.Object({
          tokens: Type.Array(Type.String()),
          token_logprobs: Type.Array(Type.Number()),
          top_logprobs: Nullable(Type.Array(Type.Null())),
          text_offset: Type.Array(Type.Integer()),
        }),
      ),
      finish_reason: Type.String(),
      token_ids: Type.Optional(Type.Array(Type.Integer())),
    }),
  ),
  prompt_token_ids: Type.Optional(Type.Array(Type.Integer())),
  usage: Usage,
});

export const OpenAiModel = Type.Object({
  id: Type.String({ description: 'the model version' }),
  object: Type.Literal('model'),
  created: Type.Integer({ description: 'Unix seconds' }),
  owned_by: Type.String(),
  parent: Nullable(Type.String()),
});

export const OpenAiModelList = Type.Object({ object: Type.Literal('list'), data: Type.Array(OpenAiModel) });

export const OpenAiModelParams = Type.Object({ model: Type.String({ minLength: 1, maxLength: 256, description: 'the model version' }) });

// ---------------------------------------------------------------- the session-scoped endpoint

/** `model` of the session-scoped endpoint: any name (agents send the one they were written for); the session's pinned version serves. */
const SessionModel = Type.Optional(
  Type.String({ maxLength: 256, description: "ignored: the session's pinned model version serves every call (the answer's `model` names it)" }),
);

/** Tool and format fields passed through to a remote version's server (a builtin version answers 400). */
const Passthrough = {
  tools: Type.Optional(Nullable(Type.Array(FreeObjectLoose(), { maxItems: 128, description: 'remote versions: passed through; builtin versions: 400' }))),
  tool_choice: Type.Optional(Type.Unknown({ description: 'remote versions: passed through; builtin versions: 400 unless "none"' })),
  parallel_tool_calls: Type.Optional(Nullable(Type.Boolean({ description: 'remote versions: passed through' }))),
  response_format: Type.Optional(
    Nullable(FreeObjectLoose({ description: 'remote versions: passed through; builtin versions: 400 unless {"type": "text"}' })),
  ),
};

function FreeObjectLoose(opts: Record<string, unknown> = {}) {
  return Type.Object({}, { additionalProperties: true, ...opts });
}

/** A chat message as agents send it: the content may be null (an assistant message with tool_calls); other fields are kept as sent. */
export const AgentChatMessage = Type.Object(
  {
    role: StringEnum(['system', 'developer', 'user', 'assistant', 'tool', 'function'], {
      description: 'the roles of OpenAI chat messages',
    }),
    content: Type.Optional(Type.Union([Type.String(), Type.Array(ContentPart), Type.Null()])),
    name: Type.Optional(Type.String()),
    tool_calls: Type.Optional(Nullable(Type.Array(FreeObjectLoose()))),
    tool_call_id: Type.Optional(Type.String()),
  },
  { additionalProperties: true },
);

export const SessionChatCompletionRequest = Type.Object({
  ...Sampling,
  model: SessionModel,
  ...Passthrough,
  messages: Type.Array(AgentChatMessage, { minItems: 1, maxItems: 256 }),
  max_completion_tokens: Type.Optional(Nullable(Type.Integer({ minimum: 1, description: 'same as max_tokens; wins when both are set' }))),
  logprobs: Type.Optional(Nullable(Type.Boolean({ description: 'return the logprob of each output token (always recorded)' }))),
  top_logprobs: Type.Optional(Nullable(Type.Integer({ minimum: 0, maximum: 0, description: 'only 0 (alternatives are not returned)' }))),
});

export const SessionCompletionRequest = Type.Object({
  ...Sampling,
  model: SessionModel,
  prompt: Type.Union([Type.String(), Type.Array(Type.String(), { minItems: 1, maxItems: 1 })], { description: 'one prompt' }),
  logprobs: Type.Optional(Nullable(Type.Integer({ minimum: 0, maximum: 0, description: 'legacy: 0 returns the sampled tokens logprobs' }))),
  echo: Type.Optional(Nullable(Type.Boolean({ description: 'only false' }))),
});

/** Where a call was recorded (an extension member OpenAI clients ignore). */
export const TurnPosition = Type.Object(
  {
    session_id: Type.String(),
    attempt: Type.Integer({ description: 'the attempt the call was recorded in' }),
    step: Type.Integer({ description: 'its position in the attempt (0-based)' }),
    latency_ms: Type.Number({ description: 'wall time of the model call, ms' }),
  },
  { description: 'extension: where this call was recorded in the session (GET /v1/sessions/{id}/trajectory)' },
);

export const SessionChatCompletion = Type.Object({
  id: Type.String(),
  object: Type.Literal('chat.completion'),
  created: Type.Integer({ description: 'Unix seconds' }),
  model: Type.String({ description: "the session's pinned model version" }),
  system_fingerprint: Nullable(Type.String()),
  choices: Type.Array(
    Type.Object({
      index: Type.Integer(),
      message: Type.Object({
        role: Type.Literal('assistant'),
        content: Nullable(Type.String(), { description: 'null when a remote version answered with tool calls only' }),
        refusal: Nullable(Type.String()),
        tool_calls: Type.Optional(Type.Array(FreeObjectLoose(), { description: "remote versions: the server's tool calls, as returned" })),
      }),
      logprobs: Nullable(
        Type.Unknown({ description: "{content: [{token, logprob, bytes, top_logprobs}], refusal}; for a remote version the server's own object" }),
      ),
      finish_reason: Type.String({ description: 'stop, length, or a remote reason such as tool_calls' }),
      token_ids: Type.Optional(Type.Array(Type.Integer(), { description: 'with return_token_ids: output token ids' })),
    }),
  ),
  prompt_token_ids: Type.Optional(Type.Array(Type.Integer(), { description: 'with return_token_ids: the prompt as the model saw it (memory included)' })),
  usage: Usage,
  lamer: TurnPosition,
});

export const SessionCompletion = Type.Object({
  ...Completion.properties,
  model: Type.String({ description: "the session's pinned model version" }),
  lamer: TurnPosition,
});

export const SessionOpenAiParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });

export type ChatCompletionBody = Static<typeof ChatCompletionRequest>;
export type CompletionBody = Static<typeof CompletionRequest>;
export type SessionChatCompletionBody = Static<typeof SessionChatCompletionRequest>;
export type SessionCompletionBody = Static<typeof SessionCompletionRequest>;
export type ChatCompletionAnswer = Static<typeof ChatCompletion>;
export type CompletionAnswer = Static<typeof Completion>;
export type SessionChatCompletionAnswer = Static<typeof SessionChatCompletion>;
export type SessionCompletionAnswer = Static<typeof SessionCompletion>;
export type OpenAiModelObject = Static<typeof OpenAiModel>;
export type OpenAiModelListing = Static<typeof OpenAiModelList>;
