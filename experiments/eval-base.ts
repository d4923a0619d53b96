/**
 * `npm run eval:base [-- options]`: the held-out rows of a base checkpoint (default models/base)
 * on MineSweeper 6x6/3 and Sokoban 6x6/2, played by the eval harness (src/eval/harness.ts runEval,
 * what `lamer eval` runs) against one in-process server on that checkpoint:
 *   (a) K-attempt LaMer sessions with reflection_only memory, no availableActions;
 *   (b) the same with availableActions;
 *   (c) independent retries (K single-attempt sessions, no memory; `lamer eval --independent-attempts`);
 * on the same held-out tasks (eval seeds from --seed), with the paper's eval sampling 0.7 / 0.8 / 20.
 * Prints a markdown table (pass@1..K, invalid-action rate, reflections: share naming the MineSweeper
 * cell that ended the attempt, share repeating the previous one verbatim) and the paired bootstrap
 * interval of pass@K (a) - (c) per game (maths: src/eval/base-policy.ts, src/eval/compare.ts), and
 * per game the checkpoint's held-out loss: nats per trained token of the reflection and the action
 * text of solver demonstrations of the first --loss-sessions held-out tasks (the same eval seeds),
 * laid out as SFT trains them (src/recipes/heldout-loss.ts heldOutDemoLoss), a number that moves with
 * training even while pass@k is near 0;
 * writes the figures as JSON (--out, default experiments/results/base-policy.json; runs with fewer than
 * 128 tasks write to the temp folder unless --out is given, so a quick run never replaces the
 * full one), the full eval reports with --reports DIR, and with --results FILE replaces the marked
 * section `base-policy` of FILE (docs/RESULTS.md).
 *
 * Options: --model DIR, --tasks N (128), --attempts K (3), --seed S (0), --concurrency C (8),
 * --games LIST (minesweeper-6x6-3,sokoban-6x6-2), --rows LIST (lamer,lamer-avail,independent),
 * --out FILE, --reports DIR, --results FILE, --resamples B (10000), --loss-sessions N (32; 0: no
 * held-out loss), -h / --help (the usage text on stdout, exit 0, nothing run).
 * Exit code: 0; 1 when a session failed with an error (the figures are still written), or for a
 * later failure such as a write the disk refuses (one line); 2 for bad options (one line, before
 * the model is loaded: the counts, the server's session limits, and the --out, --reports and
 * --results paths; a value that starts with '-' is written --option=VALUE).
 */
