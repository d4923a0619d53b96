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
import { type Tokenizer } from '../../model/tokenizers.js';
import { EngineError, type Generation, type PromptParts, type SamplingParams } from '../engine.js';
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
  const fit: PromptFit = { head: prompt.head, steps: prompt.steps.length, dropped: enc.droppedSteps };
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

/** Samples up to `maxNew` tokens after the prompt; updates the session's cache. */
export async function generate(ctx: GenContext, m: LoadedModel, sessionId: string | null, prompt: PromptParts, maxNew: number, sampling: SamplingParams): Promise<Generation> {
  const rng = rngFor(sampling);
  const V = m.model.config.vocab_size;
  const { enc, out: sampled, logprobs: sampledLogprobs } = await onPrompt(ctx, m, sessionId, prompt, maxNew, 'generation failed', async (p) => {
    const res = { enc: p.enc, out: [] as number[], logprobs: [] as number[] };
    // only tokens that keep the output valid UTF-8 are sampled, and no special token but EOS
    // (tokenizer.ts utf8Allowed); the recorded logprob is the token's under this masked distribution
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
  });
  let out = sampled;
  let logprobs = sampledLogprobs;
  // a length cap reached inside a character: its leading bytes are not part of the answer
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
