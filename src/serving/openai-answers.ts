/**
 * The OpenAI wire bodies that the sessionless `/openai/v1` and the session-scoped
 * `/v1/sessions/{id}/openai/v1` share (./completions.ts builds both): token texts and bytes of
 * logprob items, the request's sampling and stop fields, usage, the logprobs objects of both APIs,
 * and the answers (`chat.completion`, `text_completion`) with their stream chunks. Nothing here
 * knows HTTP: the routes send the bodies, or the chunks as server-sent events.
 */
import type { Generation, SamplingParams } from '../policy/engine.js';
import { BOS, EOS, PAD, SEP } from '../model/tokenizer.js';
import { type Tokenizer } from '../model/tokenizers.js';

const SPECIAL: Record<number, string> = { [BOS]: '<|bos|>', [EOS]: '<|eos|>', [SEP]: '<|sep|>', [PAD]: '<|pad|>' };

/**
 * Text of one token id of the version's tokenizer: the UTF-8 text of its bytes (a lone byte that
 * is not UTF-8 text decodes to U+FFFD; a game-vocabulary piece is its whole text), a special
 * token's name, or `token_id:<id>` when asked for ids.
 */
export function tokenText(id: number, asIds: boolean, tok: Tokenizer): string {
  if (asIds) return `token_id:${id}`;
  const bytes = tok.tokenBytes(id);
  if (bytes.length > 0) return Buffer.from(bytes).toString('utf8');
  return SPECIAL[id] ?? `<|${id}|>`;
}

/** The UTF-8 bytes a token id stands for in the version's tokenizer (none for special tokens). */
export const tokenBytes = (id: number, tok: Tokenizer): number[] => Array.from(tok.tokenBytes(id));

/** The sampling of a sessionless request: temperature 1, top_p 1, top_k off unless set. */
export function sampling(b: { temperature?: number | null; top_p?: number | null; top_k?: number | null; seed?: number | null }): SamplingParams {
  const s: SamplingParams = { temperature: b.temperature ?? 1, topP: b.top_p ?? 1, topK: Math.max(0, b.top_k ?? 0) };
  if (b.seed !== undefined && b.seed !== null) s.seed = b.seed;
  return s;
}

/** The `stop` field as a list (none: empty). */
export const stops = (s: string | string[] | null | undefined): string[] => (s === undefined || s === null ? [] : typeof s === 'string' ? [s] : s);

/** OpenAI's usage object of a generation (token counts of the prompt as seen and of the output). */
export const usage = (g: Pick<Generation, 'promptTokenIds' | 'outputTokenIds'>) => ({
  prompt_tokens: g.promptTokenIds.length,
  completion_tokens: g.outputTokenIds.length,
  total_tokens: g.promptTokenIds.length + g.outputTokenIds.length,
});

/** What a chat answer is built from: the generation, its content and tool calls as sent, and the request's choices. */
export interface ChatAnswerParts<C extends string | null = string | null, L = unknown> {
  id: string;
  /** Unix seconds. */
  created: number;
  model: string;
  g: Pick<Generation, 'promptTokenIds' | 'outputTokenIds'> & { finishReason: string };
  /** The message content (null for an answer that is only tool calls). */
  content: C;
  toolCalls: Array<Record<string, unknown>> | null;
  logprobs: L;
  /** `return_token_ids`: add the prompt's and the output's token ids. */
  withIds: boolean;
}

/** The `chat.completion` body of a generation (OpenAI's chat API, with the token ids when asked). */
export function chatCompletion<C extends string | null, L>(p: ChatAnswerParts<C, L>) {
  const { g, withIds } = p;
  return {
    id: p.id,
    object: 'chat.completion' as const,
    created: p.created,
    model: p.model,
    system_fingerprint: null,
    choices: [
      {
        index: 0,
        message: { role: 'assistant' as const, content: p.content, refusal: null, ...(p.toolCalls ? { tool_calls: p.toolCalls } : {}) },
        logprobs: p.logprobs,
        finish_reason: g.finishReason,
        ...(withIds ? { token_ids: g.outputTokenIds } : {}),
      },
    ],
    ...(withIds ? { prompt_token_ids: g.promptTokenIds } : {}),
    usage: usage(g),
  };
}

