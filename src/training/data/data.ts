/**
 * Recorded sessions -> training samples (docs/method.md#advantages, docs/architecture.md "Training data layout").
 *
 * RL (`lamer`, `gigpo`, `grpo`, `rloo`): from step records shaped like the server's `steps` table
 * (src/db/schema.ts), one record per posted observation (kind 'action', carrying the sampled action
 * unless the attempt ended there) plus one 'reflection' record per reflection turn. Token ids and
 * logprobs are used as stored (training never re-tokenises). Built here (`buildRlSamples`), packed
 * by rl-packing.ts.
 *
 * SFT (`sft`): from demonstration sessions, sft-data.ts.
 *
 * The entry point of training data: the shared types and helpers (samples.ts), RL packing and SFT
 * data are re-exported from here.
 */
import { computeAdvantages, type Estimator, type Turn } from '../maths/advantages.js';
import type { ReturnConfig } from '../maths/returns.js';
import { packedRlSample, packRlRun } from './rl-packing.js';
import { attemptOutcomes, behaviourOf, reflectionTokens, sessionOutcomes, trainedTokens, type DataStats, type SampleOutcome, type StepRecord, type TrainingSample, type TurnScore } from './samples.js';

export {
  attemptOutcomes, behaviourOf, reflectionTokens, sessionOutcomes, trainedTokens,
  type Behaviour, type DataStats, type PackedTurn, type SampleOutcome, type SamplerSettings, type StepRecord, type TrainingSample, type TurnScore,
} from './samples.js';
export { unpackSample } from './rl-packing.js';
export { buildSftSamples, parseDemoJsonl, type DemoAttempt, type DemoSession, type DemoStep, type SftDataOptions } from './sft-data.js';

import type { ReflectionGroup, RlAlgorithm } from '../../domain.js';
import type { Tokenizer } from '../../model/tokenizers.js';

export type { Algorithm, RlAlgorithm } from '../../domain.js';

/** Options of `buildRlSamples`. */
export interface RlDataOptions {
  algorithm: RlAlgorithm;
  returns: ReturnConfig;
  invalidPenalty?: number;
  stepCoef?: number;
  /** GiGPO's episode-term baseline for reflections (../maths/advantages.ts AdvantageOptions; default 'task'). */
  reflectionGroup?: ReflectionGroup;
  /** Pack each attempt's acting turns into one sample where the recorded prompts allow it (default
   *  true; see `buildRlSamples`). Needs `blockSize`: without it nothing is packed. */
  pack?: boolean;
  /** The model's context length (GPTConfig.block_size): a packed sequence holds at most
   *  blockSize + 1 tokens (makeBatch trains on at most blockSize positions). */
  blockSize?: number;
  /** The trained version's tokenizer, to encode recorded candidates as it served them (default byte). */
  tokenizer?: Tokenizer;
}

const ESTIMATOR: Record<RlAlgorithm, Estimator> = { lamer: 'gigpo', gigpo: 'gigpo', grpo: 'grpo', rloo: 'rloo' };

/**
 * Build RL samples: turn records into turns (the reward of the action at step t is the `reward`
 * posted with step t+1 of the same attempt; its invalid flag likewise), compute returns and
 * advantages (LaMer: GiGPO over cross-episode returns; baselines: every attempt is its own
 * episode, gamma_traj plays no role and reflection turns are not trained). Groups whose advantages
 * are all 0 are trained like the others (counted in `zeroAdvantageGroups`); only reflections with
 * no recorded next attempt are left out (`droppedTurns`).
 *
 * Packing (`pack`, default, with `blockSize`): the acting prompt is append-only and the
 * reflection prompt continues the attempt's last acting prompt (src/agent/prompt.ts), so per
 * attempt the longest run of its acting turns from the first, then its reflection (LaMer), whose
 * recorded prompts extend each other (`packRlRun`: exact token-id comparison, same sampler
 * settings, fits the block) becomes one sample (`packedRlSample`) with per-token `advantages`,
 * `oldLogprobs` and `lossTargets` and the turns' kinds and candidates in `packedTurns`: the same
 * per-token losses and gradient as the per-step samples at O(k) instead of O(k^2) positions. The
 * reflection joins only a run holding every acting turn of the attempt (it is the last turn
 * compared). Turns not kept inside the run stay as untrained context; a run needs two kept turns.
 * Every other turn, and a reflection whose prompt does not extend the run (steps dropped from its
 * smaller prompt budget, another sampler), is a per-step sample (prompt + output). `scores` are
 * per turn either way.
 * @throws RangeError when a record has output token ids but no logprobs of the same length.
 */
