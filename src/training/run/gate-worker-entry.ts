/**
 * Worker-thread side of src/training/run/gate-worker.ts: waits for `start`, imports the evaluator
 * module, plays the gate, computes its figures (src/training/run/gate.ts gateFigures: the
 * bootstrap runs here, not in the server's thread) and posts progress / done / cancelled / error.
 * `cancel` aborts the evaluation.
 */
import { parentPort } from 'node:worker_threads';
import { gateFigures, type GateEvaluator } from './gate.js';
import type { GateFromWorker, GateToWorker } from './gate-worker.js';
import { importFunction } from './job-thread.js';

if (!parentPort) throw new Error('gate-worker-entry.ts must run in a worker thread');
const port = parentPort;
const abort = new AbortController();
const post = (m: GateFromWorker) => port.postMessage(m);

async function run(msg: Extract<GateToWorker, { type: 'start' }>): Promise<void> {
  const { module, exportName = 'evaluateGate' } = msg.evaluator;
  const evaluate = (await importFunction(module, exportName)) as GateEvaluator;
  let last = 0;
  const evaluation = await evaluate(msg.request, {
    signal: abort.signal,
    onProgress: (done, total) => {
      // at most about 4 messages a second, and the last one
      const now = Date.now();
      if (done < total && now - last < 250) return;
      last = now;
      post({ type: 'progress', done, total });
    },
  });
  if (abort.signal.aborted) throw abort.signal.reason;
  post({ type: 'done', figures: gateFigures(msg.request.spec, evaluation) });
}

port.on('message', (msg: GateToWorker) => {
  if (msg.type === 'cancel') { abort.abort(new Error('cancelled')); return; }
  if (msg.type !== 'start') return;
  run(msg).catch((err: unknown) => {
    if (abort.signal.aborted) { post({ type: 'cancelled' }); return; }
    post({ type: 'error', message: err instanceof Error ? err.message : String(err) });
  });
});
