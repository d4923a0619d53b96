/**
 * The dashboard in a real browser: headless Chromium (Debian's `chromium` package, or the binary in
 * LAMER_CHROMIUM) driven by playwright-core against a real server on an ephemeral port. The server
 * runs the builtin engine on a tiny GPT; played MineSweeper and Sokoban sessions (train and eval)
 * and a finished LaMer training job give every view something to show.
 *
 * Checked: the numbers on each view equal the API's; a reflection edited in the UI (with its
 * confirm step) reaches the next step's prompt; activating a version through the UI changes the
 * active version; a non-admin key sees no admin control (and no admin view in the navigation); an
 * open tab polls under one request per second (timers advanced by Playwright's clock); no console
 * errors on any page.
 *
 * Skipped, with that reason in its name, when no Chromium binary is found. With
 * LAMER_UI_SCREENSHOTS=1 it also writes a screenshot of each view to docs/screenshots/.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startServer, type RunningServer } from '../../../src/server.js';
import { runEval } from '../../../src/eval/harness.js';
import { call, tmpDir, writeTinyGptCheckpoint } from '../../helpers/index.js';
import { memoryLabel } from '../../../src/ui/figures.js';

const CHROMIUM = [process.env.LAMER_CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'].find(
  (p): p is string => !!p && fs.existsSync(p),
);
const SHOTS = process.env.LAMER_UI_SCREENSHOTS === '1' ? path.resolve('docs/screenshots') : null;
const ADMIN = 'k-admin-0123456789';
const USER = 'k-user-0123456789';
const DOORS = ['door 1', 'door 2', 'door 3'];

let server: RunningServer;
let browser: Browser;
let admin: BrowserContext;
let page: Page;
let jobId: string;
let activeSessionId: string;
const consoleErrors: string[] = [];

/** The API as the admin key sees it. */
const api = async (method: string, p: string, body?: unknown, key = ADMIN) => {
  const r = await call(server.url, method, p, body, { authorization: `Bearer ${key}` });
  if (r.status >= 300) throw new Error(`${method} ${p}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
};
/** The dashboard's formats (src/ui/lib.js), to compare the API's numbers with the page's text. */
const pct = (x: number | undefined) => (x === undefined || x === null ? '–' : `${(100 * x).toFixed(1)}%`);
const num3 = (x: number) => x.toFixed(3);
const short = (x: number) => String(Number(x.toFixed(4)));

/** A new page of `ctx` whose console errors and uncaught exceptions are recorded. */
async function watchedPage(ctx: BrowserContext): Promise<Page> {
  const p = await ctx.newPage();
  p.on('console', (m) => {
    if (m.type() === 'error') consoleErrors.push(`${p.url()}: ${m.text()}`);
  });
  p.on('pageerror', (e) => consoleErrors.push(`${p.url()}: ${e.message}`));
  return p;
}

async function shot(p: Page, name: string) {
  if (!SHOTS) return;
  fs.mkdirSync(SHOTS, { recursive: true });
  await p.waitForTimeout(300); // let uPlot finish its first paint
  await p.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

/** Table rows of `selector` as { key (data-group / data-version / data-id), cells text }. */
async function rows(p: Page, selector: string, attr: string): Promise<Record<string, string[]>> {
  return p.$$eval(
    `${selector} tbody tr`,
    (trs, a) => Object.fromEntries(trs.map((tr) => [tr.getAttribute(a) ?? '', [...tr.querySelectorAll('td')].map((td) => td.textContent!.trim())])),
    attr,
  );
}

async function signIn(p: Page, key: string) {
  await p.goto(`${server.url}/ui/`);
  await p.fill('input[name=apiKey]', key);
  await p.click('button[type=submit]');
  await p.waitForSelector('[data-testid=whoami]');
}

beforeAll(async () => {
  if (!CHROMIUM) return;
  const dir = tmpDir('lamer-ui-');
  await writeTinyGptCheckpoint(path.join(dir, 'base-model'), 3);
  server = await startServer({
    port: 0,
    host: '127.0.0.1',
    dataDir: path.join(dir, 'data'),
    engine: 'builtin',
    tfjsBackend: 'wasm',
    logLevel: 'silent',
    apiKeys: [
      { key: ADMIN, tenant: 'acme', admin: true },
      { key: USER, tenant: 'acme', admin: false },
    ],
    baseModelDir: path.join(dir, 'base-model'),
  });
  const common = { attempts: 2, concurrency: 4, policy: 'model' as const, server: server.url, apiKey: ADMIN, availableActions: true, maxSteps: 3 };
  // Training rollouts, a LaMer job on them, then eval sessions of both versions.
  await runEval({ ...common, env: 'minesweeper', tasks: 3, trials: 2, seed: 1, mode: 'train' });
  jobId = (await api('POST', '/v1/training/jobs', { algorithm: 'lamer', version: 'v1', hyperparameters: { epochs: 1, minibatchSize: 6, lr: 1e-3 } })).id;
  for (;;) {
    const j = await api('GET', `/v1/training/jobs/${jobId}`);
    if (j.status !== 'queued' && j.status !== 'running') {
      if (j.status !== 'succeeded') throw new Error(`training job ${j.status}: ${j.error}`);
      break;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  for (const modelVersion of ['base', 'v1']) {
    for (const env of ['minesweeper', 'sokoban'] as const) await runEval({ ...common, env, tasks: 3, trials: 1, seed: 5, modelVersion });
  }
  // A session left active after a failed first attempt: its reflection is edited in the UI.
  const s = await api('POST', '/v1/sessions', { taskId: 'doors:ui', env: 'doors', instructions: 'Open the door with the prize.', maxAttempts: 2, maxSteps: 2 });
  activeSessionId = s.id;
  await api('POST', `/v1/sessions/${s.id}/steps`, { attempt: 0, step: 0, observation: 'Three closed doors.', availableActions: DOORS });
  await api('POST', `/v1/sessions/${s.id}/steps`, { attempt: 0, step: 1, observation: 'Empty.', reward: -1, done: true, success: false });

  const { chromium } = await import('playwright-core');
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
  admin = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await watchedPage(admin);
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

describe.skipIf(!CHROMIUM)(
  `dashboard in headless Chromium${CHROMIUM ? '' : ' (SKIPPED: no chromium binary at /usr/bin/chromium; apt-get install chromium, or set LAMER_CHROMIUM)'}`,
  () => {
    it('signs in with an admin key; the overview shows the API numbers', async () => {
      await page.goto(`${server.url}/ui/`);
      await page.waitForSelector('input[name=apiKey]');
      await shot(page, 'sign-in');
      await signIn(page, ADMIN);
      expect(await page.textContent('[data-testid=whoami]')).toContain('acme · admin');
      await page.waitForSelector('[data-testid=passk] tbody tr');
      await page.waitForSelector('[data-testid=diversity] tbody tr');
      const stats = await api('GET', '/v1/stats');
      const ready = await (await fetch(`${server.url}/readyz`)).json();
      expect(await page.textContent('[data-testid=active-version]')).toBe(ready.model.version);
      expect(ready.model.version).toBe('base');
      expect(await page.textContent('[data-testid=completed-sessions]')).toBe(String(stats.sessions));
      const label = (g: { modelVersion: string; env: string | null; mode: string; memory: string }) => `${g.modelVersion} · ${g.env ?? '(no env)'} · ${g.mode} · ${memoryLabel(g.memory)}`;
      const K = Math.max(...stats.groups.map((g: { passAtK: object }) => Object.keys(g.passAtK).length));
      const expectPassK = Object.fromEntries(
        stats.groups.map((g: any) => [label(g), [label(g), String(g.sessions), ...Array.from({ length: K }, (_, i) => pct(g.passAtK[i + 1]))]]),
      );
      expect(await rows(page, '[data-testid=passk]', 'data-group')).toEqual(expectPassK);
      const A = Math.max(...stats.groups.map((g: { successByAttempt: number[] }) => g.successByAttempt.length));
      const expectSuccess = Object.fromEntries(
        stats.groups.map((g: any) => [label(g), [label(g), ...Array.from({ length: A }, (_, a) => pct(g.successByAttempt[a]))]]),
      );
      expect(await rows(page, '[data-testid=success]', 'data-group')).toEqual(expectSuccess);
      const div = await api('GET', '/v1/stats/diversity');
      expect(div.groups.map((g: any) => g.modelVersion)).toEqual(expect.arrayContaining(['base', 'v1']));
      expect(await rows(page, '[data-testid=diversity]', 'data-group')).toEqual(
        Object.fromEntries(div.groups.map((g: any) => [`${g.modelVersion} · ${g.env} · ${memoryLabel(g.memory)}`, [g.modelVersion, g.env, memoryLabel(g.memory), String(g.sessions), String(g.tasks), num3(g.diversity)]])),
      );
      expect(await page.textContent('[data-testid=running-job]')).toContain('none');
      // the live figures come from /metrics: the second scrape (5 s later) gives steps/s
      expect(await page.textContent('[data-testid=latency-p50]')).toMatch(/^\d+(\.\d+)? ms$/);
      expect((await page.$$('.chart canvas')).length).toBeGreaterThanOrEqual(3); // pass@k, success, diversity charts
      await shot(page, 'overview');
    });

    it('lists sessions with the API filters and cursor paging', async () => {
      const p1 = await api('GET', '/v1/sessions?limit=5&mode=eval');
      const p2 = await api('GET', `/v1/sessions?limit=5&mode=eval&cursor=${p1.nextCursor}`);
      await page.click('header nav a:has-text("Sessions")');
      await page.waitForSelector('[data-testid=sessions] tbody tr');
      await page.selectOption('select[name=mode]', 'eval');
      await page.click('[data-testid=session-filters] button[type=submit]');
      await page.waitForURL(/\/ui\/sessions\?mode=eval$/);
      await page.goto(`${server.url}/ui/sessions?mode=eval&limit=5`); // a shared link with a page size
      await page.waitForSelector('[data-testid=sessions] tbody tr');
      expect(Object.keys(await rows(page, '[data-testid=sessions]', 'data-id'))).toEqual(p1.items.map((s: { id: string }) => s.id));
      await page.click('[data-testid=next-page]');
      await page.waitForURL(new RegExp(`cursor=${p1.nextCursor}`));
      await page.waitForSelector(`[data-testid=sessions] tbody tr[data-id="${p2.items[0].id}"]`);
      expect(Object.keys(await rows(page, '[data-testid=sessions]', 'data-id'))).toEqual(p2.items.map((s: { id: string }) => s.id));
      await page.goto(`${server.url}/ui/sessions`);
      await page.waitForSelector('[data-testid=sessions] tbody tr');
      await shot(page, 'sessions');
    });

    it("shows a session's attempts as timelines with the API's observations, actions and rewards", async () => {
      const list = await api('GET', '/v1/sessions?status=completed&env=sokoban&limit=1');
      const ses = await api('GET', `/v1/sessions/${list.items[0].id}`);
      const traj = await api('GET', `/v1/sessions/${ses.id}/trajectory?limit=1000`);
      await page.goto(`${server.url}/ui/sessions/${ses.id}`);
      await page.waitForSelector('[data-testid=step]');
      expect(await page.textContent('[data-field=modelVersion]')).toBe(ses.modelVersion);
      expect(await page.textContent('[data-field=sampling]')).toBe(
        `temperature ${ses.sampling.temperature}, top-p ${ses.sampling.topP}, top-k ${ses.sampling.topK}${ses.sampling.seed !== undefined ? `, seed ${ses.sampling.seed}` : ''}`,
      );
      expect(await rows(page, '[data-testid=attempts]', 'data-attempt')).toEqual(
        Object.fromEntries(
          ses.attempts.map((a: any) => {
            const actions = traj.steps.filter((r: any) => r.kind === 'action' && r.attempt === a.attempt && r.action !== null).length;
            return [String(a.attempt), [String(a.attempt), a.status, String(actions), String(a.steps), short(a.return), a.endReason ?? '–']];
          }),
        ),
      );
      expect(await page.$$eval('[data-testid=session-passk] td', (tds) => tds.map((t) => t.textContent))).toEqual(
        Object.keys(ses.passAtK).map((k) => (ses.passAtK[k] ? 'solved' : 'not solved')),
      );
      const shown = await page.$$eval('[data-testid=step]', (els) =>
        els.map((e) => ({
          attempt: Number(e.getAttribute('data-attempt')),
          step: Number(e.getAttribute('data-step')),
          observation: e.querySelector('[data-field=observation]')!.textContent,
          action: e.querySelector('[data-field=action]')?.textContent ?? null,
          reward: e.querySelector('[data-field=reward]')!.textContent,
        })),
      );
      const actionRows = traj.steps.filter((r: { kind: string }) => r.kind === 'action');
      expect(shown).toEqual(actionRows.map((r: any) => ({ attempt: r.attempt, step: r.step, observation: r.observation, action: r.action, reward: `reward ${short(r.reward)}` })));
      // observations are shown monospace, line breaks kept (boards read as boards)
      const style = await page.$eval('[data-field=observation]', (e) => [getComputedStyle(e).whiteSpace, getComputedStyle(e).fontFamily]);
      expect(style[0]).toBe('pre');
      expect(style[1]).toMatch(/mono/i);
      const reflections = await page.$$eval('[data-testid=reflection] [data-field=text]', (els) => els.map((e) => e.textContent));
      expect(reflections).toEqual(ses.reflections.map((r: { text: string }) => r.text));
      await shot(page, 'session');
    });

    it('edits a reflection with a confirm step; the next step prompt carries the new text', async () => {
      const text = 'Human note: the prize was not behind the first door; try door 3.';
      await page.goto(`${server.url}/ui/sessions/${activeSessionId}`);
      await page.waitForSelector('[data-testid=reflection-edit]');
      await page.click('[data-testid=reflection-edit]');
      await page.fill('[data-testid=reflection-text]', text);
      await page.click('[data-testid=reflection-save]');
      await page.waitForSelector('[data-testid=reflection-save-confirm]');
      // nothing is written before the confirm
      expect((await api('GET', `/v1/sessions/${activeSessionId}/memory`)).reflections[0].source).toBe('policy');
      await page.click('[data-testid=reflection-save-yes]');
      await page.waitForFunction(() => document.querySelector('[data-testid=reflection] [data-field=source]')?.textContent === 'human');
      expect(await page.textContent('[data-testid=reflection] [data-field=text]')).toBe(text);
      const mem = await api('GET', `/v1/sessions/${activeSessionId}/memory`);
      expect(mem.reflections[0]).toMatchObject({ attempt: 0, text, source: 'human' });
      await api('POST', `/v1/sessions/${activeSessionId}/steps`, { attempt: 1, step: 0, observation: 'Three closed doors.', availableActions: DOORS });
      const traj = await api('GET', `/v1/sessions/${activeSessionId}/trajectory?limit=1000`);
      const next = traj.steps.find((r: { attempt: number; step: number; kind: string }) => r.attempt === 1 && r.step === 0 && r.kind === 'action');
      expect(next.prompt).toContain(text);
      // the open page picks up the new step by polling, without a reload
      await page.waitForSelector('[data-testid=step][data-attempt="1"]', { timeout: 15_000 });
    });

    it('shows the model lineage and stats; activates a version after a confirm', async () => {
      const models = await api('GET', '/v1/models');
      const stats = await api('GET', '/v1/stats');
      await page.click('header nav a:has-text("Models")');
      await page.waitForSelector('[data-testid=models] tbody tr');
      const shown = await rows(page, '[data-testid=models]', 'data-version');
      expect(Object.keys(shown).sort()).toEqual(models.items.map((m: { version: string }) => m.version).sort());
      for (const m of models.items) {
        const gs = stats.groups.filter((g: { modelVersion: string }) => g.modelVersion === m.version);
        const n = gs.reduce((s: number, g: { sessions: number }) => s + g.sessions, 0);
        const pass1 = gs.reduce((s: number, g: any) => s + g.passAtK['1'] * g.sessions, 0) / n;
        expect(shown[m.version]!.slice(0, 8)).toEqual([m.version, m.status, m.parent ?? '–', m.jobId ?? '–', m.engine, m.loaded ? 'yes' : 'no', String(n), pct(pass1)]);
      }
      // lineage: v1 is the child of base, made by the job
      expect(await page.textContent('[data-testid=lineage] li[data-version=base] li[data-version=v1]')).toContain(jobId);
      await shot(page, 'models');
      await page.click('[data-testid=activate-v1]');
      await page.waitForSelector('[data-testid=activate-v1-confirm]');
      expect((await api('GET', '/v1/models')).active).toBe('base');
      await page.click('[data-testid=activate-v1-yes]');
      await page.waitForFunction(() => document.querySelector('[data-testid=active-version]')?.textContent === 'v1');
      expect((await api('GET', '/v1/models')).active).toBe('v1');
      // the parent is offered as the roll back
      expect(await page.textContent('[data-testid=activate-base]')).toBe('Roll back to this');
    });

    it('lists training jobs and shows a finished job with its per-iteration curves', async () => {
      const job = await api('GET', `/v1/training/jobs/${jobId}`);
      await page.click('header nav a:has-text("Training jobs")');
      await page.waitForSelector(`[data-testid=jobs] tbody tr[data-id="${jobId}"]`);
      expect((await rows(page, '[data-testid=jobs]', 'data-id'))[jobId]!.slice(0, 5)).toEqual([jobId, 'lamer', 'succeeded', '', String(job.iterations)]);
      expect(await page.$('[data-testid=start-job] form')).not.toBeNull();
      await shot(page, 'jobs');
      await page.click(`a[href="/ui/jobs/${jobId}"]`);
      await page.waitForSelector('[data-testid=curves]');
      expect(await page.textContent('[data-testid=job-progress]')).toBe(`${pct(job.progress)} · ${job.iterations} iterations`);
      expect(await page.textContent('[data-field=resultVersion]')).toBe('v1');
      for (const k of ['sessions', 'tasks', 'turns', 'samples', 'groups', 'zeroAdvantageGroups', 'zeroAdvantageTurns', 'droppedTurns']) {
        expect(await page.textContent(`[data-testid=data-stats] [data-field=${k}]`), k).toBe(String(job.dataStats[k]));
      }
      expect(await page.textContent('[data-testid=last-metrics] [data-field=loss]')).toBe(job.lastMetrics.loss.toFixed(5));
      expect(await page.$$('[data-testid=curves] canvas')).toHaveLength(7);
      expect(await page.$('[data-testid=cancel-job]')).toBeNull(); // finished: nothing to cancel
      await shot(page, 'job');
    });

    it('compares two versions side by side', async () => {
      await page.goto(`${server.url}/ui/compare?a=base&b=v1&env=minesweeper`);
      await page.waitForSelector('[data-testid=compare-passk] tbody tr');
      for (const v of ['base', 'v1']) {
        const st = await api('GET', `/v1/stats?modelVersion=${v}&env=minesweeper`);
        const row = (await rows(page, '[data-testid=compare-passk]', 'data-group'))[`${v} · minesweeper`];
        expect(row).toEqual([`${v} · minesweeper`, String(st.sessions), ...Object.keys(st.passAtK).map((k) => pct(st.passAtK[k]))]);
        const succ = (await rows(page, '[data-testid=compare-success]', 'data-group'))[`${v} · minesweeper`];
        expect(succ!.slice(1)).toEqual(st.successByAttempt.map(pct));
      }
      expect(await page.inputValue('select[name=a]')).toBe('base');
      expect(await page.inputValue('select[name=b]')).toBe('v1');
      await shot(page, 'compare');
    });

    it('shows a non-admin key no admin control', async () => {
      const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      const p = await watchedPage(ctx);
      await signIn(p, USER);
      expect(await p.textContent('[data-testid=whoami]')).not.toContain('admin');
      expect(await p.$$eval('header nav a', (as) => as.map((a) => a.textContent))).toEqual(['Overview', 'Sessions', 'Compare']);
      await p.waitForSelector('[data-testid=passk] tbody tr');
      expect(await p.$('[data-testid=running-job]')).toBeNull();
      for (const u of ['/ui/models', `/ui/jobs/${jobId}`, '/ui/jobs', '/ui/compare?a=base&b=v1']) {
        await p.goto(server.url + u);
        await p.waitForSelector('main h1');
        expect(await p.$$('[data-testid^=activate-], [data-testid=start-job], [data-testid=cancel-job], [data-testid=lineage]')).toHaveLength(0);
      }
      await ctx.close();
    });

    it('an open tab costs the server under one request per second', async () => {
      const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      await ctx.addInitScript((k) => sessionStorage.setItem('lamer.apiKey', k), ADMIN);
      const p = await watchedPage(ctx);
      await p.clock.install();
      const requests: string[] = [];
      p.on('request', (r) => requests.push(r.url()));
      await p.goto(`${server.url}/ui/`);
      await p.waitForSelector('[data-testid=passk] tbody tr');
      const loaded = requests.length;
      // 120 s of page time, a second at a time, with real time for the answers to arrive
      for (let i = 0; i < 120; i++) {
        await p.clock.runFor(1000);
        await p.waitForTimeout(15);
      }
      const polled = requests.slice(loaded).map((u) => new URL(u).pathname);
      expect(polled.length).toBeGreaterThan(10); // it does refresh
      expect(polled.length).toBeLessThan(120);
      expect(new Set(polled)).toEqual(new Set(['/readyz', '/metrics', '/v1/stats', '/v1/stats/diversity', '/v1/models', '/v1/training/jobs']));
      await ctx.close();
    });

    it('logged no console error on any page', () => {
      expect(consoleErrors).toEqual([]);
    });
  },
);
