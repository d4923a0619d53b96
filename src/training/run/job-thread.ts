/**
 * The start-up shared by the worker threads that run one long job each: a training job
 * (src/training/run/worker.ts) and a promotion gate's evaluation (src/training/run/gate-worker.ts).
 *
 * Protocol: the parent posts one start message; the thread answers with any number of progress
 * messages, then one message that ends the job (done, cancelled or error). The parent may post
 * `{ type: 'cancel' }`; the thread is terminated `graceMs` later if it has not ended by then. A crash
 * or exit of the thread rejects the job's promise; nothing is ever thrown in the parent.
 */
import { pathToFileURL } from 'node:url';
import { spawnEntry } from '../../shared/worker-channel.js';

/** A running job thread, as the parent sees it. */
export interface JobThread<T> {
  /** Resolves with the job's result; rejects with the Error that `JobThreadWiring` built. */
  readonly done: Promise<T>;
  /** Posts `{ type: 'cancel' }` once; the thread is terminated after `graceMs` (default 10 s). */
  cancel(graceMs?: number): void;
  /** Worker thread id (for logs). */
  readonly threadId: number;
}

/** How a job's messages and failures map to its outcome; each Error is built by the caller, in its own words. */
export interface JobThreadWiring<T, FromThread> {
  /**
   * Reads one message from the thread: `null` for a message that does not end the job (progress:
   * the caller handles it here), otherwise the job's result or the Error it rejects with.
   */
  onMessage(msg: FromThread): { value: T } | { error: Error } | null;
  /** The Error for an uncaught error in the thread (the worker's `error` event). */
  crashed(err: Error): Error;
  /** The Error for an exit before the job ended; `cancelling` is true once `cancel` was called. */
  exited(code: number, cancelling: boolean): Error;
}

/**
 * Starts the worker entry module `entry` (a path without extension, relative to `base`, the
 * caller's `import.meta.url`; see src/shared/worker-channel.ts spawnEntry), wires its messages,
 * errors and exit through `wiring`, and posts `start` to it. The job settles once, with the first
 * of: a message that ends it, a crash, an exit; the thread is then terminated.
 */
export function startJobThread<T, FromThread>(
  entry: string, base: string, start: { type: 'start' }, wiring: JobThreadWiring<T, FromThread>,
): JobThread<T> {
  const worker = spawnEntry(entry, base);
  let settled = false;
  let cancelTimer: NodeJS.Timeout | null = null;
  let resolveDone!: (r: T) => void;
  let rejectDone!: (e: Error) => void;
  const done = new Promise<T>((res, rej) => { resolveDone = res; rejectDone = rej; });
  const finish = (fn: () => void) => {
    if (settled) return;
    settled = true;
    if (cancelTimer) clearTimeout(cancelTimer);
    fn();
    void worker.terminate();
  };
  worker.on('message', (msg: FromThread) => {
    const end = wiring.onMessage(msg);
    if (end === null) return;
    if ('value' in end) finish(() => resolveDone(end.value));
    else finish(() => rejectDone(end.error));
  });
  worker.on('error', (err) => finish(() => rejectDone(wiring.crashed(err))));
  worker.on('exit', (code) => finish(() => rejectDone(wiring.exited(code, cancelTimer !== null))));
  worker.postMessage(start);
  return {
    done,
    threadId: worker.threadId,
    cancel(graceMs = 10_000) {
      if (settled || cancelTimer) return;
      worker.postMessage({ type: 'cancel' });
      cancelTimer = setTimeout(() => { void worker.terminate(); }, graceMs);
    },
  };
}

/**
 * In the thread: imports `module` (a URL such as file:…, or an absolute path) and returns its
 * export `exportName`.
 * @throws TypeError `<module> has no function <exportName>` when that export is not a function;
 *   whatever the import throws (module not found, syntax error).
 */
export async function importFunction(module: string, exportName: string): Promise<(...args: never[]) => unknown> {
  const url = /^[a-z]+:/i.test(module) ? module : pathToFileURL(module).href;
  const fn = ((await import(url)) as Record<string, unknown>)[exportName];
  if (typeof fn !== 'function') throw new TypeError(`${module} has no function ${exportName}`);
  return fn as (...args: never[]) => unknown;
}
