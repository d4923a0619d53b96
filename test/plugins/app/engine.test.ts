/**
 * A failing policy engine: the step is 503 engine-unavailable, nothing is recorded, and the same
 * step succeeds once the engine recovers. /readyz is 503 while the active model is not loaded. A
 * request too large for the model is a 400 naming the field. The recorded prompt is the one the
 * engine reports it fed the model, with how much was cut; reflections are cut by characters. Health
 * checks on fresh connections are answered while the builtin engine runs forwards back to back.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../../src/app.js';
import { loadConfig } from '../../../src/config.js';
import { openDatabase } from '../../../src/db/index.js';
import { sqliteStore } from '../../../src/db/store.js';
import { EngineError, EngineLimitError, type ActRequest, type ReflectRequest } from '../../../src/policy/engine.js';
import { exitOnEngineFailure } from '../../../src/policy/index.js';
import http from 'node:http';
import path from 'node:path';
import { initModel } from '../../../src/model/gpt.js';
import { saveCheckpoint } from '../../../src/model/checkpoint.js';
import { createBuiltinEngineInstance } from '../../../src/policy/builtin-engine.js';
import { TINY } from '../../model/setup.js';
import fc from 'fast-check';
import { decode } from '../../../src/model/tokenizer.js';
import { TestEngine } from '../../../src/policy/test-engine.js';
import { call, dumpDb, tmpDir } from '../../helpers/index.js';

class FlakyEngine extends TestEngine {
  failing = false;
  unloaded = false;
  /** Report this many earliest steps as dropped to fit the context. */
  drop = 0;
  /** Thrown by act (a request the model cannot take). */
  tooLarge: EngineLimitError | null = null;
  /** Report the prompt as cut: what the model saw and how many characters were cut. */
  cut: { promptText: string; promptTruncatedChars: number } | null = null;
  /** The reflection text to answer. */
  reflection: string | null = null;
  override async act(req: ActRequest) {
    if (this.failing) throw new EngineError('out of memory');
    if (this.tooLarge) throw this.tooLarge;
    const g = await super.act(req);
    const droppedSteps = Math.min(this.drop, req.prompt.steps.length);
    const { head, steps, tail } = req.prompt;
    return { ...g, droppedSteps, promptText: head + steps.slice(droppedSteps).join('') + tail, ...(this.cut ?? {}) };
  }
  override async reflect(req: ReflectRequest) {
    const g = await super.reflect(req);
    return this.reflection === null ? g : { ...g, output: this.reflection };
  }
  override isLoaded(version: string): boolean {
    return !this.unloaded && super.isLoaded(version);
  }
}

let app: FastifyInstance;
let url: string;
let dir: string;
const engine = new FlakyEngine();

