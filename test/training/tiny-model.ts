/**
 * A tiny trainable model for training tests: logits[b, j] = tanh(E[tokens[b, j]]) W + c
 * (a bigram model: enough to test that PPO/SFT move the right logprobs). Checkpoints are a JSON
 * file `tiny.json` in the folder. `createModelIO({ failLoad: true })` makes load throw (crash tests).
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import type { ModelIO, TrainableModel } from '../../src/training/model-api.js';

export interface TinyWeights { vocabSize: number; dim: number; blockSize: number; E: number[][]; W: number[][]; c: number[] }

export class TinyModel implements TrainableModel {
  readonly vocabSize: number;
  readonly blockSize: number;
  readonly padId = 0;
  readonly E: tf.Variable; readonly W: tf.Variable; readonly c: tf.Variable;
  constructor(w: TinyWeights) {
    this.vocabSize = w.vocabSize;
    this.blockSize = w.blockSize;
    const init = [tf.tensor2d(w.E), tf.tensor2d(w.W), tf.tensor1d(w.c)];
    [this.E, this.W, this.c] = init.map((t) => tf.variable(t));
    tf.dispose(init);
  }
  static init(vocabSize: number, dim: number, blockSize: number, seed = 1): TinyWeights {
    let s = seed;
    const rnd = () => { s = (s * 16807) % 2147483647; return (s / 2147483647 - 0.5) * 0.2; };
    return {
      vocabSize, dim, blockSize,
      E: Array.from({ length: vocabSize }, () => Array.from({ length: dim }, rnd)),
      W: Array.from({ length: dim }, () => Array.from({ length: vocabSize }, rnd)),
      c: new Array(vocabSize).fill(0),
    };
  }
  logits(tokens: tf.Tensor2D): tf.Tensor3D {
    return tf.tidy(() => {
      const [B, T] = tokens.shape;
      const h = tf.tanh(tf.gather(this.E, tf.reshape(tokens, [-1])));
      return tf.reshape(tf.add(tf.matMul(h, this.W), this.c), [B, T, this.vocabSize]) as tf.Tensor3D;
    });
  }
  trainableVariables(): tf.Variable[] { return [this.E, this.W, this.c]; }
  weights(): TinyWeights {
    return { vocabSize: this.vocabSize, dim: this.E.shape[1] as number, blockSize: this.blockSize, E: this.E.arraySync() as number[][], W: this.W.arraySync() as number[][], c: this.c.arraySync() as number[] };
  }
  dispose(): void { tf.dispose([this.E, this.W, this.c]); }
}

export async function writeTinyCheckpoint(dir: string, w: TinyWeights, meta: Record<string, unknown> = {}): Promise<void> {
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'tiny.json'), JSON.stringify({ weights: w, meta }));
}

export function createModelIO(options: { failLoad?: boolean; throwInLogits?: boolean; crash?: 'exit' | 'uncaught'; slowMs?: number } = {}): ModelIO {
  if (options.crash === 'exit') process.exit(3);
  return {
    async load(dir) {
      if (options.failLoad) throw new Error('tiny model: load failed on purpose');
      const { weights } = JSON.parse(await readFile(join(dir, 'tiny.json'), 'utf8')) as { weights: TinyWeights };
      const m = new TinyModel(weights);
      if (options.throwInLogits) m.logits = () => { throw new Error('tiny model: forward failed on purpose'); };
      if (options.crash === 'uncaught') setTimeout(() => { throw new Error('tiny model: uncaught crash on purpose'); }, 0);
      if (options.slowMs) {
        const inner = m.logits.bind(m);
        m.logits = (t) => { const end = Date.now() + options.slowMs!; while (Date.now() < end); return inner(t); };
      }
      return m;
    },
    async save(model, dir, meta) {
      await writeTinyCheckpoint(dir, (model as TinyModel).weights(), meta);
    },
  };
}
