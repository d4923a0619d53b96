/**
 * `npm run bench:ui`: load times of the dashboard's views (/ui) over a data directory with 10,000
 * sessions: for each view, the API requests it makes (median and max over BENCH_UI_REPS calls,
 * ms, with the answer's size) and, when a Chromium binary is found (/usr/bin/chromium or
 * LAMER_CHROMIUM), the page load in headless Chromium (navigation start until the view shows its
 * data, fresh browser context each time so nothing is cached; median and max, ms).
 *
 * Data: 48 sessions are played over HTTP by `lamer eval`'s harness (MineSweeper and Sokoban, 3
 * attempts, the test engine choosing among the legal actions), then cloned in SQLite (sessions,
 * steps and reflections rows, new time-ordered ids) until BENCH_UI_SESSIONS (10,000) exist, spread
 * over three model versions and both modes, so that /v1/stats and the diversity scan read a
 * realistic table. The server runs in this process on an ephemeral port (engine test).
 *
 * Options (env): BENCH_UI_SESSIONS (10000), BENCH_UI_REPS (5), BENCH_UI_DATA_DIR (fill this
 * directory, or reuse it when it already holds a database, and keep it; default a temporary one,
 * removed at the end). Prints a table; writes bench/results/ui.json with the host's load average.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { startServer } from '../src/server.js';
import { runEval } from '../src/eval/harness.js';
import { newSessionId } from '../src/agent/step-hash.js';
import { ensureDirSync } from '../src/ensure-dir.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SESSIONS = Number(process.env.BENCH_UI_SESSIONS ?? 10_000);
const REPS = Number(process.env.BENCH_UI_REPS ?? 5);
const VERSIONS = ['test', 'lamer-1', 'gigpo-1'];
const CHROMIUM = [process.env.LAMER_CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p): p is string => !!p && fs.existsSync(p));

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const round = (x: number) => Math.round(x * 10) / 10;

/**
 * Clones the played sessions (and their steps and reflections) until the database holds `total`
 * sessions; the clones get new ids (in creation order), a model version and mode by turn.
 */
function cloneSessions(dbFile: string, total: number): void {
  const db = new Database(dbFile);
  try {
    const have = (db.prepare('SELECT count(*) AS n FROM sessions').get() as { n: number }).n;
    if (have >= total) return;
    const templates = db.prepare("SELECT * FROM sessions WHERE status = 'completed'").all() as Record<string, unknown>[];
    const stepsOf = db.prepare('SELECT * FROM steps WHERE session_id = ? ORDER BY id');
    const reflOf = db.prepare('SELECT * FROM reflections WHERE session_id = ?');
    const steps = new Map(templates.map((t) => [t.id as string, stepsOf.all(t.id) as Record<string, unknown>[]]));
    const refls = new Map(templates.map((t) => [t.id as string, reflOf.all(t.id) as Record<string, unknown>[]]));
    const insert = (table: string, row: Record<string, unknown>) => {
      const cols = Object.keys(row).filter((c) => c !== 'id' || table === 'sessions');
      return db.prepare(`INSERT INTO ${table} (${cols.join(',')}) VALUES (${cols.map((c) => '@' + c).join(',')})`);
    };
    const insSession = insert('sessions', templates[0]!);
    const insStep = insert('steps', steps.get(templates[0]!.id as string)![0]!);
    const insRefl = templates.some((t) => refls.get(t.id as string)!.length) ? insert('reflections', [...refls.values()].find((r) => r.length)![0]!) : null;
    const start = Date.now() - total * 1000;
    db.transaction(() => {
      for (let i = have; i < total; i++) {
        const t = templates[i % templates.length]!;
        const id = newSessionId(start + i * 1000);
        const version = VERSIONS[Math.floor(i / templates.length) % VERSIONS.length]!;
        insSession.run({ ...t, id, model_version: version, mode: i % 4 === 0 ? 'train' : 'eval', created_at: start + i * 1000, updated_at: start + i * 1000 });
        for (const s of steps.get(t.id as string)!) {
          const { id: _drop, ...rest } = s;
          insStep.run({ ...rest, session_id: id, model_version: version, request_hash: `${rest.request_hash}-${i}` });
        }
        for (const r of refls.get(t.id as string)!) insRefl!.run({ ...r, session_id: id });
      }
    })();
  } finally {
    db.close();
  }
}

interface ViewSpec {
  name: string;
  url: (ctx: { sessionId: string }) => string;
  /** The API requests the view makes on load. */
  api: (ctx: { sessionId: string }) => string[];
  /** A selector that is present once the view shows its data. */
  ready: string;
}

const VIEWS: ViewSpec[] = [
  {
    name: 'overview',
    url: () => '/ui/',
    api: () => ['/readyz', '/metrics', '/v1/stats', '/v1/stats/diversity', '/v1/models', '/v1/training/jobs?status=running&limit=1'],
    ready: '[data-testid=diversity] tbody tr',
  },
  { name: 'sessions', url: () => '/ui/sessions', api: () => ['/v1/sessions?limit=50'], ready: '[data-testid=sessions] tbody tr' },
  {
    name: 'sessions (filtered, page 2)',
    url: () => '/ui/sessions?env=sokoban&mode=eval&modelVersion=gigpo-1',
    api: () => ['/v1/sessions?env=sokoban&mode=eval&modelVersion=gigpo-1&limit=50'],
    ready: '[data-testid=sessions] tbody tr',
  },
  {
    name: 'session',
    url: (c) => `/ui/sessions/${c.sessionId}`,
    api: (c) => [`/v1/sessions/${c.sessionId}`, `/v1/sessions/${c.sessionId}/trajectory?limit=1000`],
    ready: '[data-testid=step]',
  },
  { name: 'models', url: () => '/ui/models', api: () => ['/v1/models', '/v1/stats'], ready: '[data-testid=models] tbody tr' },
  { name: 'jobs', url: () => '/ui/jobs', api: () => ['/v1/training/jobs', '/v1/models'], ready: '[data-testid=jobs]' },
  {
    name: 'compare',
    url: () => '/ui/compare?a=lamer-1&b=gigpo-1',
    api: () => ['/v1/stats?modelVersion=lamer-1', '/v1/stats/diversity?modelVersion=lamer-1', '/v1/stats?modelVersion=gigpo-1', '/v1/stats/diversity?modelVersion=gigpo-1'],
    ready: '[data-testid=compare-diversity] tbody tr',
  },
];

