/**
 * Candidate actions in the builtin engine (`availableActions`, completion `choices`, `score()`).
 * - Sampling walks the candidates' trie: at each position the allowed tokens are the next tokens
 *   of the candidates that agree so far (each candidate is its UTF-8 bytes + EOS), and the same
 *   temperature / top-k / top-p apply within that set (src/model/sampling.ts); a position with one
 *   allowed token is forced (logprob 0) and needs no forward pass of its own.
 * - Scoring runs every candidate's tokens through the model over the prompt's cache and gives the
 *   plain likelihood (temperature 1, no truncation).
 * Sizes are checked before any model work (`candidateReserve`, EngineLimitError).
 */
import { MULTI_TOKEN_BATCH_TOKENS } from '../../model/batcher.js';
import { drawIndex, rngFor, samplingLogprobs } from '../../model/sampling.js';
import type { Rng } from '../../shared/rng.js';
import type { EncodedPrompt } from '../../model/tokenizer.js';
import { EngineError, EngineLimitError, type Generation, type PromptParts, type SamplingParams } from '../engine.js';
import { onPrompt, type GenContext, type Prefilled } from './generate.js';
import type { LoadedModel } from './versions.js';

/**
 * Default cap on candidate tokens per call (LAMER_MAX_CANDIDATE_TOKENS): 512 actions of 511 bytes
 * fit. `act` walks the candidates' trie: measured on wasm on the 2-core VM, 512 candidates of 503
 * bytes sharing 500 took 3.3 s, 512 pseudo-random ones of 510 bytes 0.24 s.
 */
export const DEFAULT_MAX_CANDIDATE_TOKENS = 262144;

/**
 * Default cap on scored candidate tokens per call. Scoring runs in chunks of at most
 * `MULTI_TOKEN_BATCH_TOKENS` padded tokens, so memory per forward stays flat (all candidates in
 * one forward trapped the wasm heap); the cap bounds time: 64,128 tokens took 10.7 s on wasm on
 * the 2-core VM, 32,064 took 8.2 s.
 */
export const DEFAULT_MAX_SCORED_TOKENS = 65536;

/** Caps on candidate tokens per call (defaults above). */
export interface CandidateCaps {
  maxCandidateTokens?: number;
  maxScoredTokens?: number;
}

/**
 * Tokens to keep free for the candidates after the prompt: the longest one's. Checked before any
 * model work (EngineLimitError, a validation error for the caller): each candidate (UTF-8 bytes +
 * EOS) fits half the context, and all of them together fit `maxCandidateTokens` (and
 * `maxScoredTokens` when every candidate is scored).
 */
export function candidateReserve(m: LoadedModel, candidates: string[], caps: CandidateCaps, scored = false): number {
  const half = Math.floor(m.model.config.block_size / 2);
  const candidateCap = caps.maxCandidateTokens ?? DEFAULT_MAX_CANDIDATE_TOKENS;
  const scoredCap = caps.maxScoredTokens ?? DEFAULT_MAX_SCORED_TOKENS;
  const cap = scored ? Math.min(candidateCap, scoredCap) : candidateCap;
  let longest = 0;
  let total = 0;
  for (let i = 0; i < candidates.length; i++) {
    const n = m.tokenizer.encode(candidates[i]!).length + 1;
    if (n > half) {
      throw new EngineLimitError(`body/availableActions/${i}`, `is ${n} tokens (its tokens + EOS); model version ${m.version} takes candidates of at most ${half} tokens (half its context of ${m.model.config.block_size})`);
    }
    longest = Math.max(longest, n);
    total += n;
  }
  if (total > cap) {
    const which = cap === candidateCap ? 'LAMER_MAX_CANDIDATE_TOKENS' : 'when every candidate is scored';
    throw new EngineLimitError('body/availableActions', `total ${total} tokens (each action's tokens + EOS); at most ${cap} per call (${which})`);
  }
  return longest;
}

/**
 * Walks the candidates' trie from the prefilled prompt (see `sampleCandidate`); the forced tokens
 * pending before a sampled position run in the same forward (`p.cache.extend`).
 * @returns the chosen index, the output tokens and their logprobs.
 */
