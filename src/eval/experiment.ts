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
 *      entropy (also over action and reflection tokens apart), clip fraction and KL(old || new) of
 *      its steps, zero-advantage groups (trained, no signal), output tokens trained and how many
 *      were reflections, positions processed, seconds; and, from ./experiment-probes.ts, the KL of
 *      the rollout policy from the start version (`klEvery`) and the held-out pass@k of the version
 *      the job trained (`heldOut`, also measured once for the start version before iteration 0).
 * Resuming (`resume`): the points of an earlier run of the same settings are taken as iterations
 * 0..n-1, and iteration n starts from the server's active version, which must be the version the
 * last point trained (the caller activates it). Every iteration's randomness is a function of its
 * index alone (task seeds seed + k*T + i, sampling seeds from those, the job's fixed shuffle seed;
 * each job starts a fresh optimiser from the version it trains), so a resumed run plays and trains
 * what an unbroken one would from the same weights.
 * pass@k of the single-attempt rollouts reads each task's 3G sessions as G triples of independent
 * retries (sessions 3m, 3m+1, 3m+2, in trial order), the way the paper evaluates those baselines.
 * Units: seconds; returns are undiscounted sums of the env's rewards. The learning-curve chart is
 * drawn by ./chart-svg.ts.
 */
import { FINISHED_JOB_STATUSES, type EnvKind, type RlAlgorithm } from '../domain.js';
import { makeEnv, taskId as makeTaskId, trainSeed, type EnvParams } from '../envs/index.js';
import { heldOutProbe, klSessions, klToStart, type HeldOutFigures, type HeldOutSettings, type KlEstimate } from './experiment-probes.js';
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
  /** Called after each iteration with the curve so far and the run's state (e.g. to write files). */
  onPoint?: (points: CurvePoint[], state: IterationState) => void | Promise<void>;
  /** Job poll interval, ms. Default 1000. */
  pollMs?: number;
  /** Wall-clock budget of this call, seconds: no iteration starts when the time so far plus the
   *  longest iteration so far would exceed it. Default: none (all `iterations`). */
  maxWallSeconds?: number;
  /** Held-out probe of each trained version (./experiment-probes.ts). Default: none. */
  heldOut?: HeldOutSettings;
  /** Measure the KL of the rollout policy from the start version at every `klEvery`-th iteration
   *  (0: never). Default 1. */
  klEvery?: number;
  /** An earlier run of the same settings to continue (module doc). */
  resume?: { points: CurvePoint[]; startVersion: string; heldOutStart: HeldOutFigures | null; startedAt?: string };
}

/** The run's state after an iteration, beside its points. */
export interface IterationState {
  /** The version iteration 0 played (the start of every "to the start" figure). */
  startVersion: string;
  heldOutStart: HeldOutFigures | null;
  /** The job of the iteration just done, as GET /v1/training/jobs/{id} answered. */
  job: JobView;
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
  /** Mean over the job's optimiser steps of approxKl, KL(old || new) within the job (docs/method.md
   *  "The PPO loss"); absent in curves recorded before it was. */
  approxKl?: number | null;
  /** KL(rollout policy || start version), nats per action token (./experiment-probes.ts klToStart);
   *  0 when the rollouts were played by the start version; null when not measured this iteration. */
  klToStart?: number | null;
  /** The action tokens that estimate stands on. */
  klToStartTokens?: number | null;
  /** Held-out figures of `trainedVersion` (null when not probed this iteration). */
  heldOut?: HeldOutFigures | null;
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
  /** Seconds of work since iteration 0 began (the time between a run and its resumption not counted). */
  wallSeconds: number;
  rolloutErrors: number;
}

