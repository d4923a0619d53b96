/**
 * `lamer train --env NAME --algorithm lamer|gigpo|grpo|rloo --iterations I
 *  --tasks-per-iter T --group G [--server URL] [--out DIR] ...`: the experiment driver
 * (src/eval/experiment.ts). Each iteration plays rollouts through the HTTP API, trains on
 * exactly those sessions with a training job, activates the new version, and adds a point to
 * `<out>/learning-curve.json` and `<out>/learning-curve.svg` (rewritten after every iteration).
 * Without --server a server is started in-process (builtin engine, data in --data-dir or a
 * temporary folder, base checkpoint --base-model-dir). Progress goes to stderr; the final curve
 * table to stdout. After every iteration `<out>` also holds the job (`jobs/`) and (in-process) a copy
 * of the trained checkpoint, and `--resume` continues a run from them (./train-resume.ts).
 *
 * Before any work: --out must be (or be creatable as) a writable directory, and --server must
 * answer GET /healthz; either failure is one line on stderr and exit 1. A temporary data directory
 * is kept at the end (it holds the checkpoints of the versions the run trained) and its path is
 * printed; it is removed only when the in-process server could not start in it.
 */
import { accessSync, constants as fsConstants, cpSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { parseArgs } from 'node:util';
import cliProgress from 'cli-progress';
import { learningCurveSvg } from '../eval/chart-svg.js';
import { runExperiment, type CurvePoint, type ExperimentAlgorithm, type IterationState } from '../eval/experiment.js';
import type { RunningServer } from '../server.js';
import {
  httpVersions, keepCheckpoint, pruneCheckpoints, pruneJobs, readCurve, resumeConflicts, resumeFrom, writeAtomic, writeJob, type CurveFile,
} from './train-resume.js';
import { checkServer } from '../eval/harness.js';
import { describeHttpFailure, HttpError } from '../eval/http.js';
import { REFLECTION_GROUPS, RL_ALGORITHMS } from '../domain.js';
import { ensureDirSync } from '../ensure-dir.js';
import { checkEvalSeeds, envOpt, intOpt, MAX_TOP_K, parseCommand, usageError, UsageError } from './args.js';
import type { HeldOutSettings } from '../eval/experiment-probes.js';

const HELP = `usage: lamer train --env NAME --algorithm lamer|gigpo|grpo|rloo [options]

  --env NAME            minesweeper | sokoban (default sizes), or a sized name: minesweeper-RxC-M
                        (rows x cols, mines; e.g. minesweeper-6x6-3) or sokoban-RxC-B (rows x cols,
                        boxes; e.g. sokoban-6x6-2) (required)
  --algorithm A         lamer (G trials x 3 attempts per task) | gigpo | grpo | rloo (3G single attempts per task)
  --iterations I        rollout + training iterations (default 10)
  --tasks-per-iter T    tasks per iteration, fresh training seeds each iteration (default 16)
  --group G             group size G (default 8)
  --server URL          server to use (admin key via --api-key or $LAMER_API_KEY); default: one in-process
  --out DIR             learning-curve.json and learning-curve.svg go here (default ./train-<algorithm>)
  --params JSON         env parameters, e.g. '{"rows":4,"cols":4,"mines":2}'
  --seed S              offset into the training seed range (default 0)
  --concurrency C       sessions in flight during rollouts (default 32)
  --temperature X --top-p X --top-k N   rollout sampling (default 1.0 / 1 / 0, LaMer's training setting)
  --available-actions   send the env's legal actions with each step
  --lr X --epochs N --minibatch N --gamma-traj X --ent-coef X   job hyperparameters
  --reflection-group G  lamer only: task (default, the reference) | own (an ablation: reflections' GiGPO episode
                        term centred among the task's reflections only; docs/method.md#gigpo)
  --no-pack             train one sequence per turn (default: an attempt's turns, then its reflection,
                        in one sequence where the recorded prompts extend each other; same losses)
  --data-dir DIR        in-process server: data directory (checkpoints and database are kept there;
                        default: a new temporary directory, also kept, its path printed at the end)
  --base-model-dir DIR  in-process server: base checkpoint (default models/base)
  --max-minutes M       wall-clock budget: start no iteration that would end after M minutes
  --resume              continue the run in --out (its learning-curve.json; same settings, --iterations may grow):
                        from the last iteration whose trained version the server has, or (in-process) whose
                        checkpoint --out/checkpoint/ holds; without a curve there, start at iteration 0
  --heldout-tasks N     held-out probe: play each trained version on N held-out tasks (3 attempts; default 0: none)
  --heldout-every E     ... after every E-th iteration and the last (default 1)
  --heldout-seed S      ... eval seeds from S (default 1000000: apart from lamer eval --seed 0's tasks)
  --heldout-sampling T/P/K   ... at temperature/top-p/top-k (default 0.7/0.8/20, the paper's evaluation)
  --kl-every E          KL of the rollout policy from the start version every E-th iteration and the last
                        (replays of the first trial of each task; 0: never; default 1)
  --quiet               no progress bars`;

function num(name: string, v: string | undefined, lo: number, hi: number): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || n < lo || n > hi) throw new UsageError(`--${name} must be a number in [${lo}, ${hi}], got '${v}'`);
  return n;
}

