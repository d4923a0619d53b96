/**
 * Two dashboard views in headless Chromium (as test/routes/ui/browser.test.ts, but on the scripted
 * test engine, so it starts in seconds):
 * - the overview shows the memory groups of one version and env side by side, independent retries
 *   first, with pass@k and the gain of memory over independent retries, equal to `GET /v1/stats`;
 * - a session page states its limits as actions (what maxSteps caps), counts an attempt's actions
 *   and observations, puts "(invalid)" on the card of the rejected action, and shows every card of
 *   an attempt without a horizontal scroll;
 * - the models page draws the promotion gates of the versions (pass@k of each gated version against
 *   the version active at its gate, the difference with its interval, the outcome), from versions
 *   registered with gate figures;
 * - a session driven through its OpenAI-compatible endpoint shows its turns as steps (with the
 *   API, latency, finish reason and memory of each), the end call's row and the reflection.
 * - the compare view replays version A's sessions on version B and shows, per recorded step, what
 *   B would have done beside what A did, equal to the stored report (`GET /v1/replays/{id}`).
 *
 * Skipped, with that reason in its name, when no Chromium binary is found.
 */
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { startTestServer, type TestServer } from '../../helpers/index.js';

const CHROMIUM = [process.env.LAMER_CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'].find(
  (p): p is string => !!p && fs.existsSync(p),
);
const KEY = 'k-admin-views-0123';
const H = { authorization: `Bearer ${KEY}` };

let s: TestServer;
let browser: Browser;
let page: Page;
let sessionId: string;

/** Plays one session of env `env`: each attempt one action, then done with success as given. */
async function play(env: string, taskId: string, maxAttempts: number, outcomes: boolean[]): Promise<void> {
  const c = await s.call('POST', '/v1/sessions', { taskId, env, instructions: 'x', maxAttempts, maxSteps: 3, mode: 'eval' }, H);
  expect(c.status).toBe(201);
  for (const [a, ok] of outcomes.entries()) {
    expect((await s.call('POST', `/v1/sessions/${c.body.id}/steps`, { attempt: a, step: 0, observation: 'o', availableActions: ['go'] }, H)).status).toBe(200);
    expect((await s.call('POST', `/v1/sessions/${c.body.id}/steps`, { attempt: a, step: 1, observation: 'end', reward: ok ? 1 : 0, done: true, success: ok }, H)).status).toBe(200);
  }
}

