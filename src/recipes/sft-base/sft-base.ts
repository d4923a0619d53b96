/**
 * `npm run model:sft-base`: trains the shipped builtin model (models/base) on this machine, from
 * scratch or `--from` a checkpoint: a GPT that reads the `compact` prompt format through the game
 * vocabulary (src/envs/vocab.ts), trained on solver demonstrations with soft targets
 * (src/envs/compact-data.ts, src/training/data/compact-sft.ts), the 8 board symmetries, a
 * curriculum of board sizes, failures on purpose with factual reflections, and DAgger rounds (the
 * model plays training tasks; the solver labels the states it reaches).
 *
 * Progress goes to stderr; the learning curve (held-out solver agreement and greedy pass@1/pass@3
 * against steps, examples, tokens and seconds) to `<out>/learning-curve.json`; the checkpoint to
 * `<out>` (model.json + weights.bin) at each evaluation and at the end.
 *
 *   npm run model:sft-base -- [--config FILE] [--out models/base] [--minutes 95] [--layers 4] ...
 * The options: ./options.ts (`--help` lists each with its default and range). The first stage of
 * models/base: `--config src/recipes/configs/base.json`; eight `--from` stages follow it
 * (models/base/README.md).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { activeMatmul, initBackend } from '../../model/backend.js';
import { checkpointText, loadCheckpoint, saveCheckpoint, type DefaultSampling } from '../../model/checkpoint.js';
import { countParams, initModel, type GPT, type GPTConfig } from '../../model/gpt.js';
import type { CompactPromptFormat } from '../../model/prompt-format.js';
import { GameTokenizer } from '../../model/tokenizers.js';
import { GAME_ENV_TAGS, gameVocabulary } from '../../envs/vocab.js';
import { UsageError } from '../../shared/usage-error.js';
import type { CompactExample } from '../../training/data/compact-sft.js';
import { probe, type MemoryProbe } from './memory-probe.js';
import { disposeSoftBatch, makeSoftBatch, positionLogits, softTargetLoss, unlikelihoodLoss } from '../../training/maths/soft-targets.js';
import { AdamW } from '../../training/maths/losses.js';
import { learningRateAt, type LrScheduleSpec } from '../../training/maths/lr-schedule.js';
import { applyUpdate } from '../../training/maths/ppo.js';
import { WeightAverage } from '../../training/maths/weight-average.js';
import { evaluate } from './play.js';
import { ExamplePool, poolRng } from './pool.js';
import { DataThread } from './data-thread.js';
import { COMMAND, parseSftBaseArgs, USAGE, type SftBaseOptions } from './options.js';

/** A bad command line: one line on stderr (as the lamer CLIs, src/cli/args.ts), exit code 2. */
function fail(msg: string): never {
  process.stderr.write(`${COMMAND}: ${msg.replace(/\s*\n\s*/g, ' ')} (--help lists the options)\n`);
  process.exit(2);
}

/** The command line's options; exits 2 with one line for a bad one, 0 after printing --help. */
function options(argv: string[]): SftBaseOptions {
  let o: SftBaseOptions | null;
  try {
    o = parseSftBaseArgs(argv);
  } catch (e) {
    if (e instanceof UsageError) fail(e.message);
    throw e;
  }
  if (o === null) {
    process.stdout.write(USAGE + '\n');
    process.exit(0);
  }
  return o;
}

/** The recipe's schedule: linear warm-up over 200 steps, then cosine to 10% of the peak `--lr`. */
const scheduleOf = (peak: number): LrScheduleSpec => ({ lr: peak, schedule: 'cosine', warmupSteps: 200, minLrRatio: 0.1 });

/**
 * The learning rate of step `step` (0-based) of a run whose schedule is `total` steps long
 * (src/training/maths/lr-schedule.ts `learningRateAt`): peak x (step + 1) / 200 over the first 200
 * steps, then cosine to 10% of the peak, reached at step `total`, one past the last step of a
 * `--steps` run (learningRateAt's decay ends at its last step, hence `total + 1`).
 */
export function learningRate(peak: number, step: number, total: number): number {
  return learningRateAt(scheduleOf(peak), step, total + 1);
}

/** Where training starts: a fresh model, or a compact checkpoint (`--from`) with its curve so far. */
interface Start {
  model: GPT;
  config: GPTConfig;
  /** The start checkpoint's learning-curve points (empty from scratch). */
  before: Array<Record<string, unknown>>;
  /** Provenance of the start checkpoint, for the metadata. */
  parent: Record<string, unknown> | null;
  /** Counters of the start checkpoint's last point: step, examples, tokens, trainSeconds. */
  prior: { step: number; examples: number; tokens: number; trainSeconds: number };
  /** The prompt format: the start checkpoint's, or a new compact one with `--memory-at`. */
  format: CompactPromptFormat;
  /** The default session sampling the checkpoint declares: the start checkpoint's, else PLAY_SAMPLING. */
  sampling: DefaultSampling;
}

