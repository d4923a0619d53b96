/**
 * `npm run model:init [-- <outDir>] [--layers N] [--embd C] [--heads H] [--block T] [--seed S]`:
 * writes a seeded random initialisation (GPT-2 init of src/model/gpt.ts; DEFAULT_CONFIG and seed
 * 1337 unless the options say otherwise) on the cpu backend, so the bytes are reproducible on any
 * machine. Default `<outDir>` is `models/init` (not `models/base`, which ships the checkpoint
 * trained by `npm run model:sft-base`). Refuses a non-empty `<outDir>` (exit 2) so
 * that no checkpoint is overwritten by accident.
 */
import { existsSync, readdirSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import * as tf from '@tensorflow/tfjs';
import { saveCheckpoint } from '../checkpoint.js';
import { countParams, DEFAULT_CONFIG, initModel, validateConfig, type GPTConfig } from '../gpt.js';
import { parseArgsMessage } from '../../shared/parse-args-message.js';

/** Seed of the shipped random initialisation. */
export const INIT_SEED = 1337;

/** Command-line names of the config fields (`--layers 4` sets n_layer...). */
export const CONFIG_OPTIONS = { layers: 'n_layer', embd: 'n_embd', heads: 'n_head', block: 'block_size' } as const;

/**
 * `base` with the fields named by `--layers/--embd/--heads/--block` replaced (values written as
 * positive decimal integers; absent options keep `base`'s value).
 * @throws RangeError for a value that is not a positive integer or a config `validateConfig`
 *   rejects (n_embd not divisible by n_head).
 */
export function configFromOptions(values: Partial<Record<keyof typeof CONFIG_OPTIONS, string | undefined>>, base: GPTConfig = DEFAULT_CONFIG): GPTConfig {
  const cfg: GPTConfig = { ...base };
  for (const [opt, field] of Object.entries(CONFIG_OPTIONS) as Array<[keyof typeof CONFIG_OPTIONS, keyof GPTConfig]>) {
    const v = values[opt];
    if (v === undefined) continue;
    if (!/^\d+$/.test(v) || Number(v) < 1) throw new RangeError(`--${opt} must be a positive integer written in digits, got '${v}'`);
    cfg[field] = Number(v);
  }
  try {
    validateConfig(cfg);
  } catch (e) {
    throw new RangeError((e as Error).message);
  }
  return cfg;
}

/**
 * Initialise `config` with `seed` on the cpu backend (reproducible bytes; the backend in use before
 * is restored) and write it to `outDir` as a checkpoint of version 'base', source 'random-init'.
 * @returns the parameter count.
 */
export async function writeInitCheckpoint(outDir: string, config: GPTConfig = DEFAULT_CONFIG, seed = INIT_SEED): Promise<number> {
  const previous = tf.getBackend();
  await tf.setBackend('cpu');
  const model = initModel(config, seed);
  try {
    await saveCheckpoint(model, outDir, {
      version: 'base',
      source: 'random-init',
      seed,
      script: 'npm run model:init',
      note: 'random initialisation; the shipped models/base is the SFT warm start made from it',
    });
  } finally {
    model.dispose();
    if (previous && previous !== 'cpu') await tf.setBackend(previous);
  }
  return countParams(config);
}

async function main(): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      allowPositionals: true,
      options: { layers: { type: 'string' }, embd: { type: 'string' }, heads: { type: 'string' }, block: { type: 'string' }, seed: { type: 'string' } },
    });
  } catch (e) {
    // an unknown option, or a value that starts with '-' (`--layers -2`): one line, not a stack trace
    console.error(`model:init: ${parseArgsMessage(e)}`);
    return 2;
  }
  const { values, positionals } = parsed;
  const outDir = positionals[0] ?? 'models/init';
  if (existsSync(outDir) && readdirSync(outDir).length > 0) {
    console.error(`model:init: ${outDir} exists and is not empty; give an empty or new folder`);
    return 2;
  }
  let config: GPTConfig;
  let seed = INIT_SEED;
  try {
    config = configFromOptions(values);
    if (values.seed !== undefined) {
      if (!/^\d+$/.test(values.seed)) throw new RangeError(`--seed must be a non-negative integer written in digits, got '${values.seed}'`);
      seed = Number(values.seed);
    }
  } catch (e) {
    console.error(`model:init: ${(e as Error).message}`);
    return 2;
  }
  const params = await writeInitCheckpoint(outDir, config, seed);
  console.log(`wrote ${outDir}: ${params} parameters, config ${JSON.stringify(config)}, seed ${seed}`);
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().then((code) => { process.exitCode = code; }, (err) => {
    console.error(err);
    process.exit(1);
  });
}
