/**
 * The compact trainer's model as a player (src/recipes/sft-base/sft-base.ts): greedy decoding, the model as a
 * trial policy for DAgger rounds, and the held-out evaluation written to the learning curve.
 */
import * as tf from '@tensorflow/tfjs';
import { renderActPrompt, renderReflectionPrompt, type PromptAttempt } from '../../agent/prompt.js';
import type { EnvKind } from '../../domain.js';
import { playCompactTrial, type TrialPolicy } from '../../envs/compact-data.js';
import { evalSeed } from '../../envs/index.js';
import type { GPT } from '../../model/gpt.js';
import type { CompactPromptFormat } from '../../model/prompt-format.js';
import { EOS } from '../../model/tokenizer.js';
import type { Tokenizer } from '../../model/tokenizers.js';
import { positionLogits } from '../../training/maths/soft-targets.js';

/** Generation caps the builtin engine reserves after a prompt (src/model/sampling.ts defaults). */
export const ACTION_RESERVE = 64;
export const REFLECTION_RESERVE = 256;

/** Greedy decode of up to `max` tokens after `ids` (full forward each token; prompts are short). */
export function greedy(model: GPT, ids: number[], max: number): number[] {
  const out: number[] = [];
  const seq = ids.slice();
  for (let j = 0; j < max; j++) {
    const t = tf.tidy(() => {
      const idx = tf.tensor2d(Int32Array.from(seq), [1, seq.length], 'int32');
      const logits = positionLogits(model, idx, tf.tensor1d([seq.length - 1], 'int32'));
      return logits.argMax(-1).dataSync()[0]!;
    });
    out.push(t);
    if (t === EOS || seq.length + 1 >= model.config.block_size) break;
    seq.push(t);
  }
  return out;
}

/**
 * The model as a trial policy (greedy), reading the compact prompt with its memory lines. Greedy
 * decoding is a function of the prompt, so answers are memoised by prompt while the weights do not
 * change (a policy lives for one refill or one evaluation): a model that repeats an invalid click
 * sees the same board again, and each repeat until the turn cap then costs no forward pass.
 */
export function modelPolicy(model: GPT, tok: Tokenizer, format: CompactPromptFormat, instructionsOf: (env: EnvKind) => string): TrialPolicy {
  const memo = new Map<string, string>();
  return (c) => {
    const previousAttempts: PromptAttempt[] = c.memory.map((m) => ({ steps: [], finalObservation: '', success: false, reflection: m }));
    const parts = renderActPrompt({
      instructions: instructionsOf(c.env), memory: 'reflection_only', attempt: c.attempt, previousAttempts, steps: [], observation: c.observation, env: c.env, format,
    });
    const enc = tok.fitPrompt(parts, model.config.block_size, ACTION_RESERVE);
    const key = enc.ids.join(',');
    let answer = memo.get(key);
    if (answer === undefined) {
      answer = tok.decode(greedy(model, enc.ids, c.env === 'minesweeper' ? 2 : 8).filter((t) => t !== EOS));
      if (memo.size >= 4096) memo.clear();
      memo.set(key, answer);
    }
    return answer;
  };
}

/**
 * One game's held-out figures at a learning-curve point (shares in [0, 1]).
 * - `memoryGain`: pass@3 - pass@1. Greedy play of a fixed task is a function of the prompt, so
 *   independent retries without memory replay attempt 1 exactly and score pass@1: this is the
 *   memory's effect, memory minus independent retries, on these tasks.
 * - `repeatsEnding`: share of failed later attempts (2 and 3) that end as an earlier attempt of the
 *   task ended: MineSweeper on a mine cell that an earlier attempt hit, Sokoban in a box
 *   configuration that an earlier attempt ended in. Null when no later attempt failed that way.
 */
export interface EvalPoint {
  env: string; tasks: number; agreement: number; invalid: number | null; pass1: number; pass3: number;
  reflectionsNamingMine: number | null; memoryGain: number; repeatsEnding: number | null;
}