beforeAll(async () => {
  if (!CHROMIUM) return;
  s = await startTestServer({ apiKeys: [{ key: KEY, tenant: 'acme', admin: true }] });
  // env "grid": LaMer sessions (solved at attempt 1 and 0) and independent retries of the same tasks
  await play('grid', 'T1', 3, [false, true]);
  await play('grid', 'T2', 3, [true]);
  for (const ok of [false, false, true]) await play('grid', 'T1', 1, [ok]);
  await play('grid', 'T2', 1, [false]);
  await play('grid', 'T2', 1, [false]);
  await play('grid', 'T2', 1, [false]);

  // a session of 3 attempts x 7 actions: attempt 0 plays all 7 (8 observations); its action at
  // step 2 is rejected, which the env reports with the observation of step 3
  const c = await s.call('POST', '/v1/sessions', { taskId: 'long', env: 'grid', instructions: 'x', maxAttempts: 3, maxSteps: 7 }, H);
  sessionId = c.body.id;
  const board = Array.from({ length: 6 }, () => '? '.repeat(12).trim()).join('\n');
  for (let t = 0; t <= 7; t++) {
    const r = await s.call('POST', `/v1/sessions/${sessionId}/steps`, { attempt: 0, step: t, observation: `${board}\nturn ${t}`, reward: 0, invalidAction: t === 3, ...(t < 7 ? { availableActions: [`act ${t}`] } : {}) }, H);
    expect(r.status).toBe(200);
    expect(r.body.action).toBe(t < 7 ? `act ${t}` : null);
  }

  // a second version for the compare view (the test engine serves any version it is given)
  await s.app.repos.models.insert({
    version: 'test2', parent: 'test', jobId: null, checkpointDir: '', status: 'candidate', metrics: {}, createdAt: Date.now(), engine: 'builtin', engineConfig: null,
  });

  // versions made by gated jobs, as GET /v1/models gives them (the gate itself: test/training/gate-routes.test.ts)
  const report = (promoted: boolean, cand: number, inc: number, status: string) => ({
    env: 'minesweeper-6x6-3', tasks: 64, attempts: 3, seedStart: 1e9, metric: 'pass@3', margin: 0.02, decision: 'mean', concurrency: 4, availableActions: true,
    sampling: { temperature: 0.7, topP: 0.8, topK: 20 }, status, progress: 1, candidate: null, incumbent: 'test', promoted, reason: `reason ${status}`,
    candidatePassAtK: { '1': cand / 2, '2': cand, '3': cand }, incumbentPassAtK: { '1': inc / 2, '2': inc, '3': inc },
    difference: { mean: cand - inc, lo: cand - inc - 0.1, hi: cand - inc + 0.1, level: 0.95, resamples: 10000, tasks: 64 },
    sessionErrors: { candidate: 0, incumbent: 0 }, startedAt: null, finishedAt: null,
  });
  const gated = { jobId: null, checkpointDir: '', status: 'candidate' as const, engine: 'builtin' as const, engineConfig: null };
  s.app.repos.models.insert({
    ...gated, version: 'g1', parent: 'test', metrics: { gate: { ...report(true, 0.5, 0.25, 'passed'), candidate: 'g1' } }, createdAt: Date.now() + 1,
  });
  s.app.repos.models.insert({
    ...gated, version: 'g2', parent: 'g1', metrics: { gate: { ...report(false, 0.4, 0.5, 'failed'), candidate: 'g2', incumbent: 'g1' } }, createdAt: Date.now() + 2,
  });

  const { chromium } = await import('playwright-core');
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
  page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
  await page.goto(`${s.url}/ui/`);
  await page.fill('input[name=apiKey]', KEY);
  await page.click('button[type=submit]');
  await page.waitForSelector('[data-testid=whoami]');
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await s?.close();
});

