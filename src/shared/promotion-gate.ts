/**
 * The promotion gate of a training job (docs/training.md "Promotion gate"), as configured: a
 * held-out evaluation of the new version and of the active one on the same tasks, and the margin
 * the new one must beat for it to be activated. Shared by the job rules (src/training/service.ts),
 * the job runner (src/training/run/gate.ts) and the configuration (LAMER_TRAIN_GATE_*,
 * src/config.ts), so the three check a gate the same way.
 *
 * Units: pass rates and the margin are fractions in [0, 1] (a margin of 0.05 is 5 points of pass@k).
 */
import { canonicalEnvName, EVAL_SEED_START, SEED_END, taskSeedOf } from './env-names.js';

/** How the paired difference is compared with the margin. */
export const GATE_DECISIONS = ['mean', 'lower-bound'] as const;
export type GateDecision = (typeof GATE_DECISIONS)[number];

/** A gate's states: pending (training), running, passed, failed (margin not beaten), error (not judged), cancelled. */
export const GATE_STATUSES = ['pending', 'running', 'passed', 'failed', 'error', 'cancelled'] as const;
export type GateStatus = (typeof GATE_STATUSES)[number];

/** Most held-out tasks of one gate (each is played once by each of the two versions). */
export const MAX_GATE_TASKS = 10_000;
/** Most attempts per gate session (the server's default LAMER_MAX_ATTEMPTS). */
export const MAX_GATE_ATTEMPTS = 10;
/** Most gate sessions played at once per version. */
export const MAX_GATE_CONCURRENCY = 64;
/** Bootstrap resamples and level of the paired interval. */
export const GATE_BOOTSTRAP = { resamples: 10_000, level: 0.95 } as const;

/** Sampling of the gate's sessions. */
export interface GateSampling {
  temperature: number;
  topP: number;
  topK: number;
}

/** A gate as a client may give it (the CreateJob body's `gate`, or LAMER_TRAIN_GATE_*): env and tasks required. */
export interface GateInput {
  env: string;
  tasks: number;
  attempts?: number;
  seedStart?: number;
  metric?: string;
  margin?: number;
  decision?: GateDecision;
  concurrency?: number;
  availableActions?: boolean;
  sampling?: GateSampling;
}

/** A gate with every field set: the env as its full name (`minesweeper` -> `minesweeper-6x6-3`). */
export interface GateSpec {
  /** Full env name; its tasks are `<env>:seed=<seed>`. */
  env: string;
  /** Held-out tasks, seeds seedStart .. seedStart + tasks - 1. */
  tasks: number;
  /** Attempts per session (a LaMer session: reflections between attempts). */
  attempts: number;
  /** First seed, in the held-out range [1e9, 2^32). */
  seedStart: number;
  /** `pass@k`, 1 <= k <= attempts. */
  metric: string;
  /** The new version must beat the active one by more than this (fraction in [-1, 1]). */
  margin: number;
  /** `mean`: the mean paired difference must exceed the margin; `lower-bound`: the 95% interval's lower end must. */
  decision: GateDecision;
  /** Sessions played at once per version. */
  concurrency: number;
  /** Send the env's legal actions as `availableActions` (the model then picks one of them). */
  availableActions: boolean;
  sampling: GateSampling;
}

/** The evaluation sampling of the LaMer paper, what `lamer eval` plays at by default. */
export const GATE_DEFAULT_SAMPLING: GateSampling = { temperature: 0.7, topP: 0.8, topK: 20 };

/** Defaults of the optional gate fields (`metric` defaults to pass@<attempts>). */
export const GATE_DEFAULTS = {
  attempts: 3, seedStart: EVAL_SEED_START, margin: 0, decision: 'mean' as GateDecision, concurrency: 4, availableActions: true,
};

/** A gate field at fault, relative to the gate object (`tasks`, `seedStart`, ...), and why. */
export interface GateProblem {
  field: string;
  message: string;
}

/** The k of a metric `pass@k`, or null when it is not of that form. */
export function metricK(metric: string): number | null {
  const m = /^pass@([1-9]\d{0,2})$/.exec(metric);
  return m ? Number(m[1]) : null;
}

const isInt = (x: unknown, lo: number, hi: number) => typeof x === 'number' && Number.isInteger(x) && x >= lo && x <= hi;

