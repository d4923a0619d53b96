/**
 * What the training job needs from a model (a small interface, so that the job runs on the builtin
 * transformer of src/model and on tiny test models alike). Types only, at the bottom of
 * src/training: maths/, data/ and run/ all use them, and it imports nothing of src/training.
 *
 * Shapes: tokens `[B, T]` int32 token ids, T <= blockSize; logits `[B, T, V]` float32 where
 * logits[b, j] predicts token j+1.
 */
import type * as tf from '@tensorflow/tfjs';

export interface TrainableModel {
  /** Vocabulary size V. */
  readonly vocabSize: number;
  /** Maximum sequence length T the model accepts. */
  readonly blockSize: number;
  /** Token id used to pad batched sequences (never a training target). */
  readonly padId: number;
  /**
   * Attention probability maps a sequence makes in one forward pass (layers x heads), when the
   * model has attention; each map is `[T, T]` float32. Used to keep a micro-batch's activations
   * inside the wasm heap (see `fitMicroBatchTokens` in ./run/job.ts).
   */
  readonly attentionMaps?: number;
  /**
   * Forward pass: `[B, T]` int32 -> `[B, T, V]` logits. `training` enables dropout if the model has
   * any. `positionOffsets` `[B]` int32 (training's random position offsets, TrainingHyper
   * `positionOffset` in ./run/job.ts): row b's token t is at absolute position offsets[b] + t; null or
   * absent: position t, as served. A model without absolute positions ignores it.
   */
  logits(tokens: tf.Tensor2D, training: boolean, positionOffsets?: tf.Tensor1D | null): tf.Tensor3D;
  /** The variables the optimiser updates. */
  trainableVariables(): tf.Variable[];
  dispose(): void;
}

/** Loading and saving checkpoints (tfjs format folders: `model.json` + `weights.bin`, src/model/checkpoint.ts). */
export interface ModelIO {
  /** @throws when the folder is missing or not a checkpoint. */
  load(checkpointDir: string): Promise<TrainableModel>;
  /** Write `model` to a new folder `checkpointDir` with `meta` stored beside the weights. */
  save(model: TrainableModel, checkpointDir: string, meta: Record<string, unknown>): Promise<void>;
  /** How another worker thread makes the same ModelIO (data-parallel training replicas,
   *  src/training/run/data-parallel.ts); absent: the job trains in this thread only. */
  readonly replica?: ModelIOModule;
}

/**
 * A module the worker thread can import to get a ModelIO: `module` is a file URL or absolute path,
 * `exportName` (default 'createModelIO') a function `(options) => ModelIO | Promise<ModelIO>`.
 */
export interface ModelIOModule {
  module: string;
  exportName?: string;
  options?: Record<string, unknown>;
}
