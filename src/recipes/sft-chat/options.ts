/**
 * The options of `npm run model:sft-chat` (./sft-chat.ts): one table (`SFT_CHAT_OPTIONS`: name,
 * kind, default, range and help of each option, src/recipes/options.ts), from which the usage text,
 * the parsing, the checks and `--config FILE` come; then the checks that join options and read the
 * model config, of the shape options or of a `--from` checkpoint (`parseSftChatArgs`).
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { LR_SCHEDULES, type TfjsBackend } from '../../domain.js';
import { EVAL_SEED_START } from '../../envs/index.js';
import { countParams, DEFAULT_CONFIG, validateConfig, type GPTConfig } from '../../model/gpt.js';
import { configFromOptions, INIT_SEED } from '../../model/scripts/init-base.js';
import { UsageError } from '../../shared/usage-error.js';
import { flagOf, opt, parseTable, usageText, type ArgsOf } from '../options.js';
import { checkCurvePoints, type CurvePoint } from './curve.js';

/**
 * The npm script that runs ./sft-chat.ts (package.json), the prefix of its messages and usage
 * line: `model:sft-base` is the compact trainer of the shipped base (src/recipes/sft-base/).
 */
export const COMMAND = 'model:sft-chat';

/**
 * The options, in the order of the usage text. Each entry's `help` is its docstring; the default
 * and the range are the entry's own fields. The shape options stay text here: `configFromOptions`
 * (src/model/scripts/init-base.ts) reads them with the model's own checks, defaults DEFAULT_CONFIG.
 */
export const SFT_CHAT_OPTIONS = {
  out: opt.text({ meta: 'DIR', default: 'models/sft', help: 'new or empty checkpoint folder' }),
  layers: opt.text({ meta: 'N', default: String(DEFAULT_CONFIG.n_layer), help: 'transformer blocks of the model' }),
  embd: opt.text({ meta: 'C', default: String(DEFAULT_CONFIG.n_embd), help: 'width of the model (a multiple of --heads)' }),
  heads: opt.text({ meta: 'H', default: String(DEFAULT_CONFIG.n_head), help: 'attention heads per block' }),
  block: opt.text({ meta: 'T', default: String(DEFAULT_CONFIG.block_size), help: 'context of the model in tokens' }),
  initSeed: opt.digits({ meta: 'S', default: INIT_SEED, min: 0, help: 'seed of the random initialisation' }),
  from: opt.text({
    meta: 'DIR', default: null,
    help: 'start from this checkpoint instead of a random init (its config; not with --layers/--embd/--heads/--block/--init-seed); '
      + 'with a --seed past the sessions it was trained on, the demonstrations are new ones',
  }),
  curriculum: opt.text({
    meta: 'LIST', default: 'minesweeper:4x4/2,minesweeper:5x5/2,minesweeper:6x6/3,sokoban:5x5/1,sokoban:6x6/1,sokoban:6x6/2',
    help: 'boards of the demonstrations (lamer demos --curriculum): comma-separated kind[:RxC/N][=COUNT|@WEIGHT], N = mines or boxes',
  }),
  sessions: opt.digits({ default: 1200, min: 1, help: 'demonstration sessions in all, shared by weight among the items without =COUNT' }),
  failRate: opt.number({ meta: 'P', default: 0.5, range: [0, 1], help: 'share of sessions whose first attempt fails on purpose' }),
  seed: opt.digits({ meta: 'S', default: 0, min: 0, help: 'training-range seed offset of the demos and minibatch seed' }),
  steps: opt.digits({ default: 1000, min: 1, help: 'optimiser steps, unless --epochs is given' }),
  epochs: opt.digits({ meta: 'E', default: null, min: 1, help: 'whole passes over the samples instead of --steps' }),
  lr: opt.number({ meta: 'X', default: 1e-3, range: [0, 1], help: 'peak learning rate' }),
  lrSchedule: opt.choice({
    meta: 'S', default: 'cosine', choices: LR_SCHEDULES,
    help: 'cosine: linear warm-up, then cosine decay to --min-lr-ratio x --lr at the last step; constant: --lr at every step',
  }),
  warmupSteps: opt.digits({ default: null, min: 0, defaultText: '5% of the steps', help: 'warm-up steps of the cosine schedule' }),
  minLrRatio: opt.number({ meta: 'R', default: 0.1, range: [0, 1], help: 'last step\'s learning rate / --lr, cosine only' }),
  minibatch: opt.digits({ default: 16, min: 1, help: 'samples per optimiser step' }),
  microBatchTokens: opt.digits({ default: 4096, min: 1, help: 'memory cap per forward pass in [B, T] positions' }),
  positionOffset: opt.choice({
    meta: 'M', default: 'random', choices: ['random', 'none'],
    help: 'random: each sample trained at a uniform random start position, drawn per epoch from --seed; none: at position 0, as served',
  }),
  workers: opt.digits({
    default: null, min: 1, defaultText: '$LAMER_TRAIN_WORKERS, else every core on wasm or cpu', help: 'training threads, data parallel',
  }),
  backend: opt.choice({ meta: 'NAME', default: 'wasm', choices: ['wasm', 'cpu', 'auto'] satisfies TfjsBackend[], help: 'tfjs backend' }),
  logEvery: opt.digits({ default: 10, min: 1, help: 'steps between JSON progress lines when stderr is not a TTY' }),
  keepDemos: opt.flag({ help: 'copy the demonstrations (sft-demos.jsonl) into --out' }),
  dryRun: opt.flag({ help: 'generate the demos, print the plan, train nothing, write nothing' }),
};