export function buildRlSamples(records: readonly StepRecord[], opts: RlDataOptions): { samples: TrainingSample[]; stats: DataStats; scores: TurnScore[] } {
  const multiAttempt = opts.algorithm === 'lamer';
  const beh = (r: StepRecord) => behaviourOf(r, opts.tokenizer);
  const { turns, sources } = turnsOf(records, multiAttempt);
  const adv = computeAdvantages(turns, {
    estimator: ESTIMATOR[opts.algorithm],
    returns: multiAttempt ? opts.returns : { ...opts.returns, gammaTraj: 0 },
    invalidPenalty: opts.invalidPenalty,
    stepCoef: opts.stepCoef,
    reflectionGroup: opts.reflectionGroup,
  });
  const samples: TrainingSample[] = [];
  const scores: TurnScore[] = [];
  const outcomesOf = attemptOutcomes(records);
  const packedAt = (opts.pack ?? true) && opts.blockSize !== undefined ? packedRuns(sources, adv.turns, opts.blockSize, outcomesOf, beh) : new Map<number, TrainingSample | null>();
  adv.turns.forEach((a, i) => {
    const r = sources[i];
    scores.push({ sessionId: r.sessionId, attempt: r.attempt, step: r.step, kind: r.kind, return: a.return, advantage: a.advantage, kept: a.kept });
    const packed = packedAt.get(i);
    if (packed) samples.push(packed);
    if (packed !== undefined || !a.kept) return;
    samples.push({
      sessionId: r.sessionId, taskId: r.taskId, attempt: r.attempt, step: r.step, kind: r.kind,
      promptTokenIds: r.promptTokenIds!, outputTokenIds: r.outputTokenIds!, oldLogprobs: r.logprobs,
      advantage: a.advantage, return: a.return, behaviour: beh(r), outcome: outcomeOf(outcomesOf, r),
    });
  });
  const outcomes = sessionOutcomes(records);
  return {
    samples,
    scores,
    stats: {
      sessions: outcomes.sessions,
      tasks: new Set(records.map((r) => r.taskId)).size,
      turns: turns.length,
      samples: samples.length,
      groups: adv.groups,
      zeroAdvantageGroups: adv.zeroAdvantageGroups,
      zeroAdvantageTurns: adv.zeroAdvantageTurns,
      droppedTurns: adv.droppedTurns,
      meanReturn: outcomes.meanReturn,
      passAtK: outcomes.passAtK,
      outputTokens: samples.reduce((n, s) => n + trainedTokens(s), 0),
      reflectionTokens: samples.reduce((n, s) => n + reflectionTokens(s), 0),
    },
  };
}

/**
 * The turns of `buildRlSamples` and the record of each (`sources[i]` is turn i's): records with
 * output tokens, each with the reward and invalid flag posted with the next step of its attempt;
 * reflections only when `multiAttempt` (LaMer), else every attempt is its own episode.
 * @throws RangeError when a record has output token ids but no logprobs of the same length.
 */
