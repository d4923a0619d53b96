/**
 * ModelIO for the builtin GPT (src/model): loads and saves tfjs-format checkpoints with
 * src/model/checkpoint.ts and exposes the full-sequence forward pass to the training job.
 * The worker thread imports this module by default (`createModelIO`).
 */
import type * as tf from '@tensorflow/tfjs';
import path from 'node:path';
import { initBackend, type BackendPreference } from '../../model/backend.js';
import { checkpointText, loadCheckpoint, saveCheckpoint, type CheckpointText } from '../../model/checkpoint.js';
import { forward, type GPT } from '../../model/gpt.js';
import { PAD } from '../../model/tokenizer.js';
import type { ModelIO, TrainableModel } from '../model-api.js';

/** A loaded GPT as a TrainableModel. */
export class GptTrainable implements TrainableModel {
  readonly vocabSize: number;
  readonly blockSize: number;
  readonly padId = PAD;
  readonly attentionMaps: number;
  /**
   * @param text the tokenizer and prompt format of the checkpoint it was loaded from, written again
   *   with every checkpoint saved from it (a version trained from a compact base reads what its
   *   base read). Default: byte tokenizer, chat prompts.
   */
  constructor(readonly gpt: GPT, readonly text: CheckpointText = {}) {
    this.vocabSize = gpt.config.vocab_size;
    this.blockSize = gpt.config.block_size;
    this.attentionMaps = gpt.config.n_layer * gpt.config.n_head;
  }
  /** `[B, T]` int32 -> `[B, T, V]` (no dropout in this model, `training` is ignored); row b at
   *  positions positionOffsets[b] + t when given (src/model/gpt.ts forward). */
  logits(tokens: tf.Tensor2D, _training: boolean, positionOffsets: tf.Tensor1D | null = null): tf.Tensor3D {
    return forward(this.gpt, tokens, positionOffsets);
  }
  trainableVariables(): tf.Variable[] {
    return this.gpt.trainableVariables;
  }
  dispose(): void {
    this.gpt.dispose();
  }
}

/**
 * @param options.backend tfjs backend for this thread (default 'auto': native, wasm, cpu).
 * Saved checkpoints carry `meta.version` (default: the folder name) and the rest of `meta`.
 */
export async function createModelIO(options: { backend?: BackendPreference } = {}): Promise<ModelIO> {
  await initBackend(options.backend ?? 'auto');
  return {
    replica: { module: import.meta.url, exportName: 'createModelIO', options: { ...options } },
    async load(dir) {
      const { model, metadata } = await loadCheckpoint(dir);
      return new GptTrainable(model, checkpointText(metadata));
    },
    async save(model, dir, meta) {
      if (!(model instanceof GptTrainable)) throw new TypeError('gpt-adapter can only save models it loaded');
      const version = typeof meta.version === 'string' ? meta.version : path.basename(dir);
      await saveCheckpoint(model.gpt, dir, { ...meta, version }, model.text);
    },
  };
}
