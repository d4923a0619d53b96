/**
 * `npm run bench:pg-round-trips`: the round trips to PostgreSQL (statements sent, each one
 * `query` of node-postgres: BEGIN and COMMIT count, a named prepared statement counts once) that
 * each kind of request of the step workload costs, counted in the server's process.
 *
 * One server (engine test, role `serve`, the database poll at its longest so that nothing else
 * queries meanwhile) is built in this process over a throw-away PostgreSQL (test/helpers/postgres.ts)
 * and driven through `app.inject`, one request at a time; every `pg.Client#query` call made inside
 * a request's async context from its handler on is counted for that request (AsyncLocalStorage,
 * entered in a preHandler hook). The workload is that
 * of bench/step-workload.ts (a session of 3 attempts: create, 24 steps, 2 attempt ends with a
 * reflection, 1 completion), plus single-attempt sessions (memory `none`, whose completion also
 * reads and writes the task's retry chain in the statistics aggregates), each session of another
 * task so that the chains stay short. Counting happens after 2 sessions of each kind warmed the
 * server's caches (model rows, prepared statements).
 *
 * Before/after in one run: BENCH_BASELINE_ROOT names another checkout of the server (its node_modules
 * must resolve `pg` to the same files as this one's, e.g. both linked to one folder); its server
 * runs the same workload on its own database. Options (env): BENCH_SESSIONS (10 of each kind).
 * Prints a table; writes bench/results/pg-round-trips.json (BENCH_OUT: another path). Counts do
 * not depend on the machine's load.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { ensureDirSync } from '../src/ensure-dir.js';
import { startPostgres, type TestPostgres } from '../test/helpers/postgres.js';
import { ATTEMPTS, STEPS, STEPS_PER_SESSION, sessionBody, stepBody } from './step-workload.js';

const root = path.resolve(import.meta.dirname, '..');
const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 10);
const BASELINE_ROOT = process.env.BENCH_BASELINE_ROOT ? path.resolve(process.env.BENCH_BASELINE_ROOT) : null;
const OUT = process.env.BENCH_OUT ?? path.join(root, 'bench', 'results', 'pg-round-trips.json');
const WARM_SESSIONS = 2;

/** The kinds of request counted. */
const KINDS = ['create', 'step', 'attempt end (reflection)', 'completion', 'create (1 attempt)', 'step (1 attempt)', 'completion (1 attempt)'] as const;
type Kind = (typeof KINDS)[number];

/** What was counted for one request: its round trips and the start of each statement's text. */
interface Counted {
  trips: number;
  statements: string[];
}

const tagged = new AsyncLocalStorage<Counted>();
/** The counts of the requests in flight, by their `x-count` header. */
const inFlight = new Map<string, Counted>();
let requestNo = 0;
let untagged = 0;

/** Count every query of every node-postgres client (pools included: they query through their clients). */
function countQueries(): void {
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  proto.query = function (this: unknown, ...args: unknown[]) {
    const c = tagged.getStore();
    const q = args[0] as string | { name?: string; text?: string };
    const text = typeof q === 'string' ? q : q?.name ? `[prepared ${q.name}]` : (q?.text ?? '?');
    if (c) {
      c.trips++;
      c.statements.push(text.replace(/\s+/g, ' ').trim().slice(0, 70));
    } else untagged++;
    return original.apply(this, args);
  };
}

/** One tree's server, built from its own sources over database `url`. */
async function serverOf(treeRoot: string, url: string) {
  const src = (p: string) => import(pathToFileURL(path.join(treeRoot, 'src', p)).href);
  const [{ buildApp }, { loadConfig }, { openPgDatabase }, { pgStore }, { TestEngine }] = await Promise.all([
    src('app.ts'), src('config.ts'), src('db/pg/connection.ts'), src('db/pg/store.ts'), src('policy/test-engine.ts'),
  ]);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'lamer-bench-rt-'));
  const postgres = { url, maxConnections: 4, connectTimeoutMs: 5_000, statementTimeoutMs: 30_000, idleTimeoutMs: 0, migrationLockTimeoutMs: 60_000, pollMs: 600_000 };
  const config = { ...loadConfig({}), host: '127.0.0.1', port: 0, engine: 'test', logLevel: 'silent', dataDir, role: 'serve', apiKeys: [], postgres };
  const conn = await openPgDatabase(url, { maxConnections: 4, idleTimeoutMs: 0 });
  const app = await buildApp(config, { store: pgStore(conn, url), engine: new TestEngine() });
  // Fastify does not run a handler in the async context of its `inject` call: the request's count
  // is named by a header and entered here, right before the handler.
  app.addHook('preHandler', (req: { headers: Record<string, unknown> }, _reply: unknown, done: () => void) => {
    const c = inFlight.get(String(req.headers['x-count']));
    if (c) tagged.enterWith(c);
    done();
  });
  await app.ready();
  return { app, close: async () => { await app.close(); fs.rmSync(dataDir, { recursive: true, force: true }); } };
}

type App = Awaited<ReturnType<typeof serverOf>>['app'];