/** The learning curve as a fixed-width table. */
export function formatCurve(points: CurvePoint[]): string {
  const head = 'iter  version            return  pass@1  pass@2  pass@3    loss  entropy  zero-adv  tokens   roll s  train s';
  const rows = points.map((p) =>
    [
      String(p.iteration).padStart(4), p.rolloutVersion.padEnd(18).slice(0, 18), p.meanReturn.toFixed(2).padStart(6),
      ...['1', '2', '3'].map((k) => (100 * (p.passAtK[k] ?? 0)).toFixed(1).padStart(6)),
      (p.loss === null ? '-' : p.loss.toFixed(4)).padStart(7), (p.entropy === null ? '-' : p.entropy.toFixed(3)).padStart(8),
      `${p.zeroAdvantageGroups ?? '-'}/${p.groups ?? '-'}`.padStart(8), String(p.tokensTrained).padStart(7),
      p.rolloutSeconds.toFixed(0).padStart(8), p.trainSeconds.toFixed(0).padStart(8),
    ].join('  '),
  );
  return [head, ...rows].join('\n');
}

const OPTIONS = {
  env: { type: 'string' }, algorithm: { type: 'string' }, iterations: { type: 'string' }, 'tasks-per-iter': { type: 'string' },
  group: { type: 'string' }, server: { type: 'string' }, out: { type: 'string' }, params: { type: 'string' }, seed: { type: 'string' },
  concurrency: { type: 'string' }, temperature: { type: 'string' }, 'top-p': { type: 'string' }, 'top-k': { type: 'string' }, 'available-actions': { type: 'boolean' }, lr: { type: 'string' },
  epochs: { type: 'string' }, minibatch: { type: 'string' }, 'gamma-traj': { type: 'string' }, 'ent-coef': { type: 'string' },
  'no-pack': { type: 'boolean' }, 'reflection-group': { type: 'string' },
  'data-dir': { type: 'string' }, 'base-model-dir': { type: 'string' }, 'api-key': { type: 'string' }, 'max-minutes': { type: 'string' }, quiet: { type: 'boolean' },
  resume: { type: 'boolean' }, 'heldout-tasks': { type: 'string' }, 'heldout-every': { type: 'string' }, 'heldout-seed': { type: 'string' },
  'heldout-sampling': { type: 'string' }, 'kl-every': { type: 'string' },
} as const;

type Values = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; strict: true }>>['values'];

