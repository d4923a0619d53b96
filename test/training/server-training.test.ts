/**
 * Training next to serving over real HTTP: a server with the builtin engine on
 * a tiny GPT records door-game sessions; a LaMer job trains on them in a worker thread while the
 * server keeps answering steps; the new version is registered with its parent and job, activated,
 * and pinned by new sessions.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../src/server.js';
import type { AsyncRepositories } from '../../src/db/async-repositories.js';
import type { ModelRegistry } from '../../src/agent/models.js';
import { TrainingJobManager } from '../../src/training/run/manager.js';
import { DEFAULT_MODEL_IO } from '../../src/training/run/worker.js';
import { tmpDir, writeTinyGptCheckpoint } from '../helpers/index.js';

let dir: string;
let server: RunningServer;
const DOORS = ['door 1', 'door 2', 'door 3'];

async function call(method: string, path: string, body?: unknown) {
  const r = await fetch(server.url + path, { method, headers: body ? { 'content-type': 'application/json' } : {}, body: body ? JSON.stringify(body) : undefined });
  return { status: r.status, body: (await r.json()) as Record<string, any> };
}

/** One session of the door game: the prize is behind door (seed % 3) + 1; two attempts. */
async function playSession(seed: number): Promise<{ steps: number; modelVersion: string }> {
  const s = await call('POST', '/v1/sessions', { taskId: `doors:seed=${seed}`, instructions: 'Open the door with the prize.', env: 'doors', maxAttempts: 2, maxSteps: 2, sampling: { temperature: 1, topP: 1, topK: 0, seed } });
  expect(s.status).toBe(201);
  let steps = 0;
  for (let attempt = 0; attempt < 2; attempt++) {
    const a = await call('POST', `/v1/sessions/${s.body.id}/steps`, { attempt, step: 0, observation: 'Three closed doors.', availableActions: DOORS });
    expect(a.status).toBe(200);
    const win = a.body.action === DOORS[seed % 3];
    const d = await call('POST', `/v1/sessions/${s.body.id}/steps`, { attempt, step: 1, observation: win ? 'Prize!' : 'Empty.', reward: win ? 10 : -1, done: true, success: win });
    expect(d.status).toBe(200);
    steps += 2;
    if (d.body.session.status !== 'active') break;
  }
  return { steps, modelVersion: s.body.modelVersion };
}

beforeAll(async () => {
  dir = tmpDir('lamer-srvtrain-');
  await writeTinyGptCheckpoint(join(dir, 'base-model'), 3);
  server = await startServer({ port: 0, host: '127.0.0.1', dataDir: join(dir, 'data'), engine: 'builtin', tfjsBackend: 'wasm', logLevel: 'silent', apiKeys: [], baseModelDir: join(dir, 'base-model') });
});
afterAll(async () => {
  await server?.close();
});

describe('a LaMer job next to a serving server', () => {
  it('trains in a worker while steps are answered, then hot-swaps to the new version', async () => {
    for (let seed = 0; seed < 4; seed++) await playSession(seed);
    const app = server.app as unknown as { repos: AsyncRepositories; models: ModelRegistry };
    const manager = new TrainingJobManager({ repos: app.repos, dataDir: join(dir, 'data'), registry: app.models, modelIO: { ...DEFAULT_MODEL_IO, options: { backend: 'wasm' } } });
    const job = await manager.create({ algorithm: 'lamer', version: 'v1', activate: true, hyper: { lr: 1e-3, epochs: 3, minibatchSize: 2, gammaTraj: 0.6 } });
    let stepsWhileRunning = 0;
    let seed = 100;
    const unfinished = async () => ['queued', 'running'].includes((await manager.get(job.id))!.status);
    while (await unfinished()) {
      const r = await playSession(seed++);
      // The job may finish (and activate v1) between the loop's check and the session's creation,
      // so only a session that ended while the job was still unfinished was surely created before
      // the activation: it pins 'base'. One that overlapped the end may pin either version.
      if (await unfinished()) {
        expect(r.modelVersion).toBe('base');
        if ((await manager.get(job.id))!.status === 'running') stepsWhileRunning += r.steps;
      } else {
        expect(['base', 'v1']).toContain(r.modelVersion);
      }
    }
    await manager.whenIdle();
    const done = (await manager.get(job.id))!;
    expect(done.error).toBeNull();
    expect(done.status).toBe('succeeded');
    expect(stepsWhileRunning).toBeGreaterThan(0);
    expect((done.metrics as unknown[]).length).toBeGreaterThan(0);
    const v = await call('GET', '/v1/models/v1');
    expect(v.status).toBe(200);
    expect(v.body).toMatchObject({ version: 'v1', parent: 'base', jobId: job.id, status: 'active' });
    const after = await playSession(999);
    expect(after.modelVersion).toBe('v1');
    // roll back: activating the parent again
    expect((await call('POST', '/v1/models/base/activate')).status).toBe(200);
    expect((await playSession(1000)).modelVersion).toBe('base');
    await manager.close();
  }, 180_000);
});
