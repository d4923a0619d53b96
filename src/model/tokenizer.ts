/**
 * Byte-level tokenizer of the builtin policy model (shared/DESIGN.md §4).
 *
 * Vocabulary: ids 0..255 are the 256 byte values of the UTF-8 encoding, so any text round-trips
 * exactly; four special tokens follow:
 * - `BOS` (256): first token of every prompt.
 * - `EOS` (257): end of an output (action or reflection); the default stop token.
 * - `SEP` (258): separator reserved for training layouts (not emitted by the engine's prompts).
 * - `PAD` (259): padding in batched training tensors (never attended to as a target).
 *
 * A prompt (`PromptParts`, src/policy/engine.ts) is encoded as
 * `[BOS] + bytes(head) + bytes(steps[d]) + ... + bytes(tail)` where `d` is the number of steps dropped
 * from the front so that the prompt fits `maxPromptTokens` (see `encodePrompt`).
 */
import type { PromptParts } from '../policy/engine.js';

export const BYTE_VOCAB = 256;
export const BOS = 256;
export const EOS = 257;
export const SEP = 258;
export const PAD = 259;
/** Total vocabulary size: 256 bytes + 4 special tokens. */
export const VOCAB_SIZE = 260;

/** Serialisable description of the tokenizer, stored in checkpoints (model.json metadata). */
export interface TokenizerSpec {
  type: 'byte';
  vocabSize: number;
  special: { bos: number; eos: number; sep: number; pad: number };
}

export const TOKENIZER_SPEC: TokenizerSpec = {
  type: 'byte',
  vocabSize: VOCAB_SIZE,
  special: { bos: BOS, eos: EOS, sep: SEP, pad: PAD },
};

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: false });

/** UTF-8 bytes of `text` as token ids `[bytes]`, each in 0..255. */
export function encode(text: string): number[] {
  return Array.from(encoder.encode(text));
}

/**
 * Text of token ids. Special tokens (>= 256) are skipped; byte sequences that are not valid UTF-8
 * (possible in sampled output) decode to U+FFFD replacement characters.
 */
export function decode(ids: readonly number[]): string {
  const bytes: number[] = [];
  for (const id of ids) if (id >= 0 && id < BYTE_VOCAB) bytes.push(id);
  return decoder.decode(Uint8Array.from(bytes));
}

/** Result of fitting a prompt into the context window. */
export interface EncodedPrompt {
  /** Token ids `[promptLen]`, starting with BOS. */
  ids: number[];
  /** How many of `parts.steps` were dropped from the front (0 = none). */
  droppedSteps: number;
  /** Bytes cut from the start of `head` (last resort, see `encodePrompt`); 0 normally. */
  headTruncatedBytes: number;
  /** Bytes cut from the start of `tail` (only when the tail alone exceeds the budget). */
  tailTruncatedBytes: number;
}

/**
 * Encodes a prompt so that it has at most `maxPromptTokens` tokens (BOS included).
 *
 * Fitting rule, in order:
 * 1. Drop whole steps from the front (oldest first) until the prompt fits; never head or tail.
 * 2. Last resort, when `[BOS] + head + tail` alone does not fit: all steps are dropped and `head` is
 *    cut from the left (its *end*, nearest to the current observation, is kept), byte-wise.
 * 3. If even `[BOS] + tail` does not fit, head is dropped entirely and `tail` is cut from the left
 *    (its end holds the answer cue).
 * Cuts in 2-3 may split a multi-byte UTF-8 character; the model sees bytes, so this is harmless.
 * `opts.minDroppedSteps` drops at least that many steps even when fewer would fit (the engine uses
 * it to keep a session's prompt prefix stable between steps, see src/policy/builtin-engine.ts).
 *
 * @throws Error when maxPromptTokens < 2 (no room for BOS and one byte).
 */
export function encodePrompt(parts: PromptParts, maxPromptTokens: number, opts: { minDroppedSteps?: number } = {}): EncodedPrompt {
  if (!Number.isInteger(maxPromptTokens) || maxPromptTokens < 2) {
    throw new Error(`maxPromptTokens must be an integer >= 2, got ${maxPromptTokens}`);
  }
  const head = encode(parts.head);
  const tail = encode(parts.tail);
  const steps = parts.steps.map(encode);
  let stepsLen = steps.reduce((s, x) => s + x.length, 0);
  const fixed = 1 + head.length + tail.length;
  let dropped = 0;
  const minDrop = Math.min(Math.max(0, Math.floor(opts.minDroppedSteps ?? 0)), steps.length);
  while (dropped < minDrop || (dropped < steps.length && fixed + stepsLen > maxPromptTokens)) {
    stepsLen -= steps[dropped].length;
    dropped++;
  }
  let headTruncatedBytes = 0;
  let tailTruncatedBytes = 0;
  let headKept = head;
  let tailKept = tail;
  if (fixed > maxPromptTokens) {
    const roomForHead = maxPromptTokens - 1 - tail.length;
    if (roomForHead >= 0) {
      headKept = head.slice(head.length - roomForHead);
    } else {
      headKept = [];
      tailKept = tail.slice(tail.length - (maxPromptTokens - 1));
    }
    headTruncatedBytes = head.length - headKept.length;
    tailTruncatedBytes = tail.length - tailKept.length;
  }
  const ids: number[] = [BOS];
  for (const b of headKept) ids.push(b);
  for (let i = dropped; i < steps.length; i++) for (const b of steps[i]) ids.push(b);
  for (const b of tailKept) ids.push(b);
  return { ids, droppedSteps: dropped, headTruncatedBytes, tailTruncatedBytes };
}

/** Token ids of one candidate continuation (an action): its bytes followed by EOS. */
export function encodeCandidate(text: string): number[] {
  const ids = encode(text);
  ids.push(EOS);
  return ids;
}