/** `--heldout-*` as the experiment's `heldOut` (none without --heldout-tasks). @throws UsageError naming the bad option. */
function heldOutOptions(values: Values): { heldOut?: HeldOutSettings } {
  const tasks = intOpt('heldout-tasks', values['heldout-tasks'], 0, 0, 100_000);
  const given = (['heldout-every', 'heldout-seed', 'heldout-sampling'] as const).filter((k) => values[k] !== undefined);
  if (tasks === 0) {
    if (given.length > 0) throw new UsageError(`--${given[0]} needs --heldout-tasks N (N >= 1)`);
    return {};
  }
  const seed = intOpt('heldout-seed', values['heldout-seed'], 1_000_000, 0);
  checkEvalSeeds('--heldout-seed + --heldout-tasks', seed, tasks);
  const parts = (values['heldout-sampling'] ?? '0.7/0.8/20').split('/');
  if (parts.length !== 3) throw new UsageError(`--heldout-sampling must be temperature/top-p/top-k, got '${values['heldout-sampling']}'`);
  const sampling = {
    temperature: num('heldout-sampling', parts[0], 0, 10)!,
    topP: num('heldout-sampling', parts[1], 1e-9, 1)!,
    topK: intOpt('heldout-sampling', parts[2], 0, 0, MAX_TOP_K),
  };
  return { heldOut: { tasks, every: intOpt('heldout-every', values['heldout-every'], 1, 1), seed, sampling } };
}

/** The experiment options and the output folder from the command line. @throws UsageError naming the bad option. */
function trainOptions(values: Values) {
  const { kind: env, params } = envOpt(values.env, values.params);
  const algorithm = (values.algorithm ?? '') as ExperimentAlgorithm;
  if (!(RL_ALGORITHMS as readonly string[]).includes(algorithm)) {
    throw new UsageError(`--algorithm must be ${RL_ALGORITHMS.slice(0, -1).join(', ')} or ${RL_ALGORITHMS.at(-1)}, got '${values.algorithm ?? ''}'`);
  }
  if (values.server !== undefined && !/^https?:\/\/\S+$/.test(values.server)) throw new UsageError(`--server must be an http(s) URL, got '${values.server}'`);
  const hyper: Record<string, number | boolean | string> = {};
  for (const [flag, key, lo, hi] of [['lr', 'lr', 1e-12, 1], ['epochs', 'epochs', 1, 100], ['minibatch', 'minibatchSize', 1, 4096], ['gamma-traj', 'gammaTraj', 0, 1], ['ent-coef', 'entCoef', 0, 1]] as const) {
    const v = num(flag, values[flag], lo, hi);
    if (v !== undefined) hyper[key] = v;
  }
  if (values['no-pack']) hyper.pack = false;
  const group = values['reflection-group'];
  if (group !== undefined) {
    if (!(REFLECTION_GROUPS as readonly string[]).includes(group)) throw new UsageError(`--reflection-group must be ${REFLECTION_GROUPS.join(' or ')}, got '${group}'`);
    if (algorithm !== 'lamer') throw new UsageError(`--reflection-group applies to --algorithm lamer only (${algorithm} trains no reflections)`);
    hyper.reflectionGroup = group;
  }
  const temperature = num('temperature', values.temperature, 0, 10) ?? 1;
  const opts = {
    env, algorithm, params,
    iterations: intOpt('iterations', values.iterations, 10, 1),
    tasksPerIter: intOpt('tasks-per-iter', values['tasks-per-iter'], 16, 1),
    group: intOpt('group', values.group, 8, 1),
    seed: intOpt('seed', values.seed, 0),
    concurrency: intOpt('concurrency', values.concurrency, 32, 1),
    sampling: { temperature, topP: num('top-p', values['top-p'], 1e-9, 1) ?? 1, topK: intOpt('top-k', values['top-k'], 0, 0, MAX_TOP_K) },
    availableActions: values['available-actions'] ?? false,
    hyperparameters: hyper,
    server: values.server ?? '',
    ...(values['max-minutes'] !== undefined ? { maxWallSeconds: 60 * num('max-minutes', values['max-minutes'], 0.01, 1e6)! } : {}),
    ...heldOutOptions(values),
    klEvery: intOpt('kl-every', values['kl-every'], 1, 0),
    apiKey: values['api-key'] ?? process.env.LAMER_API_KEY,
  };
  return { opts, out: path.resolve(values.out ?? `train-${algorithm}`) };
}

