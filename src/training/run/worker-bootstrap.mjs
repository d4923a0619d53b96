// Worker-thread bootstrap (see worker.ts): register tsx's ESM loader in this thread, then run the
// TypeScript entry: worker-entry.ts (a training job), or replica-entry.ts when workerData.entry is
// 'replica' (a data-parallel gradient replica, data-parallel.ts). Plain JavaScript because no loader
// is active when a worker starts.
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
await import(workerData?.entry === 'replica' ? './replica-entry.ts' : './worker-entry.ts');
