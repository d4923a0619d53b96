/**
 * The eval harness: plays held-out tasks of a built-in env and measures pass@k, mean return by
 * attempt, invalid-action rate and trajectory diversity (./metrics.ts).
 *
 * - policy 'model': through the HTTP protocol of docs/protocol.md exactly as an external env
 *   would: POST /v1/sessions (mode 'eval'), then for each attempt reset the env to the task's seed
 *   and POST /v1/sessions/{id}/steps with (attempt, step) indices, the observation, the reward of
 *   the previous action, done/success and invalidAction; execute the returned action; the answer
 *   with action null ends the attempt, and the session goes on while session.status == 'active'.
 * - policy 'random' | 'solver': the reference policies (src/envs/policies.ts) play the same tasks
 *   locally with the same turn cap and attempt loop (no server), recorded in the same shape and
 *   measured by the same functions.
 *
 * Task i (0-based) uses seed evalSeed(seed, i) from the held-out range [1e9, 2^32)
 * (src/envs/index.ts); trial r of it uses sampling seed (seed * 1_000_003 + i * 131 + r) mod 2^32.
 */
import type { EndReason, EnvKind, SessionMode } from '../domain.js';
import { evalSeed, makeEnv, MAX_STEPS, taskId as makeTaskId, trainSeed, type EnvParams } from '../envs/index.js';
import { parseCellAction } from '../envs/minesweeper.js';
import { parseMoves } from '../envs/sokoban.js';
import { makePolicy } from '../envs/policies.js';
import type { BuiltinEnv } from '../envs/types.js';
import { summarize, type AttemptRecord, type EvalMetrics, type SessionRecord } from './metrics.js';
import { describeHttpFailure, Http, HttpError, type HttpOptions, type RetryInfo } from './http.js';

export type EvalPolicy = 'model' | 'random' | 'solver';

export interface EvalOptions {
  env: EnvKind;
  params?: EnvParams;
  /** Number of held-out tasks. */
  tasks: number;
  /** Attempts per session (K of pass@K). */
  attempts: number;
  /** Sessions played at once. */
  concurrency: number;
  /** Offset into the eval seed range; also seeds sampling. */
  seed: number;
  policy: EvalPolicy;
  /** Base URL of the server (policy 'model'). */
  server?: string;
  apiKey?: string;
  /** Sessions per task (default 1). */
  trials?: number;
  /** Turns per attempt (default: the env's, 7). */
  maxSteps?: number;
  /** Sampling of policy 'model' (default: the paper's evaluation setting 0.7 / 0.8 / 20). */
  sampling?: { temperature: number; topP: number; topK: number };
  /** Send the env's legal actions as availableActions (the server then picks one of them). */
  availableActions?: boolean;
  modelVersion?: string;
  /** Per-request timeout, ms (default 120000). */
  requestTimeoutMs?: number;
  /** Called after each finished session. */
  onSession?: (done: number, total: number, s: SessionRecord) => void;
  /** Called before a request is sent again (policy 'model'): the server did not answer, or answered 408/429/503. */
  onRetry?: (info: RetryInfo) => void;
  /** 'eval' (default): held-out eval seeds, sessions never trained on. 'train': seeds from the
   *  training range (trainSeed(seed, i)) and sessions with `mode: "train"` (training rollouts,
   *  e.g. `lamer train`). */
  mode?: SessionMode;
  /** Independent retries without memory (how the paper evaluates single-attempt baselines): each
   *  attempt is its own `maxAttempts: 1` session (no reflection, no earlier attempt in the prompt),
   *  attempt n with sampling seed + n * 7919, played until one succeeds; recorded as one
   *  SessionRecord so pass@k reads the same. Policy 'model' only. */
  independentAttempts?: boolean;
  /** Once aborted, the run stops: requests in flight are dropped and runEval throws EvalAbortError. */
  signal?: AbortSignal;
}

export interface EvalReport {
  env: string;
  policy: EvalPolicy;
  server: string | null;
  tasks: number;
  attempts: number;
  trials: number;
  maxSteps: number;
  seed: number;
  seeds: { first: number; last: number };
  sampling: { temperature: number; topP: number; topK: number } | null;
  modelVersion: string | null;
  startedAt: string;
  durationS: number;
  metrics: EvalMetrics;
  sessions: SessionRecord[];
}

export const PAPER_EVAL_SAMPLING = { temperature: 0.7, topP: 0.8, topK: 20 };

/**
 * Canonical form of an action for trajectory identity: MineSweeper "(r, c)" of the parsed cell,
 * Sokoban the parsed moves joined by ","; an unparseable action is "invalid".
 */
