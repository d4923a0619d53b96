/**
 * Recorded sessions -> training samples (shared/LAMER.md §2-3, shared/DESIGN.md §4).
 *
 * RL (`lamer`, `gigpo`, `grpo`, `rloo`): from step records shaped like the server's `steps` table
 * (src/db/schema.ts), one record per posted observation (kind 'action', carrying the sampled action
 * unless the attempt ended there) plus one 'reflection' record per reflection turn. Token ids and
 * logprobs are used as stored (training never re-tokenises).
 *
 * SFT (`sft`): from demonstration sessions (`DemoSession` below, written by src/envs/demos.ts), rendered with the
 * serving prompts (src/agent/prompt.ts) and the builtin byte tokenizer (src/model/tokenizer.ts).
 */
import { passAtKRate } from '../agent/passk.js';
import { renderActPrompt, renderReflectionPrompt, type PromptAttempt, type PromptStep } from '../agent/prompt.js';
import { DEFAULT_LIMITS } from '../model/sampling.js';
import { encode, encodeCandidate, encodePrompt, EOS } from '../model/tokenizer.js';
import { computeAdvantages, type Estimator, type Turn, type TurnKind } from './advantages.js';
import type { ReturnConfig } from './returns.js';

/**
 * One step of a demonstration: the observation the env posted, the action taken (null at the last
 * step), the reward of the previous action (0 at step 0), and whether the attempt ended / succeeded.
 */
export interface DemoStep {
  observation: string;
  action: string | null;
  reward: number;
  done: boolean;
  success: boolean;
}

/** One attempt of a demonstration; `reflection` follows a failed attempt when another follows, else null. */
export interface DemoAttempt {
  steps: DemoStep[];
  reflection: string | null;
}

/**
 * A demonstration session, one JSON object per line of the SFT demonstration file (written by
 * `lamer demos`, src/envs/demos.ts; read by `parseDemoJsonl`).
 */
export interface DemoSession {
  env: string;
  taskId: string;
  instructions: string;
  memory: 'reflection_only';
  attempts: DemoAttempt[];
}

export type RlAlgorithm = 'lamer' | 'gigpo' | 'grpo' | 'rloo';
export type Algorithm = RlAlgorithm | 'sft';

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
  /** The session's sampling settings (temperature, top-p, top-k); absent or null: 1 / 1 / 0. */
  sampling?: SamplerSettings | null;
  /** The step's availableActions (action records), when the answer was constrained to them. */
  availableActions?: string[] | null;
}

/** What the sampler of a recorded output used (shared/DESIGN.md §2 `sampling`, without the seed). */
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
   *  output token is trained as its own target (src/training/batch.ts makeBatch). */
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

/** What the job writes back to the steps table (DESIGN §3: trajectory shows returns and advantages). */
export interface TurnScore {
  sessionId: string;
  attempt: number;
  step: number;
  kind: TurnKind;
  return: number;
  advantage: number;
  kept: boolean;
}

export interface DataStats {
  sessions: number;
  tasks: number;
  /** Turns with a model output before skipping. */
  turns: number;
  /** Samples kept for training. */
  samples: number;
  groups: number;
  skippedGroups: number;
  skippedTurns: number;
  /** Mean undiscounted return of an attempt, over all recorded attempts. */
  meanReturn: number;
  /** pass@k of the data: fraction of sessions solved within the first k attempts, k = 1..maxAttempts. */
  passAtK: Record<string, number>;
  /** Output tokens in the kept samples. */
  outputTokens: number;
}

export interface RlDataOptions {
  algorithm: RlAlgorithm;
  returns: ReturnConfig;
  invalidPenalty?: number;
  stepCoef?: number;
  /** Pack each attempt's acting turns into one sample where the recorded prompts allow it (default
   *  true; see `buildRlSamples`). Needs `blockSize`: without it nothing is packed. */
  pack?: boolean;
  /** The model's context length (GPTConfig.block_size): a packed sequence holds at most
   *  blockSize + 1 tokens (makeBatch trains on at most blockSize positions). */
  blockSize?: number;
}

