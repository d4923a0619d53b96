/**
 * `npm run model:sft-base`: trains the shipped builtin model (models/base) from scratch on this
 * machine: a GPT that reads the `compact` prompt format through the game vocabulary
 * (src/envs/vocab.ts), trained on solver demonstrations with soft targets
 * (src/envs/compact-data.ts, src/training/data/compact-sft.ts), the 8 board symmetries, a
 * curriculum of board sizes, failures on purpose with factual reflections, and DAgger rounds (the
 * model plays training tasks; the solver labels the states it reaches).
 *
 * Progress goes to stderr; the learning curve (held-out solver agreement and greedy pass@1/pass@3
 * against steps, examples, tokens and seconds) to `<out>/learning-curve.json`; the checkpoint to
 * `<out>` (model.json + weights.bin) at each evaluation and at the end.
 *
 *   npm run model:sft-base -- [--out models/base] [--minutes 95] [--layers 4] [--embd 128] ...
 * `--help` lists every option with its default.
 */
import { parseArgs } from 'node:util';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { parseArgsMessage } from './args.js';
import { ensureDirSync } from '../ensure-dir.js';
import { initBackend } from '../model/backend.js';
import { DEFAULT_LIMITS } from '../model/sampling.js';
import { checkpointText, loadCheckpoint, saveCheckpoint, type DefaultSampling } from '../model/checkpoint.js';
import { countParams, initModel, type GPT, type GPTConfig } from '../model/gpt.js';
import type { CompactPromptFormat } from '../model/prompt-format.js';
import { GameTokenizer } from '../model/tokenizers.js';
import { makeEnv } from '../envs/index.js';
import { GAME_ENV_TAGS, gameVocabulary } from '../envs/vocab.js';
import { evaluate } from './sft-compact-play.js';
import { ExamplePool, poolRng } from './sft-compact-pool.js';
import { DataThread } from './sft-compact-data-thread.js';
import type { CompactExample } from '../training/data/compact-sft.js';
import { disposeSoftBatch, makeSoftBatch, positionLogits, softTargetLoss, unlikelihoodLoss } from '../training/maths/soft-targets.js';
import { AdamW, clipByGlobalNorm } from '../training/maths/losses.js';
import { WeightAverage } from '../training/maths/weight-average.js';

const USAGE = `usage: npm run model:sft-base -- [options]
  --out DIR            checkpoint folder, new or empty (default models/base)
  --overwrite          replace the checkpoint in a non-empty --out (to rebuild models/base)
  --minutes M          training wall-clock budget in minutes, evaluations excluded (default 95)
  --steps N            stop after N optimiser steps instead (default: none)
  --layers N --embd N --heads N --block N   model shape (default 4, 128, 4, 384; block >= 272, the
                       smallest context the server loads with its default generation caps)
  --batch N            sequences per step (default 32)
  --lr X               peak learning rate, linear warm-up 200 steps then cosine to 10% (default 0.002)
  --curriculum LIST    env:weight,... (default minesweeper-4x4-2:1,minesweeper-5x5-3:1,minesweeper-6x6-3:4,sokoban-5x5-1:1,sokoban-6x6-1:1,sokoban-6x6-2:3)
  --dagger-from F      fraction of the budget after which DAgger rounds start (default 0.2)
  --dagger-share F     share of new trials played by the model once DAgger runs (default 0.4)
  --eval-every N       steps between held-out evaluations (default 1500)
  --eval-tasks N       held-out tasks per game per evaluation (default 32)
  --seed N             initialisation and data seed (default 1)
  --data-thread on|off play and label trials in a thread of their own, beside the optimiser step
                       (DAgger then plays with the weights of one step earlier; default off)
  --reflection-share F share of steps that train reflections, each reflection then trained about
                       F / (its share of the examples) times (default: the examples' own share, a
                       few percent)
  --balance-reflections on|off   reflection batches draw each failure class (a mine, turns ran
                       out, a cornered box, a dead end) equally often instead of as often as the
                       trials produce it (default off)
  --memory-weight K    copies of each MineSweeper decision where the memory changes the solver's
                       target (a mine it names would otherwise be among the safest cells) (default 1)
  --memory-contrast F  once DAgger runs, share of MineSweeper decisions that also train the same
                       board in a later attempt whose memory names the cell the model clicks there as
                       a mine (where it can be one), the target the solver's cells knowing it
                       (default 0)
  --memory-share F     share of steps that train memory contrasts (--memory-contrast), drawn with
                       reuse from the newest 2048 (default: none, they are drawn as often as the
                       trials make them, a few percent of the decisions)
  --memory-pairs on|off  contrasts only where the model's click is among the solver's safest cells
                       of the bare board, each with that board's no-memory decision beside it, so
                       that only the memory line separates the two targets (default off)
  --memory-unlikelihood L   weight of an unlikelihood term on the cells that a MineSweeper memory
                       names as mines, at every decision after such a reflection: -L log(1 - P(cell))
                       (its logit is then pushed down L + 1 times as hard as by the soft target alone)
                       (default 0)
  --invalid-unlikelihood L   the same term on MineSweeper's revealed cells, which the game refuses
                       as invalid clicks (default 0)
  --move-unlikelihood L  the same term on Sokoban moves that would not move at each move of the
                       answer (into a wall or an unpushable box: the game's invalid no-op), from the
                       state the solver's earlier moves of that answer reach (default 0)
  --ema D              keep an exponential moving average of the weights with decay D (about
                       1 / (1 - D) steps; e.g. 0.998) and evaluate and save it at every point in place
                       of the last iterate, which then goes to <out>/last-iterate at the end, measured
                       at the last point too (default 0: off)
  --memory-at WHERE    where the compact prompt puts the memory lines: tail (after the board, so the
                       board keeps its positions in every attempt) or head (after the env tag, the
                       layout of checkpoints made before the option) (default tail; --from keeps
                       the checkpoint's)
  --from DIR           go on training the compact checkpoint in DIR (its shape, tokenizer and
                       prompt format; a fresh optimiser and schedule; its learning curve goes on);
                       give a --seed other than its run's so that new tasks are drawn
  --help, -h           this text

models/base is <out>/last-iterate of --minutes 110 --data-thread on --reflection-share 0.2
--memory-weight 6 --ema 0.998 --seed 21 (models/base/README.md)`;

