/**
 * `npm run model:sft-base -- --out DIR [options]`: the SFT warm start (the shipped `models/base`
 * checkpoint), rebuilt from scratch and reproducibly:
 *   1. a random initialisation of the chosen config (`--layers --embd --heads --block`, GPT-2 init
 *      on the cpu backend, `--init-seed`, src/model/scripts/init-base.ts) in a temporary folder,
 *      or with `--from DIR` an existing checkpoint (its config; e.g. the shipped base, trained on
 *      for more steps on fresh demonstrations: give a `--seed` past the earlier run's sessions);
 *   2. solver demonstrations of the `--curriculum` mix of boards (`lamer demos --curriculum`, a
 *      child process, which also checks the list: `--sessions` in all, shared by weight among the
 *      items without an exact count; distinct seeds of the training range after `--seed`, so no
 *      held-out eval task is seen);
 *   3. an `sft` training job (src/training/job.ts runTrainingJob, the runner of the server's jobs)
 *      from that start (a fresh AdamW state and learning-rate schedule), for a FIXED number of optimiser steps (`--steps`, each on `--minibatch`
 *      samples drawn as consecutive seeded permutations of the samples) or whole epochs
 *      (`--epochs`), at the learning rate `--lr` with linear warm-up and cosine decay to
 *      `--min-lr-ratio` of it (`--lr-schedule cosine`, the default; `constant` keeps `--lr`), each sample at
 *      a random start position (`--position-offset random`, the default: TrainingHyper
 *      `positionOffset`, so that the model cannot learn where a format goes by absolute position
 *      in the fixed-layout prompts; `none` trains at position 0 as served);
 *   4. the checkpoint in `--out` (refused unless new or empty), with the config, curriculum, demo
 *      command, the demonstrations' sha256 and the hyperparameters in its metadata, and beside it
 *      `learning-curve.json` (per step: step, tokens, seconds, loss, lr) and `learning-curve.svg` (./sft-curve.ts).
 * Progress on stderr: a bar (loss, tokens/s, ETA) when stderr is a TTY, else one JSON line per
 * `--log-every` steps. The last line on stdout is the summary JSON (`SftBaseSummary`).
 * `--dry-run` stops after the demonstrations and prints the plan (samples, tokens) instead.
 * The temporary folder is removed at the end, on error and on SIGINT / SIGTERM.
 * Units: seconds; tokens are byte tokens (non-padding positions); bytes on disk of model.json +
 * weights.bin.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import cliProgress from 'cli-progress';
import { LR_SCHEDULES, type LrSchedule } from '../../domain.js';
import { countParams, DEFAULT_CONFIG, validateConfig, type GPTConfig } from '../../model/gpt.js';
import { mulberry32 } from '../../model/sampling.js';
import { configFromOptions, INIT_SEED, writeInitCheckpoint } from '../../model/scripts/init-base.js';
import { buildSftSamples, parseDemoJsonl, type TrainingSample } from '../data.js';
import { createModelIO } from '../gpt-adapter.js';
import { sftCurveSvg, type CurvePoint } from './sft-curve.js';
import { resolveTrainWorkers, runTrainingJob, type TrainingHyper } from '../job.js';

const repoRoot = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..', '..');

/** Model config of the shipped base when no `--layers/--embd/--heads/--block` is given. */
export const SFT_BASE_CONFIG: GPTConfig = { ...DEFAULT_CONFIG };

/** Default curriculum: both games, small boards to the eval boards (MineSweeper 6x6/3, Sokoban 6x6/2). */
export const DEFAULT_CURRICULUM = 'minesweeper:4x4/2,minesweeper:5x5/2,minesweeper:6x6/3,sokoban:5x5/1,sokoban:6x6/1,sokoban:6x6/2';

/** Sessions per board of the demonstrations, in order of first appearance (from their task ids). */
export function sessionsPerEnv(demos: ReadonlyArray<{ taskId: string }>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const d of demos) {
    const env = d.taskId.replace(/:seed=\d+$/, '');
    out[env] = (out[env] ?? 0) + 1;
  }
  return out;
}

/**
 * The samples of `steps` optimiser steps of `minibatch` samples each: consecutive seeded
 * permutations of `samples` (every sample once per pass, passes back to back), cut to
 * steps x minibatch. The job then runs one epoch over this list, exactly `steps` steps.
 */
