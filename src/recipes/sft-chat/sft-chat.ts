/**
 * `npm run model:sft-chat -- --out DIR [options]`: the byte-level chat-format SFT warm start (the
 * trainer of the base shipped before the compact one of `npm run model:sft-base`,
 * src/recipes/sft-base/sft-base.ts), rebuilt from scratch and reproducibly:
 *   1. a random initialisation of the chosen config (`--layers --embd --heads --block`, GPT-2 init
 *      on the cpu backend, `--init-seed`, src/model/scripts/init-base.ts) in a temporary folder,
 *      or with `--from DIR` an existing checkpoint (its config; e.g. the shipped base, trained on
 *      for more steps on fresh demonstrations: give a `--seed` past the earlier run's sessions);
 *   2. solver demonstrations of the `--curriculum` mix of boards (`lamer demos --curriculum`, a
 *      child process, which also checks the list: `--sessions` in all, shared by weight among the
 *      items without an exact count; distinct seeds of the training range after `--seed`, so no
 *      held-out eval task is seen);
 *   3. an `sft` training job (src/training/run/job.ts runTrainingJob, the runner of the server's jobs)
 *      from that start (a fresh AdamW state and learning-rate schedule), for a FIXED number of
 *      optimiser steps (`--steps`, each on `--minibatch`
 *      samples drawn as consecutive seeded permutations of the samples) or whole epochs
 *      (`--epochs`), at the learning rate `--lr` with linear warm-up and cosine decay to
 *      `--min-lr-ratio` of it (`--lr-schedule cosine`, the default; `constant` keeps `--lr`), each sample at
 *      a random start position (`--position-offset random`, the default: TrainingHyper
 *      `positionOffset`, so that the model cannot learn where a format goes by absolute position
 *      in the fixed-layout prompts; `none` trains at position 0 as served);
 *   4. the checkpoint in `--out` (refused unless new or empty), with the config, curriculum, demo
 *      command, the demonstrations' sha256 and the hyperparameters in its metadata, and beside it
 *      `learning-curve.json` (per step: step, tokens, seconds, loss, lr; with `--from`, after the start
 *      checkpoint's own curve when it has one, ./curve.ts continueCurve) and `learning-curve.svg`.
 * The command line: ./options.ts (`--help` lists each option with its default and range).
 * Progress on stderr: a bar (loss, tokens/s, ETA) when stderr is a TTY, else one JSON line per
 * `--log-every` steps. The last line on stdout is the summary JSON (`SftChatSummary`).
 * `--dry-run` stops after the demonstrations and prints the plan (samples, tokens) instead.
 * The temporary folder is removed at the end, on error and on SIGINT / SIGTERM.
 * Units: seconds; tokens are byte tokens (non-padding positions); bytes on disk of model.json +
 * weights.bin.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import cliProgress from 'cli-progress';
import { countParams, type GPTConfig } from '../../model/gpt.js';
import { mulberry32 } from '../../shared/rng.js';
import { writeInitCheckpoint } from '../../model/scripts/init-base.js';
import { buildSftSamples, parseDemoJsonl, type TrainingSample } from '../../training/data/data.js';
import { createModelIO } from '../../training/run/gpt-adapter.js';
import { UsageError } from '../../shared/usage-error.js';
import { COMMAND, parseSftChatArgs, USAGE, type SftChatOptions } from './options.js';
import { continueCurve, sftCurveSvg, type CurvePoint } from './curve.js';
import { resolveTrainWorkers, runTrainingJob, type JobProgress, type TrainingHyper } from '../../training/run/job.js';

const repoRoot = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..', '..');

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

/** The summary printed last on stdout. */
export interface SftChatSummary {
  out: string;
  config: GPTConfig;
  parameters: number;
  sessions: number;
  samples: number;
  steps: number;
  epochs: number;
  /** Training threads the job used (src/training/run/job.ts resolveTrainWorkers: --workers, else
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

const log = (line: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`);

/**
 * Run `lamer demos ARGS` as a child process (its stdout goes to our stderr).
 * @throws UsageError when it rejects the options (exit 2; its message is on stderr), Error
 *   for any other non-zero exit.
 */
function runDemos(args: string[]): void {
  log(`lamer demos ${args.join(' ')}`);
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/index.ts', 'demos', ...args], { cwd: repoRoot, stdio: ['ignore', 2, 2] });
  if (r.status === 2) throw new UsageError('lamer demos refused the curriculum options (its message is above)');
  if (r.status !== 0) throw new Error(`lamer demos ${args.join(' ')} exited with ${r.status ?? r.signal}`);
}

const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
const round = (x: number, d = 4) => Number(x.toFixed(d));

/** The demonstrations of a run and the samples made of them (step 1 of the file comment). */
interface SftData {
  demos: ReturnType<typeof parseDemoJsonl>;
  demosText: string;
  demosSha256: string;
  /** The `lamer demos` command line without its `--out`, for the checkpoint's metadata. */
  demoCommand: string;
  samples: TrainingSample[];
  stats: ReturnType<typeof buildSftSamples>['stats'];
  /** What the job trains on: `samples`, or with --steps the drawn list of steps x minibatch. */
  trainSamples: TrainingSample[];
  epochs: number;
  steps: number;
  parameters: number;
  /** What a dry run prints (and every run logs). */
  plan: Record<string, unknown>;
}

/**
 * Step 1: the demonstrations (`lamer demos` checks the curriculum; a bad one exits 2 with its
 * message), their samples, the step count and the plan.
 * @throws UsageError for a curriculum `lamer demos` refuses or a warm-up of at least the
 *   run's steps; Error when there are no samples.
 */
function prepareSftData(opts: SftChatOptions, work: string): SftData {
  const demosPath = path.join(work, 'demos.jsonl');
  const demoArgs = ['--curriculum', opts.curriculum, '--tasks', String(opts.sessions), '--seed', String(opts.seed), '--fail-rate', String(opts.failRate), '--out', demosPath];
  const seen = opts.fromDemoSeeds;
  if (seen && opts.seed < seen[1] && seen[0] < opts.seed + opts.sessions) {
    log(`warning: demonstration seeds [${opts.seed}, ${opts.seed + opts.sessions}) overlap the [${seen[0]}, ${seen[1]}) that --from ${opts.from} was trained on; give --seed ${seen[1]} or more for new ones`);
  }
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
  if (opts.warmupSteps !== null && opts.warmupSteps >= steps) throw new UsageError(`--warmup-steps (${opts.warmupSteps}) must be below the run's ${steps} optimiser steps`);
  const parameters = countParams(opts.config);
  const plan = {
    start: opts.from ?? 'random init', config: opts.config, parameters, sessionsPerEnv: sessionsPerEnv(demos), demos: demos.length, samples: samples.length,
    reflections: samples.filter((s) => s.kind === 'reflection').length, tokensPerPass,
    steps, passes: round((steps * opts.minibatch) / samples.length, 3),
    tokensToTrain: opts.steps !== null ? trainSamples.reduce((a, s) => a + sampleTokens(s), 0) : tokensPerPass * epochs,
  };
  return { demos, demosText, demosSha256, demoCommand, samples, stats, trainSamples, epochs, steps, parameters, plan };
}

/**
 * Progress of the job on stderr: a bar when stderr is a TTY, else one JSON line per `--log-every`
 * steps; collects the learning-curve points (step, tokens so far, seconds since `t0`, loss, lr).
 */
function sftProgress(opts: SftChatOptions, steps: number) {
  const points: CurvePoint[] = [];
  const bar = process.stderr.isTTY === true
    ? new cliProgress.SingleBar({ stream: process.stderr, hideCursor: true, etaBuffer: 50, format: 'sft {bar} {value}/{total} steps | loss {loss} (20-step mean) | {tps} tok/s | {duration_formatted} | ETA {eta_formatted}' }, cliProgress.Presets.shades_classic)
    : null;
  bar?.start(steps, 0, { loss: '-', tps: '-' });
  const t0 = performance.now();
  let tokens = 0;
  const onProgress = (p: JobProgress) => {
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
  };
  return { points, onProgress, stop: () => bar?.stop(), tokens: () => tokens, seconds: () => (performance.now() - t0) / 1000 };
}

/**
 * Steps 2-3: the start (a random initialisation in `work`, or --from) and the sft job on it.
 * @returns the job's result, its hyperparameters, the threads it used, the curve points, tokens
 *   trained and seconds taken.
 */
async function trainSftChat(opts: SftChatOptions, data: SftData, work: string) {
  const initDir = opts.from ?? path.join(work, 'init');
  if (opts.from === null) await writeInitCheckpoint(initDir, opts.config, opts.initSeed);
  const parent = opts.from === null
    ? { source: 'random-init', config: opts.config, seed: opts.initSeed }
    : { source: 'checkpoint', dir: opts.from, weightsSha256: createHash('sha256').update(readFileSync(path.join(opts.from, 'weights.bin'))).digest('hex') };
  const io = await createModelIO({ backend: opts.backend });
  const hyper: TrainingHyper = {
    lr: opts.lr, epochs: data.epochs, minibatchSize: opts.minibatch, microBatchTokens: opts.microBatchTokens, seed: opts.seed, positionOffset: opts.positionOffset,
    lrSchedule: opts.lrSchedule,
    ...(opts.lrSchedule === 'cosine' ? { warmupSteps: opts.warmupSteps ?? Math.floor(data.steps * 0.05), minLrRatio: opts.minLrRatio } : {}),
    ...(opts.workers !== null ? { workers: opts.workers } : {}),
  };
  const workers = resolveTrainWorkers(opts.workers ?? undefined, io, opts.minibatch); // what the job will use
  const { demos, samples } = data;
  const progress = sftProgress(opts, data.steps);
  let res;
  try {
    res = await runTrainingJob(
      {
        algorithm: 'sft', baseCheckpointDir: initDir, outputDir: opts.out, hyper, dataStats: data.stats,
        meta: {
          version: 'base', source: 'sft', script: `npm run ${COMMAND}`, argv: process.argv.slice(2),
          parent,
          curriculum: opts.curriculum,
          demos: { command: data.demoCommand, sessionsPerEnv: sessionsPerEnv(demos), sessions: demos.length, samples: samples.length, sha256: data.demosSha256, failRate: opts.failRate },
          schedule: opts.steps !== null ? { steps: opts.steps, drawing: 'consecutive seeded permutations of the samples' } : { epochs: data.epochs },
          lrSchedule: opts.lrSchedule,
        },
      },
      data.trainSamples,
      { io, onProgress: progress.onProgress },
    );
  } finally {
    progress.stop();
  }
  return { res, hyper, workers, points: progress.points, tokens: progress.tokens(), seconds: progress.seconds() };
}

/**
 * Step 4: `learning-curve.json` and `.svg` beside the checkpoint (with --from, the curve goes on
 * from the start checkpoint's when it has one: the whole training of this checkpoint), and the
 * demonstrations with --keep-demos.
 */
function writeSftCurve(opts: SftChatOptions, data: SftData, hyper: TrainingHyper, points: readonly CurvePoint[]): void {
  const parentCurve = opts.fromCurve;
  const start = parentCurve.at(-1);
  const curve = {
    config: opts.config, parameters: data.parameters, hyper, curriculum: opts.curriculum, sessions: data.demos.length, samples: data.samples.length,
    ...(start ? { continues: { from: opts.from, step: start.step, tokens: start.tokens, seconds: start.seconds } } : {}),
    points: continueCurve(parentCurve, points),
  };
  writeFileSync(path.join(opts.out, 'learning-curve.json'), JSON.stringify(curve) + '\n');
  writeFileSync(path.join(opts.out, 'learning-curve.svg'), sftCurveSvg(curve.points, `SFT base: ${opts.config.n_layer} x ${opts.config.n_embd}, ${data.parameters} parameters; ${data.demos.length} sessions, ${data.samples.length} samples; minibatch ${opts.minibatch}, lr ${opts.lr}${start ? `; steps after ${start.step} trained on from ${path.basename(opts.from!)}` : ''}`));
  if (opts.keepDemos) writeFileSync(path.join(opts.out, 'sft-demos.jsonl'), data.demosText);
}

/**
 * Make the SFT base checkpoint (see the file comment). Work files live in a temporary folder that
 * is removed at the end.
 * @returns the summary, or the plan for a dry run.
 * @throws Error when `lamer demos` fails, the data is empty, or training fails (nothing is left in
 *   `opts.out` but what the job wrote).
 */
export async function runSftChat(opts: SftChatOptions): Promise<SftChatSummary | Record<string, unknown>> {
  const work = mkdtempSync(path.join(tmpdir(), 'lamer-sft-chat-'));
  const cleanup = () => rmSync(work, { recursive: true, force: true });
  const onSignal = (sig: NodeJS.Signals) => {
    cleanup();
    process.exit(sig === 'SIGINT' ? 130 : 143);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    const data = prepareSftData(opts, work);
    log(`plan ${JSON.stringify(data.plan)}`);
    if (opts.dryRun) return { dryRun: true, ...data.plan };
    const { res, hyper, workers, points, tokens, seconds } = await trainSftChat(opts, data, work);
    writeSftCurve(opts, data, hyper, points);
    const losses = res.metrics.map((m) => m.loss);
    const k = Math.min(10, losses.length);
    const bytesOnDisk = ['model.json', 'weights.bin'].reduce((a, f) => a + statSync(path.join(opts.out, f)).size, 0);
    return {
      out: opts.out, config: opts.config, parameters: data.parameters, sessions: data.demos.length, samples: data.samples.length,
      steps: res.iterations, epochs: round((res.iterations * opts.minibatch) / data.samples.length, 3),
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
  let opts: SftChatOptions | null;
  try {
    opts = parseSftChatArgs(process.argv.slice(2));
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    console.error(`${COMMAND}: ${e.message}`);
    return 2;
  }
  if (opts === null) {
    console.log(USAGE);
    return 0;
  }
  let summary;
  try {
    summary = await runSftChat(opts);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    console.error(`${COMMAND}: ${e.message}`);
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
