/**
 * `npm run experiment:base-scaling -- --out DIR --points 2x64:200,4x128:800 [options]`: how the SFT
 * base model's held-out play scales with model size and training length. Each point of the grid
 * (LAYERSxEMBD[hHEADS]:STEPS; heads n_embd/32, at least 1, unless given) is
 *   (a) trained from scratch by `npm run model:sft-chat -- --out DIR/<point>/model --layers L
 *       --embd E --heads H --steps S` plus the shared options (defaults: the shipped recipe,
 *       models/base/README.md) and `--sft-args`, then
 *   (b) evaluated by `npm run eval:base -- --model DIR/<point>/model --tasks N --rows lamer
 *       --out DIR/<point>/eval.json` (experiments/eval-base.ts: row (a), K = 3 attempt LaMer sessions
 *       with reflections, on held-out MineSweeper 6x6/3 and Sokoban 6x6/2 tasks),
 * both as child processes whose stdout / stderr go to DIR/<point>/{train,eval}.{out,err}.log;
 * progress lines (point, phase, elapsed seconds, the child's last log line) go to stderr.
 * A point whose eval.json exists is skipped, and a trained model whose evaluation is missing is
 * evaluated without retraining, so an interrupted grid resumes where it stopped. `--existing
 * POINT=CHECKPOINT` adds an already-trained checkpoint (evaluated, not trained; its tokens and
 * seconds from the learning-curve.json beside it; its config must be the point's).
 * At the end (alone with --report-only) it writes DIR/scaling.json (per point: layers, embd, heads,
 * parameters, steps, tokens trained, training seconds, per game pass@1..3, invalid-action rate,
 * share of reflections naming the ending cell, held-out loss of the reflection and the action text
 * in nats per token as eval:base measures it; src/eval/scaling.ts), DIR/scaling.md (the table,
 * also printed on stdout) and DIR/scaling.svg (pass@1 / pass@3 per game against log10 tokens
 * trained, one series per model size, the aims as grey lines).
 *
 * Usage: npm run experiment:base-scaling -- --out /tmp/scaling --points 2x64:200,4x128:800 --existing 4x128:700=models/base
 *
 * Options: --out DIR (required; new, or holding only a grid's own files), --points LIST,
 * --existing POINT=DIR[,...], --tasks N (64), --games LIST (minesweeper-6x6-3,sokoban-6x6-2),
 * --seed S (0: the eval seed offset of the held-out tasks; the training seed goes in --sft-args),
 * shared training options --sessions (6000), --curriculum (the shipped mix), --block (1024),
 * --micro-batch-tokens (2048), --minibatch (16), --lr (1e-3), --sft-args '...' (more
 * model:sft-chat options, split on whitespace; they override the shared ones), --report-only,
 * -h / --help (the usage text on stdout, exit 0, nothing run).
 * Exit code: 0; 1 when a point failed to train or evaluate (the others still run and are
 * reported); 2 for bad options (one line; a value that starts with '-' is written
 * --option=VALUE), or when model:sft-chat or eval:base refuses its options.
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readdirSync, readFileSync, readSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { checkEvalSeeds, intOpt, parseArgsMessage, UsageError } from '../src/cli/args.js';
import { ensureDirSync } from '../src/ensure-dir.js';
import { EVAL_SEED_COUNT, parseEnvName } from '../src/envs/index.js';
import {
  assertDistinct, defaultHeads, parseExisting, parsePoints, parseSftArgs, POINT_DIR_RE, scalingMarkdown, scalingRecord, scalingSvg, ScalingUsageError, sortRecords,
  type BaseEvalJson, type PointSpec, type PointTraining, type ScalingRecord,
} from '../src/eval/scaling.js';
import { readCheckpointMetadata } from '../src/model/checkpoint.js';

const repoRoot = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const SHIPPED_CURRICULUM = 'minesweeper:4x4/2,minesweeper:5x5/2,minesweeper:6x6/3@3,sokoban:5x5/1,sokoban:6x6/1,sokoban:6x6/2@3';
/** Files a grid writes at the top of its folder (beside one folder per point). */
const GRID_FILES = ['scaling.json', 'scaling.md', 'scaling.svg'];

