/**
 * Advantage estimators over recorded turns: GiGPO (mean_norm, episode term + anchor-state step
 * term; used by `lamer` and `gigpo`), GRPO and RLOO. See docs/method.md#advantages.
 *
 * A *turn* is one model output that gets trained: an action turn (one step of an attempt) or a
 * reflection turn (written after a failed attempt). As in verl-agent, every turn is one sample of
 * the batch, so group statistics are taken over turns. The advantage is one number per turn,
 * applied to every output token of the turn.
 *
 * Conventions (0-based):
 * - action turn: `attempt` n, `step` t, `reward` = the reward the env gave for this turn's action.
 * - reflection turn: `attempt` n = the failed attempt it reflects on, `reward` ignored. Its return
 *   is G_0(n+1); its own episode score is 0 (minus the invalid penalty when the reflection was
 *   malformed), as in the reference code: mlbio-epfl/LaMer
 *   agent_system/multi_turn_rollout/metarl_rollout_loop.py lines 581-589 (only 'play' turns sum
 *   rewards; a 'reflect' turn appends `episode_rewards.append(0.)`), the penalty from
 *   verl/trainer/ppo/ray_trainer.py lines 200-220 (apply_invalid_action_penalty) on the validity
 *   of agent_system/environments/minesweeper/env_manager.py ~line 123. The
 *   outcome of attempt n+1 reaches the reflection through its return (the step term), and is not
 *   counted a second time as its episode score. Reflection turns count in their task's episode
 *   mean like every other turn of the batch. A reflection with no recorded attempt n+1 is dropped
 *   (not trained: it has no return).
 */
import type { AdvantageEstimator, ReflectionGroup } from '../../domain.js';
import { sessionReturns, type ReturnConfig } from './returns.js';

export type TurnKind = 'action' | 'reflection';

/** One trainable turn as plain data (rewards as given by the environment). */
export interface Turn {
  taskId: string;
  sessionId: string;
  attempt: number;
  step: number;
  kind: TurnKind;
  /** Raw observation the action was taken in (the anchor state); ignored for reflections. */
  observation: string;
  /** Reward of this turn's action; ignored for reflection turns. */
  reward: number;
  /** The env rejected this turn's action. */
  invalidAction: boolean;
}

/** An advantage estimator (src/domain.ts ADVANTAGE_ESTIMATORS). */
export type Estimator = AdvantageEstimator;

export interface AdvantageOptions {
  estimator: Estimator;
  returns: ReturnConfig;
  /** Subtracted from a turn's episode score when its action was invalid (LaMer CODE: 0.5). */
  invalidPenalty?: number;
  /** Weight of GiGPO's step term (LaMer CODE: 1.0). */
  stepCoef?: number;
  /** GiGPO's episode-term baseline: 'task' (default, the reference) centres every turn against the
   *  mean score of all turns of its task; 'own' (an ablation, a departure from the reference)
   *  centres reflection turns against the mean of their task's reflection turns only and action
   *  turns against the mean of their task's action turns only. The step term is the same either
   *  way. Ignored by GRPO and RLOO. */
  reflectionGroup?: ReflectionGroup;
  /** GRPO std epsilon (verl: 1e-6). */
  eps?: number;
  /** |advantage| at or below this counts as zero when counting zero-advantage groups. */
  zeroTol?: number;
}

/** Per-turn result, aligned with the input array. */
export interface TurnAdvantage {
  /** false: the turn is not trained (a reflection with no recorded next attempt: no return to
   *  credit it with). Every other turn is trained, a zero advantage included. */
  kept: boolean;
  /** Cross-episode return G (action turns) or G_0(n+1) (reflection turns). */
  return: number;
  /** Action turns: undiscounted reward sum of the turn's attempt, minus the invalid penalty;
   *  reflection turns: 0 minus the invalid penalty (see the module doc). */
  episodeScore: number;
  /** GiGPO episode term (0 for GRPO/RLOO); the raw episode score in a task group of one turn. */
  episodeTerm: number;
  /** GiGPO step term (0 for GRPO/RLOO); 0 in an anchor-state group of one turn. */
  stepTerm: number;
  advantage: number;
}

