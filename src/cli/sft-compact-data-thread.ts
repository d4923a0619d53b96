/**
 * The compact trainer's data thread (src/cli/sft-compact.ts `--data-thread`): the example pool
 * (src/cli/sft-compact-pool.ts) runs in a worker thread with its own tfjs backend and its own copy
 * of the model for DAgger play, so that playing and labelling trials (a quarter of a step once
 * DAgger runs) overlaps the optimiser step on the other core instead of preceding it.
 *
 * Protocol, one request at a time: `init` (model shape, weights, pool options, prompt format)
 * -> the thread fills its pool -> `ready`; then per step `take` -> the thread copies the trainer's
 * newest weights from the shared buffer, answers with a batch from its full pool, and refills the
 * pool while the trainer trains on that batch. The pool draws exactly what it draws in the
 * trainer's thread for the same seed (same rng stream, same order of calls); the one difference is
 * that DAgger trials are played by the weights of one step earlier.
 */
import { Worker } from 'node:worker_threads';
import type * as tf from '@tensorflow/tfjs';
import type { GPTConfig } from '../model/gpt.js';
import type { CompactPromptFormat } from '../model/prompt-format.js';
import type { CompactExample } from '../training/data/compact-sft.js';
import { paramCount, readWeights } from '../training/run/data-parallel.js';
import type { PoolOptions } from './sft-compact-pool.js';

export type ToDataThread =
  | { type: 'init'; config: GPTConfig; weights: SharedArrayBuffer; pool: PoolOptions; format: CompactPromptFormat; size: number }
  | { type: 'take'; n: number; daggerOn: boolean; syncWeights: boolean };
export type FromDataThread =
  | { type: 'ready'; params: number; refillMs: number }
  | { type: 'batch'; examples: CompactExample[]; trials: number; daggerTrials: number; refillMs: number }
  | { type: 'error'; message: string; stack?: string };

/** What `take` gives: the batch, the pool's trial counters, and the last refill's duration (ms). */
export interface TakenBatch { examples: CompactExample[]; trials: number; daggerTrials: number; refillMs: number }

function spawn(): Worker {
  return import.meta.url.endsWith('.js')
    ? new Worker(new URL('./sft-compact-data-entry.js', import.meta.url))
    : new Worker(new URL('./worker-bootstrap.mjs', import.meta.url), { execArgv: [], workerData: { entry: './sft-compact-data-entry.ts' } });
}

/** The trainer's side of the data thread. Always `close()` it (a finally). */
export class DataThread {
  private pending: { resolve: (m: FromDataThread) => void; reject: (e: Error) => void } | null = null;
  private failure: Error | null = null;
  private readonly weights: Float32Array;
  private stale = false;

  private constructor(private readonly worker: Worker, buffer: SharedArrayBuffer) {
    this.weights = new Float32Array(buffer);
    worker.on('message', (m: FromDataThread) => {
      const p = this.pending;
      this.pending = null;
      if (!p) return;
      if (m.type === 'error') {
        const e = new Error(`data thread: ${m.message}`);
        if (m.stack) e.stack = m.stack;
        p.reject(e);
      } else p.resolve(m);
    });
    worker.on('error', (err) => this.fail(new Error(`data thread crashed: ${err.message}`, { cause: err })));
    worker.on('exit', (code) => this.fail(new Error(`data thread exited with code ${code}`)));
  }

  private fail(e: Error): void {
    this.failure ??= e;
    const p = this.pending;
    this.pending = null;
    p?.reject(e);
  }

  private request(msg: ToDataThread): Promise<FromDataThread> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject };
      this.worker.postMessage(msg);
    });
  }

  /**
   * Starts the thread with a copy of `vars` (the model's trainable variables, in order) and waits
   * until its pool is full. @throws Error when the thread fails to start or its model differs.
   */
  static async start(config: GPTConfig, vars: readonly tf.Variable[], pool: PoolOptions, format: CompactPromptFormat, size = 4096): Promise<DataThread> {
    const n = paramCount(vars);
    const buffer = new SharedArrayBuffer(n * 4);
    const t = new DataThread(spawn(), buffer);
    readWeights(vars, t.weights);
    try {
      const m = await t.request({ type: 'init', config, weights: buffer, pool, format, size });
      if (m.type !== 'ready' || m.params !== n) throw new Error(`data thread built ${m.type === 'ready' ? m.params : '?'} parameters, the trainer has ${n}`);
      return t;
    } catch (e) {
      await t.close();
      throw e;
    }
  }

  /** Copies the trainer's weights for the thread's next `take` (after each optimiser step). */
  publish(vars: readonly tf.Variable[]): void {
    readWeights(vars, this.weights);
    this.stale = true;
  }

  /**
   * `n` examples of one kind from the thread's pool (ExamplePool.take); the thread then refills
   * its pool, with DAgger trials when `daggerOn`, while the caller trains.
   * @throws Error when the thread fails.
   */
  async take(n: number, daggerOn: boolean): Promise<TakenBatch> {
    const m = await this.request({ type: 'take', n, daggerOn, syncWeights: this.stale });
    this.stale = false;
    if (m.type !== 'batch') throw new Error(`data thread answered ${m.type} to take`);
    return { examples: m.examples, trials: m.trials, daggerTrials: m.daggerTrials, refillMs: m.refillMs };
  }

  /** Terminates the thread. */
  async close(): Promise<void> {
    await this.worker.terminate().catch(() => undefined);
  }
}
