/**
 * `lamer eval --env NAME --tasks N --attempts K --concurrency C [--server URL]
 *  [--api-key KEY] --seed S --out FILE [--policy model|random|solver]`
 *
 * Plays N held-out tasks (eval seed range) and prints pass@1..K, mean return by attempt,
 * invalid-action rate and trajectory diversity; writes the full report (metrics and every
 * session) as JSON. Policy 'model' (default) plays through the HTTP API of `--server`, or of a
 * server started in-process (port 0, a temporary data dir) when no URL is given; 'random' and
 * 'solver' are the reference policies, played locally with the same metrics (src/eval/harness.ts).
 *
 * Exit code: 0 when every session was played (won or lost); 1 when any session failed with an
 * error (how many is printed; the report is still written) or the server cannot be used; 2 for
 * bad options; 128 + the signal number on SIGINT / SIGTERM, after the in-process server is closed
 * and its temporary data directory removed.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { constants as osConstants, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import type { parseArgs } from 'node:util';
import cliProgress from 'cli-progress';
import { runEval, checkServer, EvalAbortError, PAPER_EVAL_SAMPLING, type EvalPolicy, type EvalReport } from '../eval/harness.js';
import type { RetryInfo } from '../eval/http.js';
import { defaultLimits } from '../config.js';
import { EVAL_SEED_COUNT, makeEnv, MAX_STEPS, type EnvParams } from '../envs/index.js';
import {
  checkEvalSeeds, checkOutPath, checkSessionLimits, choiceOpt, envOpt, inProcessSessionLimits, intOpt, MAX_TOP_K, numOpt, parseCommand, usageError, UsageError,
} from './args.js';

const HELP = `usage: lamer eval --env NAME [options]

  --env NAME           minesweeper | sokoban (default sizes), or a sized name: minesweeper-RxC-M
                       (rows x cols, mines; e.g. minesweeper-6x6-3) or sokoban-RxC-B (rows x cols,
                       boxes; e.g. sokoban-6x6-2) (required)
  --tasks N            held-out tasks (default 128)
  --attempts K         attempts per session, pass@1..K (default 3; a server takes at most its
                       LAMER_MAX_ATTEMPTS, ${defaultLimits.maxAttempts} unless set)
  --concurrency C      sessions in flight (default 8)
  --seed S             offset into the eval seed range [1e9, 2^32) (default 0)
  --out FILE           write the JSON report here (default: eval-results/ENV-POLICY-TIME.json under
                       the current folder, created if missing; git ignores eval-results/)
  --policy P           model (default) | random | solver
  --server URL         server base URL (policy model); without it one is started in-process
  --api-key KEY        API key sent as "Authorization: Bearer KEY" (default: $LAMER_API_KEY)
  --engine E           engine of the in-process server: builtin (default) | test
  --trials R           sessions per task (default 1)
  --max-steps T        turns per attempt (default 7; a server takes at most its
                       LAMER_MAX_STEPS_CAP, ${defaultLimits.maxStepsCap} unless set)
  --temperature X --top-p X --top-k N   sampling (default 0.7 / 0.8 / 20, the paper's eval)
  --available-actions  send the env's legal actions with each step
  --independent-attempts  each attempt its own single-attempt session (no reflection, no memory):
                       independent retries, as the paper evaluates single-attempt baselines
  --model-version V    pin a model version
  --params JSON        env parameters, e.g. '{"mines":5}' (minesweeper: rows, cols, mines;
                       sokoban: rows, cols, boxes, minMoves, maxMoves)
  --quiet              no progress bar`;

/** Folder of the reports written without --out, relative to the current folder (git ignores it). */
export const DEFAULT_OUT_DIR = 'eval-results';

/**
 * Where a report goes without --out: DEFAULT_OUT_DIR/<env name>-<policy>-<UTC time>.json, e.g.
 * eval-results/minesweeper-6x6-3-model-20250101T120000Z.json. @throws RangeError for bad env params.
 */
export function defaultOutPath(env: string, params: EnvParams | undefined, policy: EvalPolicy, now = new Date()): string {
  const stamp = now.toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
  return join(DEFAULT_OUT_DIR, `${makeEnv(env, params).name}-${policy}-${stamp}.json`);
}

