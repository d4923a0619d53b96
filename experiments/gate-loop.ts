/**
 * `npm run demo:gate-loop -- [--server URL] [--minutes M] [--every N] [--gate-tasks T] ...`: the
 * server's own learning loop end to end, as a user runs it (docs/training.md "Promotion gate").
 *
 * - The server: with `--server URL`, one already running (its LAMER_TRAIN_* schedule and
 *   LAMER_TRAIN_GATE_* gate decide; `--every`, `--gate-*`, `--base-model` do not apply). Without it,
 *   one started in this process on `--data-dir` (default a temporary folder, removed at the end
 *   unless `--keep`), serving `--base-model` (default models/base) with the builtin engine, that
 *   starts a `--algorithm` job (default lamer) by itself after every `--every` completed
 *   `mode: "train"` MineSweeper sessions (LAMER_TRAIN_EVERY_SESSIONS) and gates each new version
 *   on `--gate-tasks` held-out tasks of `--gate-attempts` attempts with margin `--margin`
 *   (LAMER_TRAIN_GATE_*).
 * - The client: the eval harness (src/eval/harness.ts) plays `mode: "train"` sessions against it
 *   nonstop, in rounds of `--round` tasks (`--concurrency` at once; training seeds below 1e9, a new
 *   block each round; sampling temperature 1 with availableActions, as `lamer train` rolls out),
 *   for `--minutes` minutes, or until `--jobs` gated jobs have finished. After each round it prints
 *   the rollouts' pass@k and the jobs that started or finished, with their gate's outcome.
 * - At the end it waits (at most `--wait-minutes`) for a job still running, then prints the
 *   version history: per version its parent, status, producing job, and its gate (pass@k of the
 *   new and of the active version on the gate tasks, the difference with its 95% interval, the
 *   outcome). `--out FILE` also writes `GET /v1/models` and the jobs as JSON.
 *
 * Exit code: 0; 2 for bad options (one line naming the option); 1 when the server cannot be
 * reached or fails.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { choiceOpt, intOpt, joinNegativeValues, numOpt, parseArgsMessage, UsageError } from '../src/cli/args.js';
import { loadConfig } from '../src/config.js';
import { RL_ALGORITHMS, type TfjsBackend } from '../src/domain.js';
import { checkServer, runEval } from '../src/eval/harness.js';
import { startServer, type RunningServer } from '../src/server.js';

const USAGE = `usage: npm run demo:gate-loop -- [--server URL] [--minutes 5] [--jobs N] [--every 24] [--round 24]
  [--gate-tasks 16] [--gate-attempts 3] [--margin 0] [--algorithm lamer] [--concurrency 4] [--base-model DIR]
  [--backend auto] [--data-dir DIR] [--keep] [--wait-minutes 15] [--out FILE]`;

export interface LoopOptions {
  server: string | null;
  minutes: number;
  jobs: number;
  every: number;
  round: number;
  gateTasks: number;
  gateAttempts: number;
  margin: number;
  algorithm: (typeof RL_ALGORITHMS)[number];
  concurrency: number;
  baseModel: string | null;
  backend: TfjsBackend;
  dataDir: string | null;
  keep: boolean;
  waitMinutes: number;
  out: string | null;
}

/** The options of `argv`. @throws UsageError naming the option at fault. */
export function loopOptions(argv: string[]): LoopOptions {
  const options = Object.fromEntries([
    ...['server', 'minutes', 'jobs', 'every', 'round', 'gate-tasks', 'gate-attempts', 'margin', 'algorithm', 'concurrency', 'base-model', 'backend', 'data-dir', 'wait-minutes', 'out']
      .map((n) => [n, { type: 'string' as const }]),
    ['keep', { type: 'boolean' as const }],
  ]);
  let values: Record<string, unknown>;
  try {
    ({ values } = parseArgs({ args: joinNegativeValues(argv, options), options }));
  } catch (e) {
    throw new UsageError(parseArgsMessage(e));
  }
  const s = (n: string) => values[n] as string | undefined;
  const every = intOpt('every', s('every'), 24, 1, 100_000);
  return {
    server: s('server') ?? null,
    minutes: numOpt('minutes', s('minutes'), 5, 0, 100_000),
    jobs: intOpt('jobs', s('jobs'), 1_000_000, 1),
    every,
    round: intOpt('round', s('round'), every, 1, 100_000),
    gateTasks: intOpt('gate-tasks', s('gate-tasks'), 16, 1, 10_000),
    gateAttempts: intOpt('gate-attempts', s('gate-attempts'), 3, 1, 10),
    margin: numOpt('margin', s('margin'), 0, -1, 1),
    algorithm: choiceOpt('algorithm', s('algorithm'), RL_ALGORITHMS, 'lamer'),
    concurrency: intOpt('concurrency', s('concurrency'), 4, 1, 256),
    baseModel: s('base-model') ?? null,
    backend: choiceOpt('backend', s('backend'), ['auto', 'tensorflow', 'webgpu', 'wasm', 'cpu'] as const, 'auto'),
    dataDir: s('data-dir') ?? null,
    keep: values.keep === true,
    waitMinutes: numOpt('wait-minutes', s('wait-minutes'), 15, 0, 100_000),
    out: s('out') ?? null,
  };
}