export function samplesForSteps<T>(samples: readonly T[], steps: number, minibatch: number, seed: number): T[] {
  const need = steps * minibatch;
  const out: T[] = [];
  const rand = mulberry32(seed ^ 0x5bd1e995);
  while (out.length < need) {
    const idx = samples.map((_, i) => i);
    for (let i = idx.length - 1; i > 0; i--) {
      const j = Math.floor(rand() * (i + 1));
      [idx[i], idx[j]] = [idx[j], idx[i]];
    }
    for (const i of idx) {
      if (out.length === need) break;
      out.push(samples[i]);
    }
  }
  return out;
}

export interface SftBaseOptions {
  out: string;
  config: GPTConfig;
  /** Checkpoint folder to start from instead of a random init (its config is `config`); null: random init. */
  from: string | null;
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
  positionOffset: 'random' | 'none';
  /** Data-parallel training threads (TrainingHyper.workers); null: the job's default
   *  (LAMER_TRAIN_WORKERS, else every core on wasm or cpu). */
  workers: number | null;
  backend: 'wasm' | 'cpu' | 'auto';
  logEvery: number;
  keepDemos: boolean;
  dryRun: boolean;
}

/** The summary printed last on stdout. */
export interface SftBaseSummary {
  out: string;
  config: GPTConfig;
  parameters: number;
  sessions: number;
  samples: number;
  steps: number;
  epochs: number;
  /** Training threads the job used (src/training/job.ts resolveTrainWorkers: --workers, else
   *  LAMER_TRAIN_WORKERS, else every core on wasm / cpu; at most the minibatch). */
  workers: number;
  tokens: number;
  seconds: number;
  tokensPerSec: number;
  lossFirst: number;
  lossLast: number;
  /** Means of the first / last min(10, steps) steps' losses. */
  lossFirst10: number;
  lossLast10: number;
  bytesOnDisk: number;
}

