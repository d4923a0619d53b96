/**
 * Byte-level tokenizer of the builtin policy model (docs/architecture.md "The policy engine and the model").
 *
 * Vocabulary: ids 0..255 are the 256 byte values of the UTF-8 encoding, so any text round-trips
 * exactly; four special tokens follow:
 * - `BOS` (256): first token of every prompt.
 * - `EOS` (257): end of an output (action or reflection); the default stop token.
 * - `SEP` (258): separator reserved for training layouts (not emitted by the engine's prompts).
 * - `PAD` (259): padding in batched training tensors (never attended to as a target).
 * Free generation samples EOS but never BOS, SEP or PAD (`utf8Allowed`).
 *
 * A prompt (`PromptParts`) is encoded as
 * `[BOS] + bytes(head) + bytes(steps[d]) + ... + bytes(tail)` where `d` is the number of steps dropped
 * from the front so that the prompt fits `maxPromptTokens` (see `encodePrompt`).
 */
/**
 * A prompt in parts so that the engine can fit it to its context window by tokens:
 * - `head`: instructions and memory (src/agent/prompt.ts); never dropped.
 * - `steps`: the current attempt's earlier steps, oldest first, one rendered string each; when the
 *   whole prompt exceeds the context, whole steps are dropped from the front.
 * - `tail`: the current observation and the answer cue; never dropped.
 * The full prompt text is `head + steps.join('') + tail`.
 */
export interface PromptParts {
  head: string;
  steps: string[];
  tail: string;
}

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
  /** The text the model sees: exactly `decode(ids)` (what is recorded as the step's prompt). */
  text: string;
  /** How many of `parts.steps` were dropped from the front (0 = none). */
  droppedSteps: number;
  /** Bytes cut from the start of `head` (last resort, see `encodePrompt`); 0 normally. */
  headTruncatedBytes: number;
  /** Bytes cut from the start of `tail` (only when the tail alone exceeds the budget). */
  tailTruncatedBytes: number;
  /**
   * Characters (Unicode code points; a lone surrogate counts as one) cut from the start of `head`
   * and `tail` together, beyond the dropped steps; 0 normally.
   */
  truncatedChars: number;
}

/** True for a UTF-8 continuation byte (10xxxxxx). */
export const isContinuation = (b: number): boolean => (b & 0xc0) === 0x80;

/**
 * The last `room` bytes (at most) of the UTF-8 bytes `bytes`, starting on a character boundary
 * (continuation bytes at the cut are dropped too), and the number of characters cut (one lead
 * byte per character).
 */
function keepEnd(bytes: Uint8Array, room: number): { kept: Uint8Array; cutChars: number } {
  let start = Math.max(0, bytes.length - Math.max(0, room));
  while (start < bytes.length && isContinuation(bytes[start]!)) start++;
  let cutChars = 0;
  for (let i = 0; i < start; i++) if (!isContinuation(bytes[i]!)) cutChars++;
  return { kept: bytes.subarray(start), cutChars };
}

const byteLength = (s: string): number => Buffer.byteLength(s, 'utf8');

/**
 * Encodes a prompt so that it has at most `maxPromptTokens` tokens (BOS included).
 *
 * Fitting rule, in order:
 * 1. Drop whole steps from the front (oldest first) until the prompt fits; never head or tail.
 * 2. Last resort, when `[BOS] + head + tail` alone does not fit: all steps are dropped and `head` is
 *    cut from the left (its *end*, nearest to the current observation, is kept), byte-wise.
 * 3. If even `[BOS] + tail` does not fit, head is dropped entirely and `tail` is cut from the left
 *    (its end holds the answer cue).
 * Cuts in 2-3 fall on character boundaries (a multi-byte UTF-8 character at the cut is dropped
 * whole), so `text === decode(ids)` is the prompt shown and `truncatedChars` counts what was cut.
 * `opts.minDroppedSteps` drops at least that many steps even when fewer would fit (the engine uses
 * it to keep a session's prompt prefix stable between steps, see `fitPrompt`).
 *
 * @throws Error when maxPromptTokens < 2 (no room for BOS and one byte).
 */