describe.skipIf(!CHROMIUM)(`dashboard views in headless Chromium${CHROMIUM ? '' : ' (SKIPPED: no chromium binary; apt-get install chromium, or set LAMER_CHROMIUM)'}`, () => {
  it('shows the memory groups of a version and env side by side on the overview', async () => {
    await page.goto(`${s.url}/ui/`);
    await page.waitForSelector('[data-testid=memory-compare] tbody tr');
    const stats = (await s.call('GET', '/v1/stats?env=grid&mode=eval', undefined, H)).body;
    const byMemory = Object.fromEntries(stats.groups.map((g: { memory: string }) => [g.memory, g]));
    const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
    const table = await page.$$eval('[data-testid=memory-compare][data-block="test · grid · eval"] tbody tr', (trs) =>
      trs.map((tr) => [tr.getAttribute('data-memory'), ...[...tr.querySelectorAll('td')].map((td) => td.textContent!.trim())]),
    );
    // T1: F F S, T2: F F F as independent retries; LaMer: T1 at attempt 1, T2 at attempt 0
    expect(byMemory.none.passAtK).toEqual({ '1': 0, '2': 0, '3': 0.5 });
    expect(byMemory.reflection_only.passAtK).toEqual({ '1': 0.5, '2': 1, '3': 1 });
    expect(table).toEqual([
      ['none', 'independent retries (no memory)', '6', '0.0%', '0.0%', '50.0%', '–'],
      ['reflection_only', 'memory: reflections', '2', pct(0.5), pct(1), pct(1), '+50.0 pts'],
    ]);
  });

  it('draws the promotion gates of the versions on the models page, with figures and outcomes', async () => {
    await page.goto(`${s.url}/ui/models`);
    await page.waitForSelector('[data-testid=gates] tbody tr[data-version=g2]');
    const rows = await page.$$eval('[data-testid=gates] tbody tr', (trs) => trs.map((tr) => ({
      version: tr.getAttribute('data-version'),
      ...Object.fromEntries([...tr.querySelectorAll('[data-field]')].map((td) => [td.getAttribute('data-field'), td.textContent!.trim()])),
    })));
    expect(rows).toEqual([
      { version: 'g1', gate: 'passed', candidate: '50.0%', incumbent: '25.0%test', difference: '+25.0 pts [+15.0 pts, +35.0 pts]', margin: '+2.0 pts', rise: '–', outcome: 'promotedreason passed' },
      { version: 'g2', gate: 'failed', candidate: '40.0%', incumbent: '50.0%g1', difference: '−10.0 pts [−20.0 pts, +0.0 pts]', margin: '+2.0 pts', rise: '−10.0 pts', outcome: 'not promotedreason failed' },
    ]);
    expect(await page.$('[data-testid=gates-chart] canvas')).not.toBeNull();
  });

  it('shows a session page with true step counts, the invalid tag on its own card, and every card in view', async () => {
    await page.goto(`${s.url}/ui/sessions/${sessionId}`);
    await page.waitForSelector('[data-testid=attempt][data-attempt="0"] [data-testid=step][data-step="7"]');
    expect(await page.textContent('[data-field=limits]')).toBe('3 attempts × up to 7 actions (8 observations with the final one)');
    expect(await page.textContent('[data-testid=attempt][data-attempt="0"] h2')).toContain('7 actions · 8 observations');
    expect(await page.textContent('[data-testid=attempts] tr[data-attempt="0"] [data-field=actions]')).toBe('7');
    expect(await page.textContent('[data-testid=attempts] tr[data-attempt="0"] [data-field=observations]')).toBe('8');
    const tagged = await page.$$eval('[data-testid=step]', (cards) => cards.filter((c) => c.querySelector('.bad')).map((c) => c.getAttribute('data-step')));
    expect(tagged).toEqual(['2']);
    // no horizontal scroll: the timeline is no wider than its box and the final card lies inside the viewport
    const fit = await page.$eval('[data-testid=attempt][data-attempt="0"] .timeline', (el) => ({ scroll: el.scrollWidth, client: el.clientWidth }));
    expect(fit.scroll).toBeLessThanOrEqual(fit.client);
    const last = await page.$eval('[data-testid=step][data-step="7"]', (el) => el.getBoundingClientRect().right);
    expect(last).toBeLessThanOrEqual(1280);
  });

  it('replays the sessions of version A on version B in the compare view: what B would have done at each recorded step', async () => {
    const errors: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text());
    });
    await page.goto(`${s.url}/ui/compare?a=test&b=test2&env=grid`);
    await page.waitForSelector('[data-testid=replay-none]');
    await page.fill('input[name=replay-sessions]', '2');
    await page.click('[data-testid=replay-run]');
    await page.waitForSelector('[data-testid=replay-steps] tbody tr');
    const id = new URL(page.url()).searchParams.get('replay');
    expect(id).toMatch(/^rpl_/);
    const report = (await s.call('GET', `/v1/replays/${id}`, undefined, H)).body;
    expect(report.request.filter).toEqual({ modelVersion: 'test', env: 'grid', limit: 2 });
    expect(report.sessions.map((x: { id: string }) => x.id)[0]).toBe(sessionId); // the newest session of test on grid
    const shown = await page.$$eval('[data-testid=replay-step]', (trs) =>
      trs.map((tr) => [tr.getAttribute('data-session'), tr.getAttribute('data-attempt'), tr.getAttribute('data-step'),
        ...['observation', 'recorded', 'replayed', 'diff'].map((f) => tr.querySelector(`[data-field=${f}]`)!.textContent!.trim())]),
    );
    const nats = (x: number) => `${x >= 0 ? '+' : '−'}${Math.abs(x).toFixed(3)}`;
    expect(shown).toEqual(
      report.steps.map((x: any) => [x.sessionId, String(x.attempt), String(x.step), x.observation, x.recorded.action, x.replayed.action, nats(x.logprobDiff)]),
    );
    expect(shown).toHaveLength(8);
    expect(await page.textContent('[data-testid=replay-summary] [data-field=agreement]')).toBe(`${(100 * report.summary.agreement).toFixed(1)}%`);
    // the URL names the report: a reload shows it again
    await page.reload();
    await page.waitForSelector('[data-testid=replay-steps] tbody tr');
    expect(await page.$$('[data-testid=replay-step]')).toHaveLength(8);
    expect(errors).toEqual([]);
  });

  it("shows a session driven through its OpenAI endpoint like any other: turns as steps, the end call's row, the reflection", async () => {
    const c = await s.call('POST', '/v1/sessions', { taskId: 'agent', env: 'grid', instructions: 'x', maxAttempts: 2, maxSteps: 3 }, H);
    const id = c.body.id as string;
    const turn = (content: string, stream = false) =>
      s.call('POST', `/v1/sessions/${id}/openai/v1/chat/completions`, { model: 'gpt-4o-mini', messages: [{ role: 'user', content }], stream }, H);
    expect((await turn('board A')).status).toBe(200);
    expect((await turn('board B', true)).status).toBe(200);
    expect((await s.call('POST', `/v1/sessions/${id}/attempts/0/end`, { reward: -1, observation: 'lost' }, H)).status).toBe(200);
    expect((await turn('board A')).status).toBe(200);
    expect((await s.call('POST', `/v1/sessions/${id}/attempts/1/end`, { reward: 1, success: true, observation: 'won' }, H)).status).toBe(200);
    const rows = (await s.call('GET', `/v1/sessions/${id}/trajectory`, undefined, H)).body.steps as Array<{ kind: string; action: string | null }>;

    await page.goto(`${s.url}/ui/sessions/${id}`);
    await page.waitForSelector('[data-testid=attempt][data-attempt="1"] [data-testid=step][data-step="1"]');
    expect(await page.textContent('[data-testid=attempts] tr[data-attempt="0"] [data-field=actions]')).toBe('2');
    expect(await page.textContent('[data-testid=attempts] tr[data-attempt="0"] [data-field=observations]')).toBe('3');
    expect(await page.textContent('[data-testid=attempts] tr[data-attempt="1"] [data-field=return]')).toBe('1');
    expect(await page.textContent('[data-testid=session-passk] td[data-k="2"]')).toBe('solved');
    const cards = await page.$$eval('[data-testid=step]', (els) => els.map((el) => ({
      at: `${el.getAttribute('data-attempt')}/${el.getAttribute('data-step')}`,
      turn: el.querySelector('[data-field=turn]')?.textContent ?? null,
      observation: el.querySelector('[data-field=observation]')!.textContent,
      action: el.querySelector('[data-field=action]')?.textContent ?? null,
    })));
    expect(cards.map((x) => [x.at, x.observation, x.action])).toEqual([
      ['0/0', 'board A', rows[0]!.action], ['0/1', 'board B', rows[1]!.action], ['0/2', 'lost', null], ['1/0', 'board A', rows[4]!.action], ['1/1', 'won', null],
    ]);
    // a turn's card names its API, latency and finish reason, and whether the memory was added
    expect(cards[0]!.turn).toMatch(/^chat turn · \d+ ms · stop$/);
    expect(cards[3]!.turn).toMatch(/^chat turn · \d+ ms · stop · memory$/);
    expect(cards[2]!.turn).toBeNull();
    expect(await page.textContent('[data-testid=reflection][data-attempt="0"] [data-field=source]')).toBe('policy');
  });
});
