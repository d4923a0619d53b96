import { startServer } from '/work/wt/hostile/src/server.ts';
import fs from 'node:fs';
const dir = fs.mkdtempSync('/tmp/h413-');
const s = await startServer({ host: '127.0.0.1', port: 0, engine: 'test', logLevel: 'silent', apiKeys: [], dataDir: dir });
console.log(s.url);
setTimeout(() => process.exit(0), 60000);