/** How an attempt ended, for `repeatsEnding`: the mine cell clicked (MineSweeper), or the final board without the player (Sokoban). */
export function endingKey(env: EnvKind, finalObservation: string, lastAction: string | undefined): string | null {
  if (env === 'minesweeper') return finalObservation.includes('*') && lastAction !== undefined ? lastAction.trim() : null;
  if (env === 'sokoban') return finalObservation.replace(/P/g, '_').replace(/S/g, 'O');
  return null;
}

/**
 * Held-out evaluation on the first `tasks` eval seeds of each target env: greedy play, 3 attempts
 * with the model's own reflections; agreement = share of decisions whose answer is one of the
 * solver's equally good answers (for Sokoban: whose first move is); invalid = share of decisions
 * that the env flagged as invalid actions (MineSweeper: not a hidden cell; Sokoban: no move, or a
 * move into a wall or an unpushable box). Greedy answers, so below eval:base's sampled rates.
 * `memoryGain` and `repeatsEnding` measure what the memory does (see EvalPoint).
 */
export function evaluate(model: GPT, tok: Tokenizer, format: CompactPromptFormat, envName: string, tasks: number): EvalPoint {
  let agree = 0, decisions = 0, invalid = 0, p1 = 0, p3 = 0, mineRefl = 0, mineFails = 0, laterEndings = 0, repeated = 0;
  const instr = (env: EnvKind) => env;
  const base = modelPolicy(model, tok, format, instr);
  for (let i = 0; i < tasks; i++) {
    const seed = evalSeed(0, i);
    const memory: string[] = [];
    const endings = new Set<string>();
    let solved = -1;
    for (let n = 0; n < 3 && solved < 0; n++) {
      const policy: TrialPolicy = (c) => {
        const a = base({ ...c, memory, attempt: n });
        decisions++;
        if (c.choices && c.target !== null) {
          const first = c.choices[0]!;
          if (first.some((p) => a.startsWith(p))) agree++;
        }
        return a;
      };
      const trial = playCompactTrial({ envName, seed, maxAttempts: 1, policy, rngSeed: seed });
      const att = trial.attempts[0]!;
      invalid += att.steps.filter((s) => s.invalidAction).length;
      if (att.success) solved = n;
      else {
        const key = endingKey(trial.env, att.finalObservation, att.steps[att.steps.length - 1]?.action);
        if (key !== null) {
          if (n > 0) { laterEndings++; if (endings.has(key)) repeated++; }
          endings.add(key);
        }
      }
      if (!att.success && n < 2) {
        // the model's own reflection, from the compact reflection prompt
        const steps = att.steps.map((s) => ({ observation: s.observation, action: s.action }));
        const previousAttempts: PromptAttempt[] = memory.map((m) => ({ steps: [], finalObservation: '', success: false, reflection: m }));
        const parts = renderReflectionPrompt({ instructions: trial.env, memory: 'reflection_only', attempt: n, previousAttempts, steps, finalObservation: att.finalObservation, env: trial.env, format });
        const enc = tok.fitPrompt(parts, model.config.block_size, REFLECTION_RESERVE);
        const text = tok.decode(greedy(model, enc.ids, 24).filter((t) => t !== EOS)).trim();
        if (trial.env === 'minesweeper' && att.finalObservation.includes('*')) {
          mineFails++;
          const last = att.steps[att.steps.length - 1]!.action.trim();
          if (text.includes(last)) mineRefl++;
        }
        memory.push(text);
      }
    }
    if (solved === 0) p1++;
    if (solved >= 0) p3++;
  }
  return {
    env: envName, tasks, agreement: agree / Math.max(1, decisions), invalid: invalid / Math.max(1, decisions),
    pass1: p1 / tasks, pass3: p3 / tasks, reflectionsNamingMine: mineFails ? mineRefl / mineFails : null,
    memoryGain: (p3 - p1) / tasks, repeatsEnding: laterEndings ? repeated / laterEndings : null,
  };
}