export function canonicalAction(kind: EnvKind, action: string): string {
  if (kind === 'minesweeper') {
    const c = parseCellAction(action);
    return c ? `(${c.row}, ${c.col})` : 'invalid';
  }
  const m = parseMoves(action);
  return m.length ? m.join(',') : 'invalid';
}

/**
 * The run cannot go on (server unreachable, or it rejected session creation with a 4xx): thrown by
 * runEval instead of recording the same failure for every session.
 */
export class EvalAbortError extends Error {}

/**
 * GET /healthz of `base` (3 s timeout). @throws EvalAbortError "cannot reach <base> (<why>)" when
 * no HTTP answer comes back, or "<base>/healthz answered <status>" for a non-2xx answer.
 */
export async function checkServer(base: string, timeoutMs = 3000): Promise<void> {
  const url = base.replace(/\/+$/, '');
  let res: Response;
  try {
    res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(timeoutMs) });
  } catch (e) {
    throw new EvalAbortError(`cannot reach ${url} (${describeHttpFailure(e)})`);
  }
  await res.text().catch(() => '');
  if (!res.ok) throw new EvalAbortError(`${url}/healthz answered HTTP ${res.status}`);
}

/**
 * Run an evaluation. @throws RangeError for bad options; EvalAbortError when policy 'model' cannot
 * create sessions (server unreachable before any session was created, or session creation answered
 * with a 4xx other than 429), or when the server stops answering mid-run: at the first request
 * that got no answer, /healthz is asked (3 s); when it does not answer either, every request in
 * flight is dropped and the run stops within seconds, instead of retrying each remaining session
 * for about 15 s. Other HTTP failures, and every failure in mode 'train' (training rollouts of
 * `lamer train`, which go on with the sessions that worked), are recorded per session.
 */
export async function runEval(opts: EvalOptions): Promise<EvalReport> {
  const { trials, maxSteps } = checkedCounts(opts);
  const probe = makeEnv(opts.env, opts.params);
  const jobs: Array<{ i: number; trial: number }> = [];
  for (let i = 0; i < opts.tasks; i++) for (let r = 0; r < trials; r++) jobs.push({ i, trial: r });
  const sampling = opts.policy === 'model' ? (opts.sampling ?? PAPER_EVAL_SAMPLING) : null;
  const started = Date.now();
  const results: SessionRecord[] = new Array(jobs.length);
  let next = 0;
  let finished = 0;
  let created = 0;
  let abort: EvalAbortError | null = null;
  // Aborted when the run stops: pending requests and their retries end at once.
  const stop = new AbortController();
  let probing = false;
  const onRetry = (info: RetryInfo) => {
    opts.onRetry?.(info);
    if (!info.network || probing || abort || opts.mode === 'train') return;
    probing = true;
    checkServer(opts.server!)
      .then(() => undefined, (e: Error) => {
        if (abort) return;
        abort = new EvalAbortError(`lost the server after ${finished} of ${jobs.length} sessions: ${e.message}`);
        stop.abort(abort);
      })
      .finally(() => {
        probing = false;
      });
  };
  const httpOpts = { signal: stop.signal, onRetry };
  const cancelled = () => {
    abort ??= new EvalAbortError(`cancelled after ${finished} of ${jobs.length} sessions`);
    stop.abort(abort);
  };
  if (opts.signal?.aborted) cancelled();
  opts.signal?.addEventListener('abort', cancelled, { once: true });
  const worker = async () => {
    const env = makeEnv(opts.env, opts.params);
    while (next < jobs.length && !abort) {
      const idx = next++;
      const rec = await playJob(env, jobs[idx], maxSteps, opts, sampling, httpOpts);
      if (rec.sessionId) created++;
      if (rec.createError && !abort && opts.mode !== 'train') abort = createAbort(rec.createError, created, opts.server);
      delete rec.createError;
      if (abort) break;
      results[idx] = rec;
      finished++;
      opts.onSession?.(finished, jobs.length, rec);
    }
  };
  const workers = Array.from({ length: Math.min(opts.concurrency, jobs.length) }, worker);
  await Promise.all(workers).finally(() => opts.signal?.removeEventListener('abort', cancelled));
  if (abort) throw abort;
  return {
    env: probe.name,
    policy: opts.policy,
    server: opts.policy === 'model' ? opts.server! : null,
    tasks: opts.tasks,
    attempts: opts.attempts,
    trials,
    maxSteps,
    seed: opts.seed,
    seeds: { first: taskSeed(opts, 0), last: taskSeed(opts, opts.tasks - 1) },
    sampling,
    modelVersion: opts.modelVersion ?? ([...new Set(results.map((x) => x.modelVersion).filter((v) => v !== undefined))].join(',') || null),
    startedAt: new Date(started).toISOString(),
    durationS: (Date.now() - started) / 1000,
    metrics: summarize(results, opts.attempts),
    sessions: results,
  };
}