const HELP = `usage: npm run model:sft-base -- --out DIR [options]

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

/**
 * Parse the command line. @returns the options, or null after printing --help.
 * @throws SftBaseUsageError naming the bad option.
 */
export function parseSftBaseArgs(argv: string[]): SftBaseOptions | null {
  let values;
  try {
    values = parseArgs({
      args: argv,
      strict: true,
      options: {
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
      },
    }).values;
  } catch (e) {
    const msg = (e as Error).message.split('\n')[0]!;
    // parseArgs reads a value that starts with '-' (e.g. --workers -1) as an option: say what to write.
    const ambiguous = /^Option '(--[a-z-]+)' argument is ambiguous/.exec(msg);
    throw new SftBaseUsageError(ambiguous ? `${ambiguous[1]} needs a value (one that starts with '-' must be written ${ambiguous[1]}=VALUE)` : msg);
  }
  if (values.help) {
    console.log(HELP);
    return null;
  }
  const int = (name: string, v: string | undefined, min: number): number => {
    if (v === undefined || !/^\d+$/.test(v) || !Number.isSafeInteger(Number(v)) || Number(v) < min) throw new SftBaseUsageError(`--${name} must be an integer >= ${min}, got '${v}'`);
    return Number(v);
  };
  const num = (name: string, v: string, lo: number, hi: number): number => {
    const n = Number(v);
    if (v.trim() === '' || !Number.isFinite(n) || n < lo || n > hi) throw new SftBaseUsageError(`--${name} must be a number in [${lo}, ${hi}], got '${v}'`);
    return n;
  };
  if (values.steps !== undefined && values.epochs !== undefined) throw new SftBaseUsageError('give --steps or --epochs, not both');
  let config: GPTConfig;
  let from: string | null = null;
  try {
    if (values.from !== undefined) {
      const given = (['layers', 'embd', 'heads', 'block', 'init-seed'] as const).filter((k) => values[k] !== undefined);
      if (given.length > 0) throw new SftBaseUsageError(`--from takes the model config of its checkpoint: drop ${given.map((k) => `--${k}`).join(', ')}`);
      from = path.resolve(values.from);
      if (from === path.resolve(values.out)) throw new SftBaseUsageError('--from and --out must be different folders');
      config = checkpointConfig(from);
    } else config = configFromOptions(values, SFT_BASE_CONFIG);
  } catch (e) {
    throw e instanceof SftBaseUsageError ? e : new SftBaseUsageError((e as Error).message);
  }
  if (!['wasm', 'cpu', 'auto'].includes(values.backend)) throw new SftBaseUsageError(`--backend must be wasm, cpu or auto, got '${values.backend}'`);
  if (!(LR_SCHEDULES as readonly string[]).includes(values['lr-schedule'])) throw new SftBaseUsageError(`--lr-schedule must be ${LR_SCHEDULES.join(' or ')}, got '${values['lr-schedule']}'`);
  if (values['lr-schedule'] !== 'cosine' && (values['warmup-steps'] !== undefined || values['min-lr-ratio'] !== undefined)) throw new SftBaseUsageError('--warmup-steps and --min-lr-ratio apply to --lr-schedule cosine only');
  if (!['random', 'none'].includes(values['position-offset'])) throw new SftBaseUsageError(`--position-offset must be random or none, got '${values['position-offset']}'`);
  const opts: SftBaseOptions = {
    out: path.resolve(values.out),
    config,
    from,
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
    positionOffset: values['position-offset'] as SftBaseOptions['positionOffset'],
    workers: values.workers === undefined ? null : int('workers', values.workers, 1),
    backend: values.backend as SftBaseOptions['backend'],
    logEvery: int('log-every', values['log-every'], 1),
    keepDemos: values['keep-demos'],
    dryRun: values['dry-run'],
  };
  if (opts.warmupSteps !== null && opts.steps !== null && opts.warmupSteps >= opts.steps) throw new SftBaseUsageError(`--warmup-steps (${opts.warmupSteps}) must be below --steps (${opts.steps})`);
  if (existsSync(opts.out) && (!statSync(opts.out).isDirectory() || readdirSync(opts.out).length > 0)) {
    throw new SftBaseUsageError(`--out ${opts.out} exists and is not an empty folder; give a new or empty one`);
  }
  return opts;
}

/**
 * The model config of the checkpoint in `dir` (its model.json metadata, checked as
 * src/model/checkpoint.ts readCheckpointMetadata does).
 * @throws Error naming the folder when model.json is missing, unreadable or not a lamer-gpt checkpoint.
 */
function checkpointConfig(dir: string): GPTConfig {
  const file = path.join(dir, 'model.json');
  if (!existsSync(file) || !existsSync(path.join(dir, 'weights.bin'))) throw new Error(`--from ${dir}: no checkpoint there (model.json and weights.bin expected)`);
  let cfg: GPTConfig | undefined;
  try {
    cfg = JSON.parse(readFileSync(file, 'utf8'))?.userDefinedMetadata?.lamer?.config;
  } catch (e) {
    throw new Error(`--from ${dir}: model.json is not JSON (${(e as Error).message})`);
  }
  if (cfg === undefined) throw new Error(`--from ${dir}: model.json has no userDefinedMetadata.lamer.config`);
  try {
    validateConfig(cfg);
  } catch (e) {
    throw new Error(`--from ${dir}: ${(e as Error).message}`);
  }
  return cfg;
}

const log = (line: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`);

/**
 * Run `lamer demos ARGS` as a child process (its stdout goes to our stderr).
 * @throws SftBaseUsageError when it rejects the options (exit 2; its message is on stderr), Error
 *   for any other non-zero exit.
 */
function runDemos(args: string[]): void {
  log(`lamer demos ${args.join(' ')}`);
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/index.ts', 'demos', ...args], { cwd: repoRoot, stdio: ['ignore', 2, 2] });
  if (r.status === 2) throw new SftBaseUsageError('lamer demos refused the curriculum options (its message is above)');
  if (r.status !== 0) throw new Error(`lamer demos ${args.join(' ')} exited with ${r.status ?? r.signal}`);
}

const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
const round = (x: number, d = 4) => Number(x.toFixed(d));

/**
 * Make the SFT base checkpoint (see the file comment). Work files live in a temporary folder that
 * is removed at the end.
 * @returns the summary, or the plan for a dry run.
 * @throws Error when `lamer demos` fails, the data is empty, or training fails (nothing is left in
 *   `opts.out` but what the job wrote).
 */
