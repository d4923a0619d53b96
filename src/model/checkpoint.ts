/**
 * Checkpoints of the builtin model in tfjs format (what `ModelIO` loads and saves, and what a
 * training job writes as a new version): a folder with
 * - `model.json`: `{ format: 'lamer-gpt', generatedBy, weightsManifest: [{ paths: ['weights.bin'],
 *   weights: [{name, shape, dtype}] }], userDefinedMetadata: { lamer: { config, tokenizer, version,
 *   meta } } }` — the standard tfjs weights manifest, so `tf.io.decodeWeights` reads it;
 * - `weights.bin`: the float32 weights concatenated in manifest order (little-endian).
 * Written and read with plain file IO (tfjs-node's `file://` handler is not available here).
 */
import * as tf from '@tensorflow/tfjs';
import { readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ensureDir } from '../ensure-dir.js';
import { modelFromTensors, paramShapes, validateConfig, type GPT, type GPTConfig } from './gpt.js';
import { parsePromptFormat, type PromptFormat } from './prompt-format.js';
import { BYTE_TOKENIZER, tokenizerFromSpec, type AnyTokenizerSpec, type Tokenizer } from './tokenizers.js';

export interface CheckpointMeta {
  /** Model version id (e.g. 'base', 'v3'). */
  version: string;
  /** Free-form provenance (parent version, job id, seed, step...). */
  [key: string]: unknown;
}

/**
 * The sampling a version's sessions get when they give none (fields as the session's `sampling`:
 * temperature 0 = greedy, topP in (0, 1], topK 0 = off); each field a session leaves out.
 */
export interface DefaultSampling {
  temperature: number;
  topP: number;
  topK: number;
}

/**
 * A checkpoint's declared default sampling. @throws Error naming the field for a value out of the
 * ranges sessions accept (temperature [0, 10], topP (0, 1], topK an integer [0, 1e6]).
 */
export function parseDefaultSampling(raw: unknown): DefaultSampling {
  const f = raw as Record<string, unknown>;
  if (typeof f !== 'object' || f === null || Array.isArray(f)) throw new Error('sampling must be an object {temperature, topP, topK}');
  const { temperature, topP, topK } = f;
  if (typeof temperature !== 'number' || !(temperature >= 0 && temperature <= 10)) throw new Error(`sampling.temperature must be a number in [0, 10], got ${JSON.stringify(temperature)}`);
  if (typeof topP !== 'number' || !(topP > 0 && topP <= 1)) throw new Error(`sampling.topP must be a number in (0, 1], got ${JSON.stringify(topP)}`);
  if (!Number.isInteger(topK) || (topK as number) < 0 || (topK as number) > 1_000_000) throw new Error(`sampling.topK must be an integer in [0, 1000000], got ${JSON.stringify(topK)}`);
  return { temperature, topP, topK: topK as number };
}

export interface LamerMetadata {
  config: GPTConfig;
  /** The checkpoint's tokenizer (byte, or a game vocabulary with byte fallback). */
  tokenizer: AnyTokenizerSpec;
  /** How the version reads prompts; absent in older checkpoints (= chat). */
  promptFormat?: PromptFormat;
  /** The sampling its sessions get by default; absent: the server's (temperature 1, topP 1, topK 0). */
  sampling?: DefaultSampling;
  version: string;
  meta: Record<string, unknown>;
}

/** What a checkpoint says about how it reads text, besides its weights. */
export interface CheckpointText {
  /** Default: the byte tokenizer. */
  tokenizer?: Tokenizer;
  /** Default: none written (the version reads `chat` prompts). */
  promptFormat?: PromptFormat;
  /** The version's default session sampling; default (or null): none written (the server's). */
  sampling?: DefaultSampling | null;
}

/**
 * Writes `model` to `dir` (created if missing). Files are written to temporaries and renamed, so a
 * crash never leaves a half-written model.json next to old weights. `text` gives the tokenizer and
 * prompt format (a training job passes its start checkpoint's on, see `checkpointText`).
 * @throws Error when the tokenizer's vocabulary size differs from the model's vocab_size.
 */
