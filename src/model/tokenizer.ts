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
const isContinuation = (b: number): boolean => (b & 0xc0) === 0x80;

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
  const budget = blockSize - reserve;
  const carry = prev && prev.head === prompt.head && prompt.steps.length >= prev.steps ? prev.dropped : 0;
  let enc = encodePrompt(prompt, budget, { minDroppedSteps: carry });
  if (enc.droppedSteps > carry) {
    const slack = encodePrompt(prompt, budget - Math.floor(blockSize / 4), { minDroppedSteps: enc.droppedSteps });
    if (slack.headTruncatedBytes === 0 && slack.tailTruncatedBytes === 0) enc = encodePrompt(prompt, budget, { minDroppedSteps: slack.droppedSteps });
  }
  return enc;
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

const ALLOWED_AT_BOUNDARY: number[] = (() => {
  const out: number[] = [];
  for (let b = 0; b < 0x80; b++) out.push(b);
  for (let b = 0xc2; b <= 0xf4; b++) out.push(b);
  for (let t = BYTE_VOCAB; t < VOCAB_SIZE; t++) out.push(t);
  return out;
})();

/**
 * Token ids allowed next in state `s`, ascending: inside a character only its valid continuation
 * bytes (no special token, so no stop either); between characters ASCII, the valid lead bytes
 * C2..F4 and the special tokens (`vocabSize` > 260 adds its extra ids too).
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

// ---------------------------------------------------------------------------------------------
// Tokenizers per checkpoint: the byte tokenizer above, and a game vocabulary with byte fallback.
// ---------------------------------------------------------------------------------------------

/**
 * Serialisable description of a checkpoint's tokenizer (model.json metadata `lamer.tokenizer`):
 * - `byte`: ids 0..255 bytes, 256..259 BOS/EOS/SEP/PAD (the functions above);
 * - `game`: the same 260 ids, then one id per entry of `pieces` (id 260 + index): multi-byte
 *   strings (board symbols with their row labels, `(r, c)` actions, move words, memory words)
 *   matched longest first, with the bytes as fallback for any other text.
 */
export type AnyTokenizerSpec = TokenizerSpec | GameTokenizerSpec;

export interface GameTokenizerSpec {
  type: 'game';
  vocabSize: number;
  special: { bos: number; eos: number; sep: number; pad: number };
  /** Text of ids 260, 261, ...: non-empty, distinct, each at least 2 UTF-8 bytes. */
  pieces: string[];
}

/**
 * A checkpoint's tokenizer. Ids 0..259 mean the same in every tokenizer (bytes, then BOS, EOS,
 * SEP, PAD), so training layouts, stop tokens and padding do not depend on it; a game tokenizer
 * adds ids from 260 up. `decode(encode(x)) === x` for every string `x` (lone surrogates become
 * U+FFFD, as UTF-8 requires).
 */
export interface Tokenizer {
  readonly spec: AnyTokenizerSpec;
  readonly vocabSize: number;
  /** Token ids of `text` (no BOS, no EOS), `[n]`. */
  encode(text: string): number[];
  /** Text of token ids; special tokens are skipped; invalid UTF-8 byte runs decode to U+FFFD. */
  decode(ids: readonly number[]): string;
  /** UTF-8 bytes a token stands for (empty for special tokens). */
  tokenBytes(id: number): Uint8Array;
  /** `encodePrompt` with this tokenizer: same fitting rules, counted in this tokenizer's tokens. */
  encodePrompt(parts: PromptParts, maxPromptTokens: number, opts?: { minDroppedSteps?: number }): EncodedPrompt;
  /** `fitPrompt` with this tokenizer. */
  fitPrompt(prompt: PromptParts, blockSize: number, reserve: number, prev?: PromptFit): EncodedPrompt;
  /** A candidate continuation: its tokens then EOS. */
  encodeCandidate(text: string): number[];
}

/**
 * Fits pre-tokenized parts into `maxPromptTokens` (BOS included) by the rules of `encodePrompt`,
 * counted in tokens: whole steps dropped from the front first; then head, then tail, cut from the
 * left by whole tokens. `textOf` decodes ids; `charsOf` counts code points of ids' text.
 */