interface Options {
  out: string; minutes: number; steps: number | null; layers: number; embd: number; heads: number; block: number;
  batch: number; lr: number; curriculum: Array<{ env: string; weight: number }>; daggerFrom: number; daggerShare: number;
  evalEvery: number; evalTasks: number; seed: number; from: string | null; memoryAt: 'head' | 'tail';
  dataThread: boolean; balanceReflections: boolean; reflectionShare: number | null; memoryWeight: number; memoryContrast: number;
  memoryShare: number | null; memoryPairs: boolean;
  memoryUnlikelihood: number; invalidUnlikelihood: number; moveUnlikelihood: number; ema: number;
}

const DEFAULT_CURRICULUM = 'minesweeper-4x4-2:1,minesweeper-5x5-3:1,minesweeper-6x6-3:4,sokoban-5x5-1:1,sokoban-6x6-1:1,sokoban-6x6-2:3';

/** A bad command line: one line on stderr (as the lamer CLIs, src/cli/args.ts), exit code 2. */
function fail(msg: string): never {
  process.stderr.write(`model:sft-base: ${msg.replace(/\s*\n\s*/g, ' ')} (--help lists the options)\n`);
  process.exit(2);
}

function num(name: string, v: string | undefined, def: number, lo: number, hi: number, int = true): number {
  if (v === undefined) return def;
  // Number('') and Number(' ') are 0: a blank value is refused, not read as 0
  const x = v.trim() === '' ? NaN : Number(v);
  if (!Number.isFinite(x) || (int && !Number.isInteger(x)) || x < lo || x > hi) fail(`--${name} must be ${int ? 'an integer' : 'a number'} in [${lo}, ${hi}], got '${v}'`);
  return x;
}

/**
 * Smallest context the builtin engine loads with its default generation caps
 * (src/policy/builtin-engine.ts: the larger cap + 16): a smaller model could not be served.
 */
const MIN_BLOCK = Math.max(DEFAULT_LIMITS.maxActionTokens, DEFAULT_LIMITS.maxReflectionTokens) + 16;

