/**
 * Exponential moving average of a model's weights (Polyak averaging), kept beside the optimiser so
 * that a checkpoint can be evaluated and saved with the averaged weights instead of the last
 * iterate, whose sampled play moves by several points between checkpoints a few hundred steps
 * apart at a small learning rate (docs/results/history/2026-12-02-base-run-g.md).
 *
 * After the t-th update (t = 1, 2, ...):
 *   shadow <- d_t * shadow + (1 - d_t) * weights,   d_t = min(decay, (1 + t) / (10 + t))
 * with the shadow starting as a copy of the weights (t = 0). The ramp (1 + t) / (10 + t) is the
 * `num_updates` rule of tf.train.ExponentialMovingAverage: early updates follow the weights
 * closely instead of averaging in the random initialisation. With a constant d the average spans
 * about 1 / (1 - d) steps (its time constant): 500 steps for d = 0.998.
 */
import * as tf from '@tensorflow/tfjs';

export class WeightAverage {
  /** The averaged weights, one per variable, same shapes (float32). */
  private readonly shadow: tf.Variable[];
  /** Number of updates taken (t). */
  updates = 0;

  /**
   * @param variables the weights to average (e.g. `model.trainableVariables`); read, and written
   *   only inside `withAverage`.
   * @param decay the largest per-step decay d, in (0, 1).
   * @throws RangeError when `decay` is not in (0, 1).
   */
  constructor(readonly variables: readonly tf.Variable[], readonly decay: number) {
    if (!(decay > 0 && decay < 1)) throw new RangeError(`decay must be in (0, 1), got ${decay}`);
    this.shadow = variables.map((v) => tf.variable(v, false, undefined, 'float32'));
  }

  /** The decay d_t of the t-th update (t >= 1): min(decay, (1 + t) / (10 + t)). */
  decayAt(t: number): number {
    return Math.min(this.decay, (1 + t) / (10 + t));
  }

  /** Moves the average towards the variables' current values (one update; call after each step). */
  update(): void {
    this.updates += 1;
    const d = this.decayAt(this.updates);
    tf.tidy(() => {
      this.shadow.forEach((s, i) => s.assign(tf.add(tf.mul(s, d), tf.mul(this.variables[i]!, 1 - d))));
    });
  }

  /**
   * Runs `fn` with the averaged weights in the variables, then puts the trained weights back
   * (also when `fn` throws), so that training goes on from the last iterate.
   * @returns what `fn` returns.
   */
  async withAverage<T>(fn: () => Promise<T> | T): Promise<T> {
    const trained = this.variables.map((v) => tf.clone(v));
    try {
      this.variables.forEach((v, i) => v.assign(this.shadow[i]!));
      return await fn();
    } finally {
      this.variables.forEach((v, i) => v.assign(trained[i]!));
      for (const t of trained) t.dispose();
    }
  }

  /** Frees the averaged weights. */
  dispose(): void {
    for (const s of this.shadow) s.dispose();
  }
}
