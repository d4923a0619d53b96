/**
 * The command line of `npm run model:sft-chat` (./sft-base.ts): its options, defaults, help text
 * and their checks (`parseSftBaseArgs`), including the model config of a `--from` checkpoint.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { intOpt, parseArgsMessage, UsageError } from '../args.js';
import { LR_SCHEDULES, POSITION_OFFSETS, type LrSchedule, type PositionOffset, type TfjsBackend } from '../../domain.js';
import { EVAL_SEED_START } from '../../envs/index.js';
import { countParams, DEFAULT_CONFIG, validateConfig, type GPTConfig } from '../../model/gpt.js';
import { configFromOptions, INIT_SEED } from '../../model/scripts/init-base.js';
import { checkCurvePoints, type CurvePoint } from './sft-curve.js';

/**
 * The npm script that runs ./sft-base.ts (package.json), the prefix of its messages and usage
 * line: `model:sft-base` is the compact trainer (src/cli/sft-compact.ts).
 */
export const COMMAND = 'model:sft-chat';

/** The tfjs backends `--backend` accepts (a subset of src/domain.ts TFJS_BACKENDS). */
export const SFT_BASE_BACKENDS = ['wasm', 'cpu', 'auto'] as const satisfies readonly TfjsBackend[];

/** Model config of the shipped base when no `--layers/--embd/--heads/--block` is given. */
export const SFT_BASE_CONFIG: GPTConfig = { ...DEFAULT_CONFIG };

/** Default curriculum: both games, small boards to the eval boards (MineSweeper 6x6/3, Sokoban 6x6/2). */
export const DEFAULT_CURRICULUM = 'minesweeper:4x4/2,minesweeper:5x5/2,minesweeper:6x6/3,sokoban:5x5/1,sokoban:6x6/1,sokoban:6x6/2';

export interface SftBaseOptions {
  out: string;
  config: GPTConfig;
  /** Checkpoint folder to start from instead of a random init (its config is `config`); null: random init. */
  from: string | null;
  /** The `from` checkpoint's learning curve (its learning-curve.json; [] without one or without --from). */
  fromCurve: CurvePoint[];
  /** The training seeds [start, end) of the `from` checkpoint's demonstrations, from its metadata; null when unknown. */
  fromDemoSeeds: [number, number] | null;
  initSeed: number;
  curriculum: string;
  sessions: number;
  failRate: number;
  seed: number;
  /** Exactly one of steps / epochs. */
  steps: number | null;
  epochs: number | null;
  lr: number;
  /** TrainingHyper.lrSchedule of the job: 'cosine' (default) or 'constant'. */
  lrSchedule: LrSchedule;
  /** Warm-up steps of the cosine schedule; null: 5% of the job's steps, rounded down. */
  warmupSteps: number | null;
  /** Final learning rate of the cosine schedule as a fraction of `lr` (default 0.1). */
  minLrRatio: number;
  minibatch: number;
  microBatchTokens: number;
  /** TrainingHyper.positionOffset of the job: 'random' (default) or 'none'. */
  positionOffset: PositionOffset;
  /** Data-parallel training threads (TrainingHyper.workers); null: the job's default
   *  (LAMER_TRAIN_WORKERS, else every core on wasm or cpu). */
  workers: number | null;
  backend: (typeof SFT_BASE_BACKENDS)[number];
  logEvery: number;
  keepDemos: boolean;
  dryRun: boolean;
}