/** The fields of GET /v1/models items and GET /v1/training/jobs items that the loop prints. */
interface Gate {
  status: string; metric: string; promoted: boolean; reason: string | null; incumbent: string | null; progress: number; tasks: number;
  candidatePassAtK: Record<string, number> | null; incumbentPassAtK: Record<string, number> | null; difference: { mean: number; lo: number; hi: number } | null;
}
export interface VersionRow { version: string; parent: string | null; status: string; jobId: string | null; createdAt: string; gate: Gate | null }
interface JobRow { id: string; status: string; resultVersion: string | null; iterations: number; error: string | null; gate: Gate | null }

const pct = (x: number | null | undefined) => (x === null || x === undefined ? '-' : `${(100 * x).toFixed(1)}%`);
const pts = (x: number) => `${x >= 0 ? '+' : ''}${(100 * x).toFixed(1)}`;

/** One line for a gate: "pass@3 new 41.0% vs active 37.5% (base): +3.5 [-4.0, +11.0] pts, passed, promoted". */
export function gateLine(g: Gate | null): string {
  if (!g) return 'no gate';
  const k = /^pass@(\d+)$/.exec(g.metric)?.[1] ?? '1';
  if (g.status === 'pending' || g.status === 'running') return `gate ${g.status}${g.status === 'running' ? ` ${pct(g.progress)}` : ''} (${g.metric}, ${g.tasks} tasks)`;
  const d = g.difference ? `: ${pts(g.difference.mean)} [${pts(g.difference.lo)}, ${pts(g.difference.hi)}] pts` : '';
  const figures = g.candidatePassAtK ? `${g.metric} new ${pct(g.candidatePassAtK[k])} vs active ${pct(g.incumbentPassAtK?.[k])} (${g.incumbent})${d}, ` : '';
  return `${figures}${g.status}, ${g.promoted ? 'promoted' : 'not promoted'}`;
}

/** The version history as a table: oldest first, each version's parent, status, job and gate. */
export function historyTable(items: VersionRow[]): string {
  const rows = items.slice().sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.version.localeCompare(b.version));
  const lines = ['| version | parent | status | job | gate |', '|---|---|---|---|---|'];
  for (const v of rows) lines.push(`| ${v.version} | ${v.parent ?? '-'} | ${v.status} | ${v.jobId ?? '-'} | ${gateLine(v.gate)} |`);
  return lines.join('\n');
}

async function getJson<T>(base: string, p: string): Promise<T> {
  const r = await fetch(base + p);
  if (!r.ok) throw new Error(`GET ${p}: HTTP ${r.status} ${(await r.text()).slice(0, 200)}`);
  return (await r.json()) as T;
}

/** Prints what changed in the jobs since `seen` (started, gate running, finished with the gate's outcome); returns the finished gated jobs. */
async function reportJobs(url: string, seen: Map<string, string>): Promise<number> {
  const { items } = await getJson<{ items: JobRow[] }>(url, '/v1/training/jobs?limit=200');
  for (const j of items.slice().reverse()) {
    const state = `${j.status}|${j.gate?.status ?? ''}`;
    if (seen.get(j.id) === state) continue;
    seen.set(j.id, state);
    const result = j.resultVersion ? ` -> ${j.resultVersion}` : '';
    console.log(`  job ${j.id} ${j.status}${result} (${j.iterations} iterations)${j.gate ? `; ${gateLine(j.gate)}` : ''}${j.error ? `; ${j.error}` : ''}`);
  }
  return items.filter((j) => j.gate && ['succeeded', 'failed', 'cancelled'].includes(j.status)).length;
}