/** POST `body` to `url` on `app`, counting its round trips under `kind` (when `into` is given). */
async function post(app: App, url: string, body: unknown, into: Map<Kind, Counted[]> | null, kind: Kind) {
  const c: Counted = { trips: 0, statements: [] };
  const tag = String(++requestNo);
  inFlight.set(tag, c);
  const r = await app.inject({ method: 'POST', url, payload: body as Record<string, unknown>, headers: { 'x-count': tag } });
  inFlight.delete(tag);
  if (r.statusCode !== 200 && r.statusCode !== 201) throw new Error(`${kind}: ${url} answered ${r.statusCode}: ${r.body}`);
  into?.get(kind)?.push(c);
  return JSON.parse(r.body) as { id?: string };
}

/** Play the workload on `app`: SESSIONS sessions of each kind after WARM_SESSIONS uncounted ones. */
async function play(app: App): Promise<Map<Kind, Counted[]>> {
  const counts = new Map<Kind, Counted[]>(KINDS.map((k) => [k, []]));
  for (let i = 0; i < WARM_SESSIONS + SESSIONS; i++) {
    const into = i < WARM_SESSIONS ? null : counts;
    const id = (await post(app, '/v1/sessions', sessionBody(`rt-${i}`), into, 'create')).id!;
    for (let a = 0; a < ATTEMPTS; a++) {
      for (let t = 0; t <= STEPS; t++) {
        const kind: Kind = t < STEPS ? 'step' : a < ATTEMPTS - 1 ? 'attempt end (reflection)' : 'completion';
        await post(app, `/v1/sessions/${id}/steps`, stepBody(a, t), into, kind);
      }
    }
    const one = (await post(app, '/v1/sessions', { ...sessionBody(`rt1-${i}`), maxAttempts: 1 }, into, 'create (1 attempt)')).id!;
    for (let t = 0; t <= STEPS; t++) {
      await post(app, `/v1/sessions/${one}/steps`, { ...stepBody(ATTEMPTS - 1, t), attempt: 0 }, into, t < STEPS ? 'step (1 attempt)' : 'completion (1 attempt)');
    }
  }
  return counts;
}

interface KindSummary {
  kind: Kind;
  requests: number;
  /** Round trips per request: median, min, max. */
  median: number;
  min: number;
  max: number;
  /** The statements of the first counted request of the kind. */
  statements: string[];
}

function summarise(counts: Map<Kind, Counted[]>): { kinds: KindSummary[]; perSession: number; perStep: number } {
  const kinds = KINDS.map((kind) => {
    const xs = counts.get(kind)!.map((c) => c.trips).sort((a, b) => a - b);
    return { kind, requests: xs.length, median: xs[Math.floor(xs.length / 2)] ?? NaN, min: xs[0] ?? NaN, max: xs.at(-1) ?? NaN, statements: counts.get(kind)![0]?.statements ?? [] };
  });
  const total = (k: Kind) => counts.get(k)!.reduce((n, c) => n + c.trips, 0);
  // the step workload's session (bench/step-workload.ts): create, 24 steps, 2 attempt ends, 1 completion
  const perSession = (total('create') + total('step') + total('attempt end (reflection)') + total('completion')) / SESSIONS;
  return { kinds, perSession, perStep: Math.round((perSession / STEPS_PER_SESSION) * 100) / 100 };
}

async function main(): Promise<void> {
  countQueries();
  const started = await startPostgres();
  if ('skip' in started) throw new Error(`bench:pg-round-trips needs PostgreSQL: ${started.skip}`);
  const db: TestPostgres = started;
  const results: Array<{ tree: string; root: string } & ReturnType<typeof summarise>> = [];
  try {
    const trees = [{ tree: 'this tree', root }, ...(BASELINE_ROOT ? [{ tree: 'baseline', root: BASELINE_ROOT }] : [])];
    for (const t of trees) {
      const s = await serverOf(t.root, await db.freshDatabase());
      try {
        results.push({ ...t, ...summarise(await play(s.app)) });
      } finally {
        await s.close();
      }
    }
  } finally {
    await db.stop();
  }
  console.log(`\npg-round-trips: statements sent to PostgreSQL per request, ${SESSIONS} sessions of each kind (median, min-max)\n`);
  console.log(`| request | ${results.map((r) => r.tree).join(' | ')} |`);
  console.log(`|---|${results.map(() => '---').join('|')}|`);
  for (const kind of KINDS) {
    const cells = results.map((r) => {
      const k = r.kinds.find((x) => x.kind === kind)!;
      return k.min === k.max ? `${k.median}` : `${k.median} (${k.min}-${k.max})`;
    });
    console.log(`| ${kind} | ${cells.join(' | ')} |`);
  }
  console.log(`| workload session (27 steps) | ${results.map((r) => r.perSession).join(' | ')} |`);
  console.log(`| per step of the workload | ${results.map((r) => r.perStep).join(' | ')} |`);
  for (const r of results) {
    console.log(`\n${r.tree} (${r.root}):`);
    for (const k of r.kinds) console.log(`  ${k.kind}: ${k.statements.join(' ; ')}`);
  }
  console.log(`\nqueries outside any request: ${untagged} (migrations, start-up, pool set-up)`);
  ensureDirSync(path.dirname(OUT));
  const out = { date: new Date().toISOString(), node: process.version, sessions: SESSIONS, warmSessions: WARM_SESSIONS, baselineRoot: BASELINE_ROOT, results };
  fs.writeFileSync(OUT, `${JSON.stringify(out, null, 2)}\n`);
  console.log(`wrote ${path.relative(root, OUT)}`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
