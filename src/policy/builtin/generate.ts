/**
 * Free generation of the builtin engine: the prompt fitted to the context
 * (src/model/tokenizer.ts), prefilled through the session's KV cache (./kv-lru.ts SessionCache,
 * which alone owns the cache's tensors during the request), then sampled token by token
 * (src/model/sampling.ts) until a stop token or a length cap; only tokens that keep the output
 * valid UTF-8 are sampled, and of the special tokens only EOS (BOS, SEP and PAD are masked out:
 * src/model/tokenizer.ts utf8Allowed). Recorded logprobs are those of the masked sampling
 * distribution (`samplingLogprobs` over the allowed tokens, renormalised: a masked token's logit
 * is -Infinity), the behaviour policy that training recomputes with the same support
 * (`utf8Support`); they are not the model's plain softmax logprobs.
 */
import { drawIndex, rngFor, samplingLogprobs } from '../../model/sampling.js';
import { completeUtf8Prefix, UTF8_START, utf8Allowed, utf8Next, type EncodedPrompt, type PromptFit } from '../../model/tokenizer.js';
import type { Rng } from '../../shared/rng.js';
import { type Tokenizer } from '../../model/tokenizers.js';
import { EngineError, type Completion, type Generation, type PromptParts, type SamplingParams } from '../engine.js';
import type { SessionCache, SessionCaches } from './kv-lru.js';
import type { LoadedModel } from './versions.js';

/** What a generation needs from the engine: the session caches and the stop tokens. */
export interface GenContext {
  sessions: SessionCaches;
  stopSet: ReadonlySet<number>;
}

/**
 * A fitted prompt run through the model: `cache` (owned by `onPrompt`) holds `enc.ids` and grows
 * with `cache.extend`; `last` is the logprob row predicting the token after the prompt.
 */
export interface Prefilled {
  enc: EncodedPrompt;
  cache: SessionCache;
  last: Float32Array;
}

/**
 * Index of the first output token where any of `stops` (UTF-8) begins, or -1. Tokens are read as
 * the bytes they stand for (`tokenizer.tokenBytes`; byte tokenizer by default); a special token
 * ends the scan. A stop that begins inside a multi-byte token (a game-vocabulary piece) stops at
 * that token, which is then not part of the output.
 */
export function firstStop(out: readonly number[], stops: readonly string[], tokenizer?: Pick<Tokenizer, 'tokenBytes'>): number {
  const pats = stops.filter((x) => x.length > 0).map((x) => Array.from(new TextEncoder().encode(x)));
  if (pats.length === 0) return -1;
  const bytes: number[] = [];
  const owner: number[] = [];
  for (let i = 0; i < out.length; i++) {
    const t = out[i]!;
    const b = tokenizer ? tokenizer.tokenBytes(t) : t >= 0 && t < 256 ? [t] : [];
    if (b.length === 0) break;
    for (const x of b) {
      bytes.push(x);
      owner.push(i);
    }
  }
  for (let i = 0; i < bytes.length; i++) {
    for (const p of pats) {
      if (i + p.length > bytes.length) continue;
      let ok = true;
      for (let j = 0; j < p.length && ok; j++) ok = bytes[i + j] === p[j];
      if (ok) return owner[i]!;
    }
  }
  return -1;
}

/**
 * Runs `body` on the session's prompt: opens the session's cache (src/policy/builtin/kv-lru.ts
 * SessionCache), fits the prompt (keeping `reserve` tokens free), prefills it, and commits the
 * cache, holding whatever `body` extended it with, back to the session. On failure the cache is
 * disposed (the session keeps none), and an error of the model work that is not an EngineError
 * becomes one prefixed with `what`.
 */
export async function onPrompt<T>(
  ctx: GenContext, m: LoadedModel, sessionId: string | null, prompt: PromptParts, reserve: number, what: string,
  body: (p: Prefilled) => Promise<T>,
): Promise<T> {
  const cache = ctx.sessions.open(sessionId, m);
  let enc: EncodedPrompt;
  try {
    enc = m.tokenizer.fitPrompt(prompt, m.model.config.block_size, reserve, cache.priorFit); // tokenizer.ts: oldest steps dropped first, with hysteresis
  } catch (err) {
    cache.dispose();
    throw err;
  }
  return onEncoded(cache, enc, { head: prompt.head, steps: prompt.steps.length, dropped: enc.droppedSteps }, what, body);
}

/**
 * As `onPrompt` for no session, with the prompt given as token ids (`[promptLen]`, BOS first) that
 * are used as they are (the caller checks they leave room in the context).
 */
export async function onTokens<T>(
  ctx: GenContext, m: LoadedModel, ids: readonly number[], what: string, body: (p: Prefilled) => Promise<T>,
): Promise<T> {
  const enc: EncodedPrompt = {
    ids: [...ids], text: m.tokenizer.decode(ids), droppedSteps: 0, headTruncatedBytes: 0, tailTruncatedBytes: 0, truncatedChars: 0,
  };
  return onEncoded(ctx.sessions.open(null, m), enc, { head: '', steps: 0, dropped: 0 }, what, body);
}

