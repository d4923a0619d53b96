/**
 * src/shared/worker-channel.ts: WorkerChannel's one-request-at-a-time protocol against a small
 * JavaScript worker (eval), and spawnEntry starting a TypeScript entry through worker-bootstrap.mjs.
 */
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { spawnEntry, WorkerChannel } from '../../src/shared/worker-channel.js';

type In = { type: 'echo'; x: number } | { type: 'report' } | { type: 'throw' } | { type: 'exit'; code: number } | { type: 'twice'; x: number } | { type: 'hang' };
type Out = { type: 'echo'; x: number } | { type: 'error'; message: string; stack?: string };

const WORKER = `
const { parentPort } = require('node:worker_threads');
parentPort.on('message', (m) => {
  if (m.type === 'echo') parentPort.postMessage({ type: 'echo', x: m.x });
  else if (m.type === 'report') parentPort.postMessage({ type: 'error', message: 'bad request', stack: 'Error: bad request\\n    at worker' });
  else if (m.type === 'throw') throw new Error('boom');
  else if (m.type === 'exit') process.exit(m.code);
  else if (m.type === 'twice') { parentPort.postMessage({ type: 'echo', x: m.x }); parentPort.postMessage({ type: 'echo', x: -1 }); }
});
`;

const open: WorkerChannel<In, Out>[] = [];
function channel(worker = new Worker(WORKER, { eval: true })): WorkerChannel<In, Out> {
  const c = new WorkerChannel<In, Out>(worker, {
    reported: (m) => new Error(`test thread: ${m.message}`),
    crashed: (err) => new Error(`test thread crashed: ${err.message}`, { cause: err }),
    exited: (code) => new Error(`test thread exited with code ${code}`),
  });
  open.push(c);
  return c;
}
afterEach(async () => { await Promise.all(open.splice(0).map((c) => c.close())); });

describe('WorkerChannel', () => {
  it('answers each request with the thread\'s answer, in order', async () => {
    const c = channel();
    for (const x of [1, 2, 3]) expect(await c.request({ type: 'echo', x })).toEqual({ type: 'echo', x });
  });

  it('drops an answer that no request waits for', async () => {
    const worker = new Worker(WORKER, { eval: true });
    let answers = 0;
    worker.on('message', () => answers++);
    const c = channel(worker);
    expect(await c.request({ type: 'twice', x: 5 })).toEqual({ type: 'echo', x: 5 });
    // the second answer (x: -1) has arrived, with nothing pending, before the next request is sent
    await vi.waitFor(() => expect(answers).toBe(2), { timeout: 10_000, interval: 5 });
    expect(await c.request({ type: 'echo', x: 6 })).toEqual({ type: 'echo', x: 6 });
  });

  it('rejects a request the thread reports an error for, with the thread\'s stack; later requests still work', async () => {
    const c = channel();
    const e = await c.request({ type: 'report' }).catch((err: Error) => err);
    expect(e).toBeInstanceOf(Error);
    expect((e as Error).message).toBe('test thread: bad request');
    expect((e as Error).stack).toBe('Error: bad request\n    at worker');
    expect(await c.request({ type: 'echo', x: 7 })).toEqual({ type: 'echo', x: 7 });
  });

  it('a crash rejects the pending request and every later one with the crash (not the exit that follows)', async () => {
    const c = channel();
    const e = await c.request({ type: 'throw' }).catch((err: Error) => err);
    expect((e as Error).message).toBe('test thread crashed: boom');
    expect(((e as Error).cause as Error).message).toBe('boom');
    await new Promise<void>((r) => { if (c.worker.threadId === -1) r(); else c.worker.once('exit', () => r()); });
    await expect(c.request({ type: 'echo', x: 1 })).rejects.toBe(e);
  });

  it('an exit while a request is pending rejects it and every later one', async () => {
    const c = channel();
    await expect(c.request({ type: 'exit', code: 3 })).rejects.toThrow('test thread exited with code 3');
    const later = c.request({ type: 'echo', x: 1 }).catch((err: Error) => err);
    expect((await later as Error).message).toBe('test thread exited with code 3');
  });

  it('close terminates the thread (rejecting a pending request) and may be called again', async () => {
    const c = channel();
    const pending = c.request({ type: 'hang' });
    await c.close();
    const e = await pending.catch((err: Error) => err);
    expect((e as Error).message).toMatch(/^test thread exited with code \d+$/);
    await c.close();
    await expect(c.request({ type: 'echo', x: 1 })).rejects.toBe(e);
  });
});

describe('spawnEntry', () => {
  it('under tsx starts the .ts entry next to the caller through the bootstrap, with the entry\'s URL as workerData.entry', async () => {
    const w = spawnEntry('./fixtures/echo-entry', import.meta.url);
    try {
      const answer = await new Promise((resolve, reject) => {
        w.once('message', resolve);
        w.once('error', reject);
        w.postMessage({ type: 'echo', x: 9 });
      });
      expect(answer).toEqual({ type: 'echo', x: 9, lang: 'ts', workerData: { entry: new URL('./fixtures/echo-entry.ts', import.meta.url).href } });
    } finally {
      await w.terminate();
    }
  });
});
