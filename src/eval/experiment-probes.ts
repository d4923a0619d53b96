/**
 * What the experiment driver (./experiment.ts) measures of the policy beside its training rollouts,
 * both through the HTTP API:
 *
 * - `heldOutProbe`: a version on a small fixed set of held-out tasks (eval seeds, never trained
 *   on), 3 attempts, at the evaluation's sampling: LaMer as 3-attempt sessions with reflections,
 *   the single-attempt baselines as 3 independent retries (as `lamer eval --independent-attempts`
 *   and the paper evaluate them). The same tasks and sampling seeds at every call, so successive
 *   versions are compared on the same draws.
 * - `klToStart`: KL(pi || pi_start) of the policy that played an iteration's rollouts from the
 *   start version, estimated on those rollouts' action tokens. Each chosen session is replayed on
 *   the start version (POST /v1/sessions/{id}/replay, docs/replay.md), which scores every recorded
 *   action token under the recorded call's sampling distribution; with d = log pi_start(a) -
 *   log pi(a) per token (a sampled from pi), the k3 estimator (Schulman, "Approximating KL
 *   divergence", 2020; verl's `low_var_kl`)
 *       KL ~= token-mean(exp(d) - 1 - d)       (>= 0 token by token; unbiased)
 *   Reflection calls are not replayed (docs/replay.md), so this is the actions' KL. Sessions: the
 *   first trial of every task (single-attempt baselines: its first 3 sessions, the same number of
 *   attempts). Tokens the start version gives probability 0 (outside its support) are counted
 *   apart, not averaged in; at the training sampling (temperature 1, no top-k or top-p) there are none.
 * Units: nats; seconds.
 */
import type { EnvKind } from '../domain.js';
import type { EnvParams } from '../envs/index.js';
import { runEval } from './harness.js';
import { Http } from './http.js';
import { summarize, type SessionRecord } from './metrics.js';

/** Where and how the held-out probe plays. */
export interface HeldOutSettings {
  /** Held-out tasks (eval seeds evalSeed(seed, 0..tasks-1)). */
  tasks: number;
  /** Probe the version trained by every `every`-th iteration (and by the last one). */
  every: number;
  /** Offset into the eval seed range; keep it off the final evaluation's tasks (lamer eval --seed 0: the first 10^6 are far apart). */
  seed: number;
  sampling: { temperature: number; topP: number; topK: number };
}

/** A version's held-out figures. */
export interface HeldOutFigures {
  version: string;
  tasks: number;
  /** Sessions (or chains of independent retries) played to the end; `errors` ended with an error. */
  sessions: number;
  errors: number;
  /** pass@1..3 over the sessions played to the end. */
  passAtK: Record<string, number>;
  /** Trajectory diversity (nats, src/eval/metrics.ts trajectoryDiversity). */
  trajectoryDiversity: number;
  seconds: number;
}

/** The common part of the experiment's options these probes read. */
export interface ProbeTarget {
  env: EnvKind;
  params?: EnvParams;
  server: string;
  apiKey?: string;
  concurrency?: number;
  maxSteps?: number;
  availableActions?: boolean;
}

/**
 * Play `version` on the held-out tasks of `h` (module doc). @throws what runEval throws
 * (EvalAbortError when the server is gone).
 */
export async function heldOutProbe(t: ProbeTarget, h: HeldOutSettings, version: string, multiAttempt: boolean): Promise<HeldOutFigures> {
  const t0 = Date.now();
  const report = await runEval({
    env: t.env, params: t.params, tasks: h.tasks, attempts: 3, concurrency: t.concurrency ?? 32, seed: h.seed, policy: 'model',
    server: t.server, apiKey: t.apiKey, maxSteps: t.maxSteps, sampling: h.sampling, availableActions: t.availableActions, modelVersion: version, mode: 'eval',
    independentAttempts: !multiAttempt,
  });
  const ok = report.sessions.filter((s) => !s.error);
  const m = summarize(ok, 3);
  return {
    version, tasks: h.tasks, sessions: ok.length, errors: report.sessions.length - ok.length, passAtK: m.passAtK,
    trajectoryDiversity: m.trajectoryDiversity, seconds: (Date.now() - t0) / 1000,
  };
}

/** The rollout sessions `klToStart` replays: trial 0 of each task (baselines: trials 0..2). */
export function klSessions(sessions: readonly SessionRecord[], multiAttempt: boolean): string[] {
  const trials = multiAttempt ? 1 : 3;
  return sessions.filter((s) => !s.error && s.sessionId !== undefined && s.trial < trials).map((s) => s.sessionId!);
}

interface ReplayStep {
  recorded: { logprobs: number[] | null } | null;
  replayed: { logprobs: Array<number | null> | null } | null;
}

/** The k3 estimate of KL(pi || pi_start), nats per token, with the counts behind it. */
export interface KlEstimate {
  kl: number;
  tokens: number;
  calls: number;
  sessions: number;
  /** Recorded tokens the start version gives probability 0 (not in `tokens`). */
  outsideSupport: number;
}

/**
 * k3 over per-token logprob pairs: mean of exp(d) - 1 - d, d = start - recorded, summed in
 * ascending order so that the same tokens give the same number whatever order the calls came in.
 */
export function k3Estimate(pairs: ReadonlyArray<readonly [number, number]>): number {
  const terms = pairs.map(([rec, start]) => Math.expm1(start - rec) - (start - rec)).sort((a, b) => a - b);
  return terms.length ? terms.reduce((a, b) => a + b, 0) / terms.length : 0;
}

/**
 * KL of the policy that recorded `sessionIds` from `startVersion` (module doc), one replay per
 * session, one after another (the server runs one replay at a time).
 * @throws HttpError when a replay is refused (e.g. an unknown start version).
 */
export async function klToStart(t: ProbeTarget, sessionIds: readonly string[], startVersion: string): Promise<KlEstimate> {
  const http = new Http(t.server, t.apiKey, 300_000);
  const pairs: Array<[number, number]> = [];
  let calls = 0;
  let outsideSupport = 0;
  for (const id of sessionIds) {
    const body = { modelVersion: startVersion, logprobs: true };
    const report = await http.post<{ steps: ReplayStep[] }>(`/v1/sessions/${id}/replay`, body, { idempotent: true });
    for (const s of report.steps) {
      const rec = s.recorded?.logprobs;
      const rep = s.replayed?.logprobs;
      if (!rec || !rep || rec.length !== rep.length) continue;
      calls++;
      rec.forEach((r, j) => {
        const q = rep[j];
        if (q === null || q === undefined) outsideSupport++;
        else pairs.push([r, q]);
      });
    }
  }
  return { kl: k3Estimate(pairs), tokens: pairs.length, calls, sessions: sessionIds.length, outsideSupport };
}
