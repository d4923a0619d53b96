/**
 * Worker-thread side of src/training/run/worker.ts: waits for `start`, imports the model I/O module,
 * runs the job and posts progress / done / cancelled / error. `cancel` aborts the job.
 */
import { parentPort } from 'node:worker_threads';
import { JobCancelledError, runTrainingJob } from './job.js';
import type { ModelIO } from '../model-api.js';
import { importFunction } from './job-thread.js';
import { DEFAULT_MODEL_IO, type ParentToWorker, type WorkerToParent } from './worker.js';

if (!parentPort) throw new Error('worker-entry.ts must run in a worker thread');
const port = parentPort;
const abort = new AbortController();
const post = (m: WorkerToParent) => port.postMessage(m);

async function run(msg: Extract<ParentToWorker, { type: 'start' }>): Promise<void> {
  const { spec, samples } = msg.request;
  const ioSpec = msg.request.modelIO ?? DEFAULT_MODEL_IO;
  type Factory = (options: unknown) => ModelIO | Promise<ModelIO>;
  const factory = (await importFunction(ioSpec.module, ioSpec.exportName ?? 'createModelIO')) as Factory;
  const io = await factory(ioSpec.options ?? {});
  const result = await runTrainingJob(spec, samples, { io, signal: abort.signal, onProgress: (progress) => post({ type: 'progress', progress }) });
  post({ type: 'done', result });
}

port.on('message', (msg: ParentToWorker) => {
  if (msg.type === 'cancel') { abort.abort(); return; }
  if (msg.type !== 'start') return;
  run(msg).catch((err: unknown) => {
    if (err instanceof JobCancelledError) { post({ type: 'cancelled' }); return; }
    const e = err instanceof Error ? err : new Error(String(err));
    post({ type: 'error', error: { name: e.name, message: e.message, stack: e.stack } });
  });
});
