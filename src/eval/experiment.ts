/**
 * The experiment driver behind `lamer train`: alternate rollouts through the HTTP
 * API with a built-in environment and training jobs started through the same API, and record a
 * learning curve.
 *
 * Iteration k (0-based):
 *   1. rollouts: T tasks from the training seed range (trainSeed(seed + k*T, i), fresh tasks every
 *      iteration) played by the eval harness (src/eval/harness.ts, mode 'train', training sampling
 *      temperature 1.0, docs/method.md#defaults):
 *      - `lamer`: G sessions per task of 3 attempts each, memory reflection_only (G trials x 3);
 *      - single-attempt baselines (`gigpo`, `grpo`, `rloo`): 3G sessions per task with
 *        maxAttempts 1, so both see 3G trajectories per task;
 *   2. a training job (POST /v1/training/jobs) on exactly those sessions (filter: the iteration's
 *      task ids, created since the iteration started, the version that played them), with
 *      activateWhenDone, awaited by polling GET /v1/training/jobs/{id};
 *   3. a learning-curve point: mean return and pass@1..3 of the rollouts, the job's mean loss and
 *      entropy (also over action and reflection tokens apart), zero-advantage groups (trained, no
 *      signal), output tokens trained and how many were reflections, positions processed, seconds.
 * pass@k of the single-attempt rollouts reads each task's 3G sessions as G triples of independent
 * retries (sessions 3m, 3m+1, 3m+2, in trial order), the way the paper evaluates those baselines.
 * Units: seconds; returns are undiscounted sums of the env's rewards. The learning-curve chart is
 * drawn by ./chart-svg.ts.
 */
import { FINISHED_JOB_STATUSES, type EnvKind, type RlAlgorithm } from '../domain.js';
import { makeEnv, taskId as makeTaskId, trainSeed, type EnvParams } from '../envs/index.js';
import { runEval } from './harness.js';
import { Http } from './http.js';
import { summarize, type SessionRecord } from './metrics.js';

export type ExperimentAlgorithm = RlAlgorithm;

export interface ExperimentOptions {
  env: EnvKind;
  params?: EnvParams;
  algorithm: ExperimentAlgorithm;
  iterations: number;
  /** Tasks per iteration (T). */
  tasksPerIter: number;
  /** Group size G: LaMer trials per task; baselines play 3G single attempts per task. */
  group: number;
  server: string;
  apiKey?: string;
  /** Offset into the training seed range. Default 0. */
  seed?: number;
  /** Sessions in flight during rollouts. Default 32. */
  concurrency?: number;
  /** Rollout sampling. Default temperature 1, top-p 1, top-k 0 (docs/method.md#defaults: T = 1.0 in training). */
  sampling?: { temperature: number; topP: number; topK: number };
  maxSteps?: number;
  availableActions?: boolean;
  /** Training job hyperparameters (POST /v1/training/jobs `hyperparameters`). */
  hyperparameters?: Record<string, unknown>;
  /** Called with a line of progress text. */
  log?: (line: string) => void;
  onRollout?: (done: number, total: number) => void;
  onJob?: (progress: number, iteration: number) => void;
  /** Called after each iteration with the curve so far (e.g. to write files). */
  onPoint?: (points: CurvePoint[]) => void | Promise<void>;
  /** Job poll interval, ms. Default 1000. */
  pollMs?: number;
  /** Wall-clock budget, seconds: no iteration starts when the time so far plus the longest
   *  iteration so far would exceed it. Default: none (all `iterations`). */
  maxWallSeconds?: number;
}