/**
 * The default sampling a new checkpoint declares for its sessions (src/agent/models.ts
 * defaultSampling): the eval's 0.7 / 0.8 / 20, measured best at pass@3 for this kind of model
 * (temperature 1 plays worse, greedy repeats an open cell). RL rollouts send their own.
 */
export const PLAY_SAMPLING: DefaultSampling = { temperature: 0.7, topP: 0.8, topK: 20 };

/** The model to train: from `--from` (checked to be a compact checkpoint of this vocabulary) or new. */
async function startModel(o: SftBaseOptions, tok: GameTokenizer): Promise<Start> {
  let model: GPT;
  let before: Array<Record<string, unknown>> = [];
  let parent: Record<string, unknown> | null = null;
  let format: CompactPromptFormat = { name: 'compact', envTags: [...GAME_ENV_TAGS], historySteps: 0, memoryAt: o.memoryAt };
  let sampling = PLAY_SAMPLING;
  if (o.from) {
    const loaded = await loadCheckpoint(o.from).catch((e: Error) => fail(`--from ${o.from}: ${e.message}`));
    const text = checkpointText(loaded.metadata);
    const pieces = (text.tokenizer.spec as { pieces?: string[] }).pieces;
    if (text.promptFormat.name !== 'compact' || JSON.stringify(pieces) !== JSON.stringify(tok.spec.pieces)) {
      loaded.model.dispose();
      fail(`--from ${o.from}: not a compact checkpoint with this game vocabulary`);
    }
    format = text.promptFormat;
    if (text.sampling) sampling = text.sampling;
    model = loaded.model;
    try {
      const curveFile = path.join(o.from, 'learning-curve.json');
      before = (JSON.parse(readFileSync(curveFile, 'utf8')) as { points: Array<Record<string, unknown>> }).points ?? [];
    } catch {
      before = [];
    }
    const weightsSha256 = createHash('sha256').update(readFileSync(path.join(o.from, 'weights.bin'))).digest('hex');
    parent = { source: 'checkpoint', dir: o.from, weightsSha256 };
  } else {
    model = initModel({ vocab_size: tok.vocabSize, block_size: o.block, n_layer: o.layers, n_head: o.heads, n_embd: o.embd }, o.seed);
  }
  // counters go on from the start checkpoint's curve, so that the last point is the whole training
  const last = before[before.length - 1] ?? {};
  const prior = {
    step: Number(last.step ?? 0), examples: Number(last.examples ?? 0), tokens: Number(last.tokens ?? 0), trainSeconds: Number(last.trainSeconds ?? 0),
  };
  return { model, config: model.config, before, parent, prior, format, sampling };
}

/**
 * Weights of the unlikelihood term (0: off): on the cells a memory names as mines, on MineSweeper's
 * revealed cells, on Sokoban moves that would not move, on the cells a MineSweeper board proves
 * to be mines, and on the Sokoban moves that would make a push the memory names as a dead end
 * (`deadPushes`; absent: 0).
 */
export interface UnlikelihoodWeights { memory: number; invalid: number; moves: number; mines: number; deadPushes?: number }

/** Every unlikelihood term off: the steps before `--levers-from`. */
const NO_UNLIKELIHOOD: UnlikelihoodWeights = { memory: 0, invalid: 0, moves: 0, mines: 0, deadPushes: 0 };

/**
 * A batch's examples with the tokens their answer positions are trained away from, as
 * `makeSoftBatch` takes them (`[k, token id, weight]`, the k-th trained position): `namedMines`,
 * `invalid` and `provableMines` at the first position with weights `w.memory`, `w.invalid` and
 * `w.mines`, `invalidMoves` and `deadMoves` at their own positions with `w.moves` and `w.deadPushes`;
 * a weight of 0 leaves its kind out
 * (a token named by several kinds keeps the larger weight in `makeSoftBatch`).
 */
