/** `npm run openapi`: write openapi/openapi.json from the route schemas (src/app.ts). */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildOpenApiDocument, formatOpenApi } from '../src/app.js';

const out = path.join(path.dirname(fileURLToPath(import.meta.url)), 'openapi.json');
fs.writeFileSync(out, formatOpenApi(await buildOpenApiDocument()));
console.log(`wrote ${out}`);