export interface ExperimentResult {
  config: Omit<ExperimentOptions, 'log' | 'onRollout' | 'onJob' | 'onPoint' | 'apiKey' | 'resume'>;
  startVersion: string;
  /** Held-out figures of the start version (null without `heldOut`). */
  heldOutStart: HeldOutFigures | null;
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

export interface JobView {
  id: string;
  status: string;
  progress: number;
  resultVersion: string | null;
  error: string | null;
  dataStats: { groups: number; zeroAdvantageGroups: number; samples: number; outputTokens?: number; reflectionTokens?: number } | null;
  metrics: Array<{
    loss: number; entropy: number; clipFrac: number; approxKl: number; tokens: number; seconds: number;
    actionEntropy?: number | null; reflectionEntropy?: number | null;
  }>;
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
  /** The sessions played to the end. */
  played: SessionRecord[];
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
  return { sessions: ok.length, errors, meanReturn, firstReturn, summary, seconds, played: ok };
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
    approxKl: mean(job.metrics.map((x) => x.approxKl)),
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

/** Held-out figures as one line. */
const heldOutText = (h: HeldOutFigures): string =>
  `pass@1 ${h.passAtK['1']?.toFixed(3)}, pass@3 ${h.passAtK['3']?.toFixed(3)} (${h.tasks} tasks, ${h.seconds.toFixed(1)} s)`;

/** Whether iteration `it` (0-based) of `iterations` is probed at cadence `every`: every `every`-th iteration and the last (0: never). */
export function probesAt(it: number, every: number, iterations: number): boolean {
  return every > 0 && ((it + 1) % every === 0 || it === iterations - 1);
}

/** KL of the rollouts' policy from the start (0 when the start played them); null, logged, when the replays fail. */
async function measureKl(
  opts: ExperimentOptions, r: Rollouts, active: string, startVersion: string, log: (line: string) => void,
): Promise<KlEstimate | null> {
  if (active === startVersion) return { kl: 0, tokens: 0, calls: 0, sessions: 0, outsideSupport: 0 };
  try {
    const kl = await klToStart(opts, klSessions(r.played, opts.algorithm === 'lamer'), startVersion);
    if (kl.outsideSupport > 0) log(`KL to ${startVersion}: ${kl.outsideSupport} recorded tokens outside its support, left out`);
    return kl;
  } catch (err) {
    log(`KL to ${startVersion} not measured: ${err instanceof Error ? err.message : String(err)}`);
    return null;
  }
}

/** One iteration: rollouts, the KL probe, the job, the held-out probe; its point and its job. */
async function runIteration(
  api: Api, opts: ExperimentOptions, it: number, run: { envName: string; startVersion: string; started: number },
  log: (line: string) => void,
): Promise<{ point: CurvePoint; job: JobView }> {
  const lamer = opts.algorithm === 'lamer';
  const seed = (opts.seed ?? 0) + it * opts.tasksPerIter;
  const taskIds = Array.from({ length: opts.tasksPerIter }, (_, i) => makeTaskId(run.envName, trainSeed(seed, i)));
  const active = (await api.call<{ active: string }>('GET', '/v1/models')).active;
  // the server's clock decides `since`; one second of slack for clock granularity
  const since = new Date(Date.now() - 1000).toISOString();
  const rollouts = await playRollouts(opts, it, seed, active, log);
  const kl = probesAt(it, opts.klEvery ?? 1, opts.iterations) ? await measureKl(opts, rollouts, active, run.startVersion, log) : null;
  const { job, seconds: trainSeconds } = await trainOnRollouts(api, opts, it, taskIds, since, active);
  const probe = opts.heldOut && probesAt(it, opts.heldOut.every, opts.iterations) ? opts.heldOut : null;
  const heldOut = probe ? await heldOutProbe(opts, probe, job.resultVersion ?? active, lamer) : null;
  const point: CurvePoint = {
    ...curvePoint(it, active, rollouts, job, trainSeconds, run.started), klToStart: kl?.kl ?? null, klToStartTokens: kl?.tokens ?? null, heldOut,
  };
  log(`iteration ${it}: job ${job.id} ${job.status} in ${trainSeconds.toFixed(1)} s -> ${job.resultVersion ?? '(no new version: no training samples)'}; loss ${point.loss?.toFixed(4) ?? '-'}, entropy ${point.entropy?.toFixed(3) ?? '-'}, zero-advantage groups ${point.zeroAdvantageGroups ?? '-'}/${point.groups ?? '-'}, ${point.tokensTrained} tokens; entropy of actions ${point.actionEntropy?.toFixed(3) ?? '-'}, of reflections ${point.reflectionEntropy?.toFixed(3) ?? '-'} (${point.reflectionTokens ?? '-'} of ${point.outputTokens ?? '-'} output tokens)`);
  const klText = kl ? `${kl.kl.toFixed(5)} (${kl.tokens} tokens)` : '-';
  log(`iteration ${it}: clip fraction ${point.clipFrac?.toFixed(4) ?? '-'}, KL to ${run.startVersion} ${klText}${heldOut ? `; held-out ${heldOutText(heldOut)}` : ''}`);
  return { point, job };
}

/**
 * Run the experiment (from iteration 0, or after `resume.points`). @throws RangeError for bad
 * options; Error when the server's active version is not the one a resumed run's last point
 * trained, when the server refuses a job or a job fails (the points so far have been passed to
 * onPoint).
 */
export async function runExperiment(opts: ExperimentOptions): Promise<ExperimentResult> {
  for (const [k, v] of [['iterations', opts.iterations], ['tasksPerIter', opts.tasksPerIter], ['group', opts.group]] as const) {
    if (!Number.isInteger(v) || v < 1) throw new RangeError(`${k} must be an integer >= 1, got ${v}`);
  }
  const h = opts.heldOut;
  if (h && !(Number.isInteger(h.tasks) && h.tasks >= 1 && Number.isInteger(h.every) && h.every >= 1)) {
    throw new RangeError(`heldOut.tasks and heldOut.every must be integers >= 1, got ${h.tasks} and ${h.every}`);
  }
  const api = new Api(opts.server, opts.apiKey);
  const log = opts.log ?? (() => undefined);
  const t0 = Date.now();
  const points: CurvePoint[] = [...(opts.resume?.points ?? [])];
  // a point's wallSeconds counts the seconds of work since iteration 0, earlier runs' included
  const started = t0 - 1000 * (points.at(-1)?.wallSeconds ?? 0);
  const { log: _l, onRollout: _r, onJob: _j, onPoint: _p, apiKey: _k, resume: _s, ...config } = opts;
  const active = (await api.call<{ active: string }>('GET', '/v1/models')).active;
  const last = points.at(-1);
  if (last && active !== (last.trainedVersion ?? last.rolloutVersion)) {
    const left = last.trainedVersion ?? last.rolloutVersion;
    throw new Error(`cannot resume: the server's active version is '${active}', iteration ${last.iteration} left '${left}'`);
  }
  const startVersion = last ? opts.resume!.startVersion : active;
  let heldOutStart = last ? opts.resume!.heldOutStart : null;
  if (opts.heldOut && !last) {
    heldOutStart = await heldOutProbe(opts, opts.heldOut, active, opts.algorithm === 'lamer');
    log(`start ${active}: held-out ${heldOutText(heldOutStart)}`);
  }
  const run = { envName: makeEnv(opts.env, opts.params).name, startVersion, started };
  let longest = 0;
  for (let it = points.length; it < opts.iterations; it++) {
    const elapsed = (Date.now() - t0) / 1000;
    if (opts.maxWallSeconds !== undefined && longest > 0 && elapsed + longest > opts.maxWallSeconds) {
      log(`stopping after ${it} iterations: ${elapsed.toFixed(0)} s + ${longest.toFixed(0)} s for another would pass the ${opts.maxWallSeconds} s budget`);
      break;
    }
    const { point, job } = await runIteration(api, opts, it, run, log);
    points.push(point);
    longest = Math.max(longest, point.rolloutSeconds + point.trainSeconds);
    await opts.onPoint?.(points, { startVersion, heldOutStart, job });
  }
  const startedAt = (last && opts.resume?.startedAt) || new Date(t0).toISOString();
  return { config, startVersion, heldOutStart, points, startedAt, wallSeconds: (Date.now() - started) / 1000 };
}