const HELP = `usage: npm run ${COMMAND} -- --out DIR [options]

  --out DIR              new or empty checkpoint folder (default models/sft)
  --layers N --embd C --heads H --block T
                         model config (default ${SFT_BASE_CONFIG.n_layer} x ${SFT_BASE_CONFIG.n_embd}, ${SFT_BASE_CONFIG.n_head} heads, block ${SFT_BASE_CONFIG.block_size})
  --init-seed S          seed of the random initialisation (default ${INIT_SEED})
  --from DIR             start from this checkpoint instead of a random init (its config; not
                         with --layers/--embd/--heads/--block/--init-seed); with a --seed past
                         the sessions it was trained on, the demonstrations are new ones
  --curriculum LIST      boards of the demonstrations (lamer demos --curriculum): comma-separated
                         kind[:RxC/N][=COUNT|@WEIGHT], N = mines or boxes
                         (default ${DEFAULT_CURRICULUM})
  --sessions N           demonstration sessions in all, shared by weight among the items
                         without =COUNT (default 1200)
  --fail-rate P          share of sessions whose first attempt fails on purpose (default 0.5)
  --seed S               training-range seed offset of the demos and minibatch seed (default 0)
  --steps N              optimiser steps (default 1000) ...
  --epochs E             ... or whole passes over the samples instead
  --lr X                 peak learning rate (default 1e-3)
  --lr-schedule S        cosine: linear warm-up, then cosine decay to --min-lr-ratio x --lr at
                         the last step (default); constant: --lr at every step
  --warmup-steps N       warm-up steps of the cosine schedule (default 5% of the steps)
  --min-lr-ratio R       last step's learning rate / --lr, cosine only (default 0.1)
  --minibatch N          samples per optimiser step (default 16)
  --micro-batch-tokens N memory cap per forward pass in [B, T] positions (default 4096)
  --position-offset M    random: each sample trained at a uniform random start position, drawn
                         per epoch from --seed (default); none: at position 0, as served
  --workers N            training threads, data parallel (default: $LAMER_TRAIN_WORKERS, else
                         every core on wasm or cpu)
  --backend NAME         wasm | cpu | auto (default wasm)
  --log-every N          steps between JSON progress lines when stderr is not a TTY (default 10)
  --keep-demos           copy the demonstrations (sft-demos.jsonl) into --out
  --dry-run              generate the demos, print the plan, train nothing, write nothing`;

/** Thrown for a bad command line (exit code 2). */
export class SftBaseUsageError extends Error {}

/** The options of the command line (node:util parseArgs), with their defaults. */
const OPTIONS = {
  out: { type: 'string', default: 'models/sft' },
  layers: { type: 'string' }, embd: { type: 'string' }, heads: { type: 'string' }, block: { type: 'string' },
  'init-seed': { type: 'string' },
  from: { type: 'string' },
  curriculum: { type: 'string', default: DEFAULT_CURRICULUM },
  sessions: { type: 'string', default: '1200' },
  'fail-rate': { type: 'string', default: '0.5' },
  seed: { type: 'string', default: '0' },
  steps: { type: 'string' },
  epochs: { type: 'string' },
  lr: { type: 'string', default: '1e-3' },
  'lr-schedule': { type: 'string', default: 'cosine' },
  'warmup-steps': { type: 'string' },
  'min-lr-ratio': { type: 'string' },
  minibatch: { type: 'string', default: '16' },
  'micro-batch-tokens': { type: 'string', default: '4096' },
  'position-offset': { type: 'string', default: 'random' },
  workers: { type: 'string' },
  backend: { type: 'string', default: 'wasm' },
  'log-every': { type: 'string', default: '10' },
  'keep-demos': { type: 'boolean', default: false },
  'dry-run': { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h' },
} as const;

/** The raw option values. @throws SftBaseUsageError for an unknown option or a missing value. */
function readArgv(argv: string[]) {
  try {
    return parseArgs({ args: argv, strict: true, options: OPTIONS }).values;
  } catch (e) {
    // A value that starts with '-' (e.g. --workers -1) is read as an option: the message says what to write.
    throw new SftBaseUsageError(parseArgsMessage(e));
  }
}

type ArgValues = ReturnType<typeof readArgv>;

/** `--name v` as an integer >= min written in digits (src/cli/args.ts intOpt). @throws SftBaseUsageError */
function int(name: string, v: string, min: number): number {
  try {
    return intOpt(name, v, undefined, min);
  } catch (e) {
    throw e instanceof UsageError ? new SftBaseUsageError(e.message) : e;
  }
}

/** `--name v` as a number in [lo, hi]. @throws SftBaseUsageError */
function num(name: string, v: string, lo: number, hi: number): number {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || n < lo || n > hi) throw new SftBaseUsageError(`--${name} must be a number in [${lo}, ${hi}], got '${v}'`);
  return n;
}

