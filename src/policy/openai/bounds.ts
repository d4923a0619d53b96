/**
 * Bounding a remote answer by the token cap it was asked for (`max_tokens`): token arrays longer
 * than the cap are treated as not returned, and a text longer than the cap could spell is cut
 * (its arrays then describe text no longer kept, so they are dropped too).
 */
import type { ParsedAnswer } from './answer.js';

/**
 * Most characters (code points) of an answer per token of its `max_tokens` cap: longer than any
 * tokenizer's tokens give on average, so only an answer that ignored the cap is cut.
 */
export const MAX_CHARS_PER_TOKEN = 32;

/** Code points of `s` from UTF-16 index `from` on (a surrogate pair counts once). */
function codePoints(s: string, from = 0): number {
  let n = 0;
  for (let i = from; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (!(c >= 0xdc00 && c <= 0xdfff && i > from && s.charCodeAt(i - 1) >= 0xd800 && s.charCodeAt(i - 1) <= 0xdbff)) n++;
  }
  return n;
}

/** The first `max` code points of `s` at most (never half of a surrogate pair). */
function cutCodePoints(s: string, max: number): string {
  let units = 0;
  let n = 0;
  for (const ch of s) {
    if (n === max) break;
    units += ch.length;
    n++;
  }
  return s.slice(0, units);
}

/** An answer after {@link boundToCap}, how many code points were cut from its text, and the most it could keep. */
export interface BoundedAnswer {
  answer: ParsedAnswer;
  /** Code points cut from the end of the text (0: nothing cut). */
  cutChars: number;
  /** Most code points the text may have: `maxTokens` x {@link MAX_CHARS_PER_TOKEN}, or the longest candidate. */
  maxChars: number;
}

/**
 * `a` bounded by the token cap `maxTokens`. A candidate the server was made to choose may be
 * longer than the cap: it bounds the answer too (its length in characters; its UTF-8 bytes + 1 in
 * tokens, which any byte-level or larger vocabulary needs at most, the stop token included).
 * Returns a new answer; `a` is left as it is.
 */
export function boundToCap(a: ParsedAnswer, maxTokens: number, actions: readonly string[] = []): BoundedAnswer {
  let longestChars = 0;
  let longestTokens = 0;
  for (const x of actions) {
    longestChars = Math.max(longestChars, x.length);
    longestTokens = Math.max(longestTokens, Buffer.byteLength(x, 'utf8') + 1);
  }
  const answer = { ...a };
  const maxIds = Math.max(maxTokens, longestTokens);
  if (answer.outputTokenIds && answer.outputTokenIds.length > maxIds) answer.outputTokenIds = null;
  if (answer.logprobs && answer.logprobs.length > maxIds) answer.logprobs = null;
  const maxChars = Math.max(maxTokens * MAX_CHARS_PER_TOKEN, longestChars);
  const kept = answer.content.length > maxChars ? cutCodePoints(answer.content, maxChars) : answer.content;
  if (kept.length >= answer.content.length) return { answer, cutChars: 0, maxChars };
  const cutChars = codePoints(answer.content, kept.length);
  answer.content = kept;
  answer.outputTokenIds = null;
  answer.logprobs = null;
  return { answer, cutChars, maxChars };
}