type TrainOptions = ReturnType<typeof trainOptions>['opts'];

/**
 * Progress callbacks of the experiment: a bar per phase (rollouts, training job) on a TTY unless
 * `quiet`, else a line every quarter of a phase; log lines are timestamped on stderr.
 * `stop` ends the current bar.
 */
function progress(quiet: boolean) {
  const bars = !quiet && process.stderr.isTTY === true;
  let bar: cliProgress.SingleBar | null = null;
  const startBar = (format: string, total: number) => {
    bar?.stop();
    bar = bars ? new cliProgress.SingleBar({ stream: process.stderr, format, hideCursor: true }, cliProgress.Presets.shades_classic) : null;
    bar?.start(total, 0);
  };
  const stop = () => {
    bar?.stop();
    bar = null;
  };
  let phase = '';
  let lastPct = -1;
  return {
    stop,
    log: (line: string) => {
      stop();
      phase = '';
      console.error(`[${new Date().toISOString().slice(11, 19)}] ${line}`);
    },
    onRollout: (done: number, total: number) => {
      if (phase !== 'rollout') {
        phase = 'rollout';
        startBar('rollouts {bar} {value}/{total} sessions | {duration_formatted}', total);
      }
      bar?.update(done);
      if (!bars && (done === total || done % Math.max(1, Math.floor(total / 4)) === 0)) console.error(`  rollouts ${done}/${total}`);
    },
    onJob: (fraction: number) => {
      if (phase !== 'job') {
        phase = 'job';
        lastPct = -1;
        startBar('training {bar} {percentage}% | {duration_formatted}', 100);
      }
      const pct = Math.round(100 * fraction);
      bar?.update(pct);
      if (!bars && pct >= lastPct + 25) {
        lastPct = pct;
        console.error(`  training ${pct}%`);
      }
    },
  };
}

/** Write the learning curve so far as `<out>/learning-curve.json` (whole: ./train-resume.ts writeAtomic) and `.svg`. */
function writeCurve(out: string, opts: TrainOptions, points: CurvePoint[], run: Omit<CurveFile, 'config' | 'points'>): void {
  const curve: CurveFile = { config: { ...opts, apiKey: undefined }, ...run, points };
  writeAtomic(path.join(out, 'learning-curve.json'), JSON.stringify(curve, null, 2) + '\n');
  writeFileSync(path.join(out, 'learning-curve.svg'), learningCurveSvg([{ label: opts.algorithm, points }], `${opts.algorithm} on ${opts.env}: ${opts.tasksPerIter} tasks/iteration, G=${opts.group}`));
}

/**
 * What `lamer train` writes after each iteration (./train-resume.ts module doc): the trained
 * checkpoint's copy (in-process), the job's file, the curve, then the previous checkpoint copy removed.
 */
function iterationRecorder(out: string, opts: TrainOptions, inProcess: RunningServer | null, startedAt: string) {
  return async (points: CurvePoint[], state: IterationState): Promise<void> => {
    const p = points[points.length - 1]!;
    const dir = inProcess && p.trainedVersion ? (await inProcess.app.models.get(p.trainedVersion))?.checkpointDir : undefined;
    if (dir) keepCheckpoint(out, p.trainedVersion!, dir);
    writeJob(out, p.iteration, state.job);
    writeCurve(out, opts, points, { startVersion: state.startVersion, heldOutStart: state.heldOutStart, startedAt });
    if (dir) pruneCheckpoints(out, p.trainedVersion!);
  };
}

/**
 * The earlier run in `out` that --resume continues, or null when there is none (a line says so).
 * @throws Error naming the file when it is no curve, or listing the settings that differ from it.
 */
function priorRun(out: string, opts: TrainOptions): CurveFile | null {
  const prior = readCurve(out);
  if (!prior) {
    console.error(`--resume: no learning-curve.json in ${out}: starting at iteration 0`);
    return null;
  }
  const conflicts = resumeConflicts(prior.config, opts);
  const file = path.join(out, 'learning-curve.json');
  if (conflicts.length > 0) throw new Error(`--resume: ${file} was made with other settings (${conflicts.join('; ')})`);
  return prior;
}