export function encodePrompt(parts: PromptParts, maxPromptTokens: number, opts: { minDroppedSteps?: number } = {}): EncodedPrompt {
  if (!Number.isInteger(maxPromptTokens) || maxPromptTokens < 2) {
    throw new Error(`maxPromptTokens must be an integer >= 2, got ${maxPromptTokens}`);
  }
  // Sizes first (native, no copies), so that only what is kept is turned into token ids: a prompt
  // of megabytes costs what its fitted part costs.
  const head = encoder.encode(parts.head);
  const tail = encoder.encode(parts.tail);
  const stepLens = parts.steps.map(byteLength);
  let stepsLen = stepLens.reduce((s, x) => s + x, 0);
  const fixed = 1 + head.length + tail.length;
  let dropped = 0;
  const minDrop = Math.min(Math.max(0, Math.floor(opts.minDroppedSteps ?? 0)), stepLens.length);
  while (dropped < minDrop || (dropped < stepLens.length && fixed + stepsLen > maxPromptTokens)) {
    stepsLen -= stepLens[dropped]!;
    dropped++;
  }
  let headKept: Uint8Array = head;
  let tailKept: Uint8Array = tail;
  let truncatedChars = 0;
  if (fixed > maxPromptTokens) {
    const roomForHead = maxPromptTokens - 1 - tail.length;
    if (roomForHead >= 0) {
      const h = keepEnd(head, roomForHead);
      headKept = h.kept;
      truncatedChars = h.cutChars;
    } else {
      headKept = head.subarray(0, 0);
      const t = keepEnd(tail, maxPromptTokens - 1);
      tailKept = t.kept;
      truncatedChars = keepEnd(head, 0).cutChars + t.cutChars;
    }
  }
  const ids: number[] = [BOS];
  for (const b of headKept) ids.push(b);
  for (let i = dropped; i < parts.steps.length; i++) for (const b of encoder.encode(parts.steps[i]!)) ids.push(b);
  for (const b of tailKept) ids.push(b);
  return {
    ids,
    text: decode(ids),
    droppedSteps: dropped,
    headTruncatedBytes: head.length - headKept.length,
    tailTruncatedBytes: tail.length - tailKept.length,
    truncatedChars,
  };
}

/** Fit of a session's last prompt: its head and step count, and how many steps were dropped. */
export interface PromptFit {
  head: string;
  steps: number;
  dropped: number;
}

/**
 * Fits a prompt to `blockSize - reserve` tokens as the builtin engine does for a session
 * (src/policy/builtin/generate.ts), oldest steps dropped first (`encodePrompt`), with hysteresis so
 * that a long attempt does not recompute its whole prompt every step once it overflows: when the
 * prompt extends the session's previous one (`prev`: same head, no fewer steps), at least as many
 * steps are dropped as last time; when it newly overflows, steps are dropped until a quarter of
 * the context is free, so the next steps append to a stable, cached prefix. The SFT data
 * (src/training/data/sft-data.ts) fits demonstration prompts with it too, so that it trains the prompts
 * served. @throws Error as `encodePrompt` when the budget is under 2 tokens.
 */
export function fitPrompt(prompt: PromptParts, blockSize: number, reserve: number, prev?: PromptFit): EncodedPrompt {
  return fitWith(encodePrompt, prompt, blockSize, reserve, prev);
}

/** Token ids of one candidate continuation (an action): its bytes followed by EOS. */
export function encodeCandidate(text: string): number[] {
  const ids = encode(text);
  ids.push(EOS);
  return ids;
}

/**
 * UTF-8 validity of sampled bytes: the byte tokens that may come next so that the output stays a
 * prefix of valid UTF-8 (RFC 3629 §4: no overlong forms, no surrogates, nothing above U+10FFFF).
 * State: how many continuation bytes the current character still needs (`need`) and the range the
 * next one must lie in (`lo`..`hi`; narrower than 80..BF after E0, ED, F0, F4).
 */
export interface Utf8State {
  need: number;
  lo: number;
  hi: number;
}

export const UTF8_START: Utf8State = { need: 0, lo: 0x80, hi: 0xbf };