export interface CurvePoint {
  iteration: number;
  /** Version that played the rollouts. */
  rolloutVersion: string;
  /** Version the job produced (active afterwards). */
  trainedVersion: string | null;
  jobId: string;
  jobStatus: string;
  sessions: number;
  /** Mean return over every played attempt. */
  meanReturn: number;
  /** Mean return of the first attempt. */
  meanReturnFirstAttempt: number | null;
  /** pass@1..3 of the rollouts (see the module doc for single-attempt baselines). */
  passAtK: Record<string, number>;
  invalidActionRate: number;
  /** Means over the job's optimiser steps. */
  loss: number | null;
  entropy: number | null;
  clipFrac: number | null;
  /** Advantage groups (task ids) of the job's data. */
  groups: number | null;
  /** Of those, groups whose advantages are all 0 (trained all the same; they dilute the token mean). */
  zeroAdvantageGroups: number | null;
  samples: number | null;
  /** Trained output tokens of the job's data, and of those the reflection turns' (its dataStats;
   *  absent in curves recorded before they were). */
  outputTokens?: number | null;
  reflectionTokens?: number | null;
  /** The job's entropy over its action tokens alone and over its reflection tokens alone (means
   *  over the optimiser steps that trained such tokens; null when none did; absent in older curves). */
  actionEntropy?: number | null;
  reflectionEntropy?: number | null;
  /** Non-padding positions the job's steps processed (prompts included). */
  tokensTrained: number;
  rolloutSeconds: number;
  trainSeconds: number;
  /** Since the experiment started. */
  wallSeconds: number;
  rolloutErrors: number;
}

export interface ExperimentResult {
  config: Omit<ExperimentOptions, 'log' | 'onRollout' | 'onJob' | 'onPoint' | 'apiKey'>;
  points: CurvePoint[];
  startedAt: string;
  wallSeconds: number;
}

const ATTEMPTS = 3;

/** Regroup single-attempt sessions of one task (trial order) into triples of independent retries. */
export function asIndependentRetries(sessions: readonly SessionRecord[], k = ATTEMPTS): SessionRecord[] {
  const byTask = new Map<string, SessionRecord[]>();
  for (const s of sessions) byTask.set(s.taskId, [...(byTask.get(s.taskId) ?? []), s]);
  const out: SessionRecord[] = [];
  for (const [taskId, list] of byTask) {
    list.sort((a, b) => a.trial - b.trial);
    for (let m = 0; m + k <= list.length; m += k) {
      const rec: SessionRecord = { taskId, trial: m / k, attempts: [] };
      for (let n = 0; n < k; n++) {
        const a = list[m + n]!.attempts[0];
        if (!a) break;
        rec.attempts.push({ ...a, attempt: n });
        if (a.success) break;
      }
      out.push(rec);
    }
  }
  return out;
}

/**
 * The experiment's calls besides rollouts (which go through the eval harness): GETs (job polls,
 * the active model) retry like the harness does (408/429/503, network errors: `Http`), so one
 * refused poll does not end a run of many iterations; POST (creating a training job) is sent once,
 * since a retry after a lost answer could start a second job.
 * @throws Error "METHOD path: HTTP status body" for a non-2xx answer
 */