/** The problem with the env, task and seed fields, or null. */
function rangeProblem(g: GateInput, attempts: number, seedStart: number): GateProblem | null {
  try {
    canonicalEnvName(g.env);
  } catch (err) {
    return { field: 'env', message: (err as Error).message };
  }
  if (!isInt(g.tasks, 1, MAX_GATE_TASKS)) {
    return { field: 'tasks', message: `must be an integer in [1, ${MAX_GATE_TASKS}], got ${g.tasks}` };
  }
  if (!isInt(attempts, 1, MAX_GATE_ATTEMPTS)) {
    return { field: 'attempts', message: `must be an integer in [1, ${MAX_GATE_ATTEMPTS}], got ${attempts}` };
  }
  if (!isInt(seedStart, EVAL_SEED_START, SEED_END - 1)) {
    const range = `[${EVAL_SEED_START}, 2^32) (training seeds are below ${EVAL_SEED_START})`;
    return { field: 'seedStart', message: `must be a held-out seed, an integer in ${range}, got ${seedStart}` };
  }
  if (seedStart + g.tasks > SEED_END) {
    return { field: 'seedStart', message: `seedStart + tasks = ${seedStart + g.tasks} runs past the last seed 2^32 - 1` };
  }
  return null;
}

/**
 * What is wrong with gate `g`, or null when nothing is: the env is a built-in one with valid
 * parameters; tasks, attempts and concurrency within their bounds; the seed range inside the
 * held-out range; the metric `pass@k` with k <= attempts; the margin in [-1, 1]; the sampling
 * within the session's bounds.
 */
export function gateProblem(g: GateInput): GateProblem | null {
  const attempts = g.attempts ?? GATE_DEFAULTS.attempts;
  const problem = rangeProblem(g, attempts, g.seedStart ?? GATE_DEFAULTS.seedStart);
  if (problem) return problem;
  const metric = g.metric ?? `pass@${attempts}`;
  const k = metricK(metric);
  if (k === null) return { field: 'metric', message: `must be pass@k (e.g. pass@1, pass@3), got '${metric}'` };
  if (k > attempts) return { field: 'metric', message: `${metric} needs at least ${k} attempts; the gate plays ${attempts}` };
  const margin = g.margin ?? GATE_DEFAULTS.margin;
  if (!(typeof margin === 'number' && margin >= -1 && margin <= 1)) {
    return { field: 'margin', message: `must be a fraction in [-1, 1] (0.05 = 5 points of ${metric}), got ${margin}` };
  }
  if (g.decision !== undefined && !(GATE_DECISIONS as readonly string[]).includes(g.decision)) {
    return { field: 'decision', message: `must be one of ${GATE_DECISIONS.join(', ')}` };
  }
  if (g.concurrency !== undefined && !isInt(g.concurrency, 1, MAX_GATE_CONCURRENCY)) {
    return { field: 'concurrency', message: `must be an integer in [1, ${MAX_GATE_CONCURRENCY}]` };
  }
  const s = g.sampling;
  if (s && !(s.temperature >= 0 && s.temperature <= 10 && s.topP > 0 && s.topP <= 1 && isInt(s.topK, 0, 1_000_000))) {
    return { field: 'sampling', message: 'temperature must be in [0, 10], topP in (0, 1], topK an integer >= 0' };
  }
  return null;
}

/** Gate `g` with its defaults filled in and its env as the full name. @throws RangeError when `gateProblem(g)` finds a problem. */
export function resolveGate(g: GateInput): GateSpec {
  const problem = gateProblem(g);
  if (problem) throw new RangeError(`gate ${problem.field}: ${problem.message}`);
  const attempts = g.attempts ?? GATE_DEFAULTS.attempts;
  return {
    env: canonicalEnvName(g.env),
    tasks: g.tasks,
    attempts,
    seedStart: g.seedStart ?? GATE_DEFAULTS.seedStart,
    metric: g.metric ?? `pass@${attempts}`,
    margin: g.margin ?? GATE_DEFAULTS.margin,
    decision: g.decision ?? GATE_DEFAULTS.decision,
    concurrency: g.concurrency ?? GATE_DEFAULTS.concurrency,
    availableActions: g.availableActions ?? GATE_DEFAULTS.availableActions,
    sampling: g.sampling ?? { ...GATE_DEFAULT_SAMPLING },
  };
}

/**
 * The first of `taskIds` (training data: recorded sessions or demonstrations) that is one of the
 * gate's tasks (same env name, seed in the gate's range), or null. Task ids of other forms or
 * other envs cannot be among them.
 */
export function gateOverlap(spec: Pick<GateSpec, 'env' | 'tasks' | 'seedStart'>, taskIds: Iterable<string>): string | null {
  for (const id of taskIds) {
    const t = taskSeedOf(id);
    if (t && t.envName === spec.env && t.seed >= spec.seedStart && t.seed < spec.seedStart + spec.tasks) return id;
  }
  return null;
}