/**
 * The trials per task and the step cap of a run, its counts checked.
 * @throws RangeError naming the first count that is not an integer >= 1 (seed: >= 0), or for policy
 * 'model' without a server URL.
 */
function checkedCounts(opts: EvalOptions): { trials: number; maxSteps: number } {
  const trials = opts.trials ?? 1;
  const maxSteps = opts.maxSteps ?? MAX_STEPS[opts.env];
  const counts = [
    ['tasks', opts.tasks, 1], ['attempts', opts.attempts, 1], ['concurrency', opts.concurrency, 1], ['trials', trials, 1],
    ['maxSteps', maxSteps, 1], ['seed', opts.seed, 0],
  ] as const;
  for (const [k, v, min] of counts) {
    if (!Number.isInteger(v) || v < min) throw new RangeError(`${k} must be an integer >= ${min}, got ${v}`);
  }
  if (opts.policy === 'model' && !opts.server) throw new RangeError('policy model needs a server URL');
  return { trials, maxSteps };
}

/** A session record plus, when creating the session failed, why (HTTP status, 0 for no answer). */
type PlayedRecord = SessionRecord & { createError?: { status: number; why: string } };

/** One session of task `j.i` (trial `j.trial`): played here (policy 'random' or 'solver') or against the server. */
function playJob(
  env: BuiltinEnv, j: { i: number; trial: number }, maxSteps: number, opts: EvalOptions,
  sampling: { temperature: number; topP: number; topK: number } | null, httpOpts: HttpOptions,
): PlayedRecord | Promise<PlayedRecord> {
  const seed = taskSeed(opts, j.i);
  const samplingSeed = (opts.seed * 1_000_003 + j.i * 131 + j.trial) % 2 ** 32;
  if (opts.policy !== 'model') return playLocal(env, seed, j.trial, samplingSeed, maxSteps, opts);
  const play = opts.independentAttempts ? playHttpIndependent : playHttp;
  return play(env, seed, j.trial, samplingSeed, maxSteps, opts, sampling!, httpOpts);
}

/**
 * The error that stops the run after a failed session creation: a 4xx other than 429 (the server
 * refuses every session alike), or no answer before any session was created; null when only that
 * session is lost (5xx, 429, or no answer once sessions were created).
 */
function createAbort(err: { status: number; why: string }, created: number, server: string | undefined): EvalAbortError | null {
  const { status, why } = err;
  if (status >= 400 && status < 500 && status !== 429) return new EvalAbortError(`server rejected the session: ${why}`);
  return status === 0 && created === 0 ? new EvalAbortError(`cannot reach ${server} (${why})`) : null;
}

/** Seed of task i: the eval range, or the training range in mode 'train'. */
function taskSeed(opts: EvalOptions, i: number): number {
  return opts.mode === 'train' ? trainSeed(opts.seed, i) : evalSeed(opts.seed, i);
}

/** Independent retries (EvalOptions.independentAttempts): one single-attempt session per attempt. */
async function playHttpIndependent(
  env: BuiltinEnv,
  seed: number,
  trial: number,
  samplingSeed: number,
  maxSteps: number,
  opts: EvalOptions,
  sampling: { temperature: number; topP: number; topK: number },
  httpOpts: HttpOptions = {},
): Promise<PlayedRecord> {
  const out: PlayedRecord = { taskId: makeTaskId(env.name, seed), trial, attempts: [] };
  for (let n = 0; n < opts.attempts; n++) {
    const one = await playHttp(env, seed, trial, (samplingSeed + n * 7919) % 2 ** 32, maxSteps, { ...opts, attempts: 1 }, sampling, httpOpts);
    for (const a of one.attempts) out.attempts.push({ ...a, attempt: n });
    if (one.sessionId) out.sessionId = one.sessionId;
    if (one.modelVersion) out.modelVersion = one.modelVersion;
    if (one.error) return { ...out, error: one.error, ...(one.createError ? { createError: one.createError } : {}) };
    if (one.attempts.some((a) => a.success)) break;
  }
  return out;
}

/** Play one session locally with a reference policy. */
function playLocal(env: BuiltinEnv, seed: number, trial: number, policySeed: number, maxSteps: number, opts: EvalOptions): SessionRecord {
  const mines = (opts.params as { mines?: number } | undefined)?.mines ?? (env as { params?: { mines?: number } }).params?.mines;
  const policy = makePolicy(opts.policy as 'random' | 'solver', opts.env, policySeed, { mines });
  const attempts: AttemptRecord[] = [];
  for (let n = 0; n < opts.attempts; n++) {
    let obs = env.reset(seed).observation;
    const rec: AttemptRecord = { attempt: n, success: false, return: 0, actions: 0, invalidActions: 0, endReason: 'max_steps', trajectory: [] };
    for (let t = 0; t < maxSteps; t++) {
      const action = policy.act(obs);
      const r = env.step(action);
      rec.actions++;
      rec.return += r.reward;
      if (r.invalidAction) rec.invalidActions++;
      rec.trajectory.push(canonicalAction(opts.env, action));
      obs = r.observation;
      if (r.done) {
        rec.success = r.success;
        rec.endReason = 'done';
        break;
      }
    }
    rec.return = round6(rec.return);
    policy.endAttempt(obs, rec.success);
    attempts.push(rec);
    if (rec.success) break;
  }
  return { taskId: makeTaskId(env.name, seed), trial, attempts };
}