/**
 * The start of the run: the model config of `--layers/--embd/--heads/--block`, or the `--from`
 * checkpoint with its config, learning curve and demonstration seeds.
 * @throws SftBaseUsageError for --from with config options, --from equal to --out, or a start
 *   checkpoint or config that cannot be used.
 */
function startOf(values: ArgValues): Pick<SftBaseOptions, 'config' | 'from' | 'fromCurve' | 'fromDemoSeeds'> {
  try {
    if (values.from === undefined) return { config: configFromOptions(values, SFT_BASE_CONFIG), from: null, fromCurve: [], fromDemoSeeds: null };
    const given = (['layers', 'embd', 'heads', 'block', 'init-seed'] as const).filter((k) => values[k] !== undefined);
    if (given.length > 0) throw new SftBaseUsageError(`--from takes the model config of its checkpoint: drop ${given.map((k) => `--${k}`).join(', ')}`);
    const from = path.resolve(values.from);
    if (from === path.resolve(values.out)) throw new SftBaseUsageError('--from and --out must be different folders');
    const { config, curve, demoSeeds } = readStartCheckpoint(from);
    return { config, from, fromCurve: curve, fromDemoSeeds: demoSeeds };
  } catch (e) {
    throw e instanceof SftBaseUsageError ? e : new SftBaseUsageError((e as Error).message);
  }
}

/** The named choices: --backend, --lr-schedule (with its cosine-only options), --position-offset. @throws SftBaseUsageError */
function checkChoices(values: ArgValues): void {
  if (!(SFT_BASE_BACKENDS as readonly string[]).includes(values.backend)) throw new SftBaseUsageError(`--backend must be wasm, cpu or auto, got '${values.backend}'`);
  if (!(LR_SCHEDULES as readonly string[]).includes(values['lr-schedule'])) throw new SftBaseUsageError(`--lr-schedule must be ${LR_SCHEDULES.join(' or ')}, got '${values['lr-schedule']}'`);
  if (values['lr-schedule'] !== 'cosine' && (values['warmup-steps'] !== undefined || values['min-lr-ratio'] !== undefined)) throw new SftBaseUsageError('--warmup-steps and --min-lr-ratio apply to --lr-schedule cosine only');
  if (!(POSITION_OFFSETS as readonly string[]).includes(values['position-offset'])) throw new SftBaseUsageError(`--position-offset must be random or none, got '${values['position-offset']}'`);
}

/**
 * Parse the command line. @returns the options, or null after printing --help.
 * @throws SftBaseUsageError naming the bad option.
 */
export function parseSftBaseArgs(argv: string[]): SftBaseOptions | null {
  const values = readArgv(argv);
  if (values.help) {
    console.log(HELP);
    return null;
  }
  if (values.steps !== undefined && values.epochs !== undefined) throw new SftBaseUsageError('give --steps or --epochs, not both');
  const start = startOf(values);
  checkChoices(values);
  const opts: SftBaseOptions = {
    out: path.resolve(values.out),
    ...start,
    initSeed: values['init-seed'] === undefined ? INIT_SEED : int('init-seed', values['init-seed'], 0),
    curriculum: values.curriculum,
    sessions: int('sessions', values.sessions, 1),
    failRate: num('fail-rate', values['fail-rate'], 0, 1),
    seed: int('seed', values.seed, 0),
    steps: values.epochs === undefined ? int('steps', values.steps ?? '1000', 1) : null,
    epochs: values.epochs === undefined ? null : int('epochs', values.epochs, 1),
    lr: num('lr', values.lr, 0, 1),
    lrSchedule: values['lr-schedule'] as LrSchedule,
    warmupSteps: values['warmup-steps'] === undefined ? null : int('warmup-steps', values['warmup-steps'], 0),
    minLrRatio: values['min-lr-ratio'] === undefined ? 0.1 : num('min-lr-ratio', values['min-lr-ratio'], 0, 1),
    minibatch: int('minibatch', values.minibatch, 1),
    microBatchTokens: int('micro-batch-tokens', values['micro-batch-tokens'], 1),
    positionOffset: values['position-offset'] as PositionOffset,
    workers: values.workers === undefined ? null : int('workers', values.workers, 1),
    backend: values.backend as SftBaseOptions['backend'],
    logEvery: int('log-every', values['log-every'], 1),
    keepDemos: values['keep-demos'],
    dryRun: values['dry-run'],
  };
  // the demonstrations play training seeds [--seed, --seed + --sessions): the eval seeds above stay held out
  if (opts.seed + opts.sessions > EVAL_SEED_START) throw new SftBaseUsageError(`--seed + --sessions must be at most ${EVAL_SEED_START} (the training seeds [0, ${EVAL_SEED_START}); eval seeds are held out), got ${opts.seed + opts.sessions}`);
  if (opts.warmupSteps !== null && opts.steps !== null && opts.warmupSteps >= opts.steps) throw new SftBaseUsageError(`--warmup-steps (${opts.warmupSteps}) must be below --steps (${opts.steps})`);
  if (existsSync(opts.out) && (!statSync(opts.out).isDirectory() || readdirSync(opts.out).length > 0)) {
    throw new SftBaseUsageError(`--out ${opts.out} exists and is not an empty folder; give a new or empty one`);
  }
  return opts;
}