/** Prefills `enc` into `cache`, runs `body`, then commits the cache (fitted as `fit`), or disposes it on failure. */
async function onEncoded<T>(
  cache: SessionCache, enc: EncodedPrompt, fit: PromptFit, what: string, body: (p: Prefilled) => Promise<T>,
): Promise<T> {
  try {
    const last = await cache.prefill(enc.ids);
    const value = await body({ enc, cache, last });
    cache.commit(fit);
    return value;
  } catch (err) {
    cache.dispose();
    // Another error's message (a tfjs shape error, say) is internal: it stays in the log, as the cause.
    throw err instanceof EngineError ? err : new EngineError(`${what} failed inside the engine; an operator must check the server log`, { cause: err });
  }
}

/**
 * Samples up to `maxNew` tokens after the prefilled prompt `p` (extending its cache), each from
 * the masked sampling distribution: only tokens that keep the output valid UTF-8, and of the
 * special tokens only EOS (tokenizer.ts utf8Allowed). Stops at a stop token, `maxNew`, or the end
 * of the context. @returns the tokens `[n]` and each one's logprob under that distribution `[n]`.
 */
export async function sampleFree(
  ctx: GenContext, m: LoadedModel, p: Prefilled, maxNew: number, sampling: SamplingParams, rng: Rng,
): Promise<{ out: number[]; logprobs: number[] }> {
  const V = m.model.config.vocab_size;
  const res = { out: [] as number[], logprobs: [] as number[] };
  let u8 = UTF8_START;
  let row = p.last;
  for (;;) {
    const dist = samplingLogprobs(row, sampling, utf8Allowed(u8, V)); // the behaviour policy at this position
    const t = drawIndex(dist, sampling.temperature, rng);
    u8 = utf8Next(u8, t);
    res.out.push(t);
    res.logprobs.push(dist[t]);
    if (ctx.stopSet.has(t) || res.out.length >= maxNew || p.cache.tokens.length >= m.model.config.block_size) break;
    row = await p.cache.extend([t]);
  }
  return res;
}

/**
 * The generation of sampled free text: a length cap reached inside a character drops that
 * character's leading bytes (and their logprobs); the text is the tokens' without a final stop token.
 */
export function freeGeneration(
  ctx: GenContext, m: LoadedModel, enc: EncodedPrompt, sampled: number[], sampledLogprobs: number[],
): Generation {
  let out = sampled;
  let logprobs = sampledLogprobs;
  const complete = completeUtf8Prefix(out);
  if (complete < out.length) {
    out = out.slice(0, complete);
    logprobs = logprobs.slice(0, complete);
  }
  const textIds = out.length > 0 && ctx.stopSet.has(out[out.length - 1]) ? out.slice(0, -1) : out;
  return {
    output: m.tokenizer.decode(textIds),
    promptTokenIds: enc.ids,
    promptText: enc.text,
    promptTruncatedChars: enc.truncatedChars,
    outputTokenIds: out,
    logprobs,
    droppedSteps: enc.droppedSteps,
    modelVersion: m.version,
  };
}

/** Samples up to `maxNew` tokens after the prompt; updates the session's cache. */
export async function generate(ctx: GenContext, m: LoadedModel, sessionId: string | null, prompt: PromptParts, maxNew: number, sampling: SamplingParams): Promise<Generation> {
  const rng = rngFor(sampling);
  const { enc, out, logprobs } = await onPrompt(ctx, m, sessionId, prompt, maxNew, 'generation failed', async (p) => ({
    enc: p.enc,
    ...(await sampleFree(ctx, m, p, maxNew, sampling, rng)),
  }));
  return freeGeneration(ctx, m, enc, out, logprobs);
}

/**
 * A free generation as a completion: cut before the first stop string (its token ids and logprobs
 * cut at the token where it begins, so they are exactly those of the returned text). finishReason
 * 'stop' when a stop token or string ended it, else 'length'. Changes `g` in place.
 */
export function completion(ctx: GenContext, m: LoadedModel, g: Generation, stop: readonly string[]): Completion {
  const last = g.outputTokenIds[g.outputTokenIds.length - 1];
  let finishReason: Completion['finishReason'] = last !== undefined && ctx.stopSet.has(last) ? 'stop' : 'length';
  const cut = firstStop(g.outputTokenIds, stop, m.tokenizer);
  if (cut >= 0) {
    g.outputTokenIds = g.outputTokenIds.slice(0, cut);
    g.logprobs = g.logprobs.slice(0, cut);
    g.output = m.tokenizer.decode(g.outputTokenIds);
    finishReason = 'stop';
  }
  return { ...g, finishReason };
}
