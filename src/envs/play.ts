/**
 * Playing one attempt of a built-in env locally, with the same step semantics as the HTTP
 * protocol (docs/protocol.md): step i carries the observation posted at step i and the reward of
 * the previous action (0 at step 0); the attempt ends on `done` or after `maxSteps` actions, and
 * its last step has action null.
 */
import type { EndReason } from '../domain.js';
import type { TextEnv } from './types.js';

export interface PlayedStep {
  observation: string;
  /** The action taken at this step; null on the last step of the attempt. */
  action: string | null;
  /** Reward of the previous action (0 at step 0). */
  reward: number;
  done: boolean;
  success: boolean;
  /** Whether the env rejected the previous action (false at step 0). */
  invalidAction: boolean;
}

export interface PlayedAttempt {
  steps: PlayedStep[];
  /** Undiscounted sum of rewards. */
  return: number;
  success: boolean;
  /** 'done' when the env ended the attempt, 'max_steps' when the turn cap did. */
  endReason: EndReason;
  /** Number of actions taken and how many of them the env rejected. */
  actions: number;
  invalidActions: number;
}

/**
 * Play one attempt: `reset(seed)`, then `choose(observation, stepIndex)` until done or `maxSteps`
 * actions. `choose` may throw to abort.
 */
export function playAttempt(env: TextEnv, seed: number, maxSteps: number, choose: (observation: string, step: number) => string): PlayedAttempt {
  const first = env.reset(seed);
  const steps: PlayedStep[] = [{ observation: first.observation, action: null, reward: 0, done: false, success: false, invalidAction: false }];
  let ret = 0;
  let invalid = 0;
  for (let t = 0; t < maxSteps; t++) {
    const cur = steps[t];
    cur.action = choose(cur.observation, t);
    const r = env.step(cur.action);
    ret += r.reward;
    if (r.invalidAction) invalid++;
    steps.push({ observation: r.observation, action: null, reward: r.reward, done: r.done, success: r.success, invalidAction: r.invalidAction });
    if (r.done) break;
  }
  const last = steps[steps.length - 1];
  return {
    steps,
    return: Math.round(ret * 1e6) / 1e6,
    success: last.success,
    endReason: last.done ? 'done' : 'max_steps',
    actions: steps.length - 1,
    invalidActions: invalid,
  };
}
