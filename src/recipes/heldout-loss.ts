/**
 * Held-out loss on demonstrations of the held-out eval tasks (`npm run eval:base`,
 * experiments/eval-base.ts): solver demonstrations from src/envs/demos.ts, laid out as SFT trains
 * them (src/training/data/sft-data.ts) and scored by src/training/run/heldout-loss.ts. It lives
 * with the recipes, which may join the environments (API clients) and training, two units that
 * must not import each other.
 */
import type { EnvKind } from '../domain.js';
import { generateDemos } from '../envs/demos.js';
import type { EnvParams } from '../envs/index.js';
import type { HeldOutDemoLoss } from '../shared/heldout-loss.js';
import { buildSftSamples } from '../training/data/sft-data.js';
import { heldOutLoss } from '../training/run/heldout-loss.js';
import type { TrainableModel } from '../training/model-api.js';

export type { HeldOutDemoLoss } from '../shared/heldout-loss.js';

/** Options of `heldOutDemoLoss`. */
export interface HeldOutDemoOptions {
  env: EnvKind;
  params?: EnvParams;
  /** Demonstration sessions: the held-out tasks evalSeed(seed, 0..sessions-1). */
  sessions: number;
  /** Eval seed offset (eval:base's --seed: the same tasks its rows play). */
  seed: number;
  /** Context the prompts are fitted to (buildSftSamples); default and at most the model's blockSize. */
  blockSize?: number;
  microBatchTokens?: number;
}

/**
 * The held-out loss on solver demonstrations of the held-out eval tasks (src/envs/demos.ts
 * generateDemos with seedRange 'eval' and failRate 1: every session whose board the solver does
 * not clear before the sabotage step starts with a failed attempt and a reflection), made into the
 * samples SFT trains on (src/training/data/sft-data.ts buildSftSamples: the served prompts, packed
 * acting steps, one sample per reflection) and scored by `heldOutLoss`.
 * @throws RangeError for a bad session count or blockSize (outside [1, model.blockSize], or too
 *   small for a prompt), and what heldOutLoss throws.
 */
export async function heldOutDemoLoss(model: TrainableModel, opts: HeldOutDemoOptions): Promise<HeldOutDemoLoss> {
  const blockSize = opts.blockSize ?? model.blockSize;
  if (!(Number.isInteger(blockSize) && blockSize >= 1 && blockSize <= model.blockSize)) throw new RangeError(`blockSize must be an integer in [1, ${model.blockSize}], got ${blockSize}`);
  const demos = generateDemos({ env: opts.env, params: opts.params, tasks: opts.sessions, seed: opts.seed, failRate: 1, seedRange: 'eval' });
  const { samples } = buildSftSamples(demos, { blockSize });
  const loss = await heldOutLoss(model, samples, { microBatchTokens: opts.microBatchTokens });
  const count = (kind: string) => samples.filter((s) => s.kind === kind).length;
  return { sessions: opts.sessions, seed: opts.seed, samples: { action: count('action'), reflection: count('reflection') }, ...loss };
}
