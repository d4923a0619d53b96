/**
 * SFT data (docs/method.md#sft, docs/architecture.md "Training data layout"): demonstration
 * sessions (`DemoSession`, one JSON object per line, written by `lamer demos`, src/envs/demos.ts)
 * rendered with the serving prompts (src/agent/prompt.ts) and the builtin byte tokenizer
 * (src/model/tokenizer.ts) into training samples, each attempt's acting steps packed into one
 * sequence where their prompts allow it.
 */
import { renderActPrompt, renderReflectionPrompt, type PromptAttempt, type PromptStep } from '../../agent/prompt.js';
import { DEFAULT_LIMITS } from '../../model/sampling.js';
import { EOS, type PromptFit, type PromptParts } from '../../model/tokenizer.js';
import { BYTE_TOKENIZER, type Tokenizer } from '../../model/tokenizers.js';
import type { PromptFormat } from '../../model/prompt-format.js';
import type { TurnKind } from '../maths/advantages.js';
import { packRun } from './packing.js';
import { sessionOutcomes, trainedTokens, type DataStats, type StepRecord, type TrainingSample } from './samples.js';
import type { DemoSession } from '../../shared/demos.js';

export type { DemoAttempt, DemoSession, DemoStep } from '../../shared/demos.js';

/** Options of `buildSftSamples`. */
export interface SftDataOptions {
  /** The model's context length (GPTConfig.block_size). Prompts are fitted as the builtin engine
   *  fits a session's prompts when it generates freely (no availableActions): to blockSize -
   *  maxActionTokens (acting) or blockSize - maxReflectionTokens, by the tokenizer's `fitPrompt`. */
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
  /** The model's tokenizer (default: byte) and prompt format (default: chat), from its checkpoint
   *  (src/model/checkpoint.ts checkpointText), so that demonstrations train the prompts served. */
  tokenizer?: Tokenizer;
  format?: PromptFormat;
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
 * exactly as when serving: each session's prompts go through `fitPrompt` in order, each with the
 * fit of the one before, as the builtin engine does for one session (once a prompt overflows, old
 * steps are dropped until a quarter of the context is free, and the attempt's later prompts,
 * its reflection's included, drop at least as many).
 *
 * Packing (`pack`, default): the acting prompt is append-only (src/agent/prompt.ts: prompt(t+1) =
 * prompt(t) + action_t + tail(t+1)), so one sequence BOS + head + step 0 + action 0 + ... + action k
 * + EOS holds the served prompt of every step 0..k as a prefix. Per attempt the longest run of
 * steps from the first whose served prompts drop nothing and whose sequence fits the block becomes
 * one sample, with `lossTargets` training each action's tokens and, at its last token, EOS (what
 * the per-step sample trains there): the same per-token losses as the per-step samples at O(k)
 * instead of O(k^2) tokens. The attempt's remaining steps are per-step samples as served
 * (`fitPrompt`). Reflection samples stay separate.
 * @throws RangeError when blockSize leaves no room for a prompt.
 */
export function buildSftSamples(demos: readonly DemoSession[], opts: SftDataOptions): { samples: TrainingSample[]; stats: DataStats } {
  const prefix = opts.outputPrefix ?? '';
  const tok = opts.tokenizer ?? BYTE_TOKENIZER;
  const actReserve = opts.maxActionTokens ?? DEFAULT_LIMITS.maxActionTokens;
  const reflReserve = opts.maxReflectionTokens ?? DEFAULT_LIMITS.maxReflectionTokens;
  const actBudget = opts.blockSize - actReserve;
  const reflBudget = opts.blockSize - reflReserve;
  if (!(actBudget >= 2 && reflBudget >= 2)) throw new RangeError(`blockSize ${opts.blockSize} leaves no room for prompts`);
  const samples: TrainingSample[] = [];
  const records: StepRecord[] = [];
  const pack = (opts.pack ?? true) && prefix === '';
  let turns = 0;
  demos.forEach((d, di) => {
    const sessionId = `demo-${di}`;
    const previousAttempts: PromptAttempt[] = [];
    let fit: PromptFit | undefined; // the fit of the session's last prompt, as the engine keeps it
    const fitted = (parts: PromptParts, reserve: number) => {
      const enc = tok.fitPrompt(parts, opts.blockSize, reserve, fit);
      fit = { head: parts.head, steps: parts.steps.length, dropped: enc.droppedSteps };
      return enc;
    };
    d.attempts.forEach((att, n) => {
      const done: PromptStep[] = [];
      const acts: Array<{ step: number; prompt: number[]; action: string; exact: boolean }> = [];
      att.steps.forEach((s, t) => {
        records.push({ sessionId, taskId: d.taskId, attempt: n, step: t, kind: 'action', observation: s.observation, reward: s.reward, done: s.done, success: s.success, invalidAction: false, promptTokenIds: null, outputTokenIds: null, logprobs: null, modelVersion: 'demo' });
        if (s.action === null) return;
        const parts = renderActPrompt({ format: opts.format, env: d.env, instructions: d.instructions, memory: d.memory ?? 'reflection_only', attempt: n, previousAttempts, steps: done, observation: s.observation });
        const enc = fitted(parts, actReserve);
        acts.push({ step: t, prompt: enc.ids, action: prefix + s.action, exact: enc.droppedSteps === 0 && enc.truncatedChars === 0 });
        done.push({ observation: s.observation, action: s.action });
      });
      turns += acts.length;
      const packed = pack ? packSteps(acts, opts.blockSize, tok) : 0;
      if (packed > 0) samples.push(packedSample(sessionId, d.taskId, n, acts.slice(0, packed), tok));
      for (const a of acts.slice(packed)) samples.push(sftSample(sessionId, d.taskId, n, a.step, 'action', a.prompt, a.action, tok));
      const last = att.steps[att.steps.length - 1];
      const success = att.steps.some((s) => s.success);
      if (att.reflection !== null && last) {
        const parts = renderReflectionPrompt({ format: opts.format, env: d.env, instructions: d.instructions, memory: d.memory ?? 'reflection_only', attempt: n, previousAttempts, steps: done, finalObservation: last.observation });
        samples.push(sftSample(sessionId, d.taskId, n, att.steps.length - 1, 'reflection', fitted(parts, reflReserve).ids, prefix + att.reflection, tok));
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
      groups: 0, zeroAdvantageGroups: 0, zeroAdvantageTurns: 0, droppedTurns: 0, meanReturn: outcomes.meanReturn, passAtK: outcomes.passAtK,
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
function packSteps(acts: ReadonlyArray<{ prompt: number[]; action: string; exact: boolean }>, blockSize: number, tok: Tokenizer): number {
  let prev: number[] | null = null;
  let k = 0;
  for (const a of acts) {
    if (!a.exact) break;
    if (prev !== null && (a.prompt.length < prev.length || prev.some((id, i) => a.prompt[i] !== id))) break;
    const out = tok.encode(a.action);
    if (a.prompt.length + out.length + 1 > blockSize + 1) break;
    prev = [...a.prompt, ...out];
    k++;
  }
  return k >= 2 ? k : 0;
}

/**
 * One sample for acting steps whose served prompts extend each other (`packSteps`): prompt = the
 * first step's prompt; output = the rest of the last step's prompt, its action and EOS, with
 * `lossTargets` training every action's tokens and an EOS where each action ends (the next prompt
 * shows the action, not its EOS, which trains where the next observation starts).
 */
function packedSample(sessionId: string, taskId: string, attempt: number, acts: ReadonlyArray<{ step: number; prompt: number[]; action: string }>, tok: Tokenizer): TrainingSample {
  const first = acts[0]!.prompt;
  const { tokens, targets } = packRun(first, acts.map((a, k) => {
    const output = [...tok.encode(a.action), EOS];
    return { prompt: a.prompt, output, shown: k < acts.length - 1 ? output.length - 1 : output.length, trained: true };
  }));
  return { sessionId, taskId, attempt, step: acts[0]!.step, kind: 'action', promptTokenIds: first, outputTokenIds: tokens, lossTargets: targets, oldLogprobs: null, advantage: 0, return: 0 };
}

/** One per-step SFT sample: the served prompt, then the output's bytes + EOS, every output token trained. */
function sftSample(sessionId: string, taskId: string, attempt: number, step: number, kind: TurnKind, promptTokenIds: number[], output: string, tok: Tokenizer): TrainingSample {
  return { sessionId, taskId, attempt, step, kind, promptTokenIds, outputTokenIds: [...tok.encode(output), EOS], oldLogprobs: null, advantage: 0, return: 0 };
}