interface StepAnswer {
  action: string | null;
  modelVersion: string;
  attemptResult: { attempt: number; success: boolean; return: number; steps: number; endReason: EndReason } | null;
  reflection?: { attempt: number; text: string } | null;
  session: { status: string; next: { attempt: number; step: number } | null };
}

/** Play one session through the HTTP protocol. Errors end the session and are recorded. */
async function playHttp(
  env: BuiltinEnv,
  seed: number,
  trial: number,
  samplingSeed: number,
  maxSteps: number,
  opts: EvalOptions,
  sampling: { temperature: number; topP: number; topK: number },
  httpOpts: HttpOptions = {},
): Promise<PlayedRecord> {
  const tid = makeTaskId(env.name, seed);
  const attempts: AttemptRecord[] = [];
  const http = new Http(opts.server!, opts.apiKey, opts.requestTimeoutMs ?? 120_000, httpOpts);
  let sessionId: string | null = null;
  let modelVersion: string | undefined;
  let status = 'active';
  try {
    const created = await http.post<{ id: string; modelVersion: string }>('/v1/sessions', {
      taskId: tid,
      instructions: env.instructions,
      maxAttempts: opts.attempts,
      maxSteps,
      memory: 'reflection_only',
      mode: opts.mode ?? 'eval',
      sampling: { ...sampling, seed: samplingSeed },
      env: opts.env,
      ...(opts.modelVersion ? { modelVersion: opts.modelVersion } : {}),
      metadata: { harness: 'lamer eval', trial, seed },
    });
    sessionId = created.id;
    modelVersion = created.modelVersion;
    for (let n = 0; n < opts.attempts && status === 'active'; n++) {
      const first = env.reset(seed);
      const rec: AttemptRecord = { attempt: n, success: false, return: 0, actions: 0, invalidActions: 0, endReason: 'max_steps', trajectory: [] };
      attempts.push(rec);
      let body: Record<string, unknown> = { attempt: n, step: 0, observation: first.observation, ...avail(opts, env) };
      for (let t = 0; ; t++) {
        const ans = await http.post<StepAnswer>(`/v1/sessions/${sessionId}/steps`, body, { idempotent: true });
        status = ans.session.status;
        if (ans.action === null) {
          if (ans.attemptResult) rec.endReason = ans.attemptResult.endReason;
          if (ans.reflection) rec.reflection = ans.reflection.text;
          break;
        }
        if (t >= maxSteps) throw new Error(`server returned an action at step ${t} beyond maxSteps ${maxSteps}`);
        const r = env.step(ans.action);
        rec.actions++;
        rec.return += r.reward;
        if (r.invalidAction) rec.invalidActions++;
        rec.trajectory.push(canonicalAction(opts.env, ans.action));
        if (r.done) {
          rec.success = r.success;
          rec.endReason = 'done';
        }
        body = {
          attempt: n,
          step: t + 1,
          observation: r.observation,
          reward: r.reward,
          done: r.done,
          ...(r.done ? { success: r.success } : {}),
          invalidAction: r.invalidAction,
          ...(r.done ? {} : avail(opts, env)),
        };
      }
      rec.return = round6(rec.return);
      if (rec.success) break;
    }
    return { taskId: tid, trial, sessionId, modelVersion, attempts };
  } catch (err) {
    if (sessionId && status === 'active' && !httpOpts.signal?.aborted) await http.del(`/v1/sessions/${sessionId}`).catch(() => undefined);
    const rec = { taskId: tid, trial, ...(sessionId ? { sessionId, modelVersion } : {}), attempts, error: err instanceof Error ? err.message : String(err) };
    return sessionId ? rec : { ...rec, createError: { status: err instanceof HttpError ? err.status : 0, why: describeHttpFailure(err) } };
  }
}

function avail(opts: EvalOptions, env: BuiltinEnv): { availableActions?: string[] } {
  if (!opts.availableActions) return {};
  const a = env.legalActions();
  return a.length > 0 && a.length <= 512 ? { availableActions: a } : {};
}

function round6(x: number): number {
  return Math.round(x * 1e6) / 1e6;
}
