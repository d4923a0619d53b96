/**
 * One recorded model call replayed on a builtin version (src/policy/engine.ts ReplayRequest;
 * docs/replay.md). No session's KV cache is read or changed: the prompt is prefilled on a cache of
 * its own, which is disposed at the end, and every forward goes through the version's batcher like
 * any request's, so a replay shares the model with steps as one more session would.
 *
 * 1. The recorded answer's tokens are scored by teacher forcing, in one forward over the prompt's
 *    cache that keeps no cache (`keepCache: false`): row j is the model's log-softmax after the
 *    prompt and tokens 0..j-1, and token j's logprob is read from `samplingLogprobs(row_j, scoring,
 *    support_j)` (src/model/sampling.ts), the support being the candidates' trie
 *    (`candidateSupport`) or the UTF-8 guard of free text (`utf8Support`). That is the distribution
 *    the engine records when it samples (generate.ts, candidates.ts), so the version that recorded
 *    a call gives it back its recorded logprobs (up to float rounding: one forward over the
 *    answer instead of one per token).
 * 2. The version's own answer is then sampled from the same prefilled prompt as `act` samples it
 *    (a walk down the candidates' trie, or free text with the act cap and the stop strings).
 */
import { candidateSupport, rngFor, samplingLogprobs } from '../../model/sampling.js';
import { utf8Support } from '../../model/tokenizer.js';
import { EngineLimitError, type Completion, type ReplayAnswer, type ReplayRequest, type SamplingParams } from '../engine.js';
import { candidateReserve, walkTrie, type CandidateCaps } from './candidates.js';
import { completion, freeGeneration, onPrompt, onTokens, sampleFree, type GenContext, type Prefilled } from './generate.js';
import type { LoadedModel } from './versions.js';

/**
 * Logprob of each of `ids` after the prefilled prompt under `sampling`'s distribution restricted to
 * the support at its position (see the top of this file); null for a token outside it.
 * @returns `[ids.length]`.
 */
async function scoreTokens(m: LoadedModel, p: Prefilled, ids: readonly number[], sampling: SamplingParams, candidates: number[][] | null) {
  const V = m.model.config.vocab_size;
  const rows: Float32Array[] = [p.last];
  if (ids.length > 1) {
    const [r] = await m.batcher.submit([{ cache: p.cache.rows, tokens: ids.slice(0, -1), allPositions: true, keepCache: false }]);
    for (let j = 0; j < ids.length - 1; j++) rows.push(r!.logprobs.subarray(j * V, (j + 1) * V));
  }
  const support = candidates ? candidateSupport(candidates, ids) : utf8Support(ids, V);
  return ids.map((t, j): number | null => {
    const allowed = support[j]!;
    if (!allowed.includes(t)) return null;
    const lp = samplingLogprobs(rows[j]!, sampling, allowed)[t]!;
    return Number.isFinite(lp) ? lp : null;
  });
}

/**
 * Replays one recorded call on the pinned model `m` (see the top of this file). The given prompt
 * token ids are used when they are ids of this version's vocabulary and leave room for the answer
 * and the scored tokens in its context; otherwise the text prompt is fitted as `act` fits one.
 * @throws EngineLimitError (before any model work) for candidates over the caps, or scored tokens
 *   longer than half the context or outside the vocabulary; EngineError.
 */
export async function replayCall(
  ctx: GenContext,
  m: LoadedModel,
  caps: CandidateCaps,
  maxActionTokens: number,
  req: ReplayRequest,
): Promise<ReplayAnswer> {
  const block = m.model.config.block_size;
  const V = m.model.config.vocab_size;
  const cands = req.candidates && req.candidates.length > 0 ? req.candidates : null;
  const candTokens = cands ? cands.map((c) => m.tokenizer.encodeCandidate(c)) : null;
  const maxNew = cands
    ? candidateReserve(m, cands, caps)
    : Math.max(1, Math.min(Math.floor(req.maxTokens ?? maxActionTokens), Math.floor(block / 2)));
  const scored = req.score ? req.score.tokenIds : null;
  if (scored && scored.some((t) => !Number.isInteger(t) || t < 0 || t >= V)) {
    throw new EngineLimitError('recorded/outputTokenIds', `holds token ids outside model version ${m.version}'s vocabulary of ${V}`);
  }
  if (scored && scored.length > Math.floor(block / 2)) {
    throw new EngineLimitError(
      'recorded/outputTokenIds',
      `is ${scored.length} tokens; model version ${m.version} scores answers of at most ${Math.floor(block / 2)} tokens ` +
        `(half its context of ${block})`,
    );
  }
  const reserve = Math.max(maxNew, scored?.length ?? 0);
  const rng = rngFor(req.sampling);
  const body = async (p: Prefilled): Promise<{ g: Completion; scoredLogprobs: Array<number | null> | null }> => {
    const scoredLogprobs =
      scored && scored.length > 0 ? await scoreTokens(m, p, scored, req.score!.sampling, candTokens) : scored ? [] : null;
    if (candTokens) {
      const { choice, out, logprobs } = await walkTrie(m, p, candTokens, req.sampling, rng);
      const { enc } = p;
      const g: Completion = {
        output: cands![choice]!,
        promptTokenIds: enc.ids,
        promptText: enc.text,
        promptTruncatedChars: enc.truncatedChars,
        outputTokenIds: out,
        logprobs,
        droppedSteps: enc.droppedSteps,
        modelVersion: m.version,
        choiceIndex: choice,
        finishReason: 'stop',
      };
      return { g, scoredLogprobs };
    }
    const { out, logprobs } = await sampleFree(ctx, m, p, maxNew, req.sampling, rng);
    return { g: completion(ctx, m, freeGeneration(ctx, m, p.enc, out, logprobs), req.stop ?? []), scoredLogprobs };
  };
  const ids = req.promptTokenIds;
  const fromTokens =
    ids !== undefined && ids.length >= 1 && ids.length + reserve <= block && ids.every((t) => Number.isInteger(t) && t >= 0 && t < V);
  const r = fromTokens ? await onTokens(ctx, m, ids, 'replay', body) : await onPrompt(ctx, m, null, req.prompt, reserve, 'replay', body);
  return { generation: r.g, promptFrom: fromTokens ? 'tokens' : 'text', scoredLogprobs: r.scoredLogprobs };
}