import { createHash } from 'node:crypto';
import { accessSync, constants, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { checkEvalSeeds, checkOutFile, checkOutFolder, checkSessionLimits, inProcessSessionLimits, intOpt, orFail, parseArgsMessage } from '../src/cli/args.js';
import { ensureDirSync } from '../src/ensure-dir.js';
import { EVAL_SEED_COUNT, MAX_STEPS, parseEnvName } from '../src/envs/index.js';
import { basePolicyMarkdown, BASE_ROWS, BASE_ROW_SPECS, rowDifference, rowSummary, type BaseRow, type GameResult } from '../src/eval/base-policy.js';
import { hasSection, replaceSection, sectionMarkers } from '../src/eval/compare.js';
import { PAPER_EVAL_SAMPLING, runEval, type EvalReport } from '../src/eval/harness.js';
import { heldOutDemoLoss } from '../src/recipes/heldout-loss.js';
import { readCheckpointMetadata } from '../src/model/checkpoint.js';
import { countParams } from '../src/model/gpt.js';
import { startServer } from '../src/server.js';
import { createModelIO } from '../src/training/run/gpt-adapter.js';

const repoRoot = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');

function fail(msg: string): never {
  console.error(`eval:base: ${msg}`);
  process.exit(2);
}

const HELP = `usage: npm run eval:base -- [options]

Plays the held-out tasks of a base checkpoint: (a) K-attempt LaMer sessions with reflections,
(b) the same with availableActions, (c) K independent single attempts; prints the markdown table
and the per-game held-out loss; writes the figures as JSON.

  --model DIR            checkpoint folder (default models/base)
  --tasks N              held-out tasks per game (default 128)
  --attempts K           attempts per session (default 3)
  --seed S               eval seed offset of the held-out tasks (default 0)
  --concurrency C        sessions played at once (default 8)
  --games LIST           comma-separated envs (default minesweeper-6x6-3,sokoban-6x6-2)
  --rows LIST            comma-separated rows (a), (b), (c) (default ${BASE_ROWS.join(',')})
  --out FILE             the figures as JSON (default experiments/results/base-policy.json; with
                         fewer than 128 tasks, base-policy-<N>tasks.json in the temp folder);
                         a missing folder is created
  --reports DIR          also write each row's full eval report there, creating the folder
                         if missing (default: none)
  --results FILE         replace the marked section base-policy of FILE, an existing file
                         that has one, e.g. docs/RESULTS.md (default: none)
  --resamples B          bootstrap resamples of the pass@K (a) - (c) interval (default 10000)
  --loss-sessions N      held-out demonstration sessions per game for the held-out loss
                         (default 32; 0: no held-out loss)
  -h, --help             print this text and exit

Exit code: 0; 1 when a session failed with an error (the figures are still written) or a later
step failed; 2 for bad options, found before the model is loaded.`;

const { values } = (() => {
  try {
    return parseArgs({
      strict: true,
      options: {
        model: { type: 'string', default: path.join(repoRoot, 'models', 'base') },
        tasks: { type: 'string', default: '128' },
        attempts: { type: 'string', default: '3' },
        seed: { type: 'string', default: '0' },
        concurrency: { type: 'string', default: '8' },
        games: { type: 'string', default: 'minesweeper-6x6-3,sokoban-6x6-2' },
        rows: { type: 'string', default: BASE_ROWS.join(',') },
        out: { type: 'string' },
        reports: { type: 'string' },
        results: { type: 'string' },
        resamples: { type: 'string', default: '10000' },
        'loss-sessions': { type: 'string', default: '32' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (e) {
    return fail(parseArgsMessage(e));
  }
})();
if (values.help) {
  console.log(HELP);
  process.exit(0);
}

/** `n word` or `n words`: '1 task', '3 tasks'. */
const count = (n: number, word: string): string => `${n} ${word}${n === 1 ? '' : 's'}`;

/** `f()`, or exit 2 with its UsageError's line. */
const usage = <T>(f: () => T): T => orFail(f, fail);
const int = (name: string, v: string, min: number, max?: number): number => usage(() => intOpt(name, v, undefined, min, max));
// the rows and the held-out loss play eval seeds from --seed on: both counts stay within them
const tasks = int('tasks', values.tasks, 1, EVAL_SEED_COUNT);
const K = int('attempts', values.attempts, 1);
const seed = int('seed', values.seed, 0, EVAL_SEED_COUNT - 1);
const concurrency = int('concurrency', values.concurrency, 1);
const resamples = int('resamples', values.resamples, 1);
const lossSessions = int('loss-sessions', values['loss-sessions'], 0, EVAL_SEED_COUNT);
usage(() => checkEvalSeeds('--seed + --tasks', seed, tasks));
usage(() => checkEvalSeeds('--seed + --loss-sessions', seed, lossSessions));
const games = values.games.split(',').map((g) => g.trim()).filter(Boolean);
if (games.length === 0) fail(`--games: give at least one env (e.g. minesweeper-6x6-3), got '${values.games}'`);
for (const g of games) {
  try { parseEnvName(g); } catch (e) { fail(`--games: ${(e as Error).message}`); }
}
const rows = values.rows.split(',').map((r) => r.trim()).filter(Boolean) as BaseRow[];
if (rows.length === 0) fail(`--rows: give at least one of ${BASE_ROWS.join(', ')}, got '${values.rows}'`);
for (const r of rows) if (!BASE_ROWS.includes(r)) fail(`--rows: '${r}' is not one of ${BASE_ROWS.join(', ')}`);
// the in-process server refuses a session past its limits: K attempts of each game's turns
usage(() => checkSessionLimits(inProcessSessionLimits(), K, Math.max(...games.map((g) => MAX_STEPS[parseEnvName(g).kind]))));
const modelDir = path.resolve(values.model);
const out = values.out ?? (tasks >= 128 ? path.join(repoRoot, 'experiments', 'results', 'base-policy.json') : path.join(tmpdir(), `base-policy-${tasks}tasks.json`));

// The output paths, before the model is loaded: a bad one is found now and not after the run.
usage(() => checkOutFile('out', out));
if (values.reports) usage(() => checkOutFolder('reports', values.reports!));
if (values.results) checkResultsFile(values.results);

/**
 * --results FILE: an existing, writable file with the marked base-policy section that the run
 * replaces (src/eval/compare.ts replaceSection would append one to any other file). Exits 2 with
 * one line otherwise.
 */
function checkResultsFile(file: string): void {
  let doc: string;
  try {
    doc = readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    fail(`--results ${file}: ${code === 'EISDIR' ? 'a folder' : code ?? (e as Error).message} (an existing file with a base-policy section, e.g. docs/RESULTS.md)`);
  }
  try {
    accessSync(file, constants.W_OK);
  } catch {
    fail(`--results ${file} is not writable`);
  }
  const { begin, end } = sectionMarkers('base-policy');
  if (!hasSection(doc, 'base-policy')) fail(`--results ${file} has no base-policy section (${begin} ... ${end}) to replace`);
}

/** The evaluation, the held-out loss and the writes, once the options are checked. */
async function main(): Promise<void> {
  const meta = await readCheckpointMetadata(modelDir).catch((e: Error) => fail(`--model: ${e.message}`));
  let weightsBytes: Buffer;
  try {
    weightsBytes = readFileSync(path.join(modelDir, 'weights.bin'));
  } catch (e) {
    fail(`--model: ${modelDir}/weights.bin: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message} (a checkpoint is model.json + weights.bin)`);
  }
  const weightsSha256 = createHash('sha256').update(weightsBytes).digest('hex');
  const log = (line: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`);

  const dataDir = mkdtempSync(path.join(tmpdir(), 'lamer-eval-base-'));
  const server = await startServer({ port: 0, host: '127.0.0.1', dataDir, engine: 'builtin', apiKeys: [], logLevel: 'error', baseModelDir: modelDir });
  const stop = async () => { await server.close().catch(() => undefined); rmSync(dataDir, { recursive: true, force: true }); };
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => void stop().finally(() => process.exit(sig === 'SIGINT' ? 130 : 143)));

  const t0 = performance.now();
  const results: GameResult[] = [];
  const examples: Record<string, string[]> = {};
  let errors = 0;
  try {
    if (values.reports) ensureDirSync(values.reports);
    for (const env of games) {
      const { kind, params } = parseEnvName(env);
      const reports = new Map<BaseRow, EvalReport>();
      for (const row of rows) {
        const spec = BASE_ROW_SPECS[row];
        log(`${env} ${spec.label}: ${count(tasks, 'task')} x ${count(K, 'attempt')}`);
        const report = await runEval({
          env: kind, params, tasks, attempts: K, concurrency, seed, policy: 'model', server: server.url,
          sampling: PAPER_EVAL_SAMPLING, availableActions: spec.availableActions, independentAttempts: spec.independentAttempts,
          onSession: (done, total) => { if (done % 16 === 0 || done === total) log(`  ${done}/${total} sessions`); },
        });
        reports.set(row, report);
        errors += report.metrics.errors;
        if (values.reports) writeFileSync(path.join(values.reports, `${env}-${row}.json`), JSON.stringify(report) + '\n');
        log(`  pass@k ${JSON.stringify(report.metrics.passAtK)}, invalid ${(100 * report.metrics.invalidActionRate).toFixed(1)}%, ${report.durationS.toFixed(0)} s`);
      }
      const a = reports.get('lamer');
      const c = reports.get('independent');
      results.push({
        env,
        rows: [...reports].map(([row, r]) => rowSummary(row, r)),
        lamerMinusIndependent: a && c ? rowDifference(a.sessions, c.sessions, K, resamples) : null,
      });
      examples[env] = (a ?? reports.get('lamer-avail'))?.sessions.flatMap((s) => s.attempts.flatMap((x) => (x.reflection ? [x.reflection] : []))).slice(0, 3) ?? [];
    }
  } finally {
    await stop();
  }

  // The held-out loss, with the server stopped so that it has the cores alone.
  if (lossSessions > 0) {
    const model = await (await createModelIO()).load(modelDir);
    try {
      for (const g of results) {
        const { kind, params } = parseEnvName(g.env);
        const l0 = performance.now();
        g.heldOutLoss = await heldOutDemoLoss(model, { env: kind, params, sessions: lossSessions, seed });
        const nats = (x: number | null) => (x === null ? '-' : x.toFixed(3));
        log(`${g.env} held-out loss on ${count(lossSessions, 'demonstration session')}: reflection ${nats(g.heldOutLoss.reflection.natsPerToken)} nats/token (${g.heldOutLoss.reflection.tokens} tokens), action ${nats(g.heldOutLoss.action.natsPerToken)} (${g.heldOutLoss.action.tokens} tokens), ${((performance.now() - l0) / 1000).toFixed(0)} s`);
      }
    } finally {
      model.dispose();
    }
  }
  const seconds = (performance.now() - t0) / 1000;

  const rel = path.relative(repoRoot, modelDir);
  const shownModel = rel === '' || rel.startsWith('..') || path.isAbsolute(rel) ? modelDir : rel;
  const header = [
    `Measured by \`npm run eval:base\` (experiments/eval-base.ts) on ${new Date().toISOString().slice(0, 10)}: checkpoint \`${shownModel}\``
      + ` (${meta.config.n_layer} layer${meta.config.n_layer === 1 ? '' : 's'} x ${meta.config.n_embd}, ${countParams(meta.config)} parameters, weights.bin sha256 ${weightsSha256.slice(0, 12)}...),`
      + ` ${count(tasks, 'held-out task')} per game (eval seeds from offset ${seed}), ${count(K, 'attempt')}, sampling ${JSON.stringify(PAPER_EVAL_SAMPLING)}; the same tasks in every row; ${(seconds / 60).toFixed(1)} minutes.`,
    '',
  ].join('\n');
  const exampleLines = Object.entries(examples).filter(([, xs]) => xs.length > 0).flatMap(([env, xs]) => ['', `First reflections written on ${env} (row a):`, '', ...xs.map((x) => `> ${x.replace(/\n/g, ' ')}`)]);
  const markdown = header + '\n' + basePolicyMarkdown(results, K) + (exampleLines.length ? exampleLines.join('\n') + '\n' : '');
  console.log(markdown);

  ensureDirSync(path.dirname(out));
  writeFileSync(out, JSON.stringify({
    generatedAt: new Date().toISOString(), seconds: Math.round(seconds),
    model: { dir: modelDir, config: meta.config, parameters: countParams(meta.config), weightsSha256, meta: meta.meta },
    tasks, attempts: K, seed, sampling: PAPER_EVAL_SAMPLING, lossSessions, games: results, exampleReflections: examples,
  }, null, 1) + '\n');
  log(`wrote ${out}`);
  if (values.results) {
    writeFileSync(values.results, replaceSection(readFileSync(values.results, 'utf8'), 'base-policy', markdown));
    log(`updated the base-policy section of ${values.results}`);
  }
  if (errors > 0) {
    console.error(`eval:base: ${count(errors, 'session')} failed with errors`);
    process.exitCode = 1;
  }
}

main().catch((e: unknown) => {
  // A failure after the checks (a write the disk still refuses, a server that does not start) is
  // one line and exit 1: left uncaught, tfjs-backend-wasm's handler rethrows it with its whole
  // source (tens of KB) and exit 7.
  console.error(`eval:base: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