function fitTokenized(
  head: number[], steps: number[][], tail: number[], maxPromptTokens: number, minDroppedSteps: number | undefined,
  textOf: (ids: readonly number[]) => string,
): EncodedPrompt {
  if (!Number.isInteger(maxPromptTokens) || maxPromptTokens < 2) {
    throw new Error(`maxPromptTokens must be an integer >= 2, got ${maxPromptTokens}`);
  }
  let stepsLen = steps.reduce((s, x) => s + x.length, 0);
  const fixed = 1 + head.length + tail.length;
  let dropped = 0;
  const minDrop = Math.min(Math.max(0, Math.floor(minDroppedSteps ?? 0)), steps.length);
  while (dropped < minDrop || (dropped < steps.length && fixed + stepsLen > maxPromptTokens)) {
    stepsLen -= steps[dropped]!.length;
    dropped++;
  }
  let headKept = head;
  let tailKept = tail;
  if (fixed > maxPromptTokens) {
    const roomForHead = maxPromptTokens - 1 - tail.length;
    if (roomForHead >= 0) headKept = keepEndTokens(head, roomForHead);
    else {
      headKept = [];
      tailKept = keepEndTokens(tail, maxPromptTokens - 1);
    }
  }
  const chars = (ids: readonly number[]) => [...textOf(ids)].length;
  const truncatedChars = headKept.length < head.length || tailKept.length < tail.length
    ? chars(head) - chars(headKept) + chars(tail) - chars(tailKept)
    : 0;
  const ids: number[] = [BOS, ...headKept];
  for (let i = dropped; i < steps.length; i++) ids.push(...steps[i]!);
  ids.push(...tailKept);
  return {
    ids,
    text: textOf(ids),
    droppedSteps: dropped,
    headTruncatedBytes: byteLength(textOf(head)) - byteLength(textOf(headKept)),
    tailTruncatedBytes: byteLength(textOf(tail)) - byteLength(textOf(tailKept)),
    truncatedChars,
  };
}

/**
 * The last `room` tokens (at most) of `ids`, starting on a character boundary: byte-fallback
 * continuation bytes (0x80..0xBF) at the cut are dropped too, so that a cut never leaves half a
 * character (which would decode to U+FFFD). Pieces are whole characters, so they are boundaries.
 */
function keepEndTokens(ids: readonly number[], room: number): number[] {
  let start = Math.max(0, ids.length - Math.max(0, room));
  while (start < ids.length && ids[start]! < BYTE_VOCAB && isContinuation(ids[start]!)) start++;
  return ids.slice(start);
}