/**
 * Copy checkpoint folder `dir` into the in-process server's data directory as
 * `checkpoints/<version>` and register it; its parent as recorded when the server has it.
 */
async function importCheckpoint(srv: RunningServer, dataDir: string, version: string, dir: string): Promise<void> {
  const dest = path.join(dataDir, 'checkpoints', version);
  rmSync(dest, { recursive: true, force: true }); // unregistered (resumeFrom asked): a leftover of a crash
  cpSync(dir, dest, { recursive: true });
  let parent: string | undefined;
  try {
    parent = JSON.parse(readFileSync(path.join(dir, 'model.json'), 'utf8'))?.userDefinedMetadata?.lamer?.meta?.parent;
  } catch {
    parent = undefined;
  }
  const known = parent !== undefined && (await srv.app.models.get(parent)) !== undefined;
  await srv.app.models.registerCheckpoint(version, dest, { ...(known ? { parent } : {}), metrics: { resumedFrom: dir } });
}

/**
 * Check that `out` (an absolute path) is a writable directory or can be created as one: the path
 * itself when it exists, else its nearest existing ancestor, must be a directory the process may
 * write in. Nothing is created. @throws Error with a one-line message naming --out.
 */
export function checkOutDir(out: string): void {
  let dir = out;
  for (;;) {
    let st;
    try {
      st = statSync(dir);
    } catch {
      const up = path.dirname(dir);
      if (up === dir) throw new Error(`--out ${out}: no existing parent directory`);
      dir = up;
      continue;
    }
    if (!st.isDirectory()) throw new Error(dir === out ? `--out ${out} is not a directory` : `--out ${out}: ${dir} is not a directory`);
    try {
      accessSync(dir, fsConstants.W_OK);
    } catch {
      throw new Error(dir === out ? `--out ${out} is not writable` : `--out ${out}: ${dir} is not writable`);
    }
    return;
  }
}

/**
 * One line for an error that ended the run: an HTTP answer as "METHOD path: HTTP status body", a
 * request that got no answer as "cannot reach <server> (<why>)" (fetch's own message is only
 * "fetch failed"), anything else by its message.
 */
export function describeTrainFailure(err: unknown, server: string): string {
  if (err instanceof HttpError) return err.message;
  const e = err as { name?: string; message?: string };
  if ((err instanceof TypeError && e.message === 'fetch failed') || e?.name === 'TimeoutError') {
    return `cannot reach ${server} (${describeHttpFailure(err)})`;
  }
  return err instanceof Error ? err.message : String(err);
}

/**
 * The command line of `lamer train` (arguments after the command) as experiment options, the
 * output folder and the parsed flags; or the exit code when it asked for --help (printed, 0) or
 * was wrong (one usage line on stderr, 2).
 */
export function trainCommand(argv: string[]): { code: number } | { opts: TrainOptions; out: string; values: Values } {
  const parsed = parseCommand('train', argv, OPTIONS, HELP);
  if ('code' in parsed) return parsed;
  try {
    return { ...trainOptions(parsed.values), values: parsed.values };
  } catch (e) {
    return { code: usageError('train', e) };
  }
}

/**
 * Start the in-process server (no --server): data in --data-dir, or a new temporary folder that is
 * kept. @returns it with its data folder, or the exit code after one line on stderr (a --data-dir
 * another server owns, or unusable).
 */
