/**
 * A record, not a benchmark: how fast a trained compact checkpoint learns to read its memory when
 * it trains on nothing else. `npx tsx experiments/results/base-run-f/memory-unlikelihood-probe.ts MODEL
 * LAMBDA STEPS LR` (the model is not saved).
 *
 * - Data: MineSweeper 6x6/3 trials played by the solver with noise 0.4 (as `experiment:base-memory-probe`
 *   probe 1), only the acting examples whose memory names mines (`CompactExample.namedMines`):
 *   600 training trials (train seeds from 77,000,000) and 150 held-out trials (eval seeds from 0).
 * - Training: STEPS AdamW steps of 32 such examples at a constant LR, soft-target cross-entropy
 *   plus LAMBDA times the unlikelihood term on the named cells (src/recipes/sft-base/sft-base.ts
 *   `withAvoid`, src/training/maths/soft-targets.ts `unlikelihoodLoss`), grad-norm clip 1.0.
 * - Measure: the mean summed probability of the named cells at the answer position on the
 *   held-out examples (teacher-forced, the memory as served), before and after.
 *
 * Measured on run D's checkpoint (2026-12-02, on two busy cores): LAMBDA 10, 60 steps, lr 5e-4:
 * 0.0458 -> 0.0428; LAMBDA 30, 250 steps, lr 1e-3: 0.0458 -> 0.0344. A memory-blind solver uniform
 * over its equally safest cells puts 0.0055 there; one that reads the memory puts 0.
 */
import * as tf from '@tensorflow/tfjs';
import { evalSeed, trainSeed } from '../../../src/envs/index.js';
import { noisyPolicy, playCompactTrial } from '../../../src/envs/compact-data.js';
import { initBackend } from '../../../src/model/backend.js';
import { checkpointText, loadCheckpoint } from '../../../src/model/checkpoint.js';
import { GameTokenizer } from '../../../src/model/tokenizers.js';
import { gameVocabulary } from '../../../src/envs/vocab.js';
import { compactExamples, type CompactExample } from '../../../src/training/data/compact-sft.js';
import { disposeSoftBatch, makeSoftBatch, positionLogits, softTargetLoss, unlikelihoodLoss } from '../../../src/training/maths/soft-targets.js';
import { withAvoid } from '../../../src/recipes/sft-base/sft-base.js';
import { AdamW, clipByGlobalNorm } from '../../../src/training/maths/losses.js';
import { ACTION_RESERVE, REFLECTION_RESERVE } from '../../../src/recipes/sft-base/play.js';

const [dir, lamArg, stepsArg, lrArg] = process.argv.slice(2);
if (!dir) {
  process.stderr.write(
    'usage: npx tsx experiments/results/base-run-f/memory-unlikelihood-probe.ts MODEL [LAMBDA=10] [STEPS=60] [LR=5e-4]\n',
  );
  process.exit(2);
}
const lambda = Number(lamArg ?? 10);
const steps = Number(stepsArg ?? 60);
const lr = Number(lrArg ?? 5e-4);

await initBackend('wasm');
const { model, metadata } = await loadCheckpoint(dir);
const format = checkpointText(metadata).promptFormat;
if (format.name !== 'compact') throw new Error(`${dir}: not a compact checkpoint`);
const tok = new GameTokenizer(gameVocabulary());
const exOpts = { tokenizer: tok, format, blockSize: model.config.block_size, actionReserve: ACTION_RESERVE, reflectionReserve: REFLECTION_RESERVE };

/** The acting examples with named mines of n noisy solver trials. */
function gather(seedOf: (i: number) => number, n: number): CompactExample[] {
  const out: CompactExample[] = [];
  for (let i = 0; i < n; i++) {
    const seed = seedOf(i);
    const t = playCompactTrial({ envName: 'minesweeper-6x6-3', seed, maxAttempts: 3, policy: noisyPolicy(0.4), rngSeed: seed ^ 0x2545f491 });
    out.push(...compactExamples(t, exOpts).filter((e) => e.kind === 'action' && e.namedMines));
  }
  return out;
}

const held = gather((i) => evalSeed(0, i), 150);
const train = gather((i) => trainSeed(77_000_000, i), 600);

/** Mean summed probability of the named cells at the answer position, over the held-out examples. */
function pNamed(): number {
  let sum = 0;
  for (const e of held) {
    sum += tf.tidy(() => {
      const ids = e.ids.slice(0, e.at[0]! + 1);
      const p = (tf.softmax(positionLogits(model, tf.tensor2d(Int32Array.from(ids), [1, ids.length], 'int32'), tf.tensor1d([ids.length - 1], 'int32'))).arraySync() as number[][])[0]!;
      return e.namedMines!.reduce((t, v) => t + p[v]!, 0);
    });
  }
  return sum / held.length;
}

console.log(`held-out examples ${held.length}, training examples ${train.length}; lambda ${lambda}, ${steps} steps, lr ${lr}`);
console.log(`P(named cells) before: ${pNamed().toFixed(4)}`);
const opt = new AdamW(model.trainableVariables, { lr, weightDecay: 0.01 });
for (let step = 0; step < steps; step++) {
  const batch = Array.from({ length: 32 }, (_, k) => train[(step * 32 + k) % train.length]!);
  const sb = makeSoftBatch(withAvoid(batch, { memory: lambda, invalid: 0, moves: 0, mines: 0 }), tok.vocabSize, model.config.block_size);
  const { value, grads } = tf.variableGrads(() => {
    const logits = positionLogits(model, sb.idx, sb.rows);
    const ce = softTargetLoss(logits, sb.weights);
    return (sb.avoid ? tf.add(ce, unlikelihoodLoss(logits, sb.avoid)) : ce) as tf.Scalar;
  }, model.trainableVariables);
  const list = model.trainableVariables.map((v) => grads[v.name]!);
  const clipped = clipByGlobalNorm(list, 1.0);
  opt.applyGradients(clipped.grads, lr);
  if (step % 50 === 0) console.log(`step ${step} loss ${value.dataSync()[0]!.toFixed(4)}`);
  tf.dispose([value, ...list, ...clipped.grads.filter((g) => !g.isDisposed)]);
  disposeSoftBatch(sb);
}
console.log(`P(named cells) after: ${pNamed().toFixed(4)}`);