/**
 * The `chat.completion.chunk` events of a generation computed whole: the role, the content (and tool
 * calls) with the logprobs, the finish reason (with `last`'s fields), and the usage when asked.
 */
export function chatChunks<C extends string | null, L>(
  p: ChatAnswerParts<C, L>, includeUsage: boolean, last: Record<string, unknown> = {},
): unknown[] {
  const { g } = p;
  const base = { id: p.id, object: 'chat.completion.chunk', created: p.created, model: p.model, system_fingerprint: null };
  const delta: Record<string, unknown> = { content: p.content };
  if (p.toolCalls) delta.tool_calls = p.toolCalls.map((c, index) => ({ index, ...c }));
  const chunks: unknown[] = [
    { ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }] },
    {
      ...base,
      choices: [{ index: 0, delta, logprobs: p.logprobs, finish_reason: null, ...(p.withIds ? { token_ids: g.outputTokenIds } : {}) }],
    },
    { ...base, choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: g.finishReason }], ...last },
  ];
  if (includeUsage) chunks.push({ ...base, choices: [], usage: usage(g) });
  return chunks;
}

/** The chat API's `logprobs` of a generation: one item per output token (no alternatives). */
export function chatLogprobs(g: Pick<Generation, 'outputTokenIds' | 'logprobs'>, asIds: boolean, tok: Tokenizer) {
  return {
    content: g.outputTokenIds.map((t, i) => ({ token: tokenText(t, asIds, tok), logprob: g.logprobs[i]!, bytes: tokenBytes(t, tok), top_logprobs: [] })),
    refusal: null,
  };
}

/** The legacy completions API's `logprobs` of a generation: tokens, their logprobs and byte offsets. */
export function completionLogprobs(g: Pick<Generation, 'outputTokenIds' | 'logprobs'>, asIds: boolean, tok: Tokenizer) {
  let offset = 0;
  return {
    tokens: g.outputTokenIds.map((t) => tokenText(t, asIds, tok)),
    token_logprobs: g.logprobs.slice(),
    top_logprobs: null,
    text_offset: g.outputTokenIds.map((t) => {
      const o = offset;
      offset += tok.tokenBytes(t).length;
      return o;
    }),
  };
}

/** What a text completion answer is built from: as a chat answer's, with the output text in `g`. */
export interface TextAnswerParts<L = unknown> {
  id: string;
  /** Unix seconds. */
  created: number;
  model: string;
  g: Pick<Generation, 'output' | 'promptTokenIds' | 'outputTokenIds'> & { finishReason: string };
  logprobs: L;
  /** `return_token_ids`: add the prompt's and the output's token ids. */
  withIds: boolean;
}

/** The one choice of a text completion. */
const textChoice = <L>(p: TextAnswerParts<L>) => ({
  index: 0, text: p.g.output, logprobs: p.logprobs, finish_reason: p.g.finishReason, ...(p.withIds ? { token_ids: p.g.outputTokenIds } : {}),
});

/** The `text_completion` body of a generation (OpenAI's legacy completions API, with the token ids when asked). */
export function textCompletion<L>(p: TextAnswerParts<L>) {
  return {
    id: p.id,
    object: 'text_completion' as const,
    created: p.created,
    model: p.model,
    system_fingerprint: null,
    choices: [textChoice(p)],
    ...(p.withIds ? { prompt_token_ids: p.g.promptTokenIds } : {}),
    usage: usage(p.g),
  };
}

/**
 * The stream chunks of a text completion computed whole: the choice (with `first`'s fields), then
 * the usage when asked.
 */
export function textChunks<L>(p: TextAnswerParts<L>, includeUsage: boolean, first: Record<string, unknown> = {}): unknown[] {
  const base = { id: p.id, object: 'text_completion', created: p.created, model: p.model, system_fingerprint: null };
  const chunks: unknown[] = [{ ...base, choices: [textChoice(p)], ...first }];
  if (includeUsage) chunks.push({ ...base, choices: [], usage: usage(p.g) });
  return chunks;
}
