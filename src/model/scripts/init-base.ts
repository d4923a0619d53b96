/**
 * `npm run model:init [-- <outDir>]`: writes a seeded random initialisation (DEFAULT_CONFIG of
 * src/model/gpt.ts, seed 1337) on the cpu backend, so the bytes are reproducible on any machine.
 * Default `<outDir>` is `models/init` (not `models/base`, which ships the SFT warm start made from
 * this init by `npm run model:sft-base`). Refuses a non-empty `<outDir>` so that no checkpoint is
 * overwritten by accident.
 */
import { existsSync, readdirSync } from 'node:fs';
import * as tf from '@tensorflow/tfjs';
import { saveCheckpoint } from '../checkpoint.js';
import { countParams, DEFAULT_CONFIG, initModel } from '../gpt.js';

const SEED = 1337;

async function main(): Promise<void> {
  const outDir = process.argv[2] ?? 'models/init';
  if (existsSync(outDir) && readdirSync(outDir).length > 0) {
    console.error(`model:init: ${outDir} exists and is not empty; give an empty or new folder`);
    process.exit(2);
  }
  await tf.setBackend('cpu');
  const model = initModel(DEFAULT_CONFIG, SEED);
  await saveCheckpoint(model, outDir, {
    version: 'base',
    source: 'random-init',
    seed: SEED,
    script: 'npm run model:init',
    note: 'random initialisation; the shipped models/base is the SFT warm start made from it',
  });
  console.log(`wrote ${outDir}: ${countParams(DEFAULT_CONFIG)} parameters, config ${JSON.stringify(DEFAULT_CONFIG)}`);
  model.dispose();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
