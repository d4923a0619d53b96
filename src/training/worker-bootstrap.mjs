// Worker-thread bootstrap (see worker.ts): register tsx's ESM loader in this thread, then run the
// TypeScript entry. Plain JavaScript because no loader is active when a worker starts.
import { register } from 'tsx/esm/api';

register();
await import('./worker-entry.ts');
