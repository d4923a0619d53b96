#!/usr/bin/env node
// `lamer`: runs the TypeScript CLI (src/cli/index.ts) in this very process, with tsx's loader
// registered through its API (the same hooks as `node --import tsx`), so that no build step is
// needed and there is one process: signals (SIGTERM, Ctrl-C) reach the server itself, which shuts
// down gracefully, and the exit code is the command's.
import { register as registerEsm } from 'tsx/esm/api';
import { register as registerCjs } from 'tsx/cjs/api';

registerCjs();
registerEsm();
await import('../src/cli/index.ts');