/** The printed summary of a report. */
export function formatReport(r: EvalReport): string {
  const m = r.metrics;
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  const lines = [
    `${r.env}  policy=${r.policy}${r.server ? `  server=${r.server}` : ''}  tasks=${r.tasks} trials=${r.trials} attempts=${r.attempts} maxSteps=${r.maxSteps}  seeds ${r.seeds.first}..${r.seeds.last}  ${r.durationS.toFixed(1)} s`,
    `pass@k:            ${Object.entries(m.passAtK).map(([k, v]) => `pass@${k} ${pct(v)}`).join('  ')}`,
    `mean return:       ${m.meanReturnByAttempt.map((a) => `attempt ${a.attempt}: ${a.meanReturn === null ? '-' : a.meanReturn.toFixed(2)} (n=${a.sessions})`).join('  ')}`,
    `invalid actions:   ${pct(m.invalidActionRate)}`,
    `trajectory diversity: ${m.trajectoryDiversity.toFixed(3)} nats (mean over tasks)`,
  ];
  // An errored session stays in the denominators: its interrupted attempt counts as a failure of
  // the policy in pass@k and its partial return in the mean returns. Say so next to the numbers.
  if (m.errors) {
    lines.push(
      `errors: ${m.errors} of ${m.sessions} sessions failed with errors; pass@k and mean returns above count each as a failed attempt (first: ${r.sessions.find((s) => s.error)?.error})`,
    );
  }
  return lines.join('\n');
}

const OPTIONS = {
  env: { type: 'string' }, tasks: { type: 'string' }, attempts: { type: 'string' }, concurrency: { type: 'string' },
  seed: { type: 'string' }, out: { type: 'string' }, policy: { type: 'string' }, server: { type: 'string' },
  'api-key': { type: 'string' }, engine: { type: 'string' }, trials: { type: 'string' }, 'max-steps': { type: 'string' },
  temperature: { type: 'string' }, 'top-p': { type: 'string' }, 'top-k': { type: 'string' },
  'available-actions': { type: 'boolean' }, 'independent-attempts': { type: 'boolean' }, 'model-version': { type: 'string' }, params: { type: 'string' },
  quiet: { type: 'boolean' },
} as const;

type Values = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; strict: true }>>['values'];

/** The harness options and the in-process engine from the command line. @throws UsageError naming the bad option. */
function evalOptions(values: Values) {
  const { kind: env, params } = envOpt(values.env, values.params);
  const policy = choiceOpt<EvalPolicy>('policy', values.policy, ['model', 'random', 'solver'], 'model');
  const engine = choiceOpt('engine', values.engine, ['builtin', 'test'] as const, 'builtin');
  if (values.server !== undefined && !/^https?:\/\/\S+$/.test(values.server)) throw new UsageError(`--server must be an http(s) URL, got '${values.server}'`);
  const opts = {
    env, policy, params,
    tasks: intOpt('tasks', values.tasks, 128, 1, EVAL_SEED_COUNT),
    attempts: intOpt('attempts', values.attempts, 3, 1),
    concurrency: intOpt('concurrency', values.concurrency, 8, 1),
    seed: intOpt('seed', values.seed, 0, 0, EVAL_SEED_COUNT - 1),
    trials: intOpt('trials', values.trials, 1, 1),
    maxSteps: values['max-steps'] === undefined ? undefined : intOpt('max-steps', values['max-steps'], 7, 1),
    server: values.server,
    apiKey: values['api-key'] ?? process.env.LAMER_API_KEY,
    sampling: {
      temperature: numOpt('temperature', values.temperature, PAPER_EVAL_SAMPLING.temperature, 0, 10),
      topP: numOpt('top-p', values['top-p'], PAPER_EVAL_SAMPLING.topP, 1e-9, 1),
      topK: intOpt('top-k', values['top-k'], PAPER_EVAL_SAMPLING.topK, 0, MAX_TOP_K),
    },
    availableActions: values['available-actions'] ?? false,
    independentAttempts: values['independent-attempts'] ?? false,
    modelVersion: values['model-version'],
  };
  checkEvalSeeds('--seed + --tasks', opts.seed, opts.tasks);
  // A server started here has this process's limits; one given by --server has its own and says so
  // when the first session is created (lamer eval then stops with its answer, exit 1).
  if (policy === 'model' && opts.server === undefined) checkSessionLimits(inProcessSessionLimits(), opts.attempts, opts.maxSteps ?? MAX_STEPS[env]);
  if (values.out !== undefined) checkOutPath('out', values.out);
  return { opts, engine };
}

/** A server started in this process on a temporary data directory; `close` stops it and removes the directory. */
interface InProcessServer {
  url: string;
  close(): Promise<void>;
}

/**
 * Start a server in this process (port 0, engine `engine`, a temporary data directory). Until it is
 * closed, Ctrl-C / SIGTERM stop it, remove its directory and exit 128 + the signal number (the run
 * is abandoned; no report is written). @throws what startServer throws (the directory is removed).
 */
