/**
 * Worker-thread side of the serving pool (src/policy/serving-pool.ts, messages in
 * src/policy/serving/protocol.ts): one `BuiltinEngine` on this thread's own tfjs backend (a worker
 * thread has its own module instances, so its own tfjs engine and wasm heap). It answers the
 * parent's requests (`ToWorker`) with one `reply` each, carrying the result or the error (name,
 * message, field) and a snapshot of its state (loaded versions, health, queued requests); it also
 * posts `state` when that snapshot changes between requests (a backend recovery that finished),
 * `forward` per forward pass while the parent observes, `log` lines and `fatal` when its backend
 * could not be re-initialised.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { createBuiltinEngineInstance, BuiltinEngine } from './builtin-engine.js';
import { EngineLimitError } from './engine.js';
import type { ServingWorkerData, ToWorker, FromWorker, WorkerState, WireError } from './serving/protocol.js';

if (!parentPort) throw new Error('serving-worker.ts must run in a worker thread');
const port = parentPort;
const data = workerData as ServingWorkerData;
const post = (m: FromWorker) => port.postMessage(m);

const logger = {
  info: (obj: object, msg?: string) => post({ type: 'log', level: 'info', obj, msg }),
  warn: (obj: object, msg?: string) => post({ type: 'log', level: 'warn', obj, msg }),
  error: (obj: object, msg?: string) => post({ type: 'log', level: 'error', obj, msg }),
};

/** Test hook (only with `data.testHooks`): while true, every forward pass throws a WebAssembly trap. */
let poisoned = false;

function wireError(err: unknown): WireError {
  if (err instanceof EngineLimitError) return { name: err.name, message: err.message, field: err.field };
  if (err instanceof Error) return { name: err.name, message: err.message };
  return { name: 'Error', message: String(err) };
}

let engine: BuiltinEngine;
let lastState = '';

function state(): WorkerState {
  return {
    loaded: engine.info().loadedVersions,
    health: engine.health(),
    queued: engine.queueDepth(),
  };
}

/** Posts the state when it changed since the last post (replies carry it too). */
function postStateIfChanged(): void {
  const s = state();
  const key = JSON.stringify(s);
  if (key === lastState) return;
  lastState = key;
  post({ type: 'state', state: s });
}

async function handle(msg: ToWorker): Promise<unknown> {
  if ('order' in msg) engine.touchVersions(msg.order);
  switch (msg.op) {
    case 'act':
      return engine.act(msg.req);
    case 'reflect':
      return engine.reflect(msg.req);
    case 'score':
      return engine.score(msg.req);
    case 'complete':
      return engine.complete(msg.req);
    case 'replay':
      return engine.replay(msg.req);
    case 'load':
      return engine.load(msg.version, msg.dir);
    case 'release':
      engine.release(msg.sessionId);
      return undefined;
    case 'observe':
      engine.setObserver({ forward: (rows, ms) => post({ type: 'forward', rows, ms }) });
      return undefined;
    case 'stats':
      return { numTensors: BuiltinEngine.numTensors(), batchers: engine.stats(), cachedSessions: engine.cachedSessions() };
    case 'poison':
      if (!data.testHooks) throw new Error('test hooks are off');
      poisoned = msg.on;
      return undefined;
    case 'crash':
      if (!data.testHooks) throw new Error('test hooks are off');
      process.exit(msg.code); // in a worker thread: ends this thread only
      return undefined;
    case 'dispose':
      await engine.dispose();
      return undefined;
  }
}

async function main(): Promise<void> {
  try {
    engine = await createBuiltinEngineInstance({
      ...data.options,
      logger,
      onFatal: (err) => post({ type: 'fatal', message: err.message }),
      ...(data.testHooks
        ? { beforeForward: () => {
            if (poisoned) throw new WebAssembly.RuntimeError('memory access out of bounds');
          } }
        : {}),
    });
  } catch (err) {
    post({ type: 'ready', error: wireError(err) });
    return;
  }
  port.on('message', (msg: ToWorker) => {
    handle(msg).then(
      (value) => {
        const s = state();
        lastState = JSON.stringify(s);
        post({ type: 'reply', id: msg.id, ok: true, value, state: s });
      },
      (err: unknown) => {
        const s = state();
        lastState = JSON.stringify(s);
        post({ type: 'reply', id: msg.id, ok: false, error: wireError(err), state: s });
      },
    );
  });
  // A recovery ends between requests: the parent hears of it within this period.
  setInterval(postStateIfChanged, data.statePeriodMs).unref();
  const s = state();
  lastState = JSON.stringify(s);
  post({ type: 'ready', backend: engine.backend, state: s });
}

void main();