function fail(msg: string): never {
  console.error(`experiment:base-scaling: ${msg}`);
  process.exit(2);
}
const log = (line: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`);

const HELP = `usage: npm run experiment:base-scaling -- --out DIR --points 2x64:200,4x128:800 [options]

Trains (npm run model:sft-chat) and evaluates (npm run eval:base, row lamer) one SFT base model per
point of the grid; writes DIR/scaling.json, DIR/scaling.md (also printed) and DIR/scaling.svg. A
point whose eval.json exists is skipped, so an interrupted grid resumes where it stopped.

  --out DIR              grid folder, required: new, or holding only a grid's own files
  --points LIST          comma-separated LAYERSxEMBD[hHEADS]:STEPS to train from scratch
                         (heads n_embd/32, at least 1, unless given; default: none)
  --existing LIST        comma-separated POINT=CHECKPOINT_DIR, already trained: evaluated only, its
                         tokens and seconds from its learning-curve.json (default: none)
  --tasks N              held-out tasks per game (default 64)
  --games LIST           comma-separated envs (default minesweeper-6x6-3,sokoban-6x6-2)
  --seed S               eval seed offset of the held-out tasks (default 0; the training seed
                         goes in --sft-args)
  --sessions N           demonstration sessions of each training (default 6000)
  --curriculum LIST      boards of the demonstrations (default the shipped mix,
                         ${SHIPPED_CURRICULUM})
  --block T              context length of each model (default 1024)
  --micro-batch-tokens N memory cap per forward pass in [B, T] positions (default 2048)
  --minibatch N          samples per optimiser step (default 16)
  --lr X                 peak learning rate (default 1e-3)
  --sft-args '...'       more model:sft-chat options, split on whitespace; they override the
                         shared ones above (default: none)
  --report-only          train and evaluate nothing: rebuild the report from DIR's points
  -h, --help             print this text and exit

Exit code: 0; 1 when a point failed to train or evaluate (the others still run and are reported);
2 for bad options (one line), or when model:sft-chat or eval:base refuses its options.`;

// `--sft-args '--sessions 8 ...'`: its value starts with '-', which parseArgs would read as an
// option; join it to the flag as `--sft-args=...`.
const argv = process.argv.slice(2).flatMap((a, i, all) => (a === '--sft-args' && i + 1 < all.length ? [] : all[i - 1] === '--sft-args' && i > 0 ? [`--sft-args=${a}`] : [a]));
const { values } = (() => {
  try {
    return parseArgs({
      args: argv,
      strict: true,
      options: {
        out: { type: 'string' },
        points: { type: 'string' },
        existing: { type: 'string' },
        tasks: { type: 'string', default: '64' },
        games: { type: 'string', default: 'minesweeper-6x6-3,sokoban-6x6-2' },
        seed: { type: 'string', default: '0' },
        sessions: { type: 'string', default: '6000' },
        curriculum: { type: 'string', default: SHIPPED_CURRICULUM },
        block: { type: 'string', default: '1024' },
        'micro-batch-tokens': { type: 'string', default: '2048' },
        minibatch: { type: 'string', default: '16' },
        lr: { type: 'string', default: '1e-3' },
        'sft-args': { type: 'string', default: '' },
        'report-only': { type: 'boolean', default: false },
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

const usage = <T>(f: () => T): T => {
  try {
    return f();
  } catch (e) {
    if (e instanceof ScalingUsageError || e instanceof UsageError) fail(e.message);
    throw e;
  }
};
const int = (name: string, v: string, min: number, max?: number): number => usage(() => intOpt(name, v, undefined, min, max));

if (values.out === undefined) fail('--out DIR is required');
const out = path.resolve(values.out);
if (existsSync(out)) {
  if (!statSync(out).isDirectory()) fail(`--out ${out} is not a folder`);
  const foreign = readdirSync(out, { withFileTypes: true }).filter((d) => !(GRID_FILES.includes(d.name) || (d.isDirectory() && POINT_DIR_RE.test(d.name))));
  if (foreign.length > 0) fail(`--out ${out} holds files that are not a scaling grid's (${foreign.slice(0, 3).map((d) => d.name).join(', ')}${foreign.length > 3 ? ', ...' : ''}); give a new folder or a grid's own`);
} else if (values['report-only']) {
  fail(`--out ${out} does not exist (--report-only reads a grid's folder)`);
}

// each point's eval:base plays eval seeds from --seed on
const tasks = int('tasks', values.tasks, 1, EVAL_SEED_COUNT);
const seed = int('seed', values.seed, 0, EVAL_SEED_COUNT - 1);
usage(() => checkEvalSeeds('--seed + --tasks', seed, tasks));
const games = values.games.split(',').map((g) => g.trim()).filter(Boolean);
if (games.length === 0) fail('--games is empty');
for (const g of games) {
  try { parseEnvName(g); } catch (e) { fail(`--games: ${(e as Error).message}`); }
}
const sessions = int('sessions', values.sessions, 1);
const block = int('block', values.block, 1);
const microBatchTokens = int('micro-batch-tokens', values['micro-batch-tokens'], 1);
const minibatch = int('minibatch', values.minibatch, 1);
if (!(Number(values.lr) > 0 && Number(values.lr) <= 1)) fail(`--lr must be a number in (0, 1], got '${values.lr}'`);
const sftArgs = usage(() => parseSftArgs(values['sft-args']));
const points = values.points === undefined ? [] : usage(() => parsePoints(values.points!));
const existing = values.existing === undefined ? [] : usage(() => parseExisting(values.existing!));
usage(() => assertDistinct([...points, ...existing.map((e) => e.spec)].map((p) => p.name)));
// The shared training options, less those that --sft-args gives (its value wins).
const overridden = new Set(sftArgs.filter((a) => a.startsWith('--')).map((a) => a.split('=')[0]!));
const sharedSftArgs = ([
  ['--sessions', String(sessions)], ['--curriculum', values.curriculum], ['--block', String(block)], ['--micro-batch-tokens', String(microBatchTokens)],
  ['--minibatch', String(minibatch)], ['--lr', values.lr],
] as const).filter(([flag]) => !overridden.has(flag)).flat();
if (!values['report-only'] && points.length + existing.length === 0) fail('give --points and/or --existing (or --report-only)');

/** What a point folder's point.json holds: enough to rebuild its record with --report-only. */
interface PointFile {
  spec: PointSpec;
  training: PointTraining;
  commands: { train: string | null; eval: string };
}

/** The last point of a checkpoint's learning-curve.json, or null without one. */
function curveTotals(modelDir: string): { step: number; tokens: number; seconds: number } | null {
  const file = path.join(modelDir, 'learning-curve.json');
  if (!existsSync(file)) return null;
  const pts = (JSON.parse(readFileSync(file, 'utf8')) as { points?: Array<{ step: number; tokens: number; seconds: number }> }).points ?? [];
  return pts.length > 0 ? pts[pts.length - 1]! : null;
}

// Existing checkpoints: the config must be the point's, the steps those of its learning curve.
const existingTraining = new Map<string, PointTraining>();
if (!values['report-only']) {
  for (const { spec, dir } of existing) {
    const modelDir = path.resolve(dir);
    const meta = await readCheckpointMetadata(modelDir).catch((e: Error) => fail(`--existing ${spec.name}: ${e.message}`));
    const c = meta.config;
    if (c.n_layer !== spec.layers || c.n_embd !== spec.embd || c.n_head !== spec.heads) {
      fail(`--existing ${spec.name}: ${modelDir} is ${c.n_layer}x${c.n_embd} with ${c.n_head} heads; name it ${c.n_layer}x${c.n_embd}${c.n_head === defaultHeads(c.n_embd) ? '' : `h${c.n_head}`}:${spec.steps}`);
    }
    const totals = curveTotals(modelDir);
    if (totals && totals.step !== spec.steps) fail(`--existing ${spec.name}: ${modelDir}/learning-curve.json ends at step ${totals.step}, not ${spec.steps}`);
    if (!totals) log(`${spec.name}: ${modelDir} has no learning-curve.json; its tokens and training seconds are unknown`);
    existingTraining.set(spec.name, { source: 'existing', modelDir, tokens: totals?.tokens ?? null, trainSeconds: totals?.seconds ?? null });
  }
}

/** The last line (up to 400 characters) of a log file, '' when empty or missing. */
function lastLine(file: string): string {
  if (!existsSync(file)) return '';
  const size = statSync(file).size;
  const n = Math.min(size, 4096);
  const buf = Buffer.alloc(n);
  const fd = openSync(file, 'r');
  try { readSync(fd, buf, 0, n, size - n); } finally { closeSync(fd); }
  const lines = buf.toString('utf8').split('\n').map((l) => l.trim()).filter(Boolean);
  return (lines[lines.length - 1] ?? '').slice(0, 400);
}

let running: ReturnType<typeof spawn> | null = null;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    running?.kill(sig);
    process.exit(sig === 'SIGINT' ? 130 : 143);
  });
}