/** Parses the command line. Exits 2 with one line for a bad option, 0 after --help. */
export function parseOptions(argv: string[]): Options {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv, strict: true, allowPositionals: false,
      options: Object.fromEntries(['out', 'minutes', 'steps', 'layers', 'embd', 'heads', 'block', 'batch', 'lr', 'curriculum', 'dagger-from', 'dagger-share', 'eval-every', 'eval-tasks', 'seed', 'from', 'memory-at', 'data-thread', 'balance-reflections', 'reflection-share', 'memory-weight', 'memory-contrast', 'memory-share', 'memory-pairs', 'memory-unlikelihood', 'invalid-unlikelihood', 'move-unlikelihood', 'ema']
        .map((k) => [k, { type: 'string' as const }]).concat([['help', { type: 'boolean' as const, short: 'h' } as never], ['overwrite', { type: 'boolean' as const } as never]])),
    }) as { values: Record<string, string | boolean | undefined> });
  } catch (e) {
    // `--minutes -5` is read as an option without its value: the message says to write --minutes=-5
    fail(parseArgsMessage(e));
  }
  if (values.help) {
    process.stdout.write(USAGE + '\n');
    process.exit(0);
  }
  const s = (k: string) => values[k] as string | undefined;
  const curriculum = (s('curriculum') ?? DEFAULT_CURRICULUM).split(',').map((item) => {
    const [env, w] = item.split(':');
    try {
      makeEnv(env ?? ''); // the name and its board parameters
    } catch (e) {
      fail(`--curriculum: ${(e as Error).message}`);
    }
    const weight = w === undefined ? 1 : Number(w);
    if (!(weight > 0)) fail(`--curriculum: weight of ${env} must be > 0`);
    return { env: env!, weight };
  });
  const embd = num('embd', s('embd'), 128, 16, 1024);
  const heads = num('heads', s('heads'), 4, 1, 64);
  if (embd % heads !== 0) fail(`--embd (${embd}) must be divisible by --heads (${heads})`);
  const opts = {
    minutes: num('minutes', s('minutes'), 95, 0.05, 10_000, false),
    steps: s('steps') === undefined ? null : num('steps', s('steps'), 0, 1, 10_000_000),
    layers: num('layers', s('layers'), 4, 1, 48), embd, heads,
    block: num('block', s('block'), 384, MIN_BLOCK, 4096),
    batch: num('batch', s('batch'), 32, 1, 4096),
    lr: num('lr', s('lr'), 0.002, 1e-6, 1, false),
    curriculum,
    daggerFrom: num('dagger-from', s('dagger-from'), 0.2, 0, 1, false),
    daggerShare: num('dagger-share', s('dagger-share'), 0.4, 0, 1, false),
    evalEvery: num('eval-every', s('eval-every'), 1500, 1, 1_000_000),
    evalTasks: num('eval-tasks', s('eval-tasks'), 32, 1, 100_000),
    seed: num('seed', s('seed'), 1, 0, 2 ** 31 - 1),
    memoryAt: memoryAt(s('memory-at'), s('from') !== undefined),
    dataThread: onOff('data-thread', s('data-thread'), false),
    balanceReflections: onOff('balance-reflections', s('balance-reflections'), false),
    reflectionShare: s('reflection-share') === undefined ? null : num('reflection-share', s('reflection-share'), 0, 0, 1, false),
    memoryWeight: num('memory-weight', s('memory-weight'), 1, 1, 64),
    memoryContrast: num('memory-contrast', s('memory-contrast'), 0, 0, 1, false),
    memoryPairs: onOff('memory-pairs', s('memory-pairs'), false),
    memoryShare: s('memory-share') === undefined ? null : num('memory-share', s('memory-share'), 0, 0, 1, false),
    memoryUnlikelihood: num('memory-unlikelihood', s('memory-unlikelihood'), 0, 0, 100, false),
    invalidUnlikelihood: num('invalid-unlikelihood', s('invalid-unlikelihood'), 0, 0, 100, false),
    moveUnlikelihood: num('move-unlikelihood', s('move-unlikelihood'), 0, 0, 100, false),
    ema: num('ema', s('ema'), 0, 0, 0.99999, false),
    from: fromDir(s('from'), s('out') ?? 'models/base', ['layers', 'embd', 'heads', 'block'].filter((k) => s(k) !== undefined)),
  };
  // last: it creates the folder, which only a command line without other errors should do
  return { ...opts, out: outDir(s('out') ?? 'models/base', values.overwrite === true) };
}

/**
 * The --out folder, checked before any work: new or empty, or `--overwrite` given (the default,
 * models/base, holds the shipped checkpoint); it must be creatable.
 */
