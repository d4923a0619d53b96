/**
 * Free generation of the builtin engine: the prompt fitted to the context
 * (src/model/tokenizer.ts), prefilled through the session's KV cache, then sampled token by token
 * (src/model/sampling.ts) until a stop token or a length cap; only tokens that keep the output
 * valid UTF-8 are sampled. Recorded logprobs are those of the sampling distribution
 * (`samplingLogprobs`), the behaviour policy that training recomputes.
 */
import { cacheLength, disposeCache, truncateCache } from '../../model/gpt-cached.js';
import type { RowCache } from '../../model/kv-cache.js';
import { drawIndex, rngFor, samplingLogprobs } from '../../model/sampling.js';
import {
  completeUtf8Prefix, decode, fitPrompt, UTF8_START, utf8Allowed, utf8Next, type EncodedPrompt, type PromptFit,
} from '../../model/tokenizer.js';
import { EngineError, type Generation, type PromptParts, type SamplingParams } from '../engine.js';
import type { SessionCaches, SessionState } from './kv-lru.js';
import type { LoadedModel } from './versions.js';

/** What a generation needs from the engine: the session caches and the stop tokens. */
export interface GenContext {
  sessions: SessionCaches;
  stopSet: ReadonlySet<number>;
}

/** A fitted prompt run through the model: `cache` holds `enc.ids`, `last` predicts the next token. */
export interface Prefilled {
  enc: EncodedPrompt;
  cache: RowCache | null;
  last: Float32Array;
}

/** Length of the common prefix of two token arrays. */
export function commonPrefix(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/**
 * Index of the first output token where any of `stops` (UTF-8) begins, or -1. Output tokens are
 * bytes (< 256) except special tokens, which end the scan.
 */
export function firstStop(out: readonly number[], stops: readonly string[]): number {
  const pats = stops.filter((x) => x.length > 0).map((x) => Array.from(new TextEncoder().encode(x)));
  if (pats.length === 0) return -1;
  for (let i = 0; i < out.length && out[i]! < 256; i++) {
    for (const p of pats) {
      if (i + p.length > out.length) continue;
      let ok = true;
      for (let j = 0; j < p.length && ok; j++) ok = out[i + j] === p[j];
      if (ok) return i;
    }
  }
  return -1;
}

/**
 * Runs the prompt through the model reusing the session's cache for the common prefix.
 * @returns the cache now holding `ids` and the logprob row predicting the token after `ids`.
 */
async function prefill(m: LoadedModel, st: SessionState | null, ids: number[]): Promise<{ cache: RowCache; last: Float32Array }> {
  let base: RowCache | null = null;
  let reuse = 0;
  if (st && st.cache) {
    // at least one new token is needed to get the next-token logprobs
    reuse = Math.min(commonPrefix(st.tokens, ids), ids.length - 1);
    if (reuse === cacheLength(st.cache)) {
      base = st.cache;
      st.cache = null;
    } else if (reuse > 0) {
      base = truncateCache(st.cache, reuse);
    }
    disposeCache(st.cache);
    st.cache = null;
    if (!base) reuse = 0;
  }
  try {
    const [r] = await m.batcher.submit([{ cache: base, tokens: ids.slice(reuse), allPositions: false, keepCache: true }]);
    return { cache: r.cache!, last: r.logprobs };
  } finally {
    disposeCache(base);
  }
}

/**
 * Runs `body` on the session's prompt: takes the session's state, fits the prompt (keeping
 * `reserve` tokens free), prefills it, and puts the session back with the tokens `body` reports
 * in `p.cache`. On failure the cache `body` left in `p.cache` is disposed, the session loses its
 * cache, and a non-engine error becomes an EngineError prefixed with `what`.
 */
export async function onPrompt<T>(
  ctx: GenContext, m: LoadedModel, sessionId: string | null, prompt: PromptParts, reserve: number, what: string,
  body: (p: Prefilled) => Promise<{ value: T; tokens: number[] }>,
): Promise<T> {
  const st = ctx.sessions.take(sessionId, m.version);
  const enc = fitPrompt(prompt, m.model.config.block_size, reserve, st?.fit); // tokenizer.ts: oldest steps dropped first, with hysteresis
  const fit: PromptFit = { head: prompt.head, steps: prompt.steps.length, dropped: enc.droppedSteps };
  const p: Prefilled = { enc, cache: null, last: new Float32Array(0) };
  try {
    const pre = await prefill(m, st, enc.ids);
    p.cache = pre.cache;
    p.last = pre.last;
    const { value, tokens } = await body(p);
    ctx.sessions.put(sessionId, { version: m.version, gen: m.generation, tokens, cache: p.cache, fit });
    p.cache = null;
    return value;
  } catch (err) {
    disposeCache(p.cache);
    ctx.sessions.put(sessionId, null);
    // Another error's message (a tfjs shape error, say) is internal: it stays in the log, as the cause.
    throw err instanceof EngineError ? err : new EngineError(`${what} failed inside the engine; an operator must check the server log`, { cause: err });
  }
}

/** Samples up to `maxNew` tokens after the prompt; updates the session's cache. */
export async function generate(ctx: GenContext, m: LoadedModel, sessionId: string | null, prompt: PromptParts, maxNew: number, sampling: SamplingParams): Promise<Generation> {
  const rng = rngFor(sampling);
  const V = m.model.config.vocab_size;
  let enc!: EncodedPrompt;
  let { out, logprobs } = await onPrompt(ctx, m, sessionId, prompt, maxNew, 'generation failed', async (p) => {
    enc = p.enc;
    const seq = enc.ids.slice();
    const res = { out: [] as number[], logprobs: [] as number[] };
    // only tokens that keep the output valid UTF-8 are sampled (tokenizer.ts utf8Allowed)
    let u8 = UTF8_START;
    let row = p.last;
    for (;;) {
      const dist = samplingLogprobs(row, sampling, utf8Allowed(u8, V)); // the behaviour policy at this position
      const t = drawIndex(dist, sampling.temperature, rng);
      u8 = utf8Next(u8, t);
      res.out.push(t);
      res.logprobs.push(dist[t]);
      if (ctx.stopSet.has(t) || res.out.length >= maxNew || seq.length >= m.model.config.block_size) break;
      const [r] = await m.batcher.submit([{ cache: p.cache, tokens: [t], allPositions: false, keepCache: true }]);
      disposeCache(p.cache);
      p.cache = r.cache;
      seq.push(t);
      row = r.logprobs;
    }
    return { value: res, tokens: seq };
  });
  // a length cap reached inside a character: its leading bytes are not part of the answer
  const complete = completeUtf8Prefix(out);
  if (complete < out.length) {
    out = out.slice(0, complete);
    logprobs = logprobs.slice(0, complete);
  }
  const textIds = out.length > 0 && ctx.stopSet.has(out[out.length - 1]) ? out.slice(0, -1) : out;
  return {
    output: decode(textIds),
    promptTokenIds: enc.ids,
    promptText: enc.text,
    promptTruncatedChars: enc.truncatedChars,
    outputTokenIds: out,
    logprobs,
    droppedSteps: enc.droppedSteps,
    modelVersion: m.version,
  };
}