/**
 * Run `node --import tsx SCRIPT ARGS` in the repository root (what `npm run` runs), stdout and
 * stderr to LOG.out.log / LOG.err.log, with a progress line every 60 s.
 * @returns the exit code (null for a signal).
 */
function runChild(script: string, args: string[], logBase: string, label: string): Promise<number | null> {
  const [outFd, errFd] = [openSync(`${logBase}.out.log`, 'w'), openSync(`${logBase}.err.log`, 'w')];
  const t0 = performance.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], { cwd: repoRoot, stdio: ['ignore', outFd, errFd] });
    running = child;
    const timer = setInterval(() => log(`${label}: ${Math.round((performance.now() - t0) / 1000)} s; ${lastLine(`${logBase}.err.log`)}`), 60_000);
    const done = (code: number | null) => {
      clearInterval(timer);
      running = null;
      closeSync(outFd);
      closeSync(errFd);
      log(`${label}: exit ${code ?? 'by signal'} after ${Math.round((performance.now() - t0) / 1000)} s`);
      resolve(code);
    };
    child.on('error', (e) => { log(`${label}: ${e.message}`); done(-1); });
    child.on('exit', (code) => done(code));
  });
}

const quote = (a: string) => (/^[\w.:/@=,-]+$/.test(a) ? a : `'${a}'`);
const readJson = <T>(file: string): T => JSON.parse(readFileSync(file, 'utf8')) as T;

