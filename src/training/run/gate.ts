/**
 * The promotion gate's figures and report (docs/training.md "Promotion gate"). After a job trained
 * a new version (the candidate), the gate plays the same held-out tasks with it and with the
 * version active at that moment (the incumbent), one session per task and version with the
 * gate's attempts, and activates the candidate only when its pass@k beats the incumbent's by more
 * than the margin. The sessions are played by an evaluator module in a worker thread
 * (./gate-worker.ts; the default evaluator is src/cli/gate-eval.ts, which serves both versions
 * from a server of its own in that thread), so serving never waits on it.
 *
 * Figures (docs/method.md#metrics for pass@k): per task i, x_i = 1 when the version solved the
 * task within the metric's k attempts, else 0; the paired difference d_i = x_i(candidate) -
 * x_i(incumbent) over the tasks both played; its mean is pass@k(candidate) - pass@k(incumbent) on
 * those tasks, and its 95% interval the paired percentile bootstrap over tasks
 * (src/shared/bootstrap.ts, 10,000 resamples). Decision `mean`: mean > margin; `lower-bound`: the
 * interval's lower end > margin. A session that ended with an error makes the gate `error` (the
 * figures would not compare the two versions): the candidate is not activated.
 */
import { pairedBootstrap, type BootstrapInterval } from '../../shared/bootstrap.js';
import { passAtKRate } from '../../shared/passk.js';
import { GATE_BOOTSTRAP, metricK, type GateSpec, type GateStatus } from '../../shared/promotion-gate.js';

/** One task as a version played it in the gate: its first successful attempt (-1: none), and the session's error, if any. */
export interface GateTaskOutcome {
  taskId: string;
  firstSuccess: number;
  error?: string;
}

/** Both versions' outcomes, one per task each. */
export interface GateEvaluation {
  candidate: GateTaskOutcome[];
  incumbent: GateTaskOutcome[];
}

/** Which version a gate session played. */
export type GateRole = keyof GateEvaluation;

/** A version as the evaluator loads it: its name and checkpoint folder (empty for the test engine). */
export interface GateVersion {
  version: string;
  checkpointDir: string;
}

/** What the evaluator gets: the gate, how to serve, both versions and a scratch folder of its own. */
export interface GateEvaluateRequest {
  spec: GateSpec;
  /** The server's engine kind and tfjs backend, for the evaluator's own server. */
  engine: { kind: 'builtin' | 'test'; tfjsBackend: string };
  candidate: GateVersion;
  incumbent: GateVersion;
  /** An empty folder the evaluator may write (its database); removed by the caller afterwards. */
  workDir: string;
}

/** What the evaluator is told while it works. */
export interface GateEvaluateContext {
  signal: AbortSignal;
  /** Sessions finished so far (both versions) and in all. */
  onProgress(done: number, total: number): void;
}

/** An evaluator module's export: plays the gate's sessions. @throws when it cannot (the gate is then `error`). */
export type GateEvaluator = (req: GateEvaluateRequest, ctx: GateEvaluateContext) => Promise<GateEvaluation>;

/** The figures of an evaluation (see the top of this file). */
export interface GateFigures {
  /** pass@1..attempts of each version over its sessions (fractions). */
  candidatePassAtK: Record<string, number>;
  incumbentPassAtK: Record<string, number>;
  /** Paired difference candidate - incumbent of the metric over the tasks both played (fractions). */
  difference: BootstrapInterval | null;
  sessionErrors: { candidate: number; incumbent: number };
  /** `passed`, `failed` or `error` (sessions with errors, or no common task). */
  status: Extract<GateStatus, 'passed' | 'failed' | 'error'>;
  reason: string;
}