export interface AdvantageResult {
  turns: TurnAdvantage[];
  /** Task groups (same taskId) seen. */
  groups: number;
  /** Task groups in which every advantage is 0 (within `zeroTol`): no policy-gradient signal.
   *  They are kept and trained, as in the reference; they only dilute the token mean. */
  zeroAdvantageGroups: number;
  /** Turns in those groups (trained, with advantage 0). */
  zeroAdvantageTurns: number;
  /** Turns not trained (`kept` false): reflections with no recorded next attempt. */
  droppedTurns: number;
}

const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;

/** Unbiased standard deviation (torch.std default); 0 for fewer than 2 values. */
function std(xs: readonly number[]): number {
  if (xs.length < 2) return 0;
  const m = mean(xs);
  return Math.sqrt(xs.reduce((a, x) => a + (x - m) * (x - m), 0) / (xs.length - 1));
}

function groupBy<T>(items: readonly T[], key: (x: T, i: number) => string): Map<string, number[]> {
  const out = new Map<string, number[]>();
  items.forEach((x, i) => {
    const k = key(x, i);
    const g = out.get(k);
    if (g) g.push(i);
    else out.set(k, [i]);
  });
  return out;
}

/**
 * GiGPO's advantages of one task group `idx` (indices of its kept turns), written into `out`:
 *   A_E = s - mean(s) over the task group ('task'), or over the turns of its kind in the task group
 *         ('own'); a (sub)group of one takes mean 0, as a task group of one does in the reference;
 *   A_S = G - mean(G) over its anchor state: identical raw observation, all reflections of the task
 *         together; a group of one has its own G as mean (core_gigpo.py 300-302): step term 0;
 *   A   = A_E + stepCoef * A_S.
 */
function gigpoGroup(turns: readonly Turn[], out: TurnAdvantage[], idx: readonly number[], stepCoef: number, reflectionGroup: ReflectionGroup): void {
  const baselines = reflectionGroup === 'own' ? [...groupBy(idx, (i) => turns[i].kind).values()].map((g) => g.map((k) => idx[k])) : [idx];
  for (const g of baselines) {
    const meanS = g.length === 1 ? 0 : mean(g.map((i) => out[i].episodeScore));
    for (const i of g) out[i].episodeTerm = out[i].episodeScore - meanS;
  }
  const anchors = groupBy(idx, (i) => (turns[i].kind === 'reflection' ? '\u0000reflection' : 'obs:' + turns[i].observation));
  for (const members of anchors.values()) {
    const meanG = mean(members.map((k) => out[idx[k]].return));
    for (const k of members) out[idx[k]].stepTerm = out[idx[k]].return - meanG;
  }
  for (const i of idx) out[i].advantage = out[i].episodeTerm + stepCoef * out[i].stepTerm;
}

/**
 * Compute returns and advantages for a batch of turns from many sessions and tasks.
 *
 * GiGPO mean_norm (docs/method.md#gigpo):
 *   episode term  A_E = s - mean_{task}(s),      s = sum of the attempt's rewards - penalty * invalid
 *                                                (reflection turns: s = 0 - penalty * invalid)
 *                 reflectionGroup 'own': A_E = s - mean_{task, kind}(s) (reflections among reflections,
 *                                                actions among actions)
 *   step term     A_S = G - mean_{task, obs}(G)  (all reflection turns of a task: one group)
 *   advantage     A   = A_E + stepCoef * A_S
 * GRPO:  A = (s - mean_{task}(s)) / (std_{task}(s) + eps)   (std unbiased)
 * RLOO:  A = s - mean_{task, j != i}(s_j)
 *
 * Groups of one turn, as the reference does (mlbio-epfl/LaMer verl/trainer/ppo/core_gigpo.py
 * lines 191-193 and 300-302, core_algos.py lines 159-161 and 320-323):
 *   - a task with one turn: its mean is taken as 0 and its std as 1, so the GiGPO episode term is
 *     the raw score s, GRPO gives s / (1 + eps), and RLOO leaves s as it is;
 *   - an anchor state with one turn: its mean is the turn's own G, so the step term is 0.
 * Task groups whose advantages are all 0 are counted (`zeroAdvantageGroups`) and kept: the
 * reference trains on them (verl-agent's `filter_groups` is off by default), and in a token-mean
 * loss they only add tokens to the denominator.
 *
 * @throws RangeError for bad gammas or non-finite rewards (from returns.ts) or a bad estimator.
 */