/** Train (unless existing or already trained) and evaluate one point. @returns false when it failed. */
async function runPoint(spec: PointSpec, index: number, total: number): Promise<boolean> {
  const dir = path.join(out, spec.name);
  const label = `${spec.name} (${index}/${total})`;
  if (existsSync(path.join(dir, 'eval.json'))) {
    log(`${label}: eval.json exists, skipped`);
    return true;
  }
  ensureDirSync(dir);
  const modelDir = path.join(dir, 'model');
  const pointFile = path.join(dir, 'point.json');
  let training = existingTraining.get(spec.name) ?? null;
  let trainCommand: string | null = null;
  if (!training && existsSync(pointFile) && existsSync(path.join(modelDir, 'model.json'))) {
    ({ training, commands: { train: trainCommand } } = readJson<PointFile>(pointFile));
    log(`${label}: trained already, evaluating`);
  } else if (!training) {
    rmSync(modelDir, { recursive: true, force: true }); // an interrupted training leaves no usable model
    const args = [
      '--out', modelDir, '--layers', String(spec.layers), '--embd', String(spec.embd), '--heads', String(spec.heads), '--steps', String(spec.steps),
      ...sharedSftArgs, ...sftArgs,
    ];
    trainCommand = `npm run model:sft-chat -- ${args.map(quote).join(' ')}`;
    log(`${label}: training: ${trainCommand}`);
    const code = await runChild('src/recipes/sft-chat/sft-chat.ts', args, path.join(dir, 'train'), `${label} training`);
    if (code === 2) fail(`model:sft-chat refused its options for ${spec.name} (${path.join(dir, 'train.err.log')}: ${lastLine(path.join(dir, 'train.err.log'))})`);
    const summaryLine = lastLine(path.join(dir, 'train.out.log'));
    if (code !== 0 || !summaryLine.startsWith('{')) {
      log(`${label}: training failed (exit ${code}); see ${path.join(dir, 'train.err.log')}`);
      return false;
    }
    const summary = JSON.parse(summaryLine) as { tokens: number; seconds: number };
    training = { source: 'trained', modelDir, tokens: summary.tokens, trainSeconds: summary.seconds };
  }
  const evalArgs = ['--model', training.modelDir, '--tasks', String(tasks), '--rows', 'lamer', '--games', games.join(','), '--seed', String(seed), '--out', path.join(dir, 'eval.json')];
  const evalCommand = `npm run eval:base -- ${evalArgs.map(quote).join(' ')}`;
  writeFileSync(pointFile, JSON.stringify({ spec, training, commands: { train: trainCommand, eval: evalCommand } } satisfies PointFile, null, 1) + '\n');
  log(`${label}: evaluating: ${evalCommand}`);
  const code = await runChild('experiments/eval-base.ts', evalArgs, path.join(dir, 'eval'), `${label} eval`);
  if (code === 2) fail(`eval:base refused its options for ${spec.name} (${path.join(dir, 'eval.err.log')}: ${lastLine(path.join(dir, 'eval.err.log'))})`);
  if (!existsSync(path.join(dir, 'eval.json'))) {
    log(`${label}: evaluation failed (exit ${code}); see ${path.join(dir, 'eval.err.log')}`);
    return false;
  }
  if (code !== 0) log(`${label}: some sessions failed with errors (counted in the table)`);
  return true;
}