const ESTIMATOR: Record<RlAlgorithm, Estimator> = { lamer: 'gigpo', gigpo: 'gigpo', grpo: 'grpo', rloo: 'rloo' };

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
  // Attempts in order by number (an attempt with no record counts as failed), for src/agent/passk.ts.
  const ordered = [...bySession.values()].map((attempts) => Array.from({ length: maxAttempts }, (_, n) => ({ success: attempts.get(n)?.success ?? false })));
  const passAtK = passAtKRate(ordered, maxAttempts);
  return { meanReturn: nAttempts > 0 ? sumRet / nAttempts : 0, passAtK, sessions: bySession.size };
}

/**
 * Build RL samples: turn records into turns (the reward of the action at step t is the `reward`
 * posted with step t+1 of the same attempt; its invalid flag likewise), compute returns and
 * advantages (LaMer: GiGPO over cross-episode returns; baselines: every attempt is its own
 * episode, gamma_traj plays no role and reflection turns are not trained), and drop groups without
 * signal.
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
  const adv = computeAdvantages(turns, {
    estimator: ESTIMATOR[opts.algorithm],
    returns: multiAttempt ? opts.returns : { ...opts.returns, gammaTraj: 0 },
    invalidPenalty: opts.invalidPenalty,
    stepCoef: opts.stepCoef,
  });
  const samples: TrainingSample[] = [];
  const scores: TurnScore[] = [];
  const outcomesOf = attemptOutcomes(records);
  // packing: turn index -> the packed sample that replaces it (its run's first turn) or null (a
  // later turn of a run: trained inside that sample)
  const packedAt = new Map<number, TrainingSample | null>();
  if ((opts.pack ?? true) && opts.blockSize !== undefined) {
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
      const run = packRlRun(list.map((i) => sources[i]), opts.blockSize);
      // trailing turns that are not trained add nothing; a run needs two trained turns to pay
      while (run.length > 0 && !adv.turns[list[run.length - 1]].kept) run.pop();
      const idx = list.slice(0, run.length);
      if (idx.filter((i) => adv.turns[i].kept).length < 2) continue;
      const packed = packedRlSample(idx.map((i, j) => ({ r: sources[i], shown: run[j], kept: adv.turns[i].kept, advantage: adv.turns[i].advantage, return: adv.turns[i].return })));
      packed.outcome = outcomeOf(outcomesOf, sources[idx[0]]);
      idx.forEach((i, j) => packedAt.set(i, j === 0 ? packed : null));
    }
  }
  adv.turns.forEach((a, i) => {
    const r = sources[i];
    scores.push({ sessionId: r.sessionId, attempt: r.attempt, step: r.step, kind: r.kind, return: a.return, advantage: a.advantage, kept: a.kept });
    const packed = packedAt.get(i);
    if (packed) samples.push(packed);
    if (packed !== undefined || !a.kept) return;
    samples.push({
      sessionId: r.sessionId, taskId: r.taskId, attempt: r.attempt, step: r.step, kind: r.kind,
      promptTokenIds: r.promptTokenIds!, outputTokenIds: r.outputTokenIds!, oldLogprobs: r.logprobs,
      advantage: a.advantage, return: a.return, behaviour: behaviourOf(r), outcome: outcomeOf(outcomesOf, r),
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
      skippedGroups: adv.skippedGroups,
      skippedTurns: adv.skippedTurns,
      meanReturn: outcomes.meanReturn,
      passAtK: outcomes.passAtK,
      outputTokens: samples.reduce((n, s) => n + trainedTokens(s), 0),
    },
  };
}

/** Output tokens a sample trains: those its `lossTargets` trains (>= 0), else all of them. */
export function trainedTokens(s: Pick<TrainingSample, 'outputTokenIds' | 'lossTargets'>): number {
  return s.lossTargets ? s.lossTargets.filter((x) => x >= 0).length : s.outputTokenIds.length;
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
function packRlRun(turns: readonly StepRecord[], blockSize: number): number[] {
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
function packedRlSample(run: ReadonlyArray<{ r: StepRecord; shown: number; kept: boolean; advantage: number; return: number }>): TrainingSample {
  const r0 = run[0]!.r;
  const first = r0.promptTokenIds!;
  const seq: number[] = [];
  const targets: number[] = [];
  const advs: number[] = [];
  const lps: number[] = [];
  const turns: PackedTurn[] = [];
  const put = (at: number, target: number, a: number, lp: number) => { targets[at] = target; advs[at] = a; lps[at] = lp; };
  let pending: { target: number; advantage: number; lp: number } | null = null;
  for (const t of run) {
    const prompt = t.r.promptTokenIds!;
    const out = t.r.outputTokenIds!;
    const lp = t.r.logprobs!;
    const ctx = prompt.slice(first.length + seq.length);
    const ctxAt = seq.length;
    for (const id of ctx) { seq.push(id); put(seq.length - 1, -1, 0, 0); }
    if (pending) put(ctxAt, pending.target, pending.advantage, pending.lp); // the previous turn's unshown last token
    pending = null;
    const start = seq.length;
    for (let k = 0; k < t.shown; k++) {
      seq.push(out[k]);
      if (t.kept) put(seq.length - 1, out[k], t.advantage, lp[k]); else put(seq.length - 1, -1, 0, 0);
    }
    if (t.shown < out.length && t.kept) pending = { target: out[out.length - 1], advantage: t.advantage, lp: lp[out.length - 1] };
    if (t.kept) {
      const cands = behaviourOf(t.r).candidates;
      turns.push({
        step: t.r.step, ...(t.r.kind === 'reflection' ? { kind: 'reflection' as const } : {}), start, length: out.length,
        advantage: t.advantage, return: t.return, ...(cands ? { candidates: cands } : {}),
      });
    }
  }
  const head = turns[0]!;
  const { candidates: _, ...sampler } = behaviourOf(r0);
  return {
    sessionId: r0.sessionId, taskId: r0.taskId, attempt: r0.attempt, step: r0.step, kind: 'action',
    promptTokenIds: first, outputTokenIds: seq, lossTargets: targets, advantages: advs, oldLogprobs: lps, packedTurns: turns,
    advantage: head.advantage, return: head.return, behaviour: sampler,
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

function outcomeOf(m: ReturnType<typeof attemptOutcomes>, r: Pick<StepRecord, 'sessionId' | 'attempt'>): SampleOutcome {
  const s = m.get(r.sessionId);
  return { attemptReturn: s?.returns.get(r.attempt) ?? 0, firstSuccess: s?.firstSuccess ?? null };
}

/** The behaviour policy of a record's output: its session's sampling, its step's candidates. */
export function behaviourOf(r: Pick<StepRecord, 'kind' | 'sampling' | 'availableActions'>): Behaviour {
  const s = r.sampling ?? { temperature: 1, topP: 1, topK: 0 };
  const b: Behaviour = { temperature: s.temperature, topP: s.topP, topK: s.topK };
  if (r.kind === 'action' && r.availableActions && r.availableActions.length > 0) b.candidates = r.availableActions.map(encodeCandidate);
  return b;
}

export interface SftDataOptions {
  /** The model's context length (GPTConfig.block_size). Prompts get the budget the builtin engine
   *  gives them: blockSize - maxActionTokens (acting) or blockSize - maxReflectionTokens. */
  blockSize: number;
  /** Default: src/model/sampling.ts DEFAULT_LIMITS (48 / 256). */
  maxActionTokens?: number;
  maxReflectionTokens?: number;
  /** Prepended to each action/reflection before encoding. Default '' (the engine scores candidates
   *  as their bytes + EOS right after the cue "Action: ", src/model/tokenizer.ts encodeCandidate). */
  outputPrefix?: string;
  /** Pack each attempt's acting steps into one sequence (default true; only with an empty
   *  `outputPrefix`, whose actions are then exactly the text the next prompt shows). */
  pack?: boolean;
}

/** Parse JSONL text into demonstration sessions. @throws SyntaxError naming the bad line. */
export function parseDemoJsonl(text: string): DemoSession[] {
  const out: DemoSession[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    let d: DemoSession;
    try { d = JSON.parse(line) as DemoSession; } catch (e) { throw new SyntaxError(`demo JSONL line ${i + 1}: ${(e as Error).message}`); }
    if (typeof d.instructions !== 'string' || !Array.isArray(d.attempts)) throw new SyntaxError(`demo JSONL line ${i + 1}: not a DemoSession`);
    out.push(d);
  });
  return out;
}

/**
 * SFT samples from demonstrations: every step with an action trains (acting prompt -> action + EOS)
 * and every reflection (reflection prompt -> reflection + EOS), rendered and fitted to the context
 * exactly as when serving.
 *
 * Packing (`pack`, default): the acting prompt is append-only (src/agent/prompt.ts: prompt(t+1) =
 * prompt(t) + action_t + tail(t+1)), so one sequence BOS + head + step 0 + action 0 + ... + action k
 * + EOS holds the served prompt of every step 0..k as a prefix. Per attempt the longest run of
 * steps from the first whose served prompts drop nothing and whose sequence fits the block becomes
 * one sample, with `lossTargets` training each action's tokens and, at its last token, EOS (what
 * the per-step sample trains there): the same per-token losses as the per-step samples at O(k)
 * instead of O(k^2) tokens. The attempt's remaining steps are per-step samples as served
 * (encodePrompt). Reflection samples stay separate.
 * @throws RangeError when blockSize leaves no room for a prompt.
 */
export function buildSftSamples(demos: readonly DemoSession[], opts: SftDataOptions): { samples: TrainingSample[]; stats: DataStats } {
  const prefix = opts.outputPrefix ?? '';
  const actBudget = opts.blockSize - (opts.maxActionTokens ?? DEFAULT_LIMITS.maxActionTokens);
  const reflBudget = opts.blockSize - (opts.maxReflectionTokens ?? DEFAULT_LIMITS.maxReflectionTokens);
  if (!(actBudget >= 2 && reflBudget >= 2)) throw new RangeError(`blockSize ${opts.blockSize} leaves no room for prompts`);
  const samples: TrainingSample[] = [];
  const records: StepRecord[] = [];
  const pack = (opts.pack ?? true) && prefix === '';
  let turns = 0;
  demos.forEach((d, di) => {
    const sessionId = `demo-${di}`;
    const previousAttempts: PromptAttempt[] = [];
    d.attempts.forEach((att, n) => {
      const done: PromptStep[] = [];
      const acts: Array<{ step: number; prompt: number[]; action: string; exact: boolean }> = [];
      att.steps.forEach((s, t) => {
        records.push({ sessionId, taskId: d.taskId, attempt: n, step: t, kind: 'action', observation: s.observation, reward: s.reward, done: s.done, success: s.success, invalidAction: false, promptTokenIds: null, outputTokenIds: null, logprobs: null, modelVersion: 'demo' });
        if (s.action === null) return;
        const parts = renderActPrompt({ instructions: d.instructions, memory: d.memory ?? 'reflection_only', attempt: n, previousAttempts, steps: done, observation: s.observation });
        const enc = encodePrompt(parts, actBudget);
        acts.push({ step: t, prompt: enc.ids, action: prefix + s.action, exact: enc.droppedSteps === 0 && enc.truncatedChars === 0 });
        done.push({ observation: s.observation, action: s.action });
      });
      turns += acts.length;
      const packed = pack ? packSteps(acts, opts.blockSize) : 0;
      if (packed > 0) samples.push(packedSample(sessionId, d.taskId, n, acts.slice(0, packed)));
      for (const a of acts.slice(packed)) samples.push(sftSample(sessionId, d.taskId, n, a.step, 'action', a.prompt, a.action));
      const last = att.steps[att.steps.length - 1];
      const success = att.steps.some((s) => s.success);
      if (att.reflection !== null && last) {
        const parts = renderReflectionPrompt({ instructions: d.instructions, memory: d.memory ?? 'reflection_only', attempt: n, previousAttempts, steps: done, finalObservation: last.observation });
        samples.push(sftSample(sessionId, d.taskId, n, att.steps.length - 1, 'reflection', encodePrompt(parts, reflBudget).ids, prefix + att.reflection));
        turns++;
      }
      previousAttempts.push({ steps: done, finalObservation: last ? last.observation : '', success, reflection: att.reflection });
    });
  });
  const outcomes = sessionOutcomes(records);
  return {
    samples,
    stats: {
      sessions: demos.length, tasks: new Set(demos.map((d) => d.taskId)).size, turns, samples: samples.length,
      groups: 0, skippedGroups: 0, skippedTurns: 0, meanReturn: outcomes.meanReturn, passAtK: outcomes.passAtK,
      outputTokens: samples.reduce((n, s) => n + trainedTokens(s), 0),
    },
  };
}

/**
 * How many acting steps of an attempt, from its first, go into one packed sequence: each step's
 * served prompt must be whole (`exact`) and extend the previous prompt + action token for token,
 * and the sequence (its last prompt + action + EOS) must fit `blockSize` + 1 tokens (makeBatch
 * trains on at most blockSize positions). 0 or 1 means no packing is worth it.
 */
function packSteps(acts: ReadonlyArray<{ prompt: number[]; action: string; exact: boolean }>, blockSize: number): number {
  let prev: number[] | null = null;
  let k = 0;
  for (const a of acts) {
    if (!a.exact) break;
    if (prev !== null && (a.prompt.length < prev.length || prev.some((id, i) => a.prompt[i] !== id))) break;
    const out = encode(a.action);
    if (a.prompt.length + out.length + 1 > blockSize + 1) break;
    prev = [...a.prompt, ...out];
    k++;
  }
  return k >= 2 ? k : 0;
}

/**
 * One sample for acting steps whose served prompts extend each other (`packSteps`): prompt = the
 * first step's prompt; output = the rest of the last step's prompt, its action and EOS, with
 * `lossTargets` training every action's tokens and an EOS where each action ends.
 */
function packedSample(sessionId: string, taskId: string, attempt: number, acts: ReadonlyArray<{ step: number; prompt: number[]; action: string }>): TrainingSample {
  const first = acts[0]!.prompt;
  const seq: number[] = [];
  const targets: number[] = [];
  acts.forEach((a, k) => {
    const ctx = a.prompt.slice(first.length + seq.length);
    seq.push(...ctx);
    targets.push(...ctx.map(() => -1));
    if (k > 0 && ctx.length > 0) targets[targets.length - ctx.length] = EOS; // the previous action ends here
    const out = encode(a.action);
    seq.push(...out);
    targets.push(...out);
  });
  seq.push(EOS);
  targets.push(EOS);
  return { sessionId, taskId, attempt, step: acts[0]!.step, kind: 'action', promptTokenIds: first, outputTokenIds: seq, lossTargets: targets, oldLogprobs: null, advantage: 0, return: 0 };
}

function sftSample(sessionId: string, taskId: string, attempt: number, step: number, kind: TurnKind, promptTokenIds: number[], output: string): TrainingSample {
  return { sessionId, taskId, attempt, step, kind, promptTokenIds, outputTokenIds: [...encode(output), EOS], oldLogprobs: null, advantage: 0, return: 0 };
}
