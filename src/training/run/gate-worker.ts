/**
 * Runs a promotion gate's evaluation in a worker thread (as src/training/run/worker.ts runs a
 * training job), so that the server keeps answering steps while the gate's sessions are played.
 * The parent posts one `start` message; the thread answers with `progress` messages, then exactly
 * one of `done` (the figures, src/training/run/gate.ts gateFigures, computed in the thread),
 * `cancelled` or `error`. A crash of the thread rejects the handle's promise; it never throws in
 * the parent.
 *
 * The evaluator is a module the thread imports by URL (`GateEvaluatorModule`), as the training
 * worker imports its model I/O: playing the environments against a server is the API clients'
 * part (src/envs, src/eval), which only src/cli may import (docs/architecture.md), so the default,
 * `DEFAULT_GATE_EVALUATOR`, is src/cli/gate-eval.ts.
 */
import type { GateEvaluateRequest, GateFigures } from './gate.js';
import { startJobThread } from './job-thread.js';

/**
 * A module with a `GateEvaluator` export (src/training/run/gate.ts): a file URL or absolute path,
 * and the export's name (default `evaluateGate`).
 */
export interface GateEvaluatorModule {
  module: string;
  exportName?: string;
}

const EXT = import.meta.url.endsWith('.js') ? '.js' : '.ts';
/** src/cli/gate-eval.ts: both versions served by a server of the thread's own, the held-out tasks played over HTTP by the eval harness. */
export const DEFAULT_GATE_EVALUATOR: GateEvaluatorModule = {
  module: new URL(`../../cli/gate-eval${EXT}`, import.meta.url).href,
  exportName: 'evaluateGate',
};

export type GateToWorker = { type: 'start'; request: GateEvaluateRequest; evaluator: GateEvaluatorModule } | { type: 'cancel' };
export type GateFromWorker =
  | { type: 'progress'; done: number; total: number }
  | { type: 'done'; figures: GateFigures }
  | { type: 'cancelled' }
  | { type: 'error'; message: string };

/** The gate was cancelled (job cancelled, server shutting down). */
export class GateCancelledError extends Error {
  constructor() { super('the gate was cancelled'); this.name = 'GateCancelledError'; }
}

export interface GateWorkerHandle {
  /** Resolves with the figures; rejects with GateCancelledError, or an Error saying why the evaluation failed. */
  readonly done: Promise<GateFigures>;
  /** Ask the evaluation to stop; the thread is terminated after `graceMs`. */
  cancel(graceMs?: number): void;
}

/** How a gate is run: in a worker thread by default (`startGateWorker`); tests may pass another. */
export type GateRunner = (request: GateEvaluateRequest, onProgress: (done: number, total: number) => void) => GateWorkerHandle;

/**
 * Start the evaluation of `request` with `evaluator` in a new worker thread.
 * @param onProgress called in the parent as sessions finish.
 */
export function startGateWorker(
  request: GateEvaluateRequest, onProgress: (done: number, total: number) => void, evaluator = DEFAULT_GATE_EVALUATOR,
): GateWorkerHandle {
  const start = { type: 'start', request, evaluator } satisfies GateToWorker;
  return startJobThread<GateFigures, GateFromWorker>('./gate-worker-entry', import.meta.url, start, {
    onMessage(msg) {
      if (msg.type === 'progress') {
        try { onProgress(msg.done, msg.total); } catch { /* a listener bug must not end the gate */ }
      } else if (msg.type === 'done') return { value: msg.figures };
      else if (msg.type === 'cancelled') return { error: new GateCancelledError() };
      else if (msg.type === 'error') return { error: new Error(msg.message) };
      return null;
    },
    crashed: (err) => new Error(`gate worker crashed: ${err.message}`),
    exited: (code, cancelling) =>
      cancelling ? new GateCancelledError() : new Error(`gate worker exited with code ${code} before finishing`),
  });
}
