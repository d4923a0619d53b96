/**
 * A training job's promotion gate, run after the job registered its new version as a candidate
 * (src/training/run/manager.ts; figures and rules in ./gate.ts): checks that none of the gate's
 * tasks was trained on, compares the candidate with the version active now in a worker thread
 * (./gate-worker.ts), then activates the candidate when it passed and the active version is still
 * the one it was compared with. The report is kept up to date on the job row (`config.gateReport`)
 * and, at start and end, on the version's metrics (`metrics.gate`), so both show it while it runs.
 * Nothing here throws: every failure ends as the report's `error` status and the job's `error` text
 * (a report the store refuses to take is logged).
 */
import { mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import type { AsyncRepositories } from '../../db/async-repositories.js';
import { gateOverlap, type GateSpec } from '../../shared/promotion-gate.js';
import { pendingReport, type GateEvaluateRequest, type GateReport } from './gate.js';
import { GateCancelledError, startGateWorker, type GateEvaluatorModule, type GateRunner, type GateWorkerHandle } from './gate-worker.js';
import type { ManagerLogger, VersionRegistry } from './job-request.js';

/** How the server's gates evaluate: its engine kind and backend, and the evaluator module or runner. */
export interface GateSettings {
  engine: { kind: 'builtin' | 'test' | 'openai'; tfjsBackend: string };
  /** Evaluator module of the worker thread; default src/cli/gate-eval.ts. */
  evaluator?: GateEvaluatorModule;
  /** Runs a gate; default a worker thread with `evaluator` (tests may pass another). */
  runner?: GateRunner;
}

export interface GateRunDeps {
  repos: Pick<AsyncRepositories, 'jobs' | 'models'>;
  registry: VersionRegistry;
  dataDir: string;
  settings: GateSettings;
  logger?: ManagerLogger;
  /** Told the running gate's handle, so that cancelling the job cancels the gate. */
  onHandle(handle: GateWorkerHandle): void;
}

/**
 * What the job records: `cancelled` when the gate was cancelled; `error` (the job's error text)
 * when the version was not judged, or not activated, for a fault.
 */
export interface GateRunResult {
  report: GateReport;
  cancelled: boolean;
  error: string | null;
}

/** The folder gates use as scratch space: `<dataDir>/gates/<jobId>`. */
export const gateWorkDir = (dataDir: string, jobId: string) => path.join(dataDir, 'gates', jobId);

/**
 * Writes of one gate's report, one after another (each reads the row it changes, so two at once
 * could lose one); a write the store refuses is logged and the gate goes on.
 */
class ReportWriter {
  private last: Promise<void> = Promise.resolve();
  constructor(private readonly deps: GateRunDeps, private readonly jobId: string) {}

  /** Queue the report on the job row and, with `onVersion`, on the version's metrics. @returns when it is written. */
  save(report: GateReport, onVersion: boolean): Promise<void> {
    this.last = this.last.then(() => this.write(report, onVersion)).catch((err: unknown) => {
      this.deps.logger?.warn({ jobId: this.jobId, err: String(err) }, 'the promotion gate report could not be recorded');
    });
    return this.last;
  }

  private async write(report: GateReport, onVersion: boolean): Promise<void> {
    const { jobs, models } = this.deps.repos;
    const job = await jobs.get(this.jobId);
    if (job) await jobs.update(this.jobId, { config: { ...job.config, gateReport: report } });
    if (!onVersion || !report.candidate) return;
    const row = await models.get(report.candidate);
    if (row) await models.setMetrics(report.candidate, { ...row.metrics, gate: report });
  }
}

/** Ends the gate with `status`, `reason` and, for an error, the job's error text. */
async function end(
  w: ReportWriter, deps: GateRunDeps, jobId: string, report: GateReport, status: GateReport['status'], reason: string, error: string | null,
): Promise<GateRunResult> {
  const final: GateReport = { ...report, status, reason, finishedAt: new Date().toISOString() };
  await w.save(final, true);
  deps.logger?.info({ jobId, version: report.candidate, gate: status, promoted: final.promoted, reason }, 'promotion gate finished');
  return { report: final, cancelled: status === 'cancelled', error };
}

/** Why the gate cannot compare `candidate` now (the active version is remote, or is the candidate), or null. */
function incumbentProblem(deps: GateRunDeps): string | null {
  const active = deps.registry.active();
  if (active.engine === 'openai' || deps.settings.engine.kind === 'openai') {
    return `the active version '${active.version}' is served by a remote server; the gate evaluates versions served here`;
  }
  return null;
}

/**
 * Run the gate of job `jobId` on its new `version` (checkpoint `checkpointDir`), trained on tasks
 * `trainedTaskIds`. Resolves when the gate ended, with the final report (never rejects).
 */
export async function runGate(
  deps: GateRunDeps, jobId: string, spec: GateSpec, version: string, checkpointDir: string, trainedTaskIds: readonly string[],
): Promise<GateRunResult> {
  let report: GateReport = { ...pendingReport(spec), candidate: version };
  const w = new ReportWriter(deps, jobId);
  const overlap = gateOverlap(spec, trainedTaskIds);
  if (overlap !== null) {
    const seeds = `seeds ${spec.seedStart}..${spec.seedStart + spec.tasks - 1}`;
    const why = `the job trained on task '${overlap}', one of the gate's held-out tasks (${seeds}): not judged, not activated`;
    return end(w, deps, jobId, report, 'error', why, `trained, but the gate refused: ${why}`);
  }
  const problem = incumbentProblem(deps);
  if (problem) return end(w, deps, jobId, report, 'error', problem, `trained, but the gate could not run: ${problem}`);
  const incumbent = deps.registry.active();
  report = { ...report, status: 'running', incumbent: incumbent.version, startedAt: new Date().toISOString() };
  await w.save(report, true);
  const { env, tasks, metric, margin } = spec;
  deps.logger?.info({ jobId, version, incumbent: incumbent.version, env, tasks, metric, margin }, 'promotion gate started');
  const workDir = gateWorkDir(deps.dataDir, jobId);
  rmSync(workDir, { recursive: true, force: true });
  mkdirSync(workDir, { recursive: true });
  const engine = deps.settings.engine as GateEvaluateRequest['engine'];
  const request: GateEvaluateRequest = {
    spec, engine, workDir, candidate: { version, checkpointDir },
    incumbent: { version: incumbent.version, checkpointDir: incumbent.checkpointDir },
  };
  const run = deps.settings.runner ?? ((r, p) => startGateWorker(r, p, deps.settings.evaluator));
  try {
    const handle = run(request, (done, total) => {
      report = { ...report, progress: total > 0 ? done / total : 0 };
      void w.save(report, false);
    });
    deps.onHandle(handle);
    const figures = await handle.done;
    report = { ...report, ...figures, progress: 1 };
    if (figures.status !== 'passed') {
      const error = figures.status === 'error' ? `trained, but the gate failed: ${figures.reason}` : null;
      return end(w, deps, jobId, report, figures.status, figures.reason, error);
    }
    return await promote(w, deps, jobId, report, figures.reason);
  } catch (err) {
    if (err instanceof GateCancelledError) {
      return end(w, deps, jobId, report, 'cancelled', 'the gate was cancelled: the version stays a candidate', null);
    }
    const why = err instanceof Error ? err.message : String(err);
    return end(w, deps, jobId, report, 'error', `the evaluation failed: ${why}`, `trained, but the gate failed: ${why}`);
  } finally {
    rmSync(workDir, { recursive: true, force: true });
  }
}

/** The gate passed: activate the candidate, unless the active version changed meanwhile. */
async function promote(w: ReportWriter, deps: GateRunDeps, jobId: string, report: GateReport, reason: string): Promise<GateRunResult> {
  const now = deps.registry.active().version;
  if (now !== report.incumbent) {
    const why = `${reason}; but the active version changed during the gate (to '${now}'): not activated`;
    return end(w, deps, jobId, report, 'passed', why, null);
  }
  try {
    await deps.registry.activate(report.candidate!);
  } catch (err) {
    const why = `activation failed: ${String(err)}`;
    return end(w, deps, jobId, report, 'passed', `${reason}; ${why}`, `trained and passed the gate, but ${why}`);
  }
  return end(w, deps, jobId, { ...report, promoted: true }, 'passed', `${reason}: activated`, null);
}