async function startInProcess(values: Values): Promise<{ srv: RunningServer; dataDir: string; tmp: string | null } | { code: number }> {
  const tmp = values['data-dir'] === undefined ? mkdtempSync(path.join(tmpdir(), 'lamer-train-')) : null;
  const dataDir = tmp ?? path.resolve(values['data-dir']!);
  const { startServer, StartupError } = await import('../server.js');
  try {
    const srv = await startServer({
      port: 0, host: '127.0.0.1', dataDir, engine: 'builtin', apiKeys: [], logLevel: 'warn',
      ...(values['base-model-dir'] ? { baseModelDir: path.resolve(values['base-model-dir']) } : {}),
    });
    console.error(`started an in-process server at ${srv.url} (data ${dataDir})`);
    return { srv, dataDir, tmp };
  } catch (e) {
    if (tmp) rmSync(tmp, { recursive: true, force: true });
    // --data-dir owned by a running server (one owner per directory) or unusable: one line.
    if (!(e instanceof StartupError)) throw e;
    console.error(`lamer train: cannot start the in-process server: ${e.message.replace(/^LAMER_DATA_DIR=/, '--data-dir ')}`);
    return { code: 1 };
  }
}

export async function run(argv: string[]): Promise<number> {
  const cmd = trainCommand(argv);
  if ('code' in cmd) return cmd.code;
  const { opts, out, values } = cmd;
  // Checked before any work, so that a wrong --out, --server or --resume costs no rollouts or training.
  let prior: CurveFile | null = null;
  try {
    checkOutDir(out);
    if (values.resume) prior = priorRun(out, opts);
    if (opts.server) await checkServer(opts.server);
    try {
      ensureDirSync(out);
    } catch (e) {
      throw new Error(`--out: ${(e as Error).message}`);
    }
  } catch (e) {
    console.error(`lamer train: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  }

  let inProcess: RunningServer | null = null;
  // A temporary data directory (no --data-dir): kept, and named when the run ends.
  let keptTmpDir: string | null = null;
  let dataDir = '';
  if (!opts.server) {
    const started = await startInProcess(values);
    if ('code' in started) return started.code;
    ({ srv: inProcess, dataDir, tmp: keptTmpDir } = started);
    opts.server = inProcess.url;
    opts.apiKey = undefined;
  }

  const p = progress(values.quiet ?? false);
  try {
    const srv = inProcess;
    const importInto = srv ? (v: string, dir: string) => importCheckpoint(srv, dataDir, v, dir) : null;
    const access = { ...httpVersions(opts.server, opts.apiKey), importCheckpoint: importInto };
    const resumed = prior ? await resumeFrom(prior, out, access) : null;
    for (const line of resumed?.notes ?? []) p.log(`--resume: ${line}`);
    if (resumed) p.log(`--resume: continuing after iteration ${resumed.points.length - 1} of ${prior!.points.length} recorded`);
    const kept = resumed?.points ?? [];
    const startedAt = (kept.length > 0 && prior!.startedAt) || new Date().toISOString();
    const startVersion = prior?.startVersion ?? kept[0]?.rolloutVersion ?? '';
    const resume = kept.length > 0 ? { points: kept, startVersion, heldOutStart: prior!.heldOutStart ?? null, startedAt } : undefined;
    pruneJobs(out, kept.length);
    const onPoint = iterationRecorder(out, opts, inProcess, startedAt);
    const result = await runExperiment({ ...opts, resume, log: p.log, onRollout: p.onRollout, onJob: p.onJob, onPoint });
    p.stop();
    writeAtomic(path.join(out, 'learning-curve.json'), JSON.stringify(result, null, 2) + '\n');
    console.log(formatCurve(result.points));
    console.log(`wrote ${path.join(out, 'learning-curve.json')} and learning-curve.svg (${result.wallSeconds.toFixed(0)} s)`);
    if (keptTmpDir) console.log(keptDirNote(keptTmpDir));
    return 0;
  } catch (err) {
    p.stop();
    console.error(`lamer train: ${describeTrainFailure(err, opts.server)}`);
    if (keptTmpDir) console.error(keptDirNote(keptTmpDir));
    return 1;
  } finally {
    await inProcess?.close();
  }
}

/** The line that names a kept temporary data directory. */
const keptDirNote = (dir: string): string =>
  `kept the temporary data directory ${dir} (checkpoints of the trained versions and the database; --data-dir chooses one; remove it when done)`;
