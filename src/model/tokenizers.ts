/**
 * Tokenizers per checkpoint (docs/architecture.md "The policy engine and the model"): the byte
 * tokenizer of ./tokenizer.ts as a `Tokenizer`, and a game vocabulary with byte fallback
 * (`GameTokenizer`); `tokenizerFromSpec` reads the one a checkpoint's metadata describes
 * (src/model/checkpoint.ts).
 */
import {
  BOS, BYTE_VOCAB, decode, encode, encodeCandidate, encodePrompt, EOS, fitPrompt, fitWith, isContinuation, PAD, SEP, TOKENIZER_SPEC, VOCAB_SIZE,
  type EncodedPrompt, type PromptFit, type PromptParts, type TokenizerSpec,
} from './tokenizer.js';

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: false });
const byteLength = (s: string): number => Buffer.byteLength(s, 'utf8');

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
