/**
 * The promotion gate's default evaluator (src/training/run/gate.ts `GateEvaluator`; started in a
 * worker thread by src/training/run/gate-worker.ts). It plays the gate's held-out tasks with both
 * versions exactly as clients play a server: a lamer server of its own, in this thread (the
 * server's engine kind and tfjs backend, a database in the gate's scratch folder, loopback only,
 * no keys, no rate limits), serves the incumbent and the candidate, and the eval harness
 * (src/eval/harness.ts) plays one `mode: "eval"` session per task and version over HTTP, both
 * versions at once, with the same task seeds and sampling seeds. The serving server's engine,
 * database and sessions are never touched; its thread only receives progress.
 *
 * Lives in cli/ because it needs the environments and the eval harness (API clients) and the
 * server (docs/architecture.md "Which folder may import which").
 */
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../app.js';
import { loadConfig, type Config } from '../config.js';
import { openDatabase } from '../db/index.js';
import { sqliteStore } from '../db/store.js';
import { parseEnvName, EVAL_SEED_START } from '../envs/index.js';
import { runEval, type EvalReport } from '../eval/harness.js';
import { createEngine } from '../policy/index.js';
import type { GateEvaluateContext, GateEvaluateRequest, GateEvaluation, GateTaskOutcome } from '../training/run/gate.js';
import type { TfjsBackend } from '../domain.js';

/** The gate server's names of the two versions (its own database; the reports speak of roles, not names). */
const NAMES = { incumbent: 'gate-incumbent', candidate: 'gate-candidate' } as const;

/** The gate server's configuration: defaults (no environment variables read), loopback, no keys or limits in the way. */
function gateConfig(req: GateEvaluateRequest): Config {
  const d = loadConfig({});
  return {
    ...d,
    host: '127.0.0.1',
    port: 0,
    dataDir: req.workDir,
    engine: req.engine.kind,
    tfjsBackend: req.engine.tfjsBackend as TfjsBackend,
    apiKeys: [],
    logLevel: 'silent',
    serveWorkers: 1,
    baseModelDir: req.incumbent.checkpointDir,
    sessionIdleTtlSeconds: 0,
    limits: { ...d.limits, maxAttempts: Math.max(d.limits.maxAttempts, req.spec.attempts) },
    protection: { ...d.protection, rateLimitMax: 0, maxOpenSessionsPerTenant: 0, maxQueuedSteps: 0 },
    training: { ...d.training, everySessions: 0, cron: null },
  };
}

/** The gate's own server: the app, its URL and its names of the two versions. */
interface GateServer {
  app: FastifyInstance;
  url: string;
  versions: Record<keyof typeof NAMES, string>;
}

/** Start the gate server with both versions registered; `fatal` is set when its backend fails for good. */
async function startGateServer(req: GateEvaluateRequest, onFatal: (err: Error) => void): Promise<GateServer> {
  const config = gateConfig(req);
  const database = openDatabase(config.dataDir);
  let engine: Awaited<ReturnType<typeof createEngine>>;
  try {
    engine = await createEngine(config, undefined, onFatal);
  } catch (err) {
    database.close();
    throw err;
  }
  const app = await buildApp(config, { store: sqliteStore(database), engine });
  try {
    // the test engine serves every version alike; the builtin one registers the incumbent as `base`
    const incumbent = app.models.active().version;
    await app.repos.models.insert({
      version: NAMES.candidate, parent: incumbent, jobId: null, checkpointDir: req.candidate.checkpointDir, status: 'candidate',
      metrics: {}, createdAt: Date.now(),
    });
    await app.models.ensureLoaded(NAMES.candidate);
    await app.listen({ host: config.host, port: 0 });
    const addr = app.server.address();
    const port = typeof addr === 'object' && addr ? addr.port : 0;
    return { app, url: `http://127.0.0.1:${port}`, versions: { incumbent, candidate: NAMES.candidate } };
  } catch (err) {
    await app.close().catch(() => undefined);
    throw err;
  }
}

/** A session of the report as the gate reads it. */
function outcomes(report: EvalReport): GateTaskOutcome[] {
  return report.sessions.map((s) => ({
    taskId: s.taskId,
    firstSuccess: s.attempts.findIndex((a) => a.success),
    ...(s.error !== undefined ? { error: s.error } : {}),
  }));
}

/**
 * Play the gate: one session per task (seeds spec.seedStart ..) with each version, both at once.
 * @throws Error when the gate server cannot start (a checkpoint that does not load) or the harness
 *   cannot play (EvalAbortError, also when `ctx.signal` is aborted).
 */
export async function evaluateGate(req: GateEvaluateRequest, ctx: GateEvaluateContext): Promise<GateEvaluation> {
  const { spec } = req;
  ctx.signal.throwIfAborted(); // cancelled before it started: no server
  const stop = new AbortController();
  const abortBoth = () => stop.abort(new Error('cancelled'));
  ctx.signal.addEventListener('abort', abortBoth, { once: true });
  let fatal: Error | null = null;
  const server = await startGateServer(req, (err) => {
    fatal = err;
    stop.abort(err);
  });
  const { kind, params } = parseEnvName(spec.env);
  const total = 2 * spec.tasks;
  const done = { incumbent: 0, candidate: 0 };
  try {
    // one version's run that cannot go on stops the other's too
    const play = (role: keyof typeof NAMES) =>
      runEval({
        env: kind, params, tasks: spec.tasks, attempts: spec.attempts, concurrency: spec.concurrency,
        seed: spec.seedStart - EVAL_SEED_START, sampling: spec.sampling, availableActions: spec.availableActions,
        policy: 'model', server: server.url, modelVersion: server.versions[role], mode: 'eval', signal: stop.signal,
        onSession: (n) => {
          done[role] = n;
          ctx.onProgress(done.incumbent + done.candidate, total);
        },
      }).catch((err: unknown) => {
        stop.abort(err);
        throw err;
      });
    const [incumbent, candidate] = await Promise.all([play('incumbent'), play('candidate')]);
    return { incumbent: outcomes(incumbent), candidate: outcomes(candidate) };
  } catch (err) {
    if (fatal) throw new Error(`the gate's model backend failed: ${(fatal as Error).message}`);
    throw err;
  } finally {
    ctx.signal.removeEventListener('abort', abortBoth);
    await server.app.close().catch(() => undefined);
  }
}