export function withAvoid(
  batch: readonly CompactExample[], w: UnlikelihoodWeights,
): Array<CompactExample & { avoid?: Array<[number, number, number]> }> {
  const dead = w.deadPushes ?? 0;
  return batch.map((x) => {
    const avoid: Array<[number, number, number]> = [
      ...(w.memory > 0 ? (x.namedMines ?? []).map((v): [number, number, number] => [0, v, w.memory]) : []),
      ...(w.invalid > 0 ? (x.invalid ?? []).map((v): [number, number, number] => [0, v, w.invalid]) : []),
      ...(w.mines > 0 ? (x.provableMines ?? []).map((v): [number, number, number] => [0, v, w.mines]) : []),
      ...(w.moves > 0 ? (x.invalidMoves ?? []).flatMap((set, k) => set.map((v): [number, number, number] => [k, v, w.moves])) : []),
      ...(dead > 0 ? (x.deadMoves ?? []).flatMap((set, k) => set.map((v): [number, number, number] => [k, v, dead])) : []),
    ];
    return avoid.length > 0 ? { ...x, avoid } : x;
  });
}

/**
 * One optimiser step on `batch` (soft-target loss, plus the unlikelihood term on the tokens that
 * `withAvoid` gives) at the learning rate `opt.lr`: the update of src/training/maths/ppo.ts
 * `applyUpdate` (global grad-norm clip 1.0, one AdamW step).
 * @returns the loss (nats per trained position, both terms).
 */
function trainStep(model: GPT, opt: AdamW, batch: CompactExample[], vocabSize: number, unlikelihood: UnlikelihoodWeights): number {
  const sb = makeSoftBatch(withAvoid(batch, unlikelihood), vocabSize, model.config.block_size);
  try {
    const { value, grads } = tf.variableGrads(() => {
      const logits = positionLogits(model, sb.idx, sb.rows);
      const ce = softTargetLoss(logits, sb.weights);
      return sb.avoid ? tf.add(ce, unlikelihoodLoss(logits, sb.avoid)) as tf.Scalar : ce;
    }, model.trainableVariables);
    const list = model.trainableVariables.map((v) => grads[v.name]!);
    applyUpdate(opt, list, 1.0);
    const loss = value.dataSync()[0]!;
    tf.dispose([value, ...list]);
    return loss;
  } finally {
    disposeSoftBatch(sb);
  }
}

/** What a step trains on, with the pool's counters so far. */
interface StepBatch {
  examples: CompactExample[]; trials: number; daggerTrials: number; deadPushExamples: number; pushMemoryTargets: number;
}

/**
 * The next batch of `n` examples: from the data thread (which refilled while the previous step
 * trained: what is left is the wait), or from the pool in this thread after its refill.
 */
async function takeBatch(
  data: DataThread | null, pool: ExamplePool | null, n: number, daggerOn: boolean, memoryOn: boolean,
): Promise<StepBatch> {
  if (data) return data.take(n, daggerOn, memoryOn);
  pool!.refill(daggerOn, memoryOn);
  const { trials, daggerTrials, deadPushExamples, pushMemoryTargets } = pool!;
  return { examples: pool!.take(n), trials, daggerTrials, deadPushExamples, pushMemoryTargets };
}

type GamePoints = ReturnType<typeof evaluate>[];

/** One line of an evaluation's results, game by game. */
function describeGames(points: GamePoints): string {
  return points.map((p) => `${p.env} agree ${(100 * p.agreement).toFixed(1)}% ${p.invalid === null ? '' : `invalid ${(100 * p.invalid).toFixed(1)}% `} pass@1 ${(100 * p.pass1).toFixed(1)}% pass@3 ${(100 * p.pass3).toFixed(1)}%${p.reflectionsNamingMine !== null ? ` refl-names-mine ${(100 * p.reflectionsNamingMine).toFixed(0)}%` : ''} memory-gain ${(100 * p.memoryGain).toFixed(1)} pts${p.repeatsEnding !== null ? ` repeats-ending ${(100 * p.repeatsEnding).toFixed(0)}%` : ''}`).join(' | ');
}

/** A learning-curve point's memory probe: its figures without the model's name. */
function probeFigures(p: MemoryProbe): Omit<MemoryProbe, 'model'> {
  const { model: _name, ...figures } = p;
  return figures;
}

/** One line of a point's memory probe: its main figures (./memory-probe.ts). */
function describeProbe(p: MemoryProbe): string {
  const a = p.acting.canBeMine, m = p.memoryInPlay;
  return `probe: reflection top-1 ${(100 * p.reflection.top1).toFixed(0)}%, `
    + `favourite still top-1 under a memory naming it ${(100 * a.stillTop1).toFixed(1)}% `
    + `(${a.boards} boards), P(named) in play ${m.pNamedWithMemory.toFixed(4)} with memory vs ${m.pNamedWithoutMemory.toFixed(4)} without`;
}

