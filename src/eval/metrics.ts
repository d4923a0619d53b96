/**
 * Evaluation metrics (docs/method.md#metrics), pure functions over played sessions.
 *
 * A session is one LaMer trial: up to K attempts at one task, stopping at the first success.
 * Attempts are 0-based and recorded in order (`attempts[n].attempt === n`); pass@k counts attempts
 * 0..k-1 (src/shared/passk.ts). A session with an error counts as unsolved unless an attempt before
 * the error succeeded.
 */
import type { EndReason } from '../domain.js';
import { passAtKRate } from '../shared/passk.js';
import { empiricalEntropy } from '../shared/diversity.js';

/** One played attempt as the harness records it. */
export interface AttemptRecord {
  attempt: number;
  success: boolean;
  /** Undiscounted sum of the env's rewards over the attempt. */
  return: number;
  /** Actions taken (turns). */
  actions: number;
  /** Actions the env rejected (`invalidAction`). */
  invalidActions: number;
  /** 'done' (the env ended it) or 'max_steps' (turn cap). */
  endReason: EndReason;
  /** The attempt's actions in canonical form (see the harness), used for trajectory diversity. */
  trajectory: string[];
  /** The reflection the server wrote after this attempt (failed attempts with one to follow). */
  reflection?: string;
}

export interface SessionRecord {
  taskId: string;
  /** Index of this session among the sessions of the same task (`--trials`). */
  trial: number;
  /** Server session id and the model version that served it (policy 'model'). */
  sessionId?: string;
  modelVersion?: string;
  attempts: AttemptRecord[];
  /** Set when the session could not be played to the end (HTTP or engine error). */
  error?: string;
}

export interface AttemptStats {
  attempt: number;
  /** Sessions that played this attempt (sessions stop after a success). */
  sessions: number;
  /** Mean return over those sessions; null when none played it. */
  meanReturn: number | null;
  /** Fraction of those sessions whose attempt succeeded; null when none. */
  successRate: number | null;
}

/**
 * Mean return by attempt: for attempt n, the mean of the returns of the sessions that played
 * attempt n (a session solved earlier does not play it, so this is conditional on failing before).
 */
export function meanReturnByAttempt(sessions: readonly SessionRecord[], K: number): AttemptStats[] {
  return Array.from({ length: K }, (_, n) => {
    const xs = sessions.flatMap((s) => s.attempts.filter((a) => a.attempt === n));
    if (xs.length === 0) return { attempt: n, sessions: 0, meanReturn: null, successRate: null };
    return {
      attempt: n,
      sessions: xs.length,
      meanReturn: xs.reduce((acc, a) => acc + a.return, 0) / xs.length,
      successRate: xs.filter((a) => a.success).length / xs.length,
    };
  });
}

/** Rejected actions / all actions over every attempt; 0 when no action was taken. */
export function invalidActionRate(sessions: readonly SessionRecord[]): number {
  let bad = 0;
  let all = 0;
  for (const s of sessions)
    for (const a of s.attempts) {
      bad += a.invalidActions;
      all += a.actions;
    }
  return all === 0 ? 0 : bad / all;
}

/** Shannon entropy (nats) of the empirical distribution of `items` (src/agent/diversity.ts, shared with the server's diversity statistic). */
export { empiricalEntropy };

/**
 * Trajectory diversity (docs/method.md#metrics): for each task, the entropy (nats) of the empirical
 * distribution over the distinct trajectories played on it, where a trajectory is the sequence
 * of an attempt's canonical actions and every attempt of every session of the task is one sample;
 * then the mean over tasks. With one session of K attempts per task it is at most ln K (1.10 for
 * K = 3), and a task solved on its first attempt contributes 0; more sessions per task (`--trials`)
 * give more samples. Returns 0 for no sessions.
 */
export function trajectoryDiversity(sessions: readonly SessionRecord[]): number {
  const byTask = new Map<string, string[]>();
  for (const s of sessions) {
    const list = byTask.get(s.taskId) ?? [];
    for (const a of s.attempts) list.push(a.trajectory.join('\n'));
    byTask.set(s.taskId, list);
  }
  if (byTask.size === 0) return 0;
  let sum = 0;
  for (const trajs of byTask.values()) sum += empiricalEntropy(trajs);
  return sum / byTask.size;
}

export interface EvalMetrics {
  sessions: number;
  tasks: number;
  errors: number;
  /** {"1": pass@1, ..., "K": pass@K}, fractions in [0, 1] (src/shared/passk.ts). */
  passAtK: Record<string, number>;
  meanReturnByAttempt: AttemptStats[];
  invalidActionRate: number;
  trajectoryDiversity: number;
  /** Mean turns per attempt. */
  meanActionsPerAttempt: number;
}

/** All metrics of a run with K attempts per session. */
export function summarize(sessions: readonly SessionRecord[], K: number): EvalMetrics {
  const attempts = sessions.flatMap((s) => s.attempts);
  return {
    sessions: sessions.length,
    tasks: new Set(sessions.map((s) => s.taskId)).size,
    errors: sessions.filter((s) => s.error !== undefined).length,
    passAtK: passAtKRate(sessions.map((s) => s.attempts), K),
    meanReturnByAttempt: meanReturnByAttempt(sessions, K),
    invalidActionRate: invalidActionRate(sessions),
    trajectoryDiversity: trajectoryDiversity(sessions),
    meanActionsPerAttempt: attempts.length ? attempts.reduce((a, x) => a + x.actions, 0) / attempts.length : 0,
  };
}
