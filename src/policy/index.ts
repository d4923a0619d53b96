/**
 * Engine factory: `createEngine(config)` returns the policy engine named by
 * `config.engine`: 'test' -> `TestEngine`; 'openai' -> `NoLocalEngine` (every version is remote);
 * 'builtin' -> `createBuiltinEngine` from
 * `./builtin-engine.js` (tfjs transformer), imported only when asked for; with
 * `serveWorkers` (LAMER_SERVE_WORKERS) > 1, a `ServingPool` (./serving-pool.js) of that many worker
 * threads, each with its own builtin engine.
 *
 * @throws EngineError with a clear message when the builtin engine module cannot be loaded.
 */
import type { ServerEngine } from '../domain.js';
import { EngineError, type PolicyEngine } from './engine.js';
import { TestEngine } from './test-engine.js';
import { NoLocalEngine } from './routing-engine.js';
import type { TfjsBackend } from '../domain.js';

export interface EngineLogger {
  info(o: object, msg?: string): void;
  warn(o: object, msg?: string): void;
  error?(o: object, msg?: string): void;
}

/** The part of `process` that `exitOnEngineFailure` uses (a fake in tests). */
export interface ExitingProcess {
  pid: number;
  exitCode?: number | string | null | undefined;
  kill(pid: number, signal: string): boolean;
  once(event: 'exit', listener: () => void): unknown;
}

/**
 * What the server does when the builtin engine's backend faulted and could not be re-initialised
 * (src/policy/builtin-engine.ts `onFatal`): it logs one line, makes the exit status 1 and starts
 * the graceful shutdown (SIGTERM to itself: in-flight requests finish, the database is closed), so
 * that its supervisor (systemd, a container restart policy, Kubernetes) starts a fresh process.
 * /readyz is 503 from the moment the engine failed (its versions are no longer loaded).
 */
export function exitOnEngineFailure(logger?: EngineLogger, proc: ExitingProcess = process): (err: Error) => void {
  return (err: Error) => {
    const msg = 'model backend failed and could not be re-initialised; shutting down with exit status 1 so that the supervisor restarts the server';
    if (logger?.error) logger.error({ err: err.message }, msg);
    else logger?.warn({ err: err.message }, msg);
    // the exit status is set last, so that the shutdown path's own exitCode does not override it
    proc.once('exit', () => {
      proc.exitCode = 1;
    });
    proc.kill(proc.pid, 'SIGTERM');
  };
}

type BuiltinFactory = (opts: {
  backend?: TfjsBackend;
  batchWindowMs?: number;
  maxBatchSize?: number;
  forwardSectionTokens?: number;
  forwardSectionMs?: number;
  maxLoadedVersions?: number;
  maxCandidateTokens?: number;
  onFatal?: (err: Error) => void;
  logger?: EngineLogger;
}) => Promise<PolicyEngine>;

/**
 * The settings `createEngine` reads. Declared here rather than taken from src/config.ts so that the
 * policy layer does not import the configuration (which imports policy types: a cycle); the
 * server's `Config` satisfies it structurally.
 */
export interface EngineSettings {
  engine: ServerEngine;
  tfjsBackend: 'auto' | 'tensorflow' | 'webgpu' | 'wasm' | 'cpu';
  batchWindowMs: number;
  maxBatchSize: number;
  /** Bound on the padded tokens of one synchronous forward section (LAMER_FORWARD_SECTION_TOKENS). */
  forwardSectionTokens?: number;
  /** Target wall time of one forward section, ms; 0 or absent: the token bound alone (LAMER_FORWARD_SECTION_MS). */
  forwardSectionMs?: number;
  /** Serving worker threads (LAMER_SERVE_WORKERS); absent or 1: serve in this thread. */
  serveWorkers?: number;
  /** Bound on the candidate tokens of one step (LAMER_MAX_CANDIDATE_TOKENS). */
  limits?: { candidateTokens: number };
}

export async function createEngine(
  config: EngineSettings,
  logger?: EngineLogger,
  onFatal: (err: Error) => void = exitOnEngineFailure(logger),
): Promise<PolicyEngine> {
  if (config.engine === 'test') return new TestEngine();
  // Remote versions only: the routing engine (src/plugins/app/engine.ts) sends them to their server.
  if (config.engine === 'openai') return new NoLocalEngine();
  if (config.engine !== 'builtin') throw new EngineError(`unknown engine '${String(config.engine)}'`);
  const workers = config.serveWorkers ?? 1;
  if (workers > 1) {
    // LAMER_SERVE_WORKERS > 1: one builtin engine per worker thread (src/policy/serving-pool.ts)
    const { createServingPool } = await import('./serving-pool.js');
    return createServingPool({
      workers,
      backend: config.tfjsBackend,
      batchWindowMs: config.batchWindowMs,
      maxBatchSize: config.maxBatchSize,
      ...(config.forwardSectionTokens !== undefined ? { forwardSectionTokens: config.forwardSectionTokens } : {}),
      ...(config.forwardSectionMs !== undefined ? { forwardSectionMs: config.forwardSectionMs } : {}),
      ...(config.limits ? { maxCandidateTokens: config.limits.candidateTokens } : {}),
      onFatal,
      ...(logger ? { logger } : {}),
    });
  }
  let mod: { createBuiltinEngine?: BuiltinFactory };
  try {
    // A variable specifier keeps TypeScript from requiring the module at compile time.
    const specifier = './builtin-engine.js';
    mod = (await import(specifier)) as { createBuiltinEngine?: BuiltinFactory };
  } catch (err) {
    throw new EngineError(
      'the builtin engine (src/policy/builtin-engine.ts) could not be loaded; ' +
        'set LAMER_ENGINE=test to run without a model. Cause: ' +
        (err instanceof Error ? err.message : String(err)),
      { cause: err },
    );
  }
  if (typeof mod.createBuiltinEngine !== 'function') {
    throw new EngineError('src/policy/builtin-engine.ts does not export createBuiltinEngine');
  }
  const opts: Parameters<BuiltinFactory>[0] = {
    backend: config.tfjsBackend,
    batchWindowMs: config.batchWindowMs,
    maxBatchSize: config.maxBatchSize,
    onFatal,
  };
  if (config.forwardSectionTokens !== undefined) opts.forwardSectionTokens = config.forwardSectionTokens;
  if (config.forwardSectionMs !== undefined) opts.forwardSectionMs = config.forwardSectionMs;
  if (config.limits) opts.maxCandidateTokens = config.limits.candidateTokens;
  if (logger) opts.logger = logger;
  return mod.createBuiltinEngine(opts);
}

export { TestEngine };
