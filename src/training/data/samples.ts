/**
 * The shapes of training data and small facts about them (docs/method.md#returns,
 * docs/architecture.md "Training data layout"): a recorded step (`StepRecord`, a row of the
 * server's `steps` table), the behaviour policy of a recorded output, a trainable sample
 * (`TrainingSample`, packed or one turn), what the job writes back per turn and the stats of a data
 * set; plus the per-session outcomes of recorded steps, a record's behaviour policy and the tokens
 * a sample trains. The leaf of the data modules: the RL builder (data.ts), RL packing
 * (rl-packing.ts) and SFT data (sft-data.ts) build on it; import from data.ts, which re-exports all
 * of it.
 */
import { passAtKRate } from '../../shared/passk.js';
import { BYTE_TOKENIZER, type Tokenizer } from '../../model/tokenizers.js';
import type { TurnKind } from '../maths/advantages.js';

/** One recorded step (a row of the `steps` table joined with its session's taskId). */
export interface StepRecord {
  sessionId: string;
  taskId: string;
  attempt: number;
  step: number;
  kind: TurnKind;
  observation: string;
  /** Reward of the previous action, as given by the environment (0 at step 0). */
  reward: number;
  done: boolean;
  success: boolean;
  /** The env rejected the previous action. */
  invalidAction: boolean;
  /** `[promptLen]`, null when no model call was made (e.g. the final observation of an attempt). */
  promptTokenIds: number[] | null;
  /** `[outLen]`, null when no model call was made. */
  outputTokenIds: number[] | null;
  /** `[outLen]` logprobs of the output tokens as sampled, or null. */
  logprobs: number[] | null;
  modelVersion: string;
  /** The sampling settings (temperature, top-p, top-k) that produced the output: a turn's own
   *  (src/agent/turns.ts TurnRecord.sampling), else the session's; absent or null: 1 / 1 / 0. */
  sampling?: SamplerSettings | null;
  /** The step's availableActions (action records), when the answer was constrained to them. */
  availableActions?: string[] | null;
}

/** What the sampler of a recorded output used (docs/protocol.md "Create a session" `sampling`, without the seed). */
export interface SamplerSettings {
  temperature: number;
  topP: number;
  topK: number;
}

/**
 * The behaviour policy of a recorded output, as src/model/sampling.ts samplingLogprobs defines it:
 * the model's logits / temperature, restricted to the candidates' trie (when `candidates`), then
 * top-k and top-p, renormalised. The training job recomputes this distribution (job.ts).
 */
export interface Behaviour extends SamplerSettings {
  /** Token ids of each allowed candidate (its bytes + EOS), when the output was constrained. */
  candidates?: number[][];
}

/** One trainable sequence: prompt + output, with the output's advantage. */
export interface TrainingSample {
  sessionId: string;
  taskId: string;
  attempt: number;
  step: number;
  kind: TurnKind;
  promptTokenIds: number[];
  outputTokenIds: number[];
  /** Logprobs of the output tokens under the sampling policy, `[outLen]`; null for SFT. */
  oldLogprobs: number[] | null;
  /** Packed SFT samples (several actions of one attempt in one sequence, `buildSftSamples`):
   *  `[outLen]`, the token trained at the position that predicts output token i: the token itself
   *  inside an action, EOS right after an action (where the sequence goes on with the next
   *  observation), -1 (not trained) for the observations between actions. Absent or null: every
   *  output token is trained as its own target (src/training/data/batch.ts makeBatch). */
  lossTargets?: number[] | null;
  /** The sampler's policy (RL samples); absent or null: temperature 1, no truncation, free text. */
  behaviour?: Behaviour | null;
  /** How the sample's session went, for per-iteration metrics of the rollouts a minibatch trains on. */
  outcome?: SampleOutcome;
  /** Packed RL samples (`buildRlSamples`): `[outLen]`, the advantage of the turn whose output token
   *  position i trains (0 where `lossTargets` is -1). Absent or null: `advantage` for every token. */
  advantages?: number[] | null;
  /** Packed RL samples: the trained turns in the sequence, in order (see `PackedTurn`); with
   *  `lossTargets`, `advantages` and `oldLogprobs` they give back each turn's per-step sample
   *  exactly (`unpackSample`). Absent or null: the sample is one turn. */
  packedTurns?: PackedTurn[] | null;
  /** Per-turn advantage (0 for SFT; a packed RL sample: its first trained turn's). */
  advantage: number;
  /** Cross-episode return (0 for SFT). */
  return: number;
}

/**
 * One trained acting turn inside a packed RL sample: output positions start .. start + length - 1
 * (indices into `outputTokenIds`, `lossTargets`, `advantages`, `oldLogprobs`) train the turn's
 * recorded output tokens, `lossTargets.slice(start, start + length)`; its served prompt is
 * `promptTokenIds ++ outputTokenIds.slice(0, start)`.
 */
export interface PackedTurn {
  step: number;
  /** 'reflection' for the reflection written after the attempt (packed last, when its recorded
   *  prompt extends the attempt's sequence); absent: an acting turn. */
  kind?: TurnKind;
  start: number;
  length: number;
  advantage: number;
  return: number;
  /** Token ids of the step's allowed candidates (its bytes + EOS), when the output was constrained
   *  (never for a reflection: free text). */
  candidates?: number[][];
}

/** The outcome of a sample's attempt and session (undiscounted env rewards). */
export interface SampleOutcome {
  /** Sum of the rewards of the sample's attempt. */
  attemptReturn: number;
  /** 0-based index of the session's first successful attempt, or null. */
  firstSuccess: number | null;
}

