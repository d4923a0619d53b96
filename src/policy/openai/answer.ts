/**
 * Reading a remote chat-completion answer: its text, and the token arrays it may carry (output
 * token ids from `choices[0].token_ids` or `token_id:<id>` logprob tokens, logprobs from
 * `choices[0].logprobs.content[].logprob`, prompt token ids from `prompt_token_ids`). Arrays that
 * cannot describe what was asked for are treated as not returned (null).
 */
import { decode, VOCAB_SIZE } from '../../model/tokenizer.js';
import { EngineError } from '../engine.js';
import type { ChatMessage } from './request.js';

/** Token ids taken from an answer lie in [0, 2^31): an int32 vocabulary index, as in every tokenizer in use. */
export const TOKEN_ID_LIMIT = 2 ** 31;

/** Token ids as an answer may give them: integers in [0, {@link TOKEN_ID_LIMIT}) (`1e300` is an integer to JS, but no token id). */
const isTokenIds = (v: unknown): v is number[] =>
  Array.isArray(v) && v.every((x) => Number.isInteger(x) && (x as number) >= 0 && (x as number) < TOKEN_ID_LIMIT);

/** A chat-completion answer as read: its text and each token array, null where not returned. */
export interface ParsedAnswer {
  content: string;
  promptTokenIds: number[] | null;
  outputTokenIds: number[] | null;
  logprobs: number[] | null;
}

/**
 * The logprobs of `choices[0].logprobs.content` (null unless every item has a numeric `logprob`),
 * and the output token ids its tokens spell when every token is `token_id:<id>` (servers asked
 * with `return_tokens_as_token_ids`; null otherwise, or when an id is out of range).
 */
function logprobTokens(choice: Record<string, unknown>): { logprobs: number[] | null; idsFromTokens: number[] | null } {
  const lp = (choice.logprobs as { content?: unknown } | null | undefined)?.content;
  if (!Array.isArray(lp) || !lp.every((t) => t && typeof t === 'object' && typeof (t as { logprob?: unknown }).logprob === 'number')) {
    return { logprobs: null, idsFromTokens: null };
  }
  const items = lp as Array<{ logprob: number; token?: unknown }>;
  const logprobs = items.map((t) => t.logprob);
  const ids = items.map((t) => (typeof t.token === 'string' ? /^token_id:(\d{1,10})$/.exec(t.token) : null));
  if (!ids.every((m) => m !== null)) return { logprobs, idsFromTokens: null };
  const parsed = ids.map((m) => Number(m![1]));
  return { logprobs, idsFromTokens: isTokenIds(parsed) ? parsed : null };
}

/** The token arrays of an answer's first choice, each checked against `usage` (see {@link parseChatAnswer}). */
function tokenArrays(body: unknown, choice: Record<string, unknown>): Omit<ParsedAnswer, 'content'> {
  const b = body as { prompt_token_ids?: unknown } | null;
  const { logprobs, idsFromTokens } = logprobTokens(choice);
  let outputTokenIds = isTokenIds(choice.token_ids) ? choice.token_ids : idsFromTokens;
  if (outputTokenIds && logprobs && outputTokenIds.length !== logprobs.length) outputTokenIds = idsFromTokens;
  let promptTokenIds = isTokenIds(b?.prompt_token_ids) ? b!.prompt_token_ids : null;
  // The answer's own counts bound its arrays: ids that disagree with `usage` describe something else.
  const u = (body as { usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } } | null)?.usage;
  if (promptTokenIds && typeof u?.prompt_tokens === 'number' && promptTokenIds.length !== u.prompt_tokens) promptTokenIds = null;
  if (outputTokenIds && typeof u?.completion_tokens === 'number' && outputTokenIds.length !== u.completion_tokens) outputTokenIds = null;
  return { promptTokenIds, outputTokenIds, logprobs };
}

