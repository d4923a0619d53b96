/**
 * Packed RL samples (docs/architecture.md "Training data layout"): per attempt, the run of
 * recorded turns whose served prompts extend each other, token id for token id (`packRlRun`),
 * becomes one sample with per-token loss targets, advantages and old logprobs (`packedRlSample`);
 * `unpackSample` gives back the per-step samples of a packed one. `buildRlSamples` (data.ts)
 * decides which turns are kept and calls these.
 */
import { packRun } from './packing.js';
import { behaviourOf, type PackedTurn, type SamplerSettings, type StepRecord, type TrainingSample } from './samples.js';
import type { Tokenizer } from '../model/tokenizer.js';

/** One turn of a packable run with its score: how many output tokens the sequence shows
 *  (`packRlRun`), whether it trains, its advantage and return. */
export interface ScoredRunTurn {
  r: StepRecord;
  shown: number;
  kept: boolean;
  advantage: number;
  return: number;
}

const sameSampler = (a: SamplerSettings, b: SamplerSettings) => a.temperature === b.temperature && a.topP === b.topP && a.topK === b.topK;
const startsWith = (xs: readonly number[], prefix: readonly number[], at = 0) => xs.length >= at + prefix.length && prefix.every((id, i) => xs[at + i] === id);

/**
 * The packable run of an attempt's turns (`turns`: its acting turns in step order, each with a
 * model call, then its reflection if any): for each turn of the run from the first, how many of
 * its output tokens the next turn's served prompt shows (all of them for the run's last turn).
 * Turn j+1 joins when, by exact token-id comparison, its recorded prompt is turn j's prompt + turn
 * j's output tokens + a tail, or turn j's prompt + its output without the last token (the EOS that
 * ended the answer, which the next prompt does not show) + a non-empty tail (whose first position
 * then trains that last token); when its sampler settings (temperature, top-p, top-k) are the
 * first turn's (one temperature per sample: batch.ts scales a row's logits by one); and when its
 * prompt + output fits blockSize + 1 tokens. Candidates may differ from turn to turn.
 */
export function packRlRun(turns: readonly StepRecord[], blockSize: number): number[] {
  const shown: number[] = [];
  const s0 = behaviourOf(turns[0]);
  for (let j = 0; j < turns.length; j++) {
    const r = turns[j];
    const prompt = r.promptTokenIds!;
    const out = r.outputTokenIds!;
    if (prompt.length + out.length > blockSize + 1 || !sameSampler(behaviourOf(r), s0)) break;
    if (j > 0) {
      const p = turns[j - 1];
      const prev = p.promptTokenIds!;
      const pout = p.outputTokenIds!;
      if (!startsWith(prompt, prev)) break;
      if (startsWith(prompt, pout, prev.length)) shown[j - 1] = pout.length;
      else if (prompt.length > prev.length + pout.length - 1 && startsWith(prompt, pout.slice(0, -1), prev.length)) shown[j - 1] = pout.length - 1;
      else break;
    }
    shown.push(out.length);
  }
  return shown;
}

/**
 * One sample for a packable run (`packRlRun`): prompt = the first turn's served prompt; output =
 * the rest of the last turn's prompt and its output (the last turn may be the reflection); `lossTargets` train each trained (kept)
 * turn's recorded output tokens at the positions the per-step sample trains them (a last token the
 * next prompt does not show at the first position of that prompt's tail), -1 elsewhere (the
 * observations between actions and untrained turns, which stay as context); `advantages` and
 * `oldLogprobs` carry each trained position's turn advantage and recorded logprob (0 elsewhere).
 */
export function packedRlSample(run: readonly ScoredRunTurn[], tok?: Pick<Tokenizer, 'encodeCandidate'>): TrainingSample {
  const r0 = run[0]!.r;
  const first = r0.promptTokenIds!;
  const packed = packRun(first, run.map((t) => ({ prompt: t.r.promptTokenIds!, output: t.r.outputTokenIds!, shown: t.shown, trained: t.kept })));
  const turns: PackedTurn[] = [];
  run.forEach((t, j) => {
    if (!t.kept) return;
    const cands = behaviourOf(t.r, tok).candidates;
    turns.push({
      step: t.r.step, ...(t.r.kind === 'reflection' ? { kind: 'reflection' as const } : {}), start: packed.starts[j], length: t.r.outputTokenIds!.length,
      advantage: t.advantage, return: t.return, ...(cands ? { candidates: cands } : {}),
    });
  });
  const head = turns[0]!;
  const { candidates: _, ...sampler } = behaviourOf(r0);
  return {
    sessionId: r0.sessionId, taskId: r0.taskId, attempt: r0.attempt, step: r0.step, kind: 'action',
    promptTokenIds: first, outputTokenIds: packed.tokens, lossTargets: packed.targets,
    advantages: packed.sources.map((s) => (s ? run[s.turn].advantage : 0)),
    oldLogprobs: packed.sources.map((s) => (s ? run[s.turn].r.logprobs![s.token] : 0)),
    packedTurns: turns, advantage: head.advantage, return: head.return, behaviour: sampler,
  };
}

/**
 * The per-step samples of a packed RL sample (`packedTurns`), exactly as `buildRlSamples` without
 * packing makes them: per trained turn (acting turns and a packed reflection), its kind, served
 * prompt, recorded output tokens, logprobs, advantage, return and behaviour. A sample without
 * `packedTurns` is returned as is.
 */
export function unpackSample(s: TrainingSample): TrainingSample[] {
  if (!s.packedTurns || !s.lossTargets) return [s];
  const { packedTurns, lossTargets, advantages: _a, ...rest } = s;
  const sampler = s.behaviour ? { temperature: s.behaviour.temperature, topP: s.behaviour.topP, topK: s.behaviour.topK } : null;
  return packedTurns.map((t) => ({
    ...rest,
    step: t.step,
    kind: t.kind ?? 'action',
    promptTokenIds: [...s.promptTokenIds, ...s.outputTokenIds.slice(0, t.start)],
    outputTokenIds: lossTargets.slice(t.start, t.start + t.length),
    oldLogprobs: s.oldLogprobs ? s.oldLogprobs.slice(t.start, t.start + t.length) : null,
    advantage: t.advantage,
    return: t.return,
    behaviour: sampler ? { ...sampler, ...(t.candidates ? { candidates: t.candidates } : {}) } : null,
  }));
}
