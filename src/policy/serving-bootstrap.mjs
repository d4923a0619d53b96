// Worker-thread bootstrap of the serving pool (serving-pool.ts): register tsx's ESM loader in this
// thread, then run the TypeScript entry serving-worker.ts. Plain JavaScript because no loader is
// active when a worker starts (`execArgv: ['--import', 'tsx']` does not apply to a worker's entry
// module on Node 20).
import { register } from 'tsx/esm/api';

register();
await import('./serving-worker.ts');
