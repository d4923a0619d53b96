/**
 * `npm run bench:scale-out`: steps/s and latency (p50/p99, ms) of the step workload
 * (bench/step-workload.ts, test engine, autocannon) in one run, for
 *
 * - `sqlite-1`: one server on SQLite, clients connected to it directly;
 * - `sqlite-1-gateway`: the same server behind nginx (docker/nginx.conf, test/helpers/nginx.ts),
 *   which shows what the gateway alone costs;
 * - `pg-1`: one replica on PostgreSQL (test/helpers/postgres.ts: a throw-away PostgreSQL on
 *   loopback), clients connected directly;
 * - `pg-2-gateway`: two replicas on one PostgreSQL database behind nginx.
 *
 * All servers run at once, idle but for the row being measured; each round measures every row
 * (the order rotated each round, so that a drift in the machine's load hits all rows alike) after
 * a warm-up, and the table gives the median over the rounds. For each row it also gives the CPU
 * time per step of the servers, the gateway (nginx's master and workers), the database
 * (postmaster and its processes) and the client (this process), and the cores that add up to at
 * its rate: where that is near the machine's cores, the cores are the limit, not the design.
 *
 * The PostgreSQL rows skip, saying why, where PostgreSQL cannot start; the gateway rows skip where
 * nginx cannot run. The replicas run with LAMER_ROLE=both (one of them holds the trainer lease; no
 * job runs during the bench).
 *
 * Before/after in one run: BENCH_BASELINE_ROOT names another checkout of the server (e.g.
 * `git worktree add /tmp/base <commit>` with node_modules linked in); each wanted row then runs a
 * second time on that checkout's servers (named `<row>@baseline`, on its own PostgreSQL database and
 * data directories), measured in the same rounds, its ratio taken to the baseline's `sqlite-1`.
 *
 * Options (env): BENCH_SECONDS (8 per measurement), BENCH_WARMUP_SECONDS (1), BENCH_ROUNDS (3),
 * BENCH_CONCURRENCY (32 connections), BENCH_ROWS (comma list of row names; default all),
 * BENCH_NODE_ARGS (node flags for the servers, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`). Writes
 * bench/results/scale-out.json. A server that exits before it is ready stops the bench, exit 1,
 * with its exit status and last output.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ensureDirSync } from '../src/ensure-dir.js';
import { nginxUnavailable, type NginxGateway, startNginx } from '../test/helpers/nginx.js';
import { startPostgres, type TestPostgres } from '../test/helpers/postgres.js';
import { cpuSeconds, freePort, ServerNotReady, type Started, startProcess } from './bench-http-client.js';
import { autocannonSteps } from './step-workload.js';

const root = path.resolve(import.meta.dirname, '..');
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const WARMUP = Number(process.env.BENCH_WARMUP_SECONDS ?? 1);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32);
const ROW_NAMES = ['sqlite-1', 'sqlite-1-gateway', 'pg-1', 'pg-2-gateway'] as const;
type RowName = (typeof ROW_NAMES)[number];
const WANTED = (process.env.BENCH_ROWS ?? ROW_NAMES.join(',')).split(',').map((s) => s.trim()) as RowName[];
const BASELINE_ROOT = process.env.BENCH_BASELINE_ROOT ? path.resolve(process.env.BENCH_BASELINE_ROOT) : null;
const NODE_ARGS = (process.env.BENCH_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);

/** A checkout whose servers a row runs: this tree, or the baseline's (`@baseline` after the row's name). */
interface Tree {
  root: string;
  suffix: '' | '@baseline';
}

/** A row ready to measure: where clients connect and which processes do its work. */
interface LiveRow {
  name: RowName;
  /** The row's name and its tree's suffix. */
  label: string;
  replicas: number;
  store: 'SQLite' | 'PostgreSQL';
  port: number;
  servers: Started[];
  gateway: NginxGateway | null;
  /** pid of the PostgreSQL postmaster, for its CPU time. */
  postmaster: number | null;
}

/** One measurement of one row. CPU figures are µs per step; null where /proc could not be read. */
interface RowRound {
  stepsPerSecond: number;
  steps: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  errors: number;
  cpuUsPerStep: { servers: number | null; gateway: number | null; database: number | null; client: number };
}