/** The state after token `t` (special tokens >= 256 leave it unchanged; they are not text). */
export function utf8Next(s: Utf8State, t: number): Utf8State {
  if (t >= BYTE_VOCAB || t < 0) return s;
  if (s.need > 0) return { need: s.need - 1, lo: 0x80, hi: 0xbf };
  if (t < 0x80) return UTF8_START;
  if (t >= 0xc2 && t <= 0xdf) return { need: 1, lo: 0x80, hi: 0xbf };
  if (t === 0xe0) return { need: 2, lo: 0xa0, hi: 0xbf };
  if (t === 0xed) return { need: 2, lo: 0x80, hi: 0x9f };
  if (t >= 0xe1 && t <= 0xef) return { need: 2, lo: 0x80, hi: 0xbf };
  if (t === 0xf0) return { need: 3, lo: 0x90, hi: 0xbf };
  if (t === 0xf4) return { need: 3, lo: 0x80, hi: 0x8f };
  if (t >= 0xf1 && t <= 0xf3) return { need: 3, lo: 0x80, hi: 0xbf };
  return UTF8_START; // not reachable through utf8Allowed
}

// Of the special tokens only EOS may be sampled: BOS, SEP and PAD are layout tokens of prompts and
// training tensors, never text, so free generation masks them out (a random or undertrained model
// gives them mass). EOS is the stop token that ends the output.
const ALLOWED_AT_BOUNDARY: number[] = (() => {
  const out: number[] = [];
  for (let b = 0; b < 0x80; b++) out.push(b);
  for (let b = 0xc2; b <= 0xf4; b++) out.push(b);
  out.push(EOS);
  return out;
})();

/**
 * Token ids allowed next in state `s`, ascending: inside a character only its valid continuation
 * bytes (no special token, so no stop either); between characters ASCII, the valid lead bytes
 * C2..F4 and EOS (`vocabSize` > 260 adds its extra ids too). BOS, SEP and PAD are never allowed, so
 * the engine never samples them and training's recomputed support (`utf8Support`) excludes them too.
 */
export function utf8Allowed(s: Utf8State, vocabSize: number = VOCAB_SIZE): number[] {
  if (s.need > 0) {
    const out: number[] = [];
    for (let b = s.lo; b <= s.hi; b++) out.push(b);
    return out;
  }
  if (vocabSize === VOCAB_SIZE) return ALLOWED_AT_BOUNDARY;
  const out = ALLOWED_AT_BOUNDARY.filter((t) => t < vocabSize);
  for (let t = VOCAB_SIZE; t < vocabSize; t++) out.push(t);
  return out;
}

/**
 * The allowed token ids at every position of a sampled `output` (`utf8Allowed` after the tokens
 * before it), `[output.length]`: the support the engine sampled from, for training to recompute.
 */
export function utf8Support(output: readonly number[], vocabSize: number = VOCAB_SIZE): number[][] {
  let s = UTF8_START;
  return output.map((t) => {
    const a = utf8Allowed(s, vocabSize);
    s = utf8Next(s, t);
    return a;
  });
}

/**
 * Length of the longest prefix of `ids` that ends on a character boundary: trailing bytes of an
 * unfinished character (a generation stopped by its length cap mid-character) are excluded.
 */
export function completeUtf8Prefix(ids: readonly number[]): number {
  let s = UTF8_START;
  let end = 0;
  for (let i = 0; i < ids.length; i++) {
    s = utf8Next(s, ids[i]!);
    if (s.need === 0) end = i + 1;
  }
  return end;
}

/**
 * The hysteresis of `fitPrompt` over any `encodePrompt` (this module's byte one, or a checkpoint
 * tokenizer's, src/model/tokenizers.ts).
 */
export function fitWith(
  encodeFn: (parts: PromptParts, max: number, opts: { minDroppedSteps?: number }) => EncodedPrompt,
  prompt: PromptParts, blockSize: number, reserve: number, prev?: PromptFit,
): EncodedPrompt {
  const budget = blockSize - reserve;
  const carry = prev && prev.head === prompt.head && prompt.steps.length >= prev.steps ? prev.dropped : 0;
  let enc = encodeFn(prompt, budget, { minDroppedSteps: carry });
  if (enc.droppedSteps > carry) {
    const slack = encodeFn(prompt, budget - Math.floor(blockSize / 4), { minDroppedSteps: enc.droppedSteps });
    if (slack.headTruncatedBytes === 0 && slack.tailTruncatedBytes === 0) enc = encodeFn(prompt, budget, { minDroppedSteps: slack.droppedSteps });
  }
  return enc;
}