function outDir(out: string, overwrite: boolean): string {
  if (existsSync(out)) {
    let entries: string[];
    try {
      entries = readdirSync(out);
    } catch (e) {
      return fail(`--out ${out}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message} (not a folder that can be read)`);
    }
    if (entries.length > 0 && !overwrite) fail(`--out ${out} is not empty (give --overwrite to replace the checkpoint there, e.g. to rebuild models/base)`);
  }
  try {
    // level by level: a recursive mkdir can hang where the file system refuses a level (procfs for root)
    ensureDirSync(out);
  } catch (e) {
    fail(`--out ${out}: cannot create it (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  return out;
}

/** An on|off option. */
function onOff(name: string, v: string | undefined, def: boolean): boolean {
  if (v === undefined) return def;
  if (v !== 'on' && v !== 'off') fail(`--${name} must be on or off, got '${v}'`);
  return v === 'on';
}

/** --memory-at: head or tail (default tail); refused beside --from, which keeps its checkpoint's. */
function memoryAt(v: string | undefined, withFrom: boolean): 'head' | 'tail' {
  if (v === undefined) return 'tail';
  if (withFrom) fail('--from keeps the prompt format of its checkpoint; drop --memory-at');
  if (v !== 'head' && v !== 'tail') fail(`--memory-at must be head or tail, got '${v}'`);
  return v;
}

/** The --from folder, checked: not the output folder, and no shape options beside it. */
function fromDir(from: string | undefined, out: string, shapeOptions: string[]): string | null {
  if (from === undefined) return null;
  if (path.resolve(from) === path.resolve(out)) fail('--from and --out must be different folders (the start checkpoint is read, the result written)');
  if (shapeOptions.length > 0) fail(`--from takes the model shape from the checkpoint; drop --${shapeOptions.join(', --')}`);
  if (!existsSync(path.join(from, 'model.json'))) fail(`--from ${from}: no model.json there`);
  return from;
}

/** Learning rate at step s: linear warm-up over 200 steps, then cosine to 10% over `total`. */
function lrAt(peak: number, s: number, total: number): number {
  if (s < 200) return (peak * (s + 1)) / 200;
  const p = Math.min(1, (s - 200) / Math.max(1, total - 200));
  return peak * (0.1 + 0.45 * (1 + Math.cos(Math.PI * p)));
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
async function startModel(o: Options, tok: GameTokenizer): Promise<Start> {
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
      before = (JSON.parse(readFileSync(path.join(o.from, 'learning-curve.json'), 'utf8')) as { points: Array<Record<string, unknown>> }).points ?? [];
    } catch {
      before = [];
    }
    parent = { source: 'checkpoint', dir: o.from, weightsSha256: createHash('sha256').update(readFileSync(path.join(o.from, 'weights.bin'))).digest('hex') };
  } else {
    model = initModel({ vocab_size: tok.vocabSize, block_size: o.block, n_layer: o.layers, n_head: o.heads, n_embd: o.embd }, o.seed);
  }
  // counters go on from the start checkpoint's curve, so that the last point is the whole training
  const last = before[before.length - 1] ?? {};
  const prior = { step: Number(last.step ?? 0), examples: Number(last.examples ?? 0), tokens: Number(last.tokens ?? 0), trainSeconds: Number(last.trainSeconds ?? 0) };
  return { model, config: model.config, before, parent, prior, format, sampling };
}

/**
 * Weights of the unlikelihood term (0: off): on the cells a memory names as mines, on MineSweeper's
 * revealed cells, and on Sokoban moves that would not move.
 */
export interface UnlikelihoodWeights { memory: number; invalid: number; moves: number }

/**
 * A batch's examples with the tokens their answer positions are trained away from, as
 * `makeSoftBatch` takes them (`[k, token id, weight]`, the k-th trained position): `namedMines` and
 * `invalid` at the first position with weights `w.memory` and `w.invalid`, `invalidMoves` at their
 * own positions with `w.moves`; a weight of 0 leaves its kind out.
 */
export function withAvoid(batch: readonly CompactExample[], w: UnlikelihoodWeights): Array<CompactExample & { avoid?: Array<[number, number, number]> }> {
  return batch.map((x) => {
    const avoid: Array<[number, number, number]> = [
      ...(w.memory > 0 ? (x.namedMines ?? []).map((v): [number, number, number] => [0, v, w.memory]) : []),
      ...(w.invalid > 0 ? (x.invalid ?? []).map((v): [number, number, number] => [0, v, w.invalid]) : []),
      ...(w.moves > 0 ? (x.invalidMoves ?? []).flatMap((set, k) => set.map((v): [number, number, number] => [k, v, w.moves])) : []),
    ];
    return avoid.length > 0 ? { ...x, avoid } : x;
  });
}

/**
 * One optimiser step on `batch` (soft-target loss, plus the unlikelihood term on the tokens that
 * `withAvoid` gives; grad-norm clip 1.0, AdamW).
 * @returns the loss (nats per trained position, both terms).
 */
function trainStep(model: GPT, opt: AdamW, batch: CompactExample[], vocabSize: number, lr: number, unlikelihood: UnlikelihoodWeights): number {
  const sb = makeSoftBatch(withAvoid(batch, unlikelihood), vocabSize, model.config.block_size);
  try {
    const { value, grads } = tf.variableGrads(() => {
      const logits = positionLogits(model, sb.idx, sb.rows);
      const ce = softTargetLoss(logits, sb.weights);
      return sb.avoid ? tf.add(ce, unlikelihoodLoss(logits, sb.avoid)) as tf.Scalar : ce;
    }, model.trainableVariables);
    const list = model.trainableVariables.map((v) => grads[v.name]!);
    const clipped = clipByGlobalNorm(list, 1.0);
    opt.applyGradients(clipped.grads, lr);
    const loss = value.dataSync()[0]!;
    value.dispose();
    for (const g of list) g.dispose();
    for (const g of clipped.grads) if (!g.isDisposed) g.dispose();
    return loss;
  } finally {
    disposeSoftBatch(sb);
  }
}

async function main(): Promise<void> {
  const o = parseOptions(process.argv.slice(2));
  const backend = await initBackend('wasm');
  const tok = new GameTokenizer(gameVocabulary());
  const { model, config, before, parent, prior, format, sampling } = await startModel(o, tok);
  const opt = new AdamW(model.trainableVariables, { lr: o.lr, weightDecay: 0.01 });
  // with --ema, the points evaluate and save the averaged weights; training goes on from the last iterate
  const average = o.ema > 0 ? new WeightAverage(model.trainableVariables, o.ema) : null;
  const poolOptions = { curriculum: o.curriculum, seed: o.seed, daggerShare: o.daggerShare, balanceReflections: o.balanceReflections, reflectionShare: o.reflectionShare, memoryWeight: o.memoryWeight, memoryContrast: o.memoryContrast, memoryShare: o.memoryShare, memoryPairs: o.memoryPairs };
  const data = o.dataThread ? await DataThread.start(config, model.trainableVariables, poolOptions, format) : null;
  const pool = data ? null : new ExamplePool(poolOptions, model, tok, format, poolRng(o.seed));
  let trials = 0, daggerTrials = 0;
  mkdirSync(o.out, { recursive: true });
  process.stderr.write(`model:sft-base: backend ${backend}; ${config.n_layer}x${config.n_embd}, ${countParams(config)} parameters, vocabulary ${tok.vocabSize}; budget ${o.steps ? `${o.steps} steps` : `${o.minutes} min`}\n`);

  const curve: Array<Record<string, unknown>> = [...before];
  const started = Date.now();
  let trainMs = 0;
  let dataMs = 0; // of trainMs: playing and labelling trials (solver, DAgger)
  let examples = 0, tokens = 0, lossSum = 0, lossN = 0;
  const meta = (counts: { step: number; examples: number; tokens: number; trainSeconds: number }, weights: 'average' | 'last') => ({
    version: 'base', recipe: 'compact SFT: solver soft targets, 8 symmetries, curriculum, failures with factual reflections, DAgger',
    options: { ...o }, ...(average ? { weights } : {}), wallSeconds: Math.round((Date.now() - started) / 1000), trainSeconds: counts.trainSeconds,
    steps: counts.step, examples: counts.examples, tokens: counts.tokens, ...(parent ? { parent } : {}),
  });
  const evalGames = () => ['minesweeper-6x6-3', 'sokoban-6x6-2'].map((e) => evaluate(model, tok, format, e, o.evalTasks));
  const describe = (points: ReturnType<typeof evalGames>) => points.map((p) => `${p.env} agree ${(100 * p.agreement).toFixed(1)}% ${p.invalid === null ? '' : `invalid ${(100 * p.invalid).toFixed(1)}% `} pass@1 ${(100 * p.pass1).toFixed(1)}% pass@3 ${(100 * p.pass3).toFixed(1)}%${p.reflectionsNamingMine !== null ? ` refl-names-mine ${(100 * p.reflectionsNamingMine).toFixed(0)}%` : ''} memory-gain ${(100 * p.memoryGain).toFixed(1)} pts${p.repeatsEnding !== null ? ` repeats-ending ${(100 * p.repeatsEnding).toFixed(0)}%` : ''}`).join(' | ');
  /** A learning-curve point: evaluates and saves the averaged weights (--ema) or the last iterate; at the end with --ema, the last iterate too. */
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
    let lastIterate: ReturnType<typeof evalGames> | null = null;
    if (average && final) {
      lastIterate = await evalAndSave(path.join(o.out, 'last-iterate'), 'last');
      process.stderr.write(`eval @${step} (last iterate): ${describe(lastIterate)}\n`);
    }
    const points = average ? await average.withAverage(() => evalAndSave(o.out, 'average')) : await evalAndSave(o.out, 'last');
    curve.push({
      ...counts, ...(o.from ? { continues: o.from } : {}), loss: lossN ? lossSum / lossN : null, daggerTrials, evalSeconds: Math.round((Date.now() - t0) / 1000),
      ...(average ? { weights: 'average', ...(lastIterate ? { lastIterate } : {}) } : {}), games: points,
    });
    lossSum = 0; lossN = 0;
    process.stderr.write(`eval @${step}${average ? ' (average)' : ''}: ${describe(points)}\n`);
    writeFileSync(path.join(o.out, 'learning-curve.json'), JSON.stringify({ config, vocabulary: tok.vocabSize, points: curve }, null, 1) + '\n');
  };

  let step = 0;
  for (; ; step++) {
    const elapsedFrac = o.steps ? step / o.steps : trainMs / (o.minutes * 60_000);
    if (elapsedFrac >= 1) break;
    // the schedule's length: the step budget, or an estimate from the pace so far
    const total = o.steps ?? (step < 200 ? 1_000_000 : Math.max(step + 1, Math.round(step / Math.max(1e-9, elapsedFrac))));
    const t0 = Date.now();
    let batch: CompactExample[];
    if (data) {
      // the thread refills while the previous step trained: what is left here is the wait
      ({ examples: batch, trials, daggerTrials } = await data.take(o.batch, elapsedFrac >= o.daggerFrom));
    } else {
      pool!.refill(elapsedFrac >= o.daggerFrom);
      batch = pool!.take(o.batch);
      ({ trials, daggerTrials } = pool!);
    }
    dataMs += Date.now() - t0;
    lossSum += trainStep(model, opt, batch, tok.vocabSize, lrAt(o.lr, step, total), { memory: o.memoryUnlikelihood, invalid: o.invalidUnlikelihood, moves: o.moveUnlikelihood });
    data?.publish(model.trainableVariables);
    average?.update();
    lossN++;
    examples += batch.length;
    tokens += batch.reduce((sum, x) => sum + x.ids.length, 0);
    trainMs += Date.now() - t0;
    if (step % 50 === 0) process.stderr.write(`step ${step} loss ${(lossSum / Math.max(1, lossN)).toFixed(4)} examples ${examples} tokens ${tokens} train ${(trainMs / 1000).toFixed(0)} s (data ${(dataMs / 1000).toFixed(0)} s) trials ${trials} dagger-trials ${daggerTrials} tensors ${tf.memory().numTensors}\n`);
    if (step > 0 && step % o.evalEvery === 0) await doEval(step, false);
  }
  await doEval(step, true);
  process.stderr.write(`model:sft-base: done, ${step} steps, ${examples} examples, ${tokens} tokens, ${(trainMs / 60000).toFixed(1)} min training, ${((Date.now() - started) / 60000).toFixed(1)} min wall; checkpoint in ${o.out}${average ? ` (averaged weights; the last iterate in ${path.join(o.out, 'last-iterate')})` : ''}\n`);
  await data?.close();
  average?.dispose();
  opt.dispose();
  model.dispose();
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('sft-compact.ts')) {
  main().catch((e) => {
    process.stderr.write(`model:sft-base: ${(e as Error).stack ?? e}\n`);
    process.exit(1);
  });
}