const TICKS = 100; // USER_HZ of /proc/<pid>/stat on Linux

/** /proc/<pid>/stat fields after the command name (index 0 is the state, field 3). */
function statFields(pid: number): string[] | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

/** CPU seconds of `pid` and its descendants: their own time, and what their exited children used. */
function treeCpuSeconds(pid: number): number | null {
  const f = statFields(pid);
  if (!f) return null;
  let total = (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / TICKS;
  let children: number[] = [];
  try {
    children = fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    /* no children file: own time only */
  }
  for (const c of children) total += treeCpuSeconds(c) ?? 0;
  return total;
}

/** The postmaster of `pg`: the first line of postmaster.pid in its data directory; null where unreadable. */
async function postmasterPid(pg: TestPostgres): Promise<number | null> {
  const [row] = await pg.query<{ setting: string }>("SELECT setting FROM pg_settings WHERE name = 'data_directory'");
  try {
    const pid = Number(fs.readFileSync(path.join(row!.setting, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

async function startServer(tree: Tree, name: string, env: Record<string, string>, started: Started[], dirs: string[]): Promise<Started> {
  const port = await freePort();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'lamer-bench-'));
  dirs.push(dataDir);
  const s = await startProcess(`${name}${tree.suffix}`, path.join(tree.root, 'src', 'cli', 'serve.ts'), {
    LAMER_ENGINE: 'test', LAMER_PORT: String(port), LAMER_HOST: '127.0.0.1', LAMER_DATA_DIR: dataDir, LAMER_LOG_LEVEL: 'error', LAMER_API_KEYS: '', ...env,
  }, port, { nodeArgs: NODE_ARGS });
  started.push(s);
  await s.ready();
  return s;
}

async function gatewayFor(servers: Started[], gateways: NginxGateway[]): Promise<NginxGateway> {
  const g = await startNginx({ upstreams: servers.map((s) => s.port) });
  if ('skip' in g) throw new Error(`nginx could not start: ${g.skip}`);
  gateways.push(g);
  return g;
}

/** Everything the bench started, stopped at the end. */
interface Resources {
  servers: Started[];
  gateways: NginxGateway[];
  pg: TestPostgres | null;
  /** Why PostgreSQL could not start, once it was tried. */
  pgSkip: string | null;
  dirs: string[];
}

/** Start the processes of the wanted rows of `tree`; rows that cannot run here are returned with why. */
async function startRows(res: Resources, tree: Tree): Promise<{ live: LiveRow[]; skipped: Array<{ name: string; reason: string }> }> {
  const live: LiveRow[] = [];
  const skipped: Array<{ name: string; reason: string }> = [];
  const noNginx = nginxUnavailable();
  if (!res.pg && res.pgSkip === null && WANTED.some((w) => w.startsWith('pg-'))) {
    const started = await startPostgres();
    if ('skip' in started) res.pgSkip = started.skip;
    else res.pg = started;
  }
  const pgSkip = res.pgSkip;
  const row = (r: Omit<LiveRow, 'label'>): LiveRow => ({ ...r, label: `${r.name}${tree.suffix}` });
  const skip = (name: RowName, reason: string) => skipped.push({ name: `${name}${tree.suffix}`, reason });
  const server = (name: string, env: Record<string, string>) => startServer(tree, name, env, res.servers, res.dirs);
  const replicaEnv = async () => ({ LAMER_DATABASE_URL: await res.pg!.freshDatabase(), LAMER_ROLE: 'both' });
  if (WANTED.includes('sqlite-1') || WANTED.includes('sqlite-1-gateway')) {
    const s = await server('SQLite server', {});
    const direct = { replicas: 1, store: 'SQLite' as const, port: s.port, servers: [s], postmaster: null };
    if (WANTED.includes('sqlite-1')) live.push(row({ name: 'sqlite-1', ...direct, gateway: null }));
    if (WANTED.includes('sqlite-1-gateway')) {
      if (noNginx) skip('sqlite-1-gateway', noNginx);
      else {
        const g = await gatewayFor([s], res.gateways);
        live.push(row({ name: 'sqlite-1-gateway', ...direct, port: g.port, gateway: g }));
      }
    }
  }
  const postmaster = res.pg ? await postmasterPid(res.pg) : null;
  if (WANTED.includes('pg-1')) {
    if (pgSkip) skip('pg-1', pgSkip);
    else {
      const s = await server('PostgreSQL replica', await replicaEnv());
      live.push(row({ name: 'pg-1', replicas: 1, store: 'PostgreSQL', port: s.port, servers: [s], gateway: null, postmaster }));
    }
  }
  if (WANTED.includes('pg-2-gateway')) {
    const reason = pgSkip ?? noNginx;
    if (reason) skip('pg-2-gateway', reason);
    else {
      const env = await replicaEnv();
      const a = await server('PostgreSQL replica 1 of 2', env);
      const b = await server('PostgreSQL replica 2 of 2', env);
      const g = await gatewayFor([a, b], res.gateways);
      live.push(row({ name: 'pg-2-gateway', replicas: 2, store: 'PostgreSQL', port: g.port, servers: [a, b], gateway: g, postmaster }));
    }
  }
  return { live, skipped };
}

/** CPU seconds used so far by each part of `row`. */
function cpuNow(row: LiveRow) {
  const servers = row.servers.map((s) => cpuSeconds(s.pid));
  return {
    servers: servers.every((x) => x !== null) ? servers.reduce((a, b) => a! + b!, 0)! : null,
    gateway: row.gateway ? treeCpuSeconds(row.gateway.pid) : null,
    database: row.postmaster ? treeCpuSeconds(row.postmaster) : null,
    client: process.cpuUsage(),
  };
}

async function measure(row: LiveRow): Promise<RowRound> {
  await autocannonSteps(row.port, CONCURRENCY, WARMUP);
  const before = cpuNow(row);
  const r = await autocannonSteps(row.port, CONCURRENCY, SECONDS);
  const after = cpuNow(row);
  const perStep = (a: number | null, b: number | null) => (a !== null && b !== null && r.steps > 0 ? Math.round(((b - a) / r.steps) * 1e6) : null);
  const client = process.cpuUsage(before.client);
  return {
    stepsPerSecond: Math.round(r.steps / SECONDS),
    steps: r.steps,
    p50Ms: r.p50Ms,
    p99Ms: r.p99Ms,
    maxMs: r.maxMs,
    errors: r.errors,
    cpuUsPerStep: {
      servers: perStep(before.servers, after.servers),
      gateway: perStep(before.gateway, after.gateway),
      database: perStep(before.database, after.database),
      client: r.steps > 0 ? Math.round((client.user + client.system) / r.steps) : 0,
    },
  };
}

interface RowSummary {
  /** The row's name, with `@baseline` for the baseline checkout's. */
  name: string;
  replicas: number;
  store: string;
  gateway: boolean;
  stepsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
  overSqlite1: number | null;
  cpuUsPerStep: Record<'servers' | 'gateway' | 'database' | 'client', number | null>;
  /** Cores busy at this rate: steps/s x the CPU µs per step of every part, / 1e6. */
  coresBusy: number | null;
  rounds: RowRound[];
}

function summarise(row: LiveRow, rounds: RowRound[], base: number | null): RowSummary {
  const med = (f: (r: RowRound) => number | null) => {
    const xs = rounds.map(f).filter((x): x is number => x !== null);
    return xs.length ? median(xs) : null;
  };
  const sps = med((r) => r.stepsPerSecond)!;
  const cpu = {
    servers: med((r) => r.cpuUsPerStep.servers),
    gateway: med((r) => r.cpuUsPerStep.gateway),
    database: med((r) => r.cpuUsPerStep.database),
    client: med((r) => r.cpuUsPerStep.client),
  };
  const known = Object.values(cpu).filter((x): x is number => x !== null);
  return {
    name: row.label,
    replicas: row.replicas,
    store: row.store,
    gateway: row.gateway !== null,
    stepsPerSecond: sps,
    p50Ms: med((r) => r.p50Ms)!,
    p99Ms: med((r) => r.p99Ms)!,
    errors: rounds.reduce((n, r) => n + r.errors, 0),
    overSqlite1: base ? Math.round((sps / base) * 100) / 100 : null,
    cpuUsPerStep: cpu,
    coresBusy: cpu.servers !== null ? Math.round(((sps * known.reduce((a, b) => a + b, 0)) / 1e6) * 100) / 100 : null,
    rounds,
  };
}

function printTable(rows: RowSummary[], skipped: Array<{ name: string; reason: string }>): void {
  const v = (x: number | null) => (x === null ? '-' : String(x));
  console.log(`\nscale-out: steps/s and latency, test engine, ${CONCURRENCY} connections (autocannon), median of ${ROUNDS} rotated rounds of ${SECONDS} s\n`);
  console.log('| row | replicas | store | gateway | steps/s | p50 / p99 ms | errors | / sqlite-1 | CPU µs/step servers | gateway | database | client | cores busy |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const c = r.cpuUsPerStep;
    console.log(
      `| ${r.name} | ${r.replicas} | ${r.store} | ${r.gateway ? 'nginx' : 'none'} | ${r.stepsPerSecond} | ${r.p50Ms} / ${r.p99Ms} | ${r.errors} | ${v(r.overSqlite1)} | ${v(c.servers)} | ${v(c.gateway)} | ${v(c.database)} | ${v(c.client)} | ${v(r.coresBusy)} |`,
    );
  }
  for (const s of skipped) console.log(`| ${s.name} | skipped: ${s.reason} |||||||||||`);
  console.log(`\n${os.cpus().length} CPUs; load average at the end ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}. "cores busy": near the CPUs, the cores are the limit; far below them under a high load average, other processes had the CPU.`);
}

async function main(): Promise<void> {
  const unknown = WANTED.filter((w) => !(ROW_NAMES as readonly string[]).includes(w));
  if (unknown.length) throw new Error(`BENCH_ROWS: unknown row ${unknown.join(', ')} (rows: ${ROW_NAMES.join(', ')})`);
  const res: Resources = { servers: [], gateways: [], pg: null, pgSkip: null, dirs: [] };
  try {
    const trees: Tree[] = [{ root, suffix: '' }];
    if (BASELINE_ROOT) trees.push({ root: BASELINE_ROOT, suffix: '@baseline' });
    const live: LiveRow[] = [];
    const skipped: Array<{ name: string; reason: string }> = [];
    for (const tree of trees) {
      const started = await startRows(res, tree);
      live.push(...started.live);
      skipped.push(...started.skipped);
    }
    const rounds = new Map<string, RowRound[]>(live.map((r) => [r.label, []]));
    for (let round = 0; round < ROUNDS; round++) {
      const order = live.map((_, i) => live[(i + round) % live.length]!);
      for (const row of order) rounds.get(row.label)!.push(await measure(row));
    }
    // each tree's rows over its own sqlite-1
    const baseOf = (suffix: string) => {
      const baseRounds = rounds.get(`sqlite-1${suffix}`);
      return baseRounds ? median(baseRounds.map((r) => r.stepsPerSecond)) : null;
    };
    const rows = live.map((r) => summarise(r, rounds.get(r.label)!, baseOf(r.label.slice(r.name.length))));
    printTable(rows, skipped);
    const out = {
      date: new Date().toISOString(),
      node: process.version,
      cpus: os.cpus().length,
      loadAverage: os.loadavg(),
      engine: 'test',
      client: 'autocannon',
      connections: CONCURRENCY,
      secondsPerMeasurement: SECONDS,
      rounds: ROUNDS,
      baselineRoot: BASELINE_ROOT,
      nodeArgs: NODE_ARGS,
      gatewayConfig: 'docker/nginx.conf (test/helpers/nginx.ts: loopback addresses, 1 worker)',
      rows,
      skipped,
    };
    ensureDirSync(path.join(root, 'bench', 'results'));
    fs.writeFileSync(path.join(root, 'bench', 'results', 'scale-out.json'), `${JSON.stringify(out, null, 2)}\n`);
    console.log('wrote bench/results/scale-out.json');
  } finally {
    for (const g of res.gateways) await g.stop();
    for (const s of res.servers.reverse()) await s.stop();
    await res.pg?.stop();
    for (const d of res.dirs) fs.rmSync(d, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof ServerNotReady ? `bench:scale-out: ${err.message}` : err);
  process.exitCode = 1;
});