/** Rebuild every evaluated point's record from its folder; write scaling.json / .md / .svg. */
function report(): number {
  const records: ScalingRecord[] = [];
  const commands: Record<string, PointFile['commands']> = {};
  for (const d of readdirSync(out, { withFileTypes: true })) {
    const dir = path.join(out, d.name);
    if (!d.isDirectory() || !POINT_DIR_RE.test(d.name) || !existsSync(path.join(dir, 'eval.json')) || !existsSync(path.join(dir, 'point.json'))) continue;
    const p = readJson<PointFile>(path.join(dir, 'point.json'));
    records.push(scalingRecord(p.spec, p.training, readJson<BaseEvalJson>(path.join(dir, 'eval.json'))));
    commands[p.spec.name] = p.commands;
  }
  const sorted = sortRecords(records);
  const envs = [...new Set(sorted.flatMap((r) => r.games.map((g) => g.env)))];
  const taskCounts = [...new Set(sorted.flatMap((r) => r.games.map((g) => g.tasks)))];
  const markdown = scalingMarkdown(sorted);
  writeFileSync(path.join(out, 'scaling.json'), JSON.stringify({ generatedAt: new Date().toISOString(), points: sorted, commands }, null, 1) + '\n');
  writeFileSync(path.join(out, 'scaling.md'), markdown);
  writeFileSync(path.join(out, 'scaling.svg'), scalingSvg(sorted, envs, `SFT base checkpoints: held-out LaMer sessions (3 attempts, ${taskCounts.join(' / ')} tasks per game) against tokens trained; one colour per model size`));
  console.log(markdown);
  log(`wrote ${path.join(out, 'scaling.json')}, scaling.md and scaling.svg (${sorted.length} point${sorted.length === 1 ? '' : 's'})`);
  return sorted.length;
}

if (values['report-only']) {
  if (report() === 0) fail(`--out ${out} has no evaluated point yet`);
} else {
  ensureDirSync(out);
  const all = [...points, ...existing.map((e) => e.spec)];
  const t0 = performance.now();
  let failed = 0;
  for (const [i, spec] of all.entries()) if (!(await runPoint(spec, i + 1, all.length))) failed++;
  log(`grid done in ${Math.round((performance.now() - t0) / 1000)} s${failed ? `; ${failed} point${failed === 1 ? '' : 's'} failed` : ''}`);
  report();
  if (failed > 0) process.exitCode = 1;
}