function turnsOf(records: readonly StepRecord[], multiAttempt: boolean): { turns: Turn[]; sources: StepRecord[] } {
  const obsRows = new Map<string, StepRecord>(); // key session/attempt/step -> observation record
  const key = (s: string, a: number, t: number) => `${s}\u0000${a}\u0000${t}`;
  for (const r of records) if (r.kind === 'action') obsRows.set(key(r.sessionId, r.attempt, r.step), r);
  const turns: Turn[] = [];
  const sources: StepRecord[] = [];
  for (const r of records) {
    if (r.outputTokenIds === null || r.promptTokenIds === null || r.outputTokenIds.length === 0) continue;
    if (r.logprobs === null || r.logprobs.length !== r.outputTokenIds.length) {
      throw new RangeError(`step ${r.sessionId}/${r.attempt}/${r.step} (${r.kind}): logprobs missing or not [outLen]`);
    }
    if (r.kind === 'reflection' && !multiAttempt) continue;
    const next = r.kind === 'action' ? obsRows.get(key(r.sessionId, r.attempt, r.step + 1)) : undefined;
    turns.push({
      taskId: r.taskId,
      // single-attempt baselines: each attempt is an independent episode
      sessionId: multiAttempt ? r.sessionId : `${r.sessionId}#${r.attempt}`,
      attempt: multiAttempt ? r.attempt : 0,
      step: r.step,
      kind: r.kind,
      observation: r.observation,
      reward: next ? next.reward : 0,
      invalidAction: next ? next.invalidAction : false,
    });
    sources.push(r);
  }
  return { turns, sources };
}

/**
 * Packing of `buildRlSamples`: per attempt, its acting turns in step order then its reflection,
 * the longest run whose recorded prompts extend each other (`packRlRun`) with at least two kept
 * turns becomes one packed sample.
 * @returns turn index -> the packed sample that replaces it (its run's first turn) or null (a
 *   later turn of a run: trained inside that sample); turns not in the map stay per-step samples.
 */
function packedRuns(
  sources: readonly StepRecord[], advTurns: ReadonlyArray<{ kept: boolean; advantage: number; return: number }>, blockSize: number,
  outcomesOf: ReturnType<typeof attemptOutcomes>, beh: (r: StepRecord) => ReturnType<typeof behaviourOf>,
): Map<number, TrainingSample | null> {
  const packedAt = new Map<number, TrainingSample | null>();
  const byAttempt = new Map<string, number[]>();
  const reflectionOf = new Map<string, number>();
  sources.forEach((r, i) => {
    const k = `${r.sessionId}\u0000${r.attempt}`;
    if (r.kind === 'reflection') { reflectionOf.set(k, i); return; }
    const list = byAttempt.get(k);
    if (list) list.push(i); else byAttempt.set(k, [i]);
  });
  for (const [k, list] of byAttempt) {
    list.sort((x, y) => sources[x].step - sources[y].step);
    // the reflection after the attempt comes last: its prompt continues the last acting prompt
    const refl = reflectionOf.get(k);
    if (refl !== undefined) list.push(refl);
    const run = packRlRun(list.map((i) => sources[i]), blockSize, beh);
    // trailing turns that are not trained add nothing; a run needs two trained turns to pay
    while (run.length > 0 && !advTurns[list[run.length - 1]].kept) run.pop();
    // the run's last turn shows its whole output: a last token (EOS) left for a dropped next
    // turn's tail to train would otherwise not be trained at all
    if (run.length > 0) run[run.length - 1] = sources[list[run.length - 1]].outputTokenIds!.length;
    const idx = list.slice(0, run.length);
    if (idx.filter((i) => advTurns[i].kept).length < 2) continue;
    const packed = packedRlSample(idx.map((i, j) => ({ r: sources[i], shown: run[j], kept: advTurns[i].kept, advantage: advTurns[i].advantage, return: advTurns[i].return })), beh);
    packed.outcome = outcomeOf(outcomesOf, sources[idx[0]]);
    idx.forEach((i, j) => packedAt.set(i, j === 0 ? packed : null));
  }
  return packedAt;
}

/** The outcome of a record's attempt and session, from `attemptOutcomes`. */
function outcomeOf(m: ReturnType<typeof attemptOutcomes>, r: Pick<StepRecord, 'sessionId' | 'attempt'>): SampleOutcome {
  const s = m.get(r.sessionId);
  return { attemptReturn: s?.returns.get(r.attempt) ?? 0, firstSuccess: s?.firstSuccess ?? null };
}