/** What the job writes back to the steps table: the trajectory shows returns and advantages
 *  (docs/protocol.md "List, close, trajectory, memory, stats"). */
export interface TurnScore {
  sessionId: string;
  attempt: number;
  step: number;
  kind: TurnKind;
  return: number;
  advantage: number;
  kept: boolean;
}

/** Stats of a training data set, reported with every iteration and stored in the checkpoint. */
export interface DataStats {
  sessions: number;
  tasks: number;
  /** Turns with a model output (RL: those of the algorithm; baselines train no reflection). */
  turns: number;
  /** Training samples (sequences; a packed sample holds several turns). */
  samples: number;
  /** Advantage groups (task ids) seen; 0 for SFT. */
  groups: number;
  /** Groups in which every advantage is 0 (no policy-gradient signal); kept and trained, they
   *  only dilute the token mean. */
  zeroAdvantageGroups: number;
  /** Turns in those groups. */
  zeroAdvantageTurns: number;
  /** Turns not trained: reflections with no recorded next attempt (no return to credit). */
  droppedTurns: number;
  /** Mean undiscounted return of an attempt, over all recorded attempts. */
  meanReturn: number;
  /** pass@k of the data: fraction of sessions solved within the first k attempts, k = 1..maxAttempts. */
  passAtK: Record<string, number>;
  /** Output tokens in the kept samples. */
  outputTokens: number;
  /** Of those, the output tokens of reflection turns (RL; 0 for data without reflections). */
  reflectionTokens?: number;
}

/** Per session: each attempt's return and the first successful attempt (from observation records). */
export function attemptOutcomes(records: readonly StepRecord[]): Map<string, { returns: Map<number, number>; firstSuccess: number | null }> {
  const out = new Map<string, { returns: Map<number, number>; firstSuccess: number | null }>();
  for (const r of records) {
    if (r.kind !== 'action') continue;
    let s = out.get(r.sessionId);
    if (!s) out.set(r.sessionId, (s = { returns: new Map(), firstSuccess: null }));
    s.returns.set(r.attempt, (s.returns.get(r.attempt) ?? 0) + r.reward);
    if (r.done && r.success && (s.firstSuccess === null || r.attempt < s.firstSuccess)) s.firstSuccess = r.attempt;
  }
  return out;
}

/** pass@k and mean attempt return of recorded sessions, from their observation records. */
export function sessionOutcomes(records: readonly StepRecord[]): { meanReturn: number; passAtK: Record<string, number>; sessions: number } {
  const bySession = new Map<string, Map<number, { ret: number; success: boolean }>>();
  for (const r of records) {
    if (r.kind !== 'action') continue;
    let attempts = bySession.get(r.sessionId);
    if (!attempts) bySession.set(r.sessionId, (attempts = new Map()));
    const a = attempts.get(r.attempt) ?? { ret: 0, success: false };
    a.ret += r.reward; // attempt return = sum of rewards as given by the env
    if (r.done && r.success) a.success = true;
    attempts.set(r.attempt, a);
  }
  let maxAttempts = 0;
  let sumRet = 0;
  let nAttempts = 0;
  for (const attempts of bySession.values()) {
    for (const [n, a] of attempts) { maxAttempts = Math.max(maxAttempts, n + 1); sumRet += a.ret; nAttempts++; }
  }
  // Attempts in order by number (an attempt with no record counts as failed), for src/shared/passk.ts.
  const ordered = [...bySession.values()].map((attempts) => Array.from({ length: maxAttempts }, (_, n) => ({ success: attempts.get(n)?.success ?? false })));
  const passAtK = passAtKRate(ordered, maxAttempts);
  return { meanReturn: nAttempts > 0 ? sumRet / nAttempts : 0, passAtK, sessions: bySession.size };
}

/**
 * The behaviour policy of a record's output: its sampling (a turn's own, else its session's), its
 * step's candidates as the serving version's tokenizer encodes them (`tokenizer`, default byte; the job passes its base
 * checkpoint's, src/model/checkpoint.ts checkpointText).
 */
export function behaviourOf(r: Pick<StepRecord, 'kind' | 'sampling' | 'availableActions'>, tokenizer: Pick<Tokenizer, 'encodeCandidate'> = BYTE_TOKENIZER): Behaviour {
  const s = r.sampling ?? { temperature: 1, topP: 1, topK: 0 };
  const b: Behaviour = { temperature: s.temperature, topP: s.topP, topK: s.topK };
  if (r.kind === 'action' && r.availableActions && r.availableActions.length > 0) b.candidates = r.availableActions.map((a) => tokenizer.encodeCandidate(a));
  return b;
}

/**
 * Output tokens of reflection turns in a sample: all it trains for a sample of kind 'reflection',
 * a packed sample's reflection turns' lengths, else 0.
 */
export function reflectionTokens(s: Pick<TrainingSample, 'kind' | 'outputTokenIds' | 'lossTargets' | 'packedTurns'>): number {
  if (s.packedTurns) return s.packedTurns.reduce((n, t) => n + (t.kind === 'reflection' ? t.length : 0), 0);
  return s.kind === 'reflection' ? trainedTokens(s) : 0;
}

/** Output tokens a sample trains: those its `lossTargets` trains (>= 0), else all of them. */
export function trainedTokens(s: Pick<TrainingSample, 'outputTokenIds' | 'lossTargets'>): number {
  return s.lossTargets ? s.lossTargets.filter((x) => x >= 0).length : s.outputTokenIds.length;
}