export async function runSftBase(opts: SftBaseOptions): Promise<SftBaseSummary | Record<string, unknown>> {
  const work = mkdtempSync(path.join(tmpdir(), 'lamer-sft-base-'));
  const cleanup = () => rmSync(work, { recursive: true, force: true });
  const onSignal = (sig: NodeJS.Signals) => {
    cleanup();
    process.exit(sig === 'SIGINT' ? 130 : 143);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    // 1. demonstrations (lamer demos checks the curriculum; a bad one exits 2 with its message)
    const demosPath = path.join(work, 'demos.jsonl');
    const demoArgs = ['--curriculum', opts.curriculum, '--tasks', String(opts.sessions), '--seed', String(opts.seed), '--fail-rate', String(opts.failRate), '--out', demosPath];
    runDemos(demoArgs);
    const demoCommand = `lamer demos ${demoArgs.slice(0, -2).map((a) => (/^[\w.:/@=,-]+$/.test(a) ? a : `'${a}'`)).join(' ')}`;
    const demosText = readFileSync(demosPath, 'utf8');
    const demosSha256 = createHash('sha256').update(demosText).digest('hex');
    const demos = parseDemoJsonl(demosText);
    const { samples, stats } = buildSftSamples(demos, { blockSize: opts.config.block_size });
    if (samples.length === 0) throw new Error('the demonstrations gave no training samples');
    const sampleTokens = (s: TrainingSample) => Math.min(s.promptTokenIds.length + s.outputTokenIds.length - 1, opts.config.block_size);
    const tokensPerPass = samples.reduce((a, s) => a + sampleTokens(s), 0);
    const trainSamples = opts.steps !== null ? samplesForSteps(samples, opts.steps, opts.minibatch, opts.seed) : samples;
    const epochs = opts.epochs ?? 1;
    const steps = opts.steps ?? Math.ceil(samples.length / opts.minibatch) * epochs;
    // with --epochs the step count is known only now: refuse a warm-up as long as the run before any training
    if (opts.warmupSteps !== null && opts.warmupSteps >= steps) throw new SftBaseUsageError(`--warmup-steps (${opts.warmupSteps}) must be below the run's ${steps} optimiser steps`);
    const parameters = countParams(opts.config);
    const plan = {
      start: opts.from ?? 'random init', config: opts.config, parameters, sessionsPerEnv: sessionsPerEnv(demos), demos: demos.length, samples: samples.length,
      reflections: samples.filter((s) => s.kind === 'reflection').length, tokensPerPass,
      steps, passes: round((steps * opts.minibatch) / samples.length, 3),
      tokensToTrain: opts.steps !== null ? trainSamples.reduce((a, s) => a + sampleTokens(s), 0) : tokensPerPass * epochs,
    };
    log(`plan ${JSON.stringify(plan)}`);
    if (opts.dryRun) return { dryRun: true, ...plan };

    // 2. the start: a random initialisation or --from; 3. the sft job
    const initDir = opts.from ?? path.join(work, 'init');
    if (opts.from === null) await writeInitCheckpoint(initDir, opts.config, opts.initSeed);
    const parent = opts.from === null
      ? { source: 'random-init', config: opts.config, seed: opts.initSeed }
      : { source: 'checkpoint', dir: opts.from, weightsSha256: createHash('sha256').update(readFileSync(path.join(opts.from, 'weights.bin'))).digest('hex') };
    const io = await createModelIO({ backend: opts.backend });
    const hyper: TrainingHyper = {
      lr: opts.lr, epochs, minibatchSize: opts.minibatch, microBatchTokens: opts.microBatchTokens, seed: opts.seed, positionOffset: opts.positionOffset,
      lrSchedule: opts.lrSchedule,
      ...(opts.lrSchedule === 'cosine' ? { warmupSteps: opts.warmupSteps ?? Math.floor(steps * 0.05), minLrRatio: opts.minLrRatio } : {}),
      ...(opts.workers !== null ? { workers: opts.workers } : {}),
    };
    const workers = resolveTrainWorkers(opts.workers ?? undefined, io, opts.minibatch); // what the job will use
    const points: CurvePoint[] = [];
    const bar = process.stderr.isTTY === true
      ? new cliProgress.SingleBar({ stream: process.stderr, hideCursor: true, etaBuffer: 50, format: 'sft {bar} {value}/{total} steps | loss {loss} (20-step mean) | {tps} tok/s | {duration_formatted} | ETA {eta_formatted}' }, cliProgress.Presets.shades_classic)
      : null;
    bar?.start(steps, 0, { loss: '-', tps: '-' });
    const t0 = performance.now();
    let tokens = 0;
    let res;
    try {
      res = await runTrainingJob(
        {
          algorithm: 'sft', baseCheckpointDir: initDir, outputDir: opts.out, hyper, dataStats: stats,
          meta: {
            version: 'base', source: 'sft', script: 'npm run model:sft-base', argv: process.argv.slice(2),
            parent,
            curriculum: opts.curriculum,
            demos: { command: demoCommand, sessionsPerEnv: sessionsPerEnv(demos), sessions: demos.length, samples: samples.length, sha256: demosSha256, failRate: opts.failRate },
            schedule: opts.steps !== null ? { steps: opts.steps, drawing: 'consecutive seeded permutations of the samples' } : { epochs },
            lrSchedule: opts.lrSchedule,
          },
        },
        trainSamples,
        {
          io,
          onProgress: (p) => {
            tokens += p.metrics.tokens;
            const seconds = (performance.now() - t0) / 1000;
            points.push({ step: p.iteration, tokens, seconds: round(seconds, 3), loss: round(p.metrics.loss), lr: p.metrics.lr });
            if (bar) bar.update(p.iteration, { loss: mean(points.slice(-20).map((q) => q.loss)).toFixed(3), tps: Math.round(tokens / seconds) });
            else if (p.iteration % opts.logEvery === 0 || p.iteration === p.totalIterations) {
              const window = points.slice(-opts.logEvery);
              process.stderr.write(JSON.stringify({
                step: p.iteration, of: p.totalIterations, loss: round(mean(window.map((q) => q.loss))), tokens, seconds: round(seconds, 1),
                tokensPerSec: Math.round(tokens / seconds), etaSeconds: Math.round((seconds / p.iteration) * (p.totalIterations - p.iteration)),
              }) + '\n');
            }
          },
        },
      );
    } finally {
      bar?.stop();
    }
    const seconds = (performance.now() - t0) / 1000;

    // 4. the curve and the summary
    const curve = { config: opts.config, parameters, hyper, curriculum: opts.curriculum, sessions: demos.length, samples: samples.length, points };
    writeFileSync(path.join(opts.out, 'learning-curve.json'), JSON.stringify(curve) + '\n');
    writeFileSync(path.join(opts.out, 'learning-curve.svg'), sftCurveSvg(points, `SFT base: ${opts.config.n_layer} x ${opts.config.n_embd}, ${parameters} parameters; ${demos.length} sessions, ${samples.length} samples; minibatch ${opts.minibatch}, lr ${opts.lr}`));
    if (opts.keepDemos) writeFileSync(path.join(opts.out, 'sft-demos.jsonl'), demosText);
    const losses = res.metrics.map((m) => m.loss);
    const k = Math.min(10, losses.length);
    const bytesOnDisk = ['model.json', 'weights.bin'].reduce((a, f) => a + statSync(path.join(opts.out, f)).size, 0);
    return {
      out: opts.out, config: opts.config, parameters, sessions: demos.length, samples: samples.length,
      steps: res.iterations, epochs: round((res.iterations * opts.minibatch) / samples.length, 3),
      workers, tokens, seconds: round(seconds, 1),
      tokensPerSec: Math.round(tokens / seconds), lossFirst: round(losses[0]), lossLast: round(losses[losses.length - 1]),
      lossFirst10: round(mean(losses.slice(0, k))), lossLast10: round(mean(losses.slice(-k))), bytesOnDisk,
    };
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    cleanup();
  }
}

async function main(): Promise<number> {
  let opts: SftBaseOptions | null;
  try {
    opts = parseSftBaseArgs(process.argv.slice(2));
  } catch (e) {
    if (!(e instanceof SftBaseUsageError)) throw e;
    console.error(`model:sft-base: ${e.message}`);
    return 2;
  }
  if (opts === null) return 0;
  let summary;
  try {
    summary = await runSftBase(opts);
  } catch (e) {
    if (!(e instanceof SftBaseUsageError)) throw e;
    console.error(`model:sft-base: ${e.message}`);
    return 2;
  }
  console.log(JSON.stringify(summary));
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().then((code) => { process.exitCode = code; }, (err) => {
    console.error(err);
    process.exit(1);
  });
}