export async function walkTrie(m: LoadedModel, p: Prefilled, tokens: number[][], sampling: SamplingParams, rng: Rng) {
  let row = p.last;
  const out: number[] = [];
  const logprobs: number[] = [];
  let pending: number[] = [];
  let live = tokens.map((_, i) => i);
  let choice = -1;
  for (let j = 0; choice < 0; j++) {
    const allowed = [...new Set(live.filter((c) => tokens[c].length > j).map((c) => tokens[c][j]))];
    if (allowed.length === 0) throw new EngineError('constrained sampling left every candidate'); // unreachable: candidates end in EOS
    let t: number;
    let lp = 0;
    if (allowed.length === 1) {
      t = allowed[0];
    } else {
      if (pending.length > 0) {
        row = await p.cache.extend(pending);
        pending = [];
      }
      const dist = samplingLogprobs(row, sampling, allowed);
      t = drawIndex(dist, sampling.temperature, rng);
      lp = dist[t];
    }
    out.push(t);
    logprobs.push(lp);
    live = live.filter((c) => tokens[c][j] === t);
    choice = live.find((c) => tokens[c].length === j + 1) ?? -1;
    if (choice < 0) pending.push(t);
  }
  return { choice, out, logprobs };
}

/**
 * Samples one of `candidates` token by token down their trie: at position j the allowed tokens
 * are the j-th tokens of the candidates agreeing with the output so far; one allowed token is
 * forced (logprob log 1 = 0, no forward pass); otherwise the next-token row is computed (the
 * forced tokens pending before it in the same forward) and a token is drawn from
 * `samplingLogprobs(row, sampling, allowed)`, whose value at the token is recorded. Ends when a
 * candidate is complete (its last token, EOS, was drawn); duplicates resolve to the lowest index.
 * @throws EngineLimitError for candidates over the caps (before any model work); EngineError.
 */
export async function sampleCandidate(
  ctx: GenContext, m: LoadedModel, caps: CandidateCaps, sessionId: string | null, prompt: PromptParts, candidates: string[], sampling: SamplingParams,
): Promise<Generation> {
  const tokens = candidates.map((c) => m.tokenizer.encodeCandidate(c));
  const reserve = candidateReserve(m, candidates, caps);
  const rng: Rng = rngFor(sampling);
  return onPrompt(ctx, m, sessionId, prompt, reserve, 'constrained sampling failed', async (p) => {
    const { choice, out, logprobs } = await walkTrie(m, p, tokens, sampling, rng);
    const { enc } = p;
    const value: Generation = {
      output: candidates[choice], promptTokenIds: enc.ids, promptText: enc.text, promptTruncatedChars: enc.truncatedChars, outputTokenIds: out, logprobs,
      droppedSteps: enc.droppedSteps, modelVersion: m.version, choiceIndex: choice,
    };
    return value;
  });
}

/**
 * Candidates (indices) with at least two tokens, longest first, in chunks of at most
 * `MULTI_TOKEN_BATCH_TOKENS` padded tokens, so that one forward's attention stays small whatever
 * the number of candidates (all of them in one forward ran the wasm heap out of bounds).
 */
function scoringChunks(tokens: number[][]): number[][] {
  const order = tokens.map((_, i) => i).filter((i) => tokens[i].length >= 2).sort((a, b) => tokens[b].length - tokens[a].length || a - b);
  const chunks: number[][] = [];
  for (const i of order) {
    const cur = chunks[chunks.length - 1];
    // rows are sorted longest first, so the chunk's first row sets its padded width
    if (cur && (cur.length + 1) * (tokens[cur[0]].length - 1) <= MULTI_TOKEN_BATCH_TOKENS) cur.push(i);
    else chunks.push([i]);
  }
  return chunks;
}

/**
 * Exact per-token logprobs of each candidate continuation (bytes + EOS) after the prompt, from
 * batched forwards over the prompt's cache. Row j of candidate c predicts token j+1 of c.
 * @throws EngineLimitError for candidates over the caps (before any model work); EngineError.
 */
export async function scoreCandidates(
  ctx: GenContext, m: LoadedModel, caps: CandidateCaps, sessionId: string | null, prompt: PromptParts, candidates: string[],
): Promise<{ enc: EncodedPrompt; tokens: number[][]; logprobs: number[][] }> {
  const V = m.model.config.vocab_size;
  const reserve = candidateReserve(m, candidates, caps, true);
  const tokens = candidates.map((c) => m.tokenizer.encodeCandidate(c));
  return onPrompt(ctx, m, sessionId, prompt, reserve, 'scoring failed', async (p) => {
    const chunks = scoringChunks(tokens);
    const results = new Map<number, Float32Array>();
    const done = await Promise.all(
      chunks.map((ids) => m.batcher.submit(ids.map((i) => ({ cache: p.cache.rows, tokens: tokens[i].slice(0, -1), allPositions: true, keepCache: false })))),
    );
    chunks.forEach((ids, k) => ids.forEach((i, r) => results.set(i, done[k][r].logprobs)));
    const logprobs = tokens.map((c, i) => c.map((t, j) => (j === 0 ? p.last[t] : results.get(i)![(j - 1) * V + t])));
    return { enc: p.enc, tokens, logprobs };
  });
}