/**
 * What `--from` needs of the checkpoint in `dir`, checked before any work: its model config (its
 * model.json metadata, checked as src/model/checkpoint.ts readCheckpointMetadata does; weights.bin
 * must hold the config's float32 parameters), its learning curve (learning-curve.json when there is
 * one: steps 1, 2, ... in order) and the training seeds of its demonstrations (meta.hyper.seed and
 * meta.demos.sessions, when recorded).
 * @throws Error naming the folder and the file when one is missing, unreadable or inconsistent.
 */
function readStartCheckpoint(dir: string): { config: GPTConfig; curve: CurvePoint[]; demoSeeds: [number, number] | null } {
  const file = path.join(dir, 'model.json');
  if (!existsSync(file) || !existsSync(path.join(dir, 'weights.bin'))) throw new Error(`--from ${dir}: no checkpoint there (model.json and weights.bin expected)`);
  let lamer: { config?: GPTConfig; meta?: { hyper?: { seed?: unknown }; demos?: { sessions?: unknown } } } | undefined;
  try {
    lamer = JSON.parse(readFileSync(file, 'utf8'))?.userDefinedMetadata?.lamer;
  } catch (e) {
    throw new Error(`--from ${dir}: model.json is not JSON (${(e as Error).message})`);
  }
  const cfg = lamer?.config;
  if (cfg === undefined) throw new Error(`--from ${dir}: model.json has no userDefinedMetadata.lamer.config`);
  try {
    validateConfig(cfg);
  } catch (e) {
    throw new Error(`--from ${dir}: ${(e as Error).message}`);
  }
  const weightBytes = statSync(path.join(dir, 'weights.bin')).size;
  if (weightBytes !== countParams(cfg) * 4) throw new Error(`--from ${dir}: weights.bin has ${weightBytes} bytes, the config's ${countParams(cfg)} float32 parameters need ${countParams(cfg) * 4}`);
  let curve: CurvePoint[] = [];
  const curveFile = path.join(dir, 'learning-curve.json');
  if (existsSync(curveFile)) {
    let points: unknown;
    try {
      points = JSON.parse(readFileSync(curveFile, 'utf8'))?.points;
    } catch (e) {
      throw new Error(`--from ${dir}: learning-curve.json is not JSON (${(e as Error).message})`);
    }
    try {
      curve = checkCurvePoints(points);
    } catch {
      throw new Error(`--from ${dir}: learning-curve.json must have points {step, tokens, seconds, loss, lr} with steps 1, 2, ... in order (move it away to start a new curve)`);
    }
  }
  const seed = lamer?.meta?.hyper?.seed;
  const sessions = lamer?.meta?.demos?.sessions;
  const demoSeeds: [number, number] | null = Number.isInteger(seed) && Number.isInteger(sessions) ? [seed as number, (seed as number) + (sessions as number)] : null;
  return { config: cfg, curve, demoSeeds };
}
