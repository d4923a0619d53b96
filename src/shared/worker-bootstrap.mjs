// Worker-thread bootstrap for the TypeScript worker entries (worker-channel.ts spawnEntry): register
// tsx's ESM loader in this thread, then import the entry module named by workerData.entry (a URL,
// or a path relative to this folder). Plain JavaScript because no loader is active when a worker
// starts (`execArgv: ['--import', 'tsx']` does not apply to a worker's entry module on Node 20).
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
await import(new URL(workerData.entry, import.meta.url).href);
