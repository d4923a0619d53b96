/**
 * The TypeScript client (clients/typescript: openapi-fetch over openapi-typescript's types):
 *  - against a stub server: Bearer header, paths and bodies, `unwrap` raising LamerProblemError;
 *  - against a live in-process server (`startServer({ engine: 'test' })`): a session,
 *    a short fake game of 2 attempts, then memory and trajectory.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createLamerClient, LamerProblemError, unwrap, type StepRequest, type StepResponse } from '../../clients/typescript/src/index.js';
import { startTestServer, tmpDir } from '../helpers/index.js';

const ROOT = join(import.meta.dirname, '..', '..');

describe('TypeScript client against a stub server', () => {
  it('sends the Bearer key and typed bodies; unwrap throws problems with Retry-After', async () => {
    const seen: Array<[string, string, string | undefined, unknown]> = [];
    const server = createServer((req, res) => {
      let raw = '';
      req.on('data', (c: Buffer) => (raw += c.toString()));
      req.on('end', () => {
        seen.push([req.method!, req.url!, req.headers.authorization, raw ? JSON.parse(raw) : null]);
        if (req.url === '/v1/sessions') {
          res.writeHead(201, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ id: 'ses_1' }));
        } else {
          res.writeHead(429, { 'content-type': 'application/problem+json', 'retry-after': '3' });
          res.end(JSON.stringify({ type: 'https://lamer.dev/problems/rate-limited', title: 'Too Many Requests', status: 429 }));
        }
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const lamer = createLamerClient({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, apiKey: 'key-123456' });
      const created = await unwrap(lamer.POST('/v1/sessions', { body: { taskId: 't', instructions: 'i' } }));
      expect(created.id).toBe('ses_1');
      const err = await unwrap(lamer.GET('/v1/sessions/{id}', { params: { path: { id: 'a b' } } })).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(LamerProblemError);
      const p = err as LamerProblemError;
      expect([p.status, p.kind, p.retryAfter, p.message]).toEqual([429, 'rate-limited', 3, '429 Too Many Requests: https://lamer.dev/problems/rate-limited']);
      expect(seen).toEqual([
        ['POST', '/v1/sessions', 'Bearer key-123456', { taskId: 't', instructions: 'i' }],
        ['GET', '/v1/sessions/a%20b', 'Bearer key-123456', null],
      ]);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});

describe('TypeScript client package', () => {
  it('compiles to JavaScript + declarations (clients/typescript/tsconfig.json) and the output runs', async () => {
    const pkg = join(ROOT, 'clients', 'typescript');
    const out = tmpDir('.build-test-', pkg);
    try {
      execFileSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(pkg, 'tsconfig.json'), '--outDir', out], { stdio: 'pipe' });
      copyFileSync(join(pkg, 'src', 'schema.d.ts'), join(out, 'schema.d.ts'));
      for (const f of ['index.js', 'index.d.ts', 'schema.d.ts']) expect(existsSync(join(out, f)), f).toBe(true);
      const mod = (await import(join(out, 'index.js'))) as typeof import('../../clients/typescript/src/index.js');
      const client = mod.createLamerClient({ baseUrl: 'http://127.0.0.1:1' });
      expect(typeof client.GET).toBe('function');
      expect(new mod.LamerProblemError(404, { type: 'https://x/problems/not-found', title: 'Not Found', status: 404 }, null).kind).toBe('not-found');
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});

describe('TypeScript client against a live server', () => {
  it('creates a session, plays 2 failing attempts, reads memory and trajectory', async () => {
    const server = await startTestServer();
    try {
      const lamer = createLamerClient({ baseUrl: server.url });
      const session = await unwrap(
        lamer.POST('/v1/sessions', { body: { taskId: 'fake:seed=1', instructions: 'Say a number.', maxAttempts: 2, maxSteps: 5 } }),
      );
      expect(session.status).toBe('active');
      expect(session.maxAttempts).toBe(2);
      const id = session.id;
      const post = (body: StepRequest) =>
        unwrap(lamer.POST('/v1/sessions/{id}/steps', { params: { path: { id } }, body }));
      const last: StepResponse[] = [];
      for (const attempt of [0, 1]) {
        const first = await post({ attempt, step: 0, observation: 'state 0', availableActions: ['1', '2'] });
        expect(first.attempt).toBe(attempt);
        expect(['1', '2']).toContain(first.action);
        await post({ attempt, step: 1, observation: 'state 1', reward: 0.5, availableActions: ['1', '2'] });
        const end = await post({ attempt, step: 2, observation: 'lost', reward: -1, done: true, success: false });
        expect(end.action).toBeNull();
        // steps: observations posted in the attempt, the final one included (3); return: -1 + 0.5
        expect(end.attemptResult).toMatchObject({ attempt, success: false, return: -0.5, steps: 3, endReason: 'done' });
        last.push(end);
      }
      expect(last[0]!.session.status).toBe('active');
      expect(last[0]!.reflection?.attempt).toBe(0);
      expect(last[1]!.session.status).toBe('completed');
      expect(last[1]!.reflection).toBeNull();

      const got = await unwrap(lamer.GET('/v1/sessions/{id}', { params: { path: { id } } }));
      expect(got.attempts.map((a) => [a.attempt, a.status, a.success])).toEqual([
        [0, 'failed', false],
        [1, 'failed', false],
      ]);
      const memory = await unwrap(lamer.GET('/v1/sessions/{id}/memory', { params: { path: { id } } }));
      expect(memory.reflections.map((r) => r.attempt)).toEqual([0]);
      expect(memory.reflections[0]!.text).toBe(last[0]!.reflection!.text);
      const trajectory = await unwrap(lamer.GET('/v1/sessions/{id}/trajectory', { params: { path: { id } } }));
      expect(JSON.stringify(trajectory)).toContain('state 1');

      const missing = await unwrap(lamer.GET('/v1/sessions/{id}', { params: { path: { id: 'ses_missing' } } })).catch((e: unknown) => e);
      expect(missing).toBeInstanceOf(LamerProblemError);
      expect((missing as LamerProblemError).status).toBe(404);
    } finally {
      await server.close();
    }
  });
});
