/**
 * The compact trainer's data thread (src/recipes/sft-base/sft-base.ts `--data-thread`): the example pool
 * (src/recipes/sft-base/pool.ts) runs in a worker thread with its own tfjs backend and its own copy
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
import type { Worker } from 'node:worker_threads';
import type * as tf from '@tensorflow/tfjs';
import type { GPTConfig } from '../../model/gpt.js';
import type { CompactPromptFormat } from '../../model/prompt-format.js';
import type { CompactExample } from '../../training/data/compact-sft.js';
import { spawnEntry, WorkerChannel } from '../../shared/worker-channel.js';
import { paramCount, readWeights } from '../../training/run/data-parallel.js';
import type { PoolOptions } from './pool.js';

export type ToDataThread =
  | { type: 'init'; config: GPTConfig; weights: SharedArrayBuffer; pool: PoolOptions; format: CompactPromptFormat; size: number }
  | { type: 'take'; n: number; daggerOn: boolean; memoryOn: boolean; syncWeights: boolean };
export type FromDataThread =
  | { type: 'ready'; params: number; refillMs: number }
  | ({ type: 'batch' } & TakenBatch)
  | { type: 'error'; message: string; stack?: string };

/**
 * What `take` gives: the batch, the pool's counters (trials, DAgger trials, Sokoban examples with
 * dead-push labels made, push-memory targets made), and the last refill's duration (ms).
 */
export interface TakenBatch {
  examples: CompactExample[]; trials: number; daggerTrials: number; deadPushExamples: number; pushMemoryTargets: number;
  refillMs: number;
}

/** The trainer's side of the data thread. Always `close()` it (a finally). */
export class DataThread {
  private readonly channel: WorkerChannel<ToDataThread, FromDataThread>;
  private readonly weights: Float32Array;
  private stale = false;

  private constructor(worker: Worker, buffer: SharedArrayBuffer) {
    this.weights = new Float32Array(buffer);
    this.channel = new WorkerChannel(worker, {
      reported: (m) => new Error(`data thread: ${m.message}`),
      crashed: (err) => new Error(`data thread crashed: ${err.message}`, { cause: err }),
      exited: (code) => new Error(`data thread exited with code ${code}`),
    });
  }

  /**
   * Starts the thread with a copy of `vars` (the model's trainable variables, in order) and waits
   * until its pool is full. @throws Error when the thread fails to start or its model differs.
   */
  static async start(config: GPTConfig, vars: readonly tf.Variable[], pool: PoolOptions, format: CompactPromptFormat, size = 4096): Promise<DataThread> {
    const n = paramCount(vars);
    const buffer = new SharedArrayBuffer(n * 4);
    const t = new DataThread(spawnEntry('./data-entry', import.meta.url), buffer);
    readWeights(vars, t.weights);
    try {
      const m = await t.channel.request({ type: 'init', config, weights: buffer, pool, format, size });
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
   * its pool, with DAgger trials when `daggerOn` and memory contrasts when `memoryOn` too
   * (ExamplePool.refill), while the caller trains.
   * @throws Error when the thread fails.
   */
  async take(n: number, daggerOn: boolean, memoryOn = true): Promise<TakenBatch> {
    const m = await this.channel.request({ type: 'take', n, daggerOn, memoryOn, syncWeights: this.stale });
    this.stale = false;
    if (m.type !== 'batch') throw new Error(`data thread answered ${m.type} to take`);
    const { examples, trials, daggerTrials, deadPushExamples, pushMemoryTargets, refillMs } = m;
    return { examples, trials, daggerTrials, deadPushExamples, pushMemoryTargets, refillMs };
  }

  /** Terminates the thread. */
  async close(): Promise<void> {
    await this.channel.close();
  }
}