/** A gate's state and figures, on the job (`gate`) and on the version it judged (`metrics.gate`). */
export interface GateReport extends GateSpec {
  status: GateStatus;
  /** Share of the gate's sessions finished, in [0, 1]. */
  progress: number;
  /** The version judged. */
  candidate: string | null;
  /** The version it was compared with: the active one when the gate started. */
  incumbent: string | null;
  candidatePassAtK: Record<string, number> | null;
  incumbentPassAtK: Record<string, number> | null;
  difference: BootstrapInterval | null;
  sessionErrors: { candidate: number; incumbent: number } | null;
  /** Whether the gate activated the candidate. */
  promoted: boolean;
  /** Why it did or did not, in one sentence. */
  reason: string | null;
  startedAt: string | null;
  finishedAt: string | null;
}

/** The report of a gate not started yet. */
export function pendingReport(spec: GateSpec): GateReport {
  return {
    ...spec, status: 'pending', progress: 0, candidate: null, incumbent: null, candidatePassAtK: null, incumbentPassAtK: null,
    difference: null, sessionErrors: null, promoted: false, reason: null, startedAt: null, finishedAt: null,
  };
}

/** Points with a sign and one decimal: 0.023 -> "+2.3". */
const pts = (x: number) => `${x >= 0 ? '+' : ''}${(100 * x).toFixed(1)}`;

/** Attempts as passAtKRate reads them: f failures then a success, none for an unsolved task. */
const attemptsOf = (o: GateTaskOutcome) => Array.from({ length: o.firstSuccess + 1 }, (_, n) => ({ success: n === o.firstSuccess }));

/**
 * The figures and decision of an evaluation (see the top of this file). Runs in the gate's worker
 * thread: the bootstrap costs resamples x tasks draws.
 * @throws RangeError for a metric that is not pass@k.
 */
export function gateFigures(spec: GateSpec, ev: GateEvaluation): GateFigures {
  const k = metricK(spec.metric);
  if (k === null) throw new RangeError(`gate metric must be pass@k, got '${spec.metric}'`);
  const candidatePassAtK = passAtKRate(ev.candidate.map(attemptsOf), spec.attempts);
  const incumbentPassAtK = passAtKRate(ev.incumbent.map(attemptsOf), spec.attempts);
  const failed = (os: GateTaskOutcome[]) => os.filter((o) => o.error !== undefined).length;
  const sessionErrors = { candidate: failed(ev.candidate), incumbent: failed(ev.incumbent) };
  const solved = (o: GateTaskOutcome) => (o.firstSuccess >= 0 && o.firstSuccess < k ? 1 : 0);
  const inc = new Map(ev.incumbent.map((o) => [o.taskId, solved(o)]));
  const diffs = ev.candidate.filter((o) => inc.has(o.taskId)).map((o) => solved(o) - inc.get(o.taskId)!);
  const difference = diffs.length > 0 ? pairedBootstrap(diffs, GATE_BOOTSTRAP) : null;
  const base = { candidatePassAtK, incumbentPassAtK, difference, sessionErrors };
  const errors = sessionErrors.candidate + sessionErrors.incumbent;
  if (errors > 0) {
    const first = [...ev.candidate, ...ev.incumbent].find((o) => o.error !== undefined)!;
    const reason = `${errors} gate session(s) ended with an error (first: ${first.taskId}: ${first.error}); the versions were not compared`;
    return { ...base, status: 'error', reason };
  }
  if (!difference) return { ...base, status: 'error', reason: 'no task was played by both versions' };
  const judged = spec.decision === 'mean' ? difference.mean : difference.lo;
  const beaten = judged > spec.margin;
  const interval = `95% interval [${pts(difference.lo)}, ${pts(difference.hi)}]`;
  const what = `${spec.metric} new - active ${pts(difference.mean)} points, ${interval} over ${difference.tasks} tasks`;
  const judgedName = spec.decision === 'mean' ? 'the mean' : 'the lower bound';
  const rule = `${judgedName} ${beaten ? 'beats' : 'does not beat'} the margin ${pts(spec.margin)}`;
  return { ...base, status: beaten ? 'passed' : 'failed', reason: `${what}: ${rule}` };
}