class Api {
  private readonly http: Http;
  constructor(private base: string, private apiKey?: string) {
    this.base = base.replace(/\/+$/, '');
    this.http = new Http(this.base, apiKey, 120_000);
  }
  async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    if (method === 'GET') return this.http.get<T>(path);
    const headers: Record<string, string> = {};
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (this.apiKey) headers.authorization = `Bearer ${this.apiKey}`;
    const res = await fetch(this.base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path}: HTTP ${res.status} ${text.slice(0, 500)}`);
    return JSON.parse(text) as T;
  }
}

interface JobView {
  id: string;
  status: string;
  progress: number;
  resultVersion: string | null;
  error: string | null;
  dataStats: { groups: number; zeroAdvantageGroups: number; samples: number; outputTokens?: number; reflectionTokens?: number } | null;
  metrics: Array<{ loss: number; entropy: number; clipFrac: number; tokens: number; seconds: number; actionEntropy?: number | null; reflectionEntropy?: number | null }>;
}

const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null);

/** One iteration's rollouts, summarised (pass@k of single-attempt baselines as independent retries). */
interface Rollouts {
  sessions: number;
  errors: number;
  meanReturn: number;
  firstReturn: number | null;
  summary: ReturnType<typeof summarize>;
  seconds: number;
}

/** Play iteration `it`'s rollouts with the eval harness (mode 'train') and summarise them. */
async function playRollouts(opts: ExperimentOptions, it: number, seed: number, active: string, log: (line: string) => void): Promise<Rollouts> {
  const lamer = opts.algorithm === 'lamer';
  const t0 = Date.now();
  const trials = lamer ? opts.group : ATTEMPTS * opts.group;
  log(`iteration ${it}: rollouts of ${active}: ${opts.tasksPerIter} tasks x ${trials} sessions x ${lamer ? ATTEMPTS : 1} attempts`);
  const report = await runEval({
    env: opts.env, params: opts.params, tasks: opts.tasksPerIter, attempts: lamer ? ATTEMPTS : 1, trials,
    concurrency: opts.concurrency ?? 32, seed, policy: 'model', server: opts.server, apiKey: opts.apiKey,
    maxSteps: opts.maxSteps, sampling: opts.sampling ?? { temperature: 1, topP: 1, topK: 0 }, availableActions: opts.availableActions, mode: 'train',
    onSession: (done, total) => opts.onRollout?.(done, total),
  });
  const seconds = (Date.now() - t0) / 1000;
  const ok = report.sessions.filter((s) => !s.error);
  const summary = summarize(lamer ? ok : asIndependentRetries(ok), ATTEMPTS);
  const meanReturn = mean(ok.flatMap((s) => s.attempts).map((a) => a.return)) ?? 0;
  const firstReturn = mean(ok.map((s) => s.attempts[0]?.return).filter((x): x is number => x !== undefined));
  const errors = report.sessions.length - ok.length;
  log(`iteration ${it}: rollouts done in ${seconds.toFixed(1)} s: mean return ${meanReturn.toFixed(2)}, pass@1..3 ${summary.passAtK['1']?.toFixed(3)} ${summary.passAtK['2']?.toFixed(3)} ${summary.passAtK['3']?.toFixed(3)}, ${errors} errors`);
  return { sessions: ok.length, errors, meanReturn, firstReturn, summary, seconds };
}

/**
 * Start a training job on exactly the iteration's sessions (its task ids, created since `since`,
 * played by `active`) with activateWhenDone, and poll it until it ends.
 * @throws Error when the job does not succeed (a job with no training samples is returned).
 */
async function trainOnRollouts(api: Api, opts: ExperimentOptions, it: number, taskIds: string[], since: string, active: string): Promise<{ job: JobView; seconds: number }> {
  const t1 = Date.now();
  const created = await api.call<JobView>('POST', '/v1/training/jobs', {
    algorithm: opts.algorithm,
    data: { taskIds, since, modelVersion: active },
    activateWhenDone: true,
    ...(opts.hyperparameters ? { hyperparameters: opts.hyperparameters } : {}),
  });
  let job = created;
  while (!(FINISHED_JOB_STATUSES as readonly string[]).includes(job.status)) {
    await new Promise((r) => setTimeout(r, opts.pollMs ?? 1000));
    job = await api.call<JobView>('GET', `/v1/training/jobs/${created.id}`);
    opts.onJob?.(job.progress, it);
  }
  const seconds = (Date.now() - t1) / 1000;
  const failedNoData = job.status === 'failed' && /no training samples/.test(job.error ?? '');
  if (job.status !== 'succeeded' && !failedNoData) throw new Error(`training job ${job.id} ${job.status}: ${job.error ?? ''}`);
  return { job, seconds };
}

/** The learning-curve point of one iteration. */
function curvePoint(it: number, active: string, r: Rollouts, job: JobView, trainSeconds: number, started: number): CurvePoint {
  return {
    iteration: it,
    rolloutVersion: active,
    trainedVersion: job.resultVersion,
    jobId: job.id,
    jobStatus: job.status,
    sessions: r.sessions,
    meanReturn: r.meanReturn,
    meanReturnFirstAttempt: r.firstReturn,
    passAtK: r.summary.passAtK,
    invalidActionRate: r.summary.invalidActionRate,
    loss: mean(job.metrics.map((x) => x.loss)),
    entropy: mean(job.metrics.map((x) => x.entropy)),
    clipFrac: mean(job.metrics.map((x) => x.clipFrac)),
    groups: job.dataStats?.groups ?? null,
    zeroAdvantageGroups: job.dataStats?.zeroAdvantageGroups ?? null,
    samples: job.dataStats?.samples ?? null,
    outputTokens: job.dataStats?.outputTokens ?? null,
    reflectionTokens: job.dataStats?.reflectionTokens ?? null,
    actionEntropy: mean(job.metrics.map((x) => x.actionEntropy).filter((x): x is number => typeof x === 'number')),
    reflectionEntropy: mean(job.metrics.map((x) => x.reflectionEntropy).filter((x): x is number => typeof x === 'number')),
    tokensTrained: job.metrics.reduce((a, x) => a + x.tokens, 0),
    rolloutSeconds: r.seconds,
    trainSeconds,
    wallSeconds: (Date.now() - started) / 1000,
    rolloutErrors: r.errors,
  };
}

/**
 * Run the experiment. @throws RangeError for bad options; Error when the server refuses a job or a
 * job fails (the points so far have been passed to onPoint).
 */
export async function runExperiment(opts: ExperimentOptions): Promise<ExperimentResult> {
  for (const [k, v] of [['iterations', opts.iterations], ['tasksPerIter', opts.tasksPerIter], ['group', opts.group]] as const) {
    if (!Number.isInteger(v) || v < 1) throw new RangeError(`${k} must be an integer >= 1, got ${v}`);
  }
  const api = new Api(opts.server, opts.apiKey);
  const log = opts.log ?? (() => undefined);
  const seed0 = opts.seed ?? 0;
  const envName = makeEnv(opts.env, opts.params).name;
  const started = Date.now();
  const points: CurvePoint[] = [];
  const { log: _l, onRollout: _r, onJob: _j, onPoint: _p, apiKey: _k, ...config } = opts;
  let longest = 0;
  for (let it = 0; it < opts.iterations; it++) {
    const elapsed = (Date.now() - started) / 1000;
    if (opts.maxWallSeconds !== undefined && it > 0 && elapsed + longest > opts.maxWallSeconds) {
      log(`stopping after ${it} iterations: ${elapsed.toFixed(0)} s + ${longest.toFixed(0)} s for another would pass the ${opts.maxWallSeconds} s budget`);
      break;
    }
    const seed = seed0 + it * opts.tasksPerIter;
    const taskIds = Array.from({ length: opts.tasksPerIter }, (_, i) => makeTaskId(envName, trainSeed(seed, i)));
    const active = (await api.call<{ active: string }>('GET', '/v1/models')).active;
    // the server's clock decides `since`; one second of slack for clock granularity
    const since = new Date(Date.now() - 1000).toISOString();
    const rollouts = await playRollouts(opts, it, seed, active, log);
    const { job, seconds: trainSeconds } = await trainOnRollouts(api, opts, it, taskIds, since, active);
    const point = curvePoint(it, active, rollouts, job, trainSeconds, started);
    points.push(point);
    longest = Math.max(longest, point.rolloutSeconds + point.trainSeconds);
    log(`iteration ${it}: job ${job.id} ${job.status} in ${trainSeconds.toFixed(1)} s -> ${job.resultVersion ?? '(no new version: no training samples)'}; loss ${point.loss?.toFixed(4) ?? '-'}, entropy ${point.entropy?.toFixed(3) ?? '-'}, zero-advantage groups ${point.zeroAdvantageGroups ?? '-'}/${point.groups ?? '-'}, ${point.tokensTrained} tokens; entropy of actions ${point.actionEntropy?.toFixed(3) ?? '-'}, of reflections ${point.reflectionEntropy?.toFixed(3) ?? '-'} (${point.reflectionTokens ?? '-'} of ${point.outputTokens ?? '-'} output tokens)`);
    await opts.onPoint?.(points);
  }
  return { config, points, startedAt: new Date(started).toISOString(), wallSeconds: (Date.now() - started) / 1000 };
}