/** Starts the in-process server with the schedule and the gate of `o`. */
async function startLoopServer(o: LoopOptions, dataDir: string): Promise<RunningServer> {
  const training = loadConfig({
    LAMER_TRAIN_EVERY_SESSIONS: String(o.every), LAMER_TRAIN_ALGORITHM: o.algorithm, LAMER_TRAIN_ENV: 'minesweeper',
    LAMER_TRAIN_GATE_TASKS: String(o.gateTasks), LAMER_TRAIN_GATE_ENV: 'minesweeper', LAMER_TRAIN_GATE_ATTEMPTS: String(o.gateAttempts),
    LAMER_TRAIN_GATE_MARGIN: String(o.margin),
  }).training;
  return startServer({
    host: '127.0.0.1', port: 0, dataDir, engine: 'builtin', tfjsBackend: o.backend, apiKeys: [], logLevel: 'warn', training,
    ...(o.baseModel ? { baseModelDir: path.resolve(o.baseModel) } : {}),
  });
}

/** Plays rounds of train sessions until the time or the job count is reached; prints each round. */
async function play(o: LoopOptions, url: string): Promise<void> {
  const seen = new Map<string, string>();
  const deadline = Date.now() + o.minutes * 60_000;
  for (let round = 0; Date.now() < deadline; round++) {
    const r = await runEval({
      env: 'minesweeper', tasks: o.round, attempts: 3, concurrency: o.concurrency, seed: round * o.round, policy: 'model', server: url, mode: 'train',
      sampling: { temperature: 1, topP: 1, topK: 0 }, availableActions: true,
    });
    const versions = [...new Set(r.sessions.map((x) => x.modelVersion).filter(Boolean))].join(', ');
    console.log(`round ${round}: ${r.sessions.length} train sessions (${versions}), pass@1 ${pct(r.metrics.passAtK['1'])}, pass@3 ${pct(r.metrics.passAtK['3'])}, ${r.durationS.toFixed(0)} s`);
    if ((await reportJobs(url, seen)) >= o.jobs) break;
  }
  const waitUntil = Date.now() + o.waitMinutes * 60_000;
  const count = async (status: string) => (await getJson<{ items: JobRow[] }>(url, `/v1/training/jobs?status=${status}`)).items.length;
  const running = async () => (await count('running')) + (await count('queued'));
  while ((await running()) > 0 && Date.now() < waitUntil) {
    await new Promise((res) => setTimeout(res, 5000));
    await reportJobs(url, seen);
  }
}

async function main(argv: string[]): Promise<number> {
  let o: LoopOptions;
  try {
    o = loopOptions(argv);
  } catch (e) {
    if (e instanceof UsageError) {
      console.error(`gate-loop: ${e.message}\n${USAGE}`);
      return 2;
    }
    throw e;
  }
  const dataDir = o.server ? null : (o.dataDir ? path.resolve(o.dataDir) : mkdtempSync(path.join(os.tmpdir(), 'lamer-gate-loop-')));
  const server = dataDir ? await startLoopServer(o, dataDir) : null;
  const url = server?.url ?? o.server!.replace(/\/+$/, '');
  try {
    await checkServer(url);
    console.log(server
      ? `server ${url} on ${dataDir}: a ${o.algorithm} job every ${o.every} train sessions, gated on ${o.gateTasks} held-out MineSweeper tasks (${o.gateAttempts} attempts, margin ${pts(o.margin)} pts)`
      : `server ${url}: its own schedule and gate`);
    await play(o, url);
    const models = await getJson<{ items: VersionRow[]; active: string }>(url, '/v1/models');
    console.log(`\nversion history (active: ${models.active}):\n${historyTable(models.items)}`);
    if (o.out) writeFileSync(o.out, JSON.stringify({ models, jobs: await getJson(url, '/v1/training/jobs?limit=200') }, null, 2) + '\n');
    return 0;
  } finally {
    await server?.close();
    if (dataDir && !o.dataDir && !o.keep) rmSync(dataDir, { recursive: true, force: true });
    else if (dataDir) console.log(`data directory kept: ${dataDir}`);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main(process.argv.slice(2)).then(
    (code) => { process.exitCode = code; },
    (err: unknown) => {
      console.error(`gate-loop: ${err instanceof Error ? err.message : String(err)}`);
      process.exitCode = 1;
    },
  );
}