export async function saveCheckpoint(model: GPT, dir: string, meta: CheckpointMeta, text: CheckpointText = {}): Promise<void> {
  const tokenizer = text.tokenizer ?? BYTE_TOKENIZER;
  if (tokenizer.vocabSize !== model.config.vocab_size) throw new Error(`tokenizer has ${tokenizer.vocabSize} ids, model vocab_size is ${model.config.vocab_size}`);
  await ensureDir(dir);
  const named = paramShapes(model.config).map(([name]) => ({ name, tensor: model.params.get(name)! }));
  const { data, specs } = await tf.io.encodeWeights(named);
  const { version, ...rest } = meta;
  const lamer: LamerMetadata = {
    config: model.config, tokenizer: tokenizer.spec, ...(text.promptFormat && text.promptFormat.name !== 'chat' ? { promptFormat: text.promptFormat } : {}),
    ...(text.sampling ? { sampling: parseDefaultSampling(text.sampling) } : {}), version, meta: rest,
  };
  const modelJson = {
    format: 'lamer-gpt',
    generatedBy: `TensorFlow.js tfjs v${tf.version.tfjs}`,
    convertedBy: null,
    modelTopology: null,
    weightsManifest: [{ paths: ['weights.bin'], weights: specs }],
    userDefinedMetadata: { lamer },
  };
  const bin = path.join(dir, 'weights.bin');
  const json = path.join(dir, 'model.json');
  await writeFile(bin + '.tmp', Buffer.from(data));
  await writeFile(json + '.tmp', JSON.stringify(modelJson, null, 1) + '\n');
  await rename(bin + '.tmp', bin);
  await rename(json + '.tmp', json);
}

/** Reads only the metadata of a checkpoint. @throws Error when model.json is missing or not ours. */
export async function readCheckpointMetadata(dir: string): Promise<LamerMetadata> {
  const json = JSON.parse(await readFile(path.join(dir, 'model.json'), 'utf8'));
  const lamer = json?.userDefinedMetadata?.lamer as LamerMetadata | undefined;
  if (!lamer?.config) throw new Error(`${dir}/model.json has no userDefinedMetadata.lamer.config`);
  validateConfig(lamer.config);
  let tokenizer: Tokenizer;
  try {
    tokenizer = tokenizerFromSpec(lamer.tokenizer);
    if (lamer.promptFormat !== undefined) lamer.promptFormat = parsePromptFormat(lamer.promptFormat);
    if (lamer.sampling !== undefined) lamer.sampling = parseDefaultSampling(lamer.sampling);
  } catch (err) {
    throw new Error(`${dir}: ${(err as Error).message}`);
  }
  if (tokenizer.vocabSize !== lamer.config.vocab_size) {
    throw new Error(`${dir}: tokenizer has ${tokenizer.vocabSize} ids but config.vocab_size is ${lamer.config.vocab_size}`);
  }
  return lamer;
}

/**
 * The tokenizer, prompt format and default sampling a checkpoint's metadata declares (byte, chat
 * and null when absent). @throws Error for a malformed declaration.
 */
export function checkpointText(metadata: Pick<LamerMetadata, 'tokenizer' | 'promptFormat' | 'sampling'>): Required<CheckpointText> {
  return {
    tokenizer: tokenizerFromSpec(metadata.tokenizer), promptFormat: parsePromptFormat(metadata.promptFormat),
    sampling: metadata.sampling === undefined || metadata.sampling === null ? null : parseDefaultSampling(metadata.sampling),
  };
}

/**
 * Loads a checkpoint folder into a new model.
 * @throws Error for a missing/invalid model.json, missing weights or shape mismatches.
 */
export async function loadCheckpoint(dir: string): Promise<{ model: GPT; metadata: LamerMetadata }> {
  const metadata = await readCheckpointMetadata(dir);
  const json = JSON.parse(await readFile(path.join(dir, 'model.json'), 'utf8'));
  const groups = json.weightsManifest as Array<{ paths: string[]; weights: tf.io.WeightsManifestEntry[] }>;
  const tensors = new Map<string, tf.Tensor>();
  for (const g of groups) {
    const buffers = await Promise.all(g.paths.map((p) => readFile(path.join(dir, p))));
    const buf = Buffer.concat(buffers);
    const ab = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength);
    const decoded = tf.io.decodeWeights(ab, g.weights);
    for (const [k, v] of Object.entries(decoded)) tensors.set(k, v);
  }
  try {
    const model = modelFromTensors(metadata.config, tensors);
    return { model, metadata };
  } catch (err) {
    for (const t of tensors.values()) if (!t.isDisposed) t.dispose();
    throw err;
  }
}