export function computeAdvantages(turns: readonly Turn[], opts: AdvantageOptions): AdvantageResult {
  const penalty = opts.invalidPenalty ?? 0.5;
  const stepCoef = opts.stepCoef ?? 1.0;
  const eps = opts.eps ?? 1e-6;
  const zeroTol = opts.zeroTol ?? 1e-9;
  const out: TurnAdvantage[] = turns.map(() => ({
    kept: true, return: 0, episodeScore: 0, episodeTerm: 0, stepTerm: 0, advantage: 0,
  }));

  // 1. returns and episode scores, session by session
  for (const idx of groupBy(turns, (t) => t.sessionId).values()) {
    const actionIdx = idx.filter((i) => turns[i].kind === 'action');
    const nAttempts = actionIdx.reduce((a, i) => Math.max(a, turns[i].attempt + 1), 0);
    const byAttempt: number[][] = Array.from({ length: nAttempts }, () => []);
    for (const i of actionIdx) byAttempt[turns[i].attempt].push(i);
    for (const a of byAttempt) a.sort((x, y) => turns[x].step - turns[y].step);
    const rewards = byAttempt.map((a) => a.map((i) => turns[i].reward));
    const R = sessionReturns(rewards, opts.returns);
    const attemptSum = rewards.map((r) => r.reduce((x, y) => x + y, 0));
    byAttempt.forEach((a, n) => a.forEach((i, t) => {
      out[i].return = R.crossEpisode[n][t];
      out[i].episodeScore = attemptSum[n] - (turns[i].invalidAction ? penalty : 0);
    }));
    for (const i of idx) {
      if (turns[i].kind !== 'reflection') continue;
      const n = turns[i].attempt;
      if (n + 1 >= nAttempts) { out[i].kept = false; continue; } // dangling: no next attempt
      out[i].return = R.reflection[n];
      out[i].episodeScore = 0 - (turns[i].invalidAction ? penalty : 0); // reference: a reflect turn's episode reward is 0
    }
  }

  // 2. advantages, task group by task group
  const live = (i: number) => out[i].kept;
  const taskGroups = groupBy(turns, (t) => t.taskId);
  let zeroAdvantageGroups = 0;
  let zeroAdvantageTurns = 0;
  for (const all of taskGroups.values()) {
    const idx = all.filter(live);
    const s = idx.map((i) => out[i].episodeScore);
    // a task group of one: mean 0, std 1 (reference core_gigpo.py 191-193, core_algos.py 159-161)
    const single = s.length === 1;
    if (opts.estimator === 'gigpo') {
      gigpoGroup(turns, out, idx, stepCoef, opts.reflectionGroup ?? 'task');
    } else if (opts.estimator === 'grpo') {
      const meanS = single ? 0 : mean(s);
      const stdS = single ? 1 : std(s);
      for (const i of idx) out[i].advantage = (out[i].episodeScore - meanS) / (stdS + eps); // (s - mu) / (sigma + eps)
    } else if (opts.estimator === 'rloo') {
      const n = s.length;
      const total = s.reduce((a, b) => a + b, 0);
      for (const i of idx) {
        // baseline_i = (sum_j s_j - s_i) / (n - 1); a group of one keeps its raw score (core_algos.py 320-323)
        out[i].advantage = n > 1 ? out[i].episodeScore - (total - out[i].episodeScore) / (n - 1) : out[i].episodeScore;
      }
    } else {
      throw new RangeError(`unknown estimator: ${String(opts.estimator)}`);
    }
    // no signal in this group: counted, and trained all the same (the reference keeps it)
    if (idx.length > 0 && idx.every((i) => Math.abs(out[i].advantage) <= zeroTol)) {
      zeroAdvantageGroups++;
      zeroAdvantageTurns += idx.length;
    }
  }
  const droppedTurns = out.filter((t) => !t.kept).length;
  return { turns: out, groups: taskGroups.size, zeroAdvantageGroups, zeroAdvantageTurns, droppedTurns };
}
