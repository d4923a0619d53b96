// Worker-thread bootstrap for the CLIs' threads (src/cli/sft-compact-data-thread.ts): register
// tsx's ESM loader in this thread, then run the TypeScript entry named by workerData.entry
// (relative to this folder). Plain JavaScript because no loader is active when a worker starts.
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
await import(new URL(workerData.entry, import.meta.url).href);