beforeAll(async () => {
  dir = tmpDir();
  const base = loadConfig({});
  const config = { ...base, limits: { ...base.limits, reflectionChars: 5 }, engine: 'test' as const, logLevel: 'silent' as const, dataDir: dir, apiKeys: [] };
  app = await buildApp(config, { store: sqliteStore(openDatabase(dir)), engine });
  url = await app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(async () => {
  await app.close();
});

describe('engine failures', () => {
  it('503 engine-unavailable records nothing; the retry after recovery succeeds', async () => {
    const id = (await call(url, 'POST', '/v1/sessions', { taskId: 't', instructions: 'x' })).body.id;
    const before = dumpDb(dir);
    engine.failing = true;
    const r = await call(url, 'POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o' });
    expect(r.status).toBe(503);
    expect(r.type).toContain('application/problem+json');
    expect(r.body).toMatchObject({ type: 'https://lamer-server.dev/problems/engine-unavailable', detail: 'out of memory' });
    expect(r.headers.get('retry-after')).toBe('1');
    expect(dumpDb(dir)).toBe(before);
    engine.failing = false;
    const ok = await call(url, 'POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o' });
    expect(ok.status).toBe(200);
    expect(ok.body.session.next).toEqual({ attempt: 0, step: 1 });
  });

  it('the stored prompt is the one the engine saw: dropped steps are left out', async () => {
    const id = (await call(url, 'POST', '/v1/sessions', { taskId: 't', instructions: 'RULES' })).body.id;
    engine.drop = 1;
    for (let t = 0; t < 3; t++) {
      expect((await call(url, 'POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: t, observation: `O${t}` })).status).toBe(200);
    }
    engine.drop = 0;
    const rows = (await call(url, 'GET', `/v1/sessions/${id}/trajectory`)).body.steps;
    expect(rows.map((r: any) => r.droppedSteps)).toEqual([0, 1, 1]);
    expect(rows[2].prompt).toBe(`RULES\nObservation:\nO1\nAction: ${rows[1].action}\nObservation:\nO2\nAction: `);
  });

  it('/readyz is 503 while the active model is not loaded', async () => {
    engine.unloaded = true;
    const r = await call(url, 'GET', '/readyz');
    expect(r.status).toBe(503);
    expect(r.body).toMatchObject({ status: 'not-ready', database: true, model: { version: 'test', loaded: false } });
    engine.unloaded = false;
    expect((await call(url, 'GET', '/readyz')).status).toBe(200);
  });

  it('a request too large for the model is 400 naming the field, records nothing, and a smaller one works', async () => {
    const id = (await call(url, 'POST', '/v1/sessions', { taskId: 't', instructions: 'x' })).body.id;
    const before = dumpDb(dir);
    engine.tooLarge = new EngineLimitError('body/availableActions/1', 'is 600 tokens (UTF-8 bytes + 1); model version test takes candidates of at most 512 tokens (half its context of 1024)');
    const r = await call(url, 'POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o', availableActions: ['a', 'b'.repeat(599)] });
    engine.tooLarge = null;
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({
      type: 'https://lamer-server.dev/problems/validation',
      errors: [{ field: 'body/availableActions/1', message: 'is 600 tokens (UTF-8 bytes + 1); model version test takes candidates of at most 512 tokens (half its context of 1024)' }],
    });
    expect(dumpDb(dir)).toBe(before);
    const metrics = (await call(url, 'GET', '/metrics')).body as string;
    expect(metrics).not.toMatch(/lamer_step_requests_total\{outcome="engine_error"\} [2-9]/); // only the 503 test above
    expect((await call(url, 'POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o', availableActions: ['a', 'b'] })).status).toBe(200);
  });

  it('records the prompt exactly as the engine fed it to the model, and how many characters were cut', async () => {
    const id = (await call(url, 'POST', '/v1/sessions', { taskId: 't', instructions: 'INSTRUCTIONS' })).body.id;
    engine.cut = { promptText: 'TIONS\nObservation:\nO0\nAction:', promptTruncatedChars: 7 };
    expect((await call(url, 'POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'O0' })).status).toBe(200);
    engine.cut = null;
    expect((await call(url, 'POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 1, observation: 'O1' })).status).toBe(200);
    const rows = (await call(url, 'GET', `/v1/sessions/${id}/trajectory`)).body.steps;
    expect(rows[0]).toMatchObject({ prompt: 'TIONS\nObservation:\nO0\nAction:', promptTruncatedChars: 7, droppedSteps: 0 });
    expect(rows[1].promptTruncatedChars).toBe(0);
    expect(rows[1].prompt).toBe(`INSTRUCTIONS\nObservation:\nO0\nAction: ${rows[0].action}\nObservation:\nO1\nAction: `);
  });

  it("cuts the model's reflection to LAMER_MAX_REFLECTION_CHARS characters (code points) and refuses a longer human edit", async () => {
    const id = (await call(url, 'POST', '/v1/sessions', { taskId: 't', instructions: 'x', maxAttempts: 2 })).body.id;
    engine.reflection = '😀😀😀😀😀😀😀 and more';
    expect((await call(url, 'POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o' })).status).toBe(200);
    const end = await call(url, 'POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 1, observation: 'lost', done: true });
    engine.reflection = null;
    expect(end.body.reflection).toEqual({ attempt: 0, text: '😀😀😀😀😀' }); // 5 characters, no half surrogate pair
    const long = await call(url, 'PUT', `/v1/sessions/${id}/memory/0`, { text: 'abcdef' });
    expect(long.status).toBe(400);
    expect(long.body.errors[0].field).toBe('body/text');
    expect((await call(url, 'PUT', `/v1/sessions/${id}/memory/0`, { text: '😀😀😀😀😀' })).status).toBe(200);
  });
});

describe('a backend that cannot be re-initialised', () => {
  it('makes the exit status 1 and starts the graceful shutdown, logging why', () => {
    const exits: Array<() => void> = [];
    const kills: Array<[number, string]> = [];
    const errors: string[] = [];
    const proc = { pid: 4242, exitCode: undefined as number | string | null | undefined, kill: (pid: number, sig: string) => (kills.push([pid, sig]), true), once: (_e: 'exit', f: () => void) => exits.push(f) };
    exitOnEngineFailure({ info: () => {}, warn: () => {}, error: (_o, m) => errors.push(m ?? '') }, proc)(new Error('cannot load model version base'));
    expect(kills).toEqual([[4242, 'SIGTERM']]);
    expect(errors).toEqual(['model backend failed and could not be re-initialised; shutting down with exit status 1 so that the supervisor restarts the server']);
    proc.exitCode = 0; // what the graceful shutdown sets
    exits.forEach((f) => f());
    expect(proc.exitCode).toBe(1);
  });
});

describe('the builtin engine over HTTP: a backend fault is one 503, then every session steps again', () => {
  it('the failed step records nothing and answers 503; readiness drops while the backend is re-initialised; the next step of another session and the retry succeed', async () => {
    const tmp = tmpDir();
    const ckpt = path.join(tmp, 'model');
    const m = initModel(TINY, 3);
    await saveCheckpoint(m, ckpt, { version: 'base' });
    m.dispose();
    let poisoned = false;
    const builtin = await createBuiltinEngineInstance({
      backend: 'wasm', batchWindowMs: 0, limits: { maxActionTokens: 8, maxReflectionTokens: 16 },
      beforeForward: () => {
        if (poisoned) throw new WebAssembly.RuntimeError('memory access out of bounds');
      },
    });
    const base = loadConfig({});
    const config = { ...base, engine: 'builtin' as const, logLevel: 'silent' as const, dataDir: path.join(tmp, 'data'), baseModelDir: ckpt, apiKeys: [] };
    const app2 = await buildApp(config, { store: sqliteStore(openDatabase(config.dataDir)), engine: builtin });
    const u = await app2.listen({ host: '127.0.0.1', port: 0 });
    try {
      const a = (await call(u, 'POST', '/v1/sessions', { taskId: 't', instructions: 'x' })).body.id;
      const b = (await call(u, 'POST', '/v1/sessions', { taskId: 't', instructions: 'y' })).body.id;
      expect((await call(u, 'POST', `/v1/sessions/${a}/steps`, { attempt: 0, step: 0, observation: 'o' })).status).toBe(200);
      const before = dumpDb(config.dataDir);
      poisoned = true;
      const r = await call(u, 'POST', `/v1/sessions/${b}/steps`, { attempt: 0, step: 0, observation: 'o' });
      poisoned = false;
      expect(r.status).toBe(503);
      expect(r.body).toMatchObject({ type: 'https://lamer-server.dev/problems/engine-unavailable', detail: 'model backend fault; the engine re-initialises its backend, retry the request' });
      expect(dumpDb(config.dataDir)).toBe(before);
      const ready: number[] = [];
      for (let i = 0; i < 200 && ready.at(-1) !== 200; i++) {
        ready.push((await call(u, 'GET', '/readyz')).status);
        if (ready.at(-1) !== 200) await new Promise((res) => setTimeout(res, 10));
      }
      expect(ready[0]).toBe(503); // not ready while recovering
      expect(ready.at(-1)).toBe(200);
      expect(builtin.health()).toEqual({ state: 'ok', recoveries: 1 });
      // another session's next step, and the failed step sent again
      expect((await call(u, 'POST', `/v1/sessions/${a}/steps`, { attempt: 0, step: 1, observation: 'o2' })).status).toBe(200);
      const retry = await call(u, 'POST', `/v1/sessions/${b}/steps`, { attempt: 0, step: 0, observation: 'o' });
      expect(retry.status).toBe(200);
      expect(retry.body.session.next).toEqual({ attempt: 0, step: 1 });
    } finally {
      await app2.close();
    }
  });
});

describe('the builtin engine over HTTP: the record is what the model saw', () => {
  it('every recorded prompt is exactly decode(promptTokenIds) and every output valid UTF-8, for random long histories (property)', async () => {
    const tmp = tmpDir();
    const ckpt = path.join(tmp, 'model');
    const m = initModel(TINY, 4);
    await saveCheckpoint(m, ckpt, { version: 'base' });
    m.dispose();
    const builtin = await createBuiltinEngineInstance({ backend: 'wasm', batchWindowMs: 0, limits: { maxActionTokens: 8, maxReflectionTokens: 16 } });
    const config = { ...loadConfig({}), engine: 'builtin' as const, logLevel: 'silent' as const, dataDir: path.join(tmp, 'data'), baseModelDir: ckpt, apiKeys: [] };
    const app3 = await buildApp(config, { store: sqliteStore(openDatabase(config.dataDir)), engine: builtin });
    const u = await app3.listen({ host: '127.0.0.1', port: 0 });
    const fatal = new TextDecoder('utf-8', { fatal: true });
    const text = (max: number) => fc.string({ unit: fc.constantFrom('binary', 'grapheme') as never, minLength: 1, maxLength: max });
    try {
      await fc.assert(
        fc.asyncProperty(text(80), fc.array(text(40), { minLength: 2, maxLength: 5 }), fc.nat(1000), async (instructions, observations, seed) => {
          const id = (await call(u, 'POST', '/v1/sessions', { taskId: 't', instructions, maxAttempts: 2, sampling: { temperature: 2, seed } })).body.id;
          for (let t = 0; t < observations.length; t++) {
            const last = t === observations.length - 1;
            const r = await call(u, 'POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: t, observation: observations[t], ...(last ? { done: true } : {}) });
            expect(r.status).toBe(200);
          }
          const rows = (await call(u, 'GET', `/v1/sessions/${id}/trajectory`)).body.steps as Array<Record<string, any>>;
          expect(rows.some((r) => r.kind === 'reflection')).toBe(true);
          for (const r of rows.filter((x) => x.promptTokenIds !== null)) {
            expect(decode(r.promptTokenIds)).toBe(r.prompt);
            expect(r.promptTokenIds.length).toBeLessThanOrEqual(TINY.block_size);
            expect(r.promptTruncatedChars).toBeGreaterThanOrEqual(0);
            expect(() => fatal.decode(Uint8Array.from(r.outputTokenIds.filter((x: number) => x < 256)))).not.toThrow();
            expect(r.output).not.toContain('\uFFFD');
          }
        }),
        { numRuns: 8 },
      );
    } finally {
      await app3.close();
    }
  });
});

describe('the builtin engine over HTTP: health checks on fresh connections while forwards run back to back', () => {
  it('16 /healthz probes opened at once are all answered within fewer forward sections than there are probes', async () => {
    const tmp = tmpDir();
    const ckpt = path.join(tmp, 'model');
    const m = initModel(TINY, 5);
    await saveCheckpoint(m, ckpt, { version: 'base' });
    m.dispose();
    let forwards = 0;
    const builtin = await createBuiltinEngineInstance({
      backend: 'wasm', batchWindowMs: 0, limits: { maxActionTokens: 8, maxReflectionTokens: 16 },
      // a slow machine: every forward section holds the event loop for at least 30 ms
      beforeForward: () => {
        forwards++;
        const until = performance.now() + 30;
        while (performance.now() < until);
      },
    });
    const config = { ...loadConfig({}), engine: 'builtin' as const, logLevel: 'silent' as const, dataDir: path.join(tmp, 'data'), baseModelDir: ckpt, apiKeys: [] };
    const app2 = await buildApp(config, { store: sqliteStore(openDatabase(config.dataDir)), engine: builtin });
    const u = await app2.listen({ host: '127.0.0.1', port: 0 });
    const port = Number(new URL(u).port);
    let stop = false;
    try {
      // 8 sessions step without pause, so that forward sections follow each other
      const players = Array.from({ length: 8 }, async (_, c) => {
        const created = await call(u, 'POST', '/v1/sessions', { taskId: `t${c}`, instructions: 'x', maxSteps: 1000 });
        expect(created.status).toBe(201);
        for (let t = 0; !stop; t++) {
          expect((await call(u, 'POST', `/v1/sessions/${created.body.id}/steps`, { attempt: 0, step: t, observation: `o${t}` })).status).toBe(200);
        }
      });
      while (forwards < 10) await new Promise((r) => setTimeout(r, 5));
      const start = forwards;
      const probes = Array.from(
        { length: 16 },
        () =>
          new Promise<{ status: number; forwards: number }>((resolve, reject) => {
            const req = http.request({ host: '127.0.0.1', port, path: '/healthz', agent: false }, (res) => {
              const at = forwards;
              res.resume();
              res.on('end', () => resolve({ status: res.statusCode ?? 0, forwards: at - start }));
            });
            req.on('error', reject);
            req.end();
          }),
      );
      const answers = await Promise.all(probes);
      stop = true;
      await Promise.all(players);
      expect(answers.map((a) => a.status)).toEqual(new Array(16).fill(200));
      // Node accepts one new connection per event-loop turn; a 30 ms section is followed by 4 turns
      // (src/model/forward-sections.ts yieldTurnsAfter), where one turn per forward would need about 16
      expect(Math.max(...answers.map((a) => a.forwards))).toBeLessThanOrEqual(8);
    } finally {
      stop = true;
      await app2.close();
    }
  });
});
