/**
 * `npm run model:init`: writes the shipped base checkpoint `models/base/` from a seeded random
 * initialisation (DEFAULT_CONFIG of src/model/gpt.ts, seed 1337) on the cpu backend, so the
 * bytes are reproducible on any machine. The SFT warm start of the training issue replaces it
 * once it exists. Usage: `npm run model:init [-- <outDir>]`.
 */
import * as tf from '@tensorflow/tfjs';
import { saveCheckpoint } from '../checkpoint.js';
import { countParams, DEFAULT_CONFIG, initModel } from '../gpt.js';

const SEED = 1337;

async function main(): Promise<void> {
  const outDir = process.argv[2] ?? 'models/base';
  await tf.setBackend('cpu');
  const model = initModel(DEFAULT_CONFIG, SEED);
  await saveCheckpoint(model, outDir, {
    version: 'base',
    source: 'random-init',
    seed: SEED,
    script: 'npm run model:init',
    note: 'random initialisation; replaced by the SFT warm start once it exists',
  });
  console.log(`wrote ${outDir}: ${countParams(DEFAULT_CONFIG)} parameters, config ${JSON.stringify(DEFAULT_CONFIG)}`);
  model.dispose();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