async function main(): Promise<void> {
  const o = options(process.argv.slice(2));
  const backend = await initBackend('wasm');
  const tok = new GameTokenizer(gameVocabulary());
  const { model, config, before, parent, prior, format, sampling } = await startModel(o, tok);
  const opt = new AdamW(model.trainableVariables, { lr: o.lr, weightDecay: 0.01 });
  // with --ema, the points evaluate and save the averaged weights; training goes on from the last iterate
  const average = o.ema > 0 ? new WeightAverage(model.trainableVariables, o.ema) : null;
  const poolOptions = { curriculum: o.curriculum, seed: o.seed, daggerShare: o.daggerShare, balanceReflections: o.balanceReflections, reflectionShare: o.reflectionShare, memoryWeight: o.memoryWeight, memoryContrast: o.memoryContrast, memoryShare: o.memoryShare, memoryPairs: o.memoryPairs, pushReflections: o.pushReflections, pushMemoryTargets: o.pushMemoryTargets };
  const data = o.dataThread ? await DataThread.start(config, model.trainableVariables, poolOptions, format) : null;
  const pool = data ? null : new ExamplePool(poolOptions, model, tok, format, poolRng(o.seed));
  let trials = 0, daggerTrials = 0, deadPushExamples = 0;
  /** Sokoban decisions whose target avoids the pushes their memory names (--push-memory-targets), made so far. */
  let pushMemoryTargets = 0;
  /** Steps whose batch held a Sokoban example with dead-push labels, and such examples trained. */
  let deadPushSteps = 0, deadPushTrained = 0;
  /** The push-memory targets made, for the progress lines (--push-memory-targets). */
  const pmt = () => (o.pushMemoryTargets ? ` push-memory targets ${pushMemoryTargets}` : '');
  mkdirSync(o.out, { recursive: true });
  process.stderr.write(`${COMMAND}: backend ${backend} (matmul ${activeMatmul() ?? 'of the backend'}); ${config.n_layer}x${config.n_embd}, ${countParams(config)} parameters, vocabulary ${tok.vocabSize}; budget ${o.steps ? `${o.steps} steps` : `${o.minutes} min`}\n`);

  const curve: Array<Record<string, unknown>> = [...before];
  const started = Date.now();
  let trainMs = 0;
  let dataMs = 0; // of trainMs: playing and labelling trials (solver, DAgger)
  let examples = 0, tokens = 0, lossSum = 0, lossN = 0;
  const meta = (counts: { step: number; examples: number; tokens: number; trainSeconds: number }, weights: 'average' | 'last') => ({
    version: 'base', recipe: 'compact SFT: solver soft targets, 8 symmetries, curriculum, failures with factual reflections, DAgger',
    options: { ...o }, ...(average ? { weights } : {}),
    matmul: activeMatmul(), wallSeconds: Math.round((Date.now() - started) / 1000), trainSeconds: counts.trainSeconds,
    steps: counts.step, examples: counts.examples, tokens: counts.tokens, ...(parent ? { parent } : {}),
  });
  const evalGames = (): GamePoints => ['minesweeper-6x6-3', 'sokoban-6x6-2'].map((e) => evaluate(model, tok, format, e, o.evalTasks));
  /**
   * A learning-curve point: evaluates and saves the averaged weights (--ema) or the last iterate
   * (at the end with --ema, the last iterate too), and probes the memory (--probe-boards).
   */
  const doEval = async (step: number, final: boolean) => {
    const t0 = Date.now();
    const trainSeconds = prior.trainSeconds + Math.round(trainMs / 1000);
    const counts = { step: prior.step + step, examples: prior.examples + examples, tokens: prior.tokens + tokens, trainSeconds };
    // the model's weights as they are now: evaluated, then saved to `dir`
    const evalAndSave = async (dir: string, weights: 'average' | 'last') => {
      const games = evalGames();
      await saveCheckpoint(model, dir, meta(counts, weights), { tokenizer: tok, promptFormat: format, sampling });
      return games;
    };
    let lastIterate: GamePoints | null = null;
    if (average && final) {
      lastIterate = await evalAndSave(path.join(o.out, 'last-iterate'), 'last');
      process.stderr.write(`eval @${step} (last iterate): ${describeGames(lastIterate)}\n`);
    }
    const evalPoint = async () => {
      const games = await evalAndSave(o.out, average ? 'average' : 'last');
      return { games, memoryProbe: o.probeBoards > 0 ? probe(model, format, tok, o.probeBoards, 'point') : null };
    };
    const { games: points, memoryProbe } = average ? await average.withAverage(evalPoint) : await evalPoint();
    curve.push({
      ...counts, ...(o.from ? { continues: o.from } : {}), loss: lossN ? lossSum / lossN : null, daggerTrials,
      ...(o.leversFrom > 0 ? { leversFrom: leversStep === null ? null : prior.step + leversStep } : {}),
      ...(o.pushReflections ? { deadPush: { made: deadPushExamples, trained: deadPushTrained, steps: deadPushSteps } } : {}),
      ...(o.pushMemoryTargets ? { pushMemoryTargets } : {}),
      evalSeconds: Math.round((Date.now() - t0) / 1000),
      ...(average ? { weights: 'average', ...(lastIterate ? { lastIterate } : {}) } : {}), games: points,
      ...(memoryProbe ? { memoryProbe: probeFigures(memoryProbe) } : {}),
    });
    lossSum = 0; lossN = 0;
    process.stderr.write(`eval @${step}${average ? ' (average)' : ''}: ${describeGames(points)}${memoryProbe ? ` | ${describeProbe(memoryProbe)}` : ''}\n`);
    writeFileSync(path.join(o.out, 'learning-curve.json'), JSON.stringify({ config, vocabulary: tok.vocabSize, points: curve }, null, 1) + '\n');
  };

  const unlikelihood: UnlikelihoodWeights = {
    memory: o.memoryUnlikelihood, invalid: o.invalidUnlikelihood, moves: o.moveUnlikelihood, mines: o.mineUnlikelihood,
    deadPushes: o.deadPushUnlikelihood,
  };
  /** The first step with the memory contrasts and unlikelihood terms on (--levers-from), in the curve's points. */
  let leversStep: number | null = null;
  let step = 0;
  for (; ; step++) {
    const elapsedFrac = o.steps ? step / o.steps : trainMs / (o.minutes * 60_000);
    if (elapsedFrac >= 1) break;
    // the schedule's length: the step budget, or an estimate from the pace so far
    const total = o.steps ?? (step < 200 ? 1_000_000 : Math.max(step + 1, Math.round(step / Math.max(1e-9, elapsedFrac))));
    const t0 = Date.now();
    let batch: CompactExample[];
    const leversOn = elapsedFrac >= o.leversFrom;
    if (leversOn && leversStep === null) {
      leversStep = step;
      if (o.leversFrom > 0) process.stderr.write(`step ${step}: memory contrasts and unlikelihood terms start (--levers-from ${o.leversFrom})\n`);
    }
    ({ examples: batch, trials, daggerTrials, deadPushExamples, pushMemoryTargets } =
      await takeBatch(data, pool, o.batch, elapsedFrac >= o.daggerFrom, leversOn));
    const labelled = batch.filter((x) => x.deadMoves).length;
    deadPushTrained += labelled;
    if (labelled > 0) deadPushSteps++;
    dataMs += Date.now() - t0;
    opt.lr = learningRate(o.lr, step, total);
    lossSum += trainStep(model, opt, batch, tok.vocabSize, leversOn ? unlikelihood : NO_UNLIKELIHOOD);
    data?.publish(model.trainableVariables);
    average?.update();
    lossN++;
    examples += batch.length;
    tokens += batch.reduce((sum, x) => sum + x.ids.length, 0);
    trainMs += Date.now() - t0;
    if (step % 50 === 0) process.stderr.write(`step ${step} loss ${(lossSum / Math.max(1, lossN)).toFixed(4)} examples ${examples} tokens ${tokens} train ${(trainMs / 1000).toFixed(0)} s (data ${(dataMs / 1000).toFixed(0)} s) trials ${trials} dagger-trials ${daggerTrials}${o.pushReflections ? ` dead-push made ${deadPushExamples} trained ${deadPushTrained} in ${deadPushSteps} steps${pmt()}` : ''} tensors ${tf.memory().numTensors}\n`);
    if (step > 0 && step % o.evalEvery === 0) await doEval(step, false);
  }
  await doEval(step, true);
  process.stderr.write(`${COMMAND}: done, ${step} steps, ${examples} examples, ${tokens} tokens, ${(trainMs / 60000).toFixed(1)} min training, ${((Date.now() - started) / 60000).toFixed(1)} min wall${o.pushReflections ? `; dead-push examples made ${deadPushExamples}, trained ${deadPushTrained} in ${deadPushSteps} steps${pmt()}` : ''}; checkpoint in ${o.out}${average ? ` (averaged weights; the last iterate in ${path.join(o.out, 'last-iterate')})` : ''}\n`);
  await data?.close();
  average?.dispose();
  opt.dispose();
  model.dispose();
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('recipes/sft-base/sft-base.ts')) {
  main().catch((e) => {
    process.stderr.write(`${COMMAND}: ${(e as Error).stack ?? e}\n`);
    process.exit(1);
  });
}