async function main() {
  const keep = process.env.BENCH_UI_DATA_DIR;
  const dataDir = keep ? path.resolve(keep) : fs.mkdtempSync(path.join(os.tmpdir(), 'lamer-bench-ui-'));
  const t0 = Date.now();
  if (!fs.existsSync(path.join(dataDir, 'lamer.db'))) {
    ensureDirSync(dataDir);
    const filler = await startServer({ host: '127.0.0.1', port: 0, engine: 'test', logLevel: 'silent', apiKeys: [], dataDir });
    for (const env of ['minesweeper', 'sokoban'] as const) {
      await runEval({ env, tasks: 12, trials: 2, attempts: 3, concurrency: 4, seed: 1, policy: 'model', server: filler.url, availableActions: true });
    }
    await filler.close();
  }
  cloneSessions(path.join(dataDir, 'lamer.db'), SESSIONS);
  const fillSeconds = (Date.now() - t0) / 1000;
  const server = await startServer({ host: '127.0.0.1', port: 0, engine: 'test', logLevel: 'silent', apiKeys: [], dataDir });
  const sessions = ((await (await fetch(`${server.url}/v1/stats`)).json()) as { sessions: number }).sessions;
  const list = (await (await fetch(`${server.url}/v1/sessions?limit=1&status=completed`)).json()) as { items: { id: string }[] };
  const ctx = { sessionId: list.items[0]!.id };
  console.log(`data: ${sessions} completed sessions (filled in ${fillSeconds.toFixed(1)} s) in ${dataDir}`);

  const results: Array<Record<string, unknown>> = [];
  let browser: import('playwright-core').Browser | null = null;
  if (CHROMIUM) {
    const { chromium } = await import('playwright-core');
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
  } else {
    console.log('no chromium binary found (apt-get install chromium, or set LAMER_CHROMIUM): page loads are not measured');
  }
  try {
    for (const v of VIEWS) {
      const apiTimes: Record<string, { medianMs: number; maxMs: number; bytes: number }> = {};
      for (const p of v.api(ctx)) {
        const ms: number[] = [];
        let bytes = 0;
        for (let i = 0; i < REPS; i++) {
          const t = performance.now();
          const r = await fetch(server.url + p);
          bytes = (await r.arrayBuffer()).byteLength;
          ms.push(performance.now() - t);
          if (!r.ok) throw new Error(`${p}: HTTP ${r.status}`);
        }
        apiTimes[p] = { medianMs: round(median(ms)), maxMs: round(Math.max(...ms)), bytes };
      }
      let page: { medianMs: number; maxMs: number } | null = null;
      if (browser) {
        const ms: number[] = [];
        for (let i = 0; i < REPS; i++) {
          const bctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
          const pg = await bctx.newPage();
          const t = performance.now();
          await pg.goto(server.url + v.url(ctx));
          await pg.waitForSelector(v.ready, { timeout: 30_000 });
          ms.push(performance.now() - t);
          await bctx.close();
        }
        page = { medianMs: round(median(ms)), maxMs: round(Math.max(...ms)) };
      }
      results.push({ view: v.name, url: v.url(ctx), page, api: apiTimes });
    }
  } finally {
    await browser?.close();
    await server.close();
    if (!keep) fs.rmSync(dataDir, { recursive: true, force: true });
  }

  console.log(`\nload average ${os.loadavg().map((x) => x.toFixed(2)).join(' ')} on ${os.cpus().length} CPUs`);
  console.log(`\n| view | page load, median / max (ms) | slowest API request of the view, median / max (ms) | bytes |`);
  console.log('|---|---|---|---|');
  for (const r of results) {
    const api = Object.entries(r.api as Record<string, { medianMs: number; maxMs: number; bytes: number }>).sort((a, b) => b[1].medianMs - a[1].medianMs)[0]!;
    const page = r.page as { medianMs: number; maxMs: number } | null;
    console.log(`| ${r.view} | ${page ? `${page.medianMs} / ${page.maxMs}` : '–'} | ${api[0]}: ${api[1].medianMs} / ${api[1].maxMs} | ${api[1].bytes} |`);
  }
  const out = {
    bench: 'ui',
    date: new Date().toISOString(),
    node: process.version,
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model ?? null,
    /** 1, 5 and 15 minute load averages at the end: other processes' share of the CPUs. */
    loadAverage: os.loadavg().map((x) => Math.round(x * 100) / 100),
    sessions,
    reps: REPS,
    chromium: CHROMIUM ?? null,
    views: results,
  };
  const file = path.join(root, 'bench/results/ui.json');
  ensureDirSync(path.dirname(file));
  fs.writeFileSync(file, JSON.stringify(out, null, 2) + '\n');
  console.log(`\nwrote ${path.relative(root, file)}`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