type Args = ArgsOf<typeof SFT_CHAT_OPTIONS>;

/** The options of a run: the table's values with the model config in place of the shape options. */
export interface SftChatOptions extends Omit<Args, 'layers' | 'embd' | 'heads' | 'block' | 'steps'> {
  config: GPTConfig;
  /** Exactly one of steps / epochs. */
  steps: number | null;
  /** The `from` checkpoint's learning curve (its learning-curve.json; [] without one or without --from). */
  fromCurve: CurvePoint[];
  /** The training seeds [start, end) of the `from` checkpoint's demonstrations, from its metadata; null when unknown. */
  fromDemoSeeds: [number, number] | null;
}

/** The usage text (`--help`). */
export const USAGE = usageText(SFT_CHAT_OPTIONS, `usage: npm run ${COMMAND} -- --out DIR [options]`);

/**
 * The start of the run: the model config of `--layers/--embd/--heads/--block`, or the `--from`
 * checkpoint with its config, learning curve and demonstration seeds.
 * @throws UsageError for --from with config options, --from equal to --out, or a start checkpoint
 *   or config that cannot be used.
 */
function startOf(args: Args, given: ReadonlySet<string>): Pick<SftChatOptions, 'config' | 'from' | 'fromCurve' | 'fromDemoSeeds'> {
  try {
    if (args.from === null) return { config: configFromOptions(args), from: null, fromCurve: [], fromDemoSeeds: null };
    const shape = (['layers', 'embd', 'heads', 'block', 'initSeed'] as const).filter((k) => given.has(k));
    if (shape.length > 0) {
      throw new UsageError(`--from takes the model config of its checkpoint: drop ${shape.map((k) => `--${flagOf(k)}`).join(', ')}`);
    }
    const from = path.resolve(args.from);
    if (from === path.resolve(args.out)) throw new UsageError('--from and --out must be different folders');
    const { config, curve, demoSeeds } = readStartCheckpoint(from);
    return { config, from, fromCurve: curve, fromDemoSeeds: demoSeeds };
  } catch (e) {
    throw e instanceof UsageError ? e : new UsageError((e as Error).message);
  }
}

/**
 * Parse the command line (with `--config FILE`): each option by its table entry, then the checks
 * that join options. @returns the options, or null for --help (the caller prints USAGE).
 * @throws UsageError naming the bad option.
 */
export function parseSftChatArgs(argv: string[]): SftChatOptions | null {
  const parsed = parseTable(SFT_CHAT_OPTIONS, argv);
  if (parsed === null) return null;
  const { args, given } = parsed;
  if (given.has('steps') && given.has('epochs')) throw new UsageError('give --steps or --epochs, not both');
  const start = startOf(args, given);
  if (args.lrSchedule !== 'cosine' && (given.has('warmupSteps') || given.has('minLrRatio'))) {
    throw new UsageError('--warmup-steps and --min-lr-ratio apply to --lr-schedule cosine only');
  }
  const { layers: _l, embd: _e, heads: _h, block: _b, ...rest } = args;
  const opts: SftChatOptions = { ...rest, ...start, out: path.resolve(args.out), steps: args.epochs === null ? args.steps : null };
  // the demonstrations play training seeds [--seed, --seed + --sessions): the eval seeds above stay held out
  if (opts.seed + opts.sessions > EVAL_SEED_START) {
    const seeds = `the training seeds [0, ${EVAL_SEED_START}); eval seeds are held out`;
    throw new UsageError(`--seed + --sessions must be at most ${EVAL_SEED_START} (${seeds}), got ${opts.seed + opts.sessions}`);
  }
  if (opts.warmupSteps !== null && opts.steps !== null && opts.warmupSteps >= opts.steps) {
    throw new UsageError(`--warmup-steps (${opts.warmupSteps}) must be below --steps (${opts.steps})`);
  }
  if (existsSync(opts.out) && (!statSync(opts.out).isDirectory() || readdirSync(opts.out).length > 0)) {
    throw new UsageError(`--out ${opts.out} exists and is not an empty folder; give a new or empty one`);
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
