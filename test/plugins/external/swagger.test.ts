/** The committed OpenAPI document is current (regenerated and compared) and valid OpenAPI 3.1. */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import SwaggerParser from '@apidevtools/swagger-parser';
import { buildOpenApiDocument, formatOpenApi } from '../../../src/app.js';

const file = path.resolve(import.meta.dirname, '..', '..', '..', 'openapi', 'openapi.json');

describe('openapi/openapi.json', () => {
  it('matches the document generated from the route schemas (run `npm run openapi` when this fails)', async () => {
    const generated = formatOpenApi(await buildOpenApiDocument());
    expect(fs.readFileSync(file, 'utf8')).toBe(generated);
  });

  it('is a valid OpenAPI 3.1 document with every /v1 route', async () => {
    const doc = JSON.parse(fs.readFileSync(file, 'utf8'));
    const api = (await SwaggerParser.validate(structuredClone(doc))) as { openapi: string; paths: Record<string, unknown> };
    expect(api.openapi).toBe('3.1.0');
    expect(Object.keys(api.paths).sort()).toEqual([
      '/healthz',
      '/metrics',
      '/openai/v1/chat/completions',
      '/openai/v1/completions',
      '/openai/v1/models',
      '/openai/v1/models/{model}',
      '/readyz',
      '/v1/models',
      '/v1/models/{version}',
      '/v1/models/{version}/activate',
      '/v1/sessions',
      '/v1/sessions/{id}',
      '/v1/sessions/{id}/attempts/{attempt}/end',
      '/v1/sessions/{id}/memory',
      '/v1/sessions/{id}/memory/{attempt}',
      '/v1/sessions/{id}/openai/v1/chat/completions',
      '/v1/sessions/{id}/openai/v1/completions',
      '/v1/sessions/{id}/openai/v1/models',
      '/v1/sessions/{id}/steps',
      '/v1/sessions/{id}/trajectory',
      '/v1/stats',
      '/v1/stats/diversity',
      '/v1/steps:batch',
      '/v1/training/jobs',
      '/v1/training/jobs/{id}',
      '/v1/training/jobs/{id}/cancel',
      '/v1/whoami',
    ]);
  });
});