async function startInProcessServer(engine: 'builtin' | 'test', quiet: boolean): Promise<InProcessServer> {
  const dir = mkdtempSync(join(tmpdir(), 'lamer-eval-'));
  let server: { close(): Promise<void> } | null = null;
  let stopping = false;
  const onSignal = (signal: 'SIGINT' | 'SIGTERM') => {
    if (stopping) return;
    stopping = true;
    console.error(`lamer eval: ${signal}: stopping, removing ${dir}`);
    const closed = server ? server.close().catch(() => {}) : Promise.resolve();
    void closed.finally(() => {
      rmSync(dir, { recursive: true, force: true });
      process.exit(128 + osConstants.signals[signal]);
    });
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const removeSignalHandlers = () => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  };
  const { startServer } = await import('../server.js');
  let srv;
  try {
    srv = await startServer({ port: 0, host: '127.0.0.1', dataDir: dir, engine, apiKeys: [], logLevel: 'error' });
  } catch (e) {
    removeSignalHandlers();
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  server = srv;
  if (!quiet) console.error(`started an in-process server at ${srv.url} (engine ${engine}, data ${dir})`);
  return {
    url: srv.url,
    async close() {
      try {
        await srv.close();
      } finally {
        rmSync(dir, { recursive: true, force: true });
        removeSignalHandlers();
      }
    },
  };
}

/**
 * Play the sessions (progress bar on a TTY unless quiet), print the summary, write the report to
 * `out` when given. @returns the exit code: 1 when the report cannot be written, any session
 * failed with an error, or the harness gave up (EvalAbortError); else 0.
 */
async function playAndReport(opts: Parameters<typeof runEval>[0], out: string, quiet: boolean): Promise<number> {
  const bar = !quiet && process.stderr.isTTY === true
    ? new cliProgress.SingleBar(
        { stream: process.stderr, format: 'eval {bar} {value}/{total} sessions | solved {solved} | {duration_formatted} elapsed, eta {eta_formatted}', hideCursor: true },
        cliProgress.Presets.shades_classic,
      )
    : null;
  let solved = 0;
  // While the server does not answer, say so (at most every 5 s) instead of retrying silently.
  let toldAt = -Infinity;
  const onRetry = (r: RetryInfo) => {
    if (quiet || Date.now() - toldAt < 5000) return;
    toldAt = Date.now();
    console.error(`lamer eval: ${r.method} ${r.path}: ${r.network ? 'no answer' : 'answered'} (${r.why}); try ${r.nextTry} of ${r.tries} in ${(r.waitMs / 1000).toFixed(1)} s`);
  };
  try {
    bar?.start(opts.tasks * (opts.trials ?? 1), 0, { solved: 0 });
    const report = await runEval({
      ...opts,
      onRetry,
      onSession: (done, _total, s) => {
        if (s.attempts.some((a) => a.success)) solved++;
        bar?.update(done, { solved });
      },
    });
    bar?.stop();
    console.log(formatReport(report));
    // biome-ignore lint/complexity/noUselessLoneBlockStatements: a harmless block, kept (not reindented)
    {
      try {
        mkdirSync(dirname(resolve(out)), { recursive: true });
        writeFileSync(out, JSON.stringify(report, null, 2) + '\n');
      } catch (e) {
        // checked before playing, but the disk can still refuse (full, read-only, removed meanwhile)
        console.error(`lamer eval: could not write the report to ${out}: ${(e as Error).message}`);
        return 1;
      }
      console.log(`wrote ${out}`);
    }
    // Any session that failed with an error (not a lost game) makes the run a failure.
    if (report.metrics.errors > 0) {
      console.error(`lamer eval: ${report.metrics.errors} of ${report.metrics.sessions} sessions failed with errors (first: ${report.sessions.find((x) => x.error)?.error})`);
      return 1;
    }
    return 0;
  } catch (e) {
    if (!(e instanceof EvalAbortError)) throw e;
    console.error(`lamer eval: ${e.message}`);
    return 1;
  } finally {
    bar?.stop();
  }
}

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommand('eval', argv, OPTIONS, HELP);
  if ('code' in parsed) return parsed.code;
  const values = parsed.values;
  let opts;
  let engine: 'builtin' | 'test';
  try {
    ({ opts, engine } = evalOptions(values));
  } catch (e) {
    return usageError('eval', e);
  }
  if (opts.policy === 'model' && opts.server) {
    try {
      await checkServer(opts.server);
    } catch (e) {
      console.error(`lamer eval: ${(e as Error).message}`);
      return 1;
    }
  }
  let inProcess: InProcessServer | null = null;
  if (opts.policy === 'model' && !opts.server) {
    inProcess = await startInProcessServer(engine, values.quiet ?? false);
    opts.server = inProcess.url;
    opts.apiKey = undefined;
  }
  try {
    return await playAndReport(opts, values.out ?? defaultOutPath(opts.env, opts.params, opts.policy), values.quiet ?? false);
  } finally {
    await inProcess?.close();
  }
}