/** Shared `fitPrompt` logic (hysteresis) over any `encodePrompt`. */
function fitWith(
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

/** The byte tokenizer (ids 0..259) as a `Tokenizer`: the module functions above. */
export const BYTE_TOKENIZER: Tokenizer = {
  spec: TOKENIZER_SPEC,
  vocabSize: VOCAB_SIZE,
  encode,
  decode,
  tokenBytes: (id) => (id >= 0 && id < BYTE_VOCAB ? Uint8Array.of(id) : new Uint8Array(0)),
  encodePrompt,
  fitPrompt,
  encodeCandidate,
};

/**
 * A game vocabulary with byte fallback. Encoding is greedy longest match over UTF-8 bytes: at
 * each position the longest piece that starts there is taken, else the single byte. Pieces are
 * whole UTF-8 characters, so every token boundary is a character boundary of the text, except
 * inside byte-fallback runs of multi-byte characters (which decode back exactly).
 */
export class GameTokenizer implements Tokenizer {
  readonly spec: GameTokenizerSpec;
  readonly vocabSize: number;
  private readonly pieceBytes: Uint8Array[];
  /** Pieces by first byte, longest first: [bytes, id]. */
  private readonly byFirst = new Map<number, Array<[Uint8Array, number]>>();

  /** @throws Error for an empty, duplicate or single-byte piece, or a vocabSize that disagrees. */
  constructor(pieces: readonly string[]) {
    const seen = new Set<string>();
    this.pieceBytes = pieces.map((p, i) => {
      const b = encoder.encode(p);
      if (b.length < 2) throw new Error(`tokenizer piece ${i} (${JSON.stringify(p)}) must be at least 2 UTF-8 bytes`);
      if (seen.has(p)) throw new Error(`tokenizer piece ${i} (${JSON.stringify(p)}) is a duplicate`);
      if (p.includes('\uFFFD') || decoder.decode(b) !== p) throw new Error(`tokenizer piece ${i} is not well-formed text`);
      seen.add(p);
      return b;
    });
    this.vocabSize = VOCAB_SIZE + pieces.length;
    this.spec = { type: 'game', vocabSize: this.vocabSize, special: { bos: BOS, eos: EOS, sep: SEP, pad: PAD }, pieces: [...pieces] };
    this.pieceBytes.forEach((b, i) => {
      const list = this.byFirst.get(b[0]!) ?? [];
      list.push([b, VOCAB_SIZE + i]);
      this.byFirst.set(b[0]!, list);
    });
    for (const list of this.byFirst.values()) list.sort((a, b) => b[0].length - a[0].length);
  }

  encode(text: string): number[] {
    const bytes = encoder.encode(text);
    const out: number[] = [];
    let i = 0;
    while (i < bytes.length) {
      const list = this.byFirst.get(bytes[i]!);
      let taken = false;
      if (list) {
        for (const [p, id] of list) {
          if (i + p.length > bytes.length) continue;
          let ok = true;
          for (let j = 1; j < p.length && ok; j++) ok = bytes[i + j] === p[j];
          if (ok) {
            out.push(id);
            i += p.length;
            taken = true;
            break;
          }
        }
      }
      if (!taken) out.push(bytes[i++]!);
    }
    return out;
  }

  tokenBytes(id: number): Uint8Array {
    if (id >= 0 && id < BYTE_VOCAB) return Uint8Array.of(id);
    if (id >= VOCAB_SIZE && id < this.vocabSize) return this.pieceBytes[id - VOCAB_SIZE]!;
    return new Uint8Array(0);
  }

  decode(ids: readonly number[]): string {
    const parts: number[] = [];
    for (const id of ids) for (const b of this.tokenBytes(id)) parts.push(b);
    return decoder.decode(Uint8Array.from(parts));
  }

  encodePrompt(parts: PromptParts, maxPromptTokens: number, opts: { minDroppedSteps?: number } = {}): EncodedPrompt {
    return fitTokenized(this.encode(parts.head), parts.steps.map((s) => this.encode(s)), this.encode(parts.tail), maxPromptTokens, opts.minDroppedSteps, (ids) => this.decode(ids));
  }

  fitPrompt(prompt: PromptParts, blockSize: number, reserve: number, prev?: PromptFit): EncodedPrompt {
    return fitWith((p, m, o) => this.encodePrompt(p, m, o), prompt, blockSize, reserve, prev);
  }

  encodeCandidate(text: string): number[] {
    const ids = this.encode(text);
    ids.push(EOS);
    return ids;
  }
}

/**
 * The tokenizer a checkpoint's metadata describes.
 * @throws Error for an unknown type, special ids other than 256..259, or a vocabSize that does not
 *   match the pieces.
 */
export function tokenizerFromSpec(spec: unknown): Tokenizer {
  const s = spec as (Partial<Omit<GameTokenizerSpec, "type">> & { type?: string }) | undefined;
  const sp = s?.special;
  if (!sp || sp.bos !== BOS || sp.eos !== EOS || sp.sep !== SEP || sp.pad !== PAD) {
    throw new Error(`unsupported tokenizer ${JSON.stringify(spec)?.slice(0, 200)}: special ids must be bos 256, eos 257, sep 258, pad 259`);
  }
  if (s.type === 'byte') {
    if (s.vocabSize !== VOCAB_SIZE) throw new Error(`byte tokenizer vocabSize must be ${VOCAB_SIZE}, got ${s.vocabSize}`);
    return BYTE_TOKENIZER;
  }
  if (s.type === 'game') {
    if (!Array.isArray(s.pieces) || !s.pieces.every((p) => typeof p === 'string')) throw new Error('game tokenizer: pieces must be an array of strings');
    const t = new GameTokenizer(s.pieces);
    if (s.vocabSize !== t.vocabSize) throw new Error(`game tokenizer: vocabSize ${s.vocabSize} disagrees with ${s.pieces.length} pieces (${t.vocabSize})`);
    return t;
  }
  throw new Error(`unsupported tokenizer type ${JSON.stringify(s.type)}`);
}