/** The first choice of an answer and its message, if the answer has them. */
function firstChoice(body: unknown): { choice: Record<string, unknown>; message: { content?: unknown; tool_calls?: unknown } } | null {
  const b = body as { choices?: unknown } | null;
  const choice = Array.isArray(b?.choices) ? (b!.choices[0] as Record<string, unknown> | undefined) : undefined;
  const message = choice?.message as { content?: unknown; tool_calls?: unknown } | undefined;
  return choice && message && typeof message === 'object' ? { choice, message } : null;
}

/**
 * Reads a chat-completion answer. Token ids outside [0, 2^31), or whose count differs from the
 * answer's `usage` (`prompt_tokens`, `completion_tokens`), are treated as not returned (null);
 * `choices[0].token_ids` of another length than the logprobs gives way to the logprob tokens' ids.
 * @throws EngineError when it has no `choices[0].message.content` string.
 */
export function parseChatAnswer(body: unknown): ParsedAnswer {
  const c = firstChoice(body);
  if (!c || typeof c.message.content !== 'string') {
    throw new EngineError('remote answer is malformed: no choices[0].message.content string');
  }
  return { content: c.message.content, ...tokenArrays(body, c.choice) };
}

/** A chat-completion answer to an agent's turn: the text may be absent when the model called tools. */
export interface ParsedTurnAnswer extends ParsedAnswer {
  /** `choices[0].message.tool_calls` as returned (an array), else null. */
  toolCalls: unknown[] | null;
  /** `choices[0].finish_reason` ('stop' when absent). */
  finishReason: string;
  /** `choices[0].logprobs` as returned (passed on to the agent), else null. */
  rawLogprobs: unknown;
}

/**
 * Reads the answer to a turn passed through to a remote server: as {@link parseChatAnswer}, but a
 * null content is '' when the message carries `tool_calls`.
 * @throws EngineError when it has neither a content string nor a tool_calls array.
 */
export function parseTurnAnswer(body: unknown): ParsedTurnAnswer {
  const c = firstChoice(body);
  const toolCalls = c && Array.isArray(c.message.tool_calls) ? (c.message.tool_calls as unknown[]) : null;
  if (!c || (typeof c.message.content !== 'string' && !(toolCalls && (c.message.content === null || c.message.content === undefined)))) {
    throw new EngineError('remote answer is malformed: no choices[0].message.content string nor tool_calls');
  }
  const content = typeof c.message.content === 'string' ? c.message.content : '';
  const finish = c.choice.finish_reason;
  return {
    content,
    ...tokenArrays(body, c.choice),
    toolCalls,
    finishReason: typeof finish === 'string' && finish.length > 0 && finish.length <= 64 ? finish : 'stop',
    rawLogprobs: c.choice.logprobs ?? null,
  };
}

/**
 * What a lamer-server behind `/openai/v1` saw of the prompt: its byte-level token ids decode to the
 * text it kept (the messages joined with newlines, as its chat template renders them, cut from the
 * start when longer than its context). Recording that text and the number of characters (code
 * points) cut keeps `decode(promptTokenIds) === prompt` true for remote versions of kind `lamer`.
 * null when the ids are not all bytes and specials (a version with a game vocabulary, whose pieces
 * only its checkpoint lists): the caller then records the text it sent.
 */
export function lamerPromptSeen(messages: readonly ChatMessage[], promptTokenIds: readonly number[]): { promptText: string; promptTruncatedChars: number } | null {
  // Ids of another vocabulary, or ids that do not spell the end of what was sent, describe some
  // other prompt: the caller records them as not returned, and the prompt as sent.
  if (promptTokenIds.some((t) => t >= VOCAB_SIZE)) return null;
  const seen = decode(promptTokenIds);
  const full = messages.map((m) => m.content).join('\n');
  if (!full.endsWith(seen) || (seen === '' && full !== '')) return null;
  return { promptText: seen, promptTruncatedChars: [...full].length - [...seen].length };
}
