/**
 * The parent's side of a worker thread that answers one request at a time, and how such threads
 * are started. Used by the data-parallel training replicas (src/training/run/data-parallel.ts) and
 * the compact trainer's data thread (src/recipes/sft-base/data-thread.ts).
 *
 * Protocol: the parent posts a request and waits; the thread posts exactly one message in answer,
 * either a result or `{ type: 'error', message, stack? }`. The caller sends the next request only
 * after the previous one settled (a second request while one is pending replaces the first's
 * waiter).
 */
import { Worker, type Transferable } from 'node:worker_threads';

/** How a channel words its failures (each call builds the Error that the request rejects with). */
export interface ChannelErrors<E> {
  /** The thread answered a request with an `error` message; the message's stack is put on the Error. */
  reported(m: E): Error;
  /** The thread threw an uncaught error (the `error` event). */
  crashed(err: Error): Error;
  /** The thread exited (the `exit` event; `code` is its exit code, 1 after an uncaught error). */
  exited(code: number): Error;
}

/**
 * A one-request-at-a-time channel to `worker`. A reported `error` answer rejects that request
 * only. A crash or exit rejects the pending request and every later one with the first such
 * failure (an exit that follows a crash does not replace the crash's error).
 */
export class WorkerChannel<In, Out extends { type: string }> {
  private pending: { resolve: (m: Out) => void; reject: (e: Error) => void } | null = null;
  private failure: Error | null = null;

  constructor(readonly worker: Worker, errors: ChannelErrors<Extract<Out, { type: 'error' }>>) {
    worker.on('message', (m: Out) => {
      const p = this.pending;
      this.pending = null;
      if (!p) return; // nothing asked: the answer is dropped
      if (m.type === 'error') {
        const reported = m as Extract<Out, { type: 'error' }>;
        const e = errors.reported(reported);
        const stack = (reported as { stack?: string }).stack;
        if (stack) e.stack = stack;
        p.reject(e);
      } else p.resolve(m);
    });
    worker.on('error', (err) => this.fail(errors.crashed(err)));
    worker.on('exit', (code) => this.fail(errors.exited(code)));
  }

  private fail(e: Error): void {
    this.failure ??= e;
    const p = this.pending;
    this.pending = null;
    p?.reject(e);
  }

  /**
   * Posts `msg` (moving `transfer`) and resolves with the thread's answer.
   * @throws Error (rejects) as built by the channel's `ChannelErrors`: the thread's reported
   *   error, or its crash or exit, at once when the thread has already failed.
   */
  request(msg: In, transfer: readonly Transferable[] = []): Promise<Out> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject };
      this.worker.postMessage(msg, transfer);
    });
  }

  /** Terminates the thread and waits for it to exit; never rejects. */
  async close(): Promise<void> {
    await this.worker.terminate().catch(() => undefined);
  }
}

const BOOTSTRAP = new URL('./worker-bootstrap.mjs', import.meta.url);

/**
 * Starts the worker entry module `name` (a path without extension, relative to `base`, the
 * caller's `import.meta.url`) in a new thread. When the caller runs compiled (`base` ends with
 * .js), the entry's .js file is the thread's module. Under tsx the entry is `name`.ts, started
 * through worker-bootstrap.mjs (with `execArgv: []` and `workerData.entry` set to the entry's URL),
 * which registers tsx's loader in the thread first. `workerData` (optional) reaches the entry as
 * its `workerData` (with `entry` added under tsx); a SharedArrayBuffer in it is shared, not copied.
 */
export function spawnEntry(name: string, base: string, workerData?: Record<string, unknown>): Worker {
  if (base.endsWith('.js')) return new Worker(new URL(`${name}.js`, base), workerData ? { workerData } : {});
  return new Worker(BOOTSTRAP, { execArgv: [], workerData: { ...workerData, entry: new URL(`${name}.ts`, base).href } });
}
