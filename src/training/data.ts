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
  /** Per-turn advantage (0 for SFT). */
  advantage: number;
  /** Cross-episode return (0 for SFT). */
  return: number;
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
  adv.turns.forEach((a, i) => {
    const r = sources[i];
    scores.push({ sessionId: r.sessionId, attempt: r.attempt, step: r.step, kind: r.kind, return: a.return, advantage: a.advantage, kept: a.kept });
    if (!a.kept) return;
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
      outputTokens: samples.reduce((n, s) => n + s.outputTokenIds.length, 0),
    },
  };
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
      outputTokens: samples.reduce((n, s) => n + (s.lossTargets ? s.lossTargets.filter((x) => x >= 0).length : s.outputTokenIds.length), 0),
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
