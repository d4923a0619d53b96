/**
 * The committed OpenAPI document is current (regenerated and compared) and valid OpenAPI 3.1; the
 * API page at /docs is served with a Content-Security-Policy and frame protection, and still
 * renders every route in a real browser under that policy (headless Chromium, skipped with the
 * reason in its name when none is installed).
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import SwaggerParser from '@apidevtools/swagger-parser';
import { buildOpenApiDocument, formatOpenApi } from '../../../src/app.js';
import { startTestServer, type TestServer } from '../../helpers/index.js';

const CHROMIUM = [process.env.LAMER_CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'].find(
  (p): p is string => !!p && fs.existsSync(p),
);

const file = path.resolve(import.meta.dirname, '..', '..', '..', 'openapi', 'openapi.json');

describe('openapi/openapi.json', () => {
  it('matches the document generated from the route schemas (run `npm run openapi` when this fails)', async () => {
    const generated = formatOpenApi(await buildOpenApiDocument());
    expect(fs.readFileSync(file, 'utf8')).toBe(generated);
  });

  it('is a valid OpenAPI 3.1 document with every /v1 route', async () => {
    const doc = JSON.parse(fs.readFileSync(file, 'utf8'));
    const api = (await SwaggerParser.validate(structuredClone(doc))) as { openapi: string; paths: Record<string, unknown> };
    expect(api.openapi).toBe('3.1.0');
    expect(Object.keys(api.paths).sort()).toEqual([
      '/healthz',
      '/metrics',
      '/openai/v1/chat/completions',
      '/openai/v1/completions',
      '/openai/v1/models',
      '/openai/v1/models/{model}',
      '/readyz',
      '/v1/models',
      '/v1/models/{version}',
      '/v1/models/{version}/activate',
      '/v1/replays',
      '/v1/replays/{id}',
      '/v1/sessions',
      '/v1/sessions/{id}',
      '/v1/sessions/{id}/attempts/{attempt}/end',
      '/v1/sessions/{id}/memory',
      '/v1/sessions/{id}/memory/{attempt}',
      '/v1/sessions/{id}/openai/v1/chat/completions',
      '/v1/sessions/{id}/openai/v1/completions',
      '/v1/sessions/{id}/openai/v1/models',
      '/v1/sessions/{id}/replay',
      '/v1/sessions/{id}/steps',
      '/v1/sessions/{id}/trajectory',
      '/v1/stats',
      '/v1/stats/diversity',
      '/v1/steps:batch',
      '/v1/training/jobs',
      '/v1/training/jobs/{id}',
      '/v1/training/jobs/{id}/cancel',
      '/v1/whoami',
    ]);
  });
});

describe('/docs', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => {
    await s.close();
  });

  it('every /docs answer has a CSP without inline or eval scripts, frame-ancestors none, X-Frame-Options DENY and nosniff', async () => {
    for (const p of ['/docs', '/docs/', '/docs/json', '/docs/static/swagger-ui-bundle.js', '/docs/static/swagger-initializer.js', '/docs/static/swagger-ui.css']) {
      const r = await fetch(s.url + p, { redirect: 'manual' });
      await r.arrayBuffer();
      expect(r.status, p).toBeLessThan(400);
      const csp = r.headers.get('content-security-policy') ?? '';
      expect(csp, p).toContain("frame-ancestors 'none'");
      expect(csp, p).toContain("default-src 'self'");
      expect(csp, p).toMatch(/script-src 'self'(;|$)/);
      expect(csp, p).toContain("object-src 'none'");
      expect(csp, p).not.toMatch(/unsafe-eval|unsafe-inline[^;]*;?\s*$|script-src[^;]*unsafe-inline/);
      expect(r.headers.get('x-frame-options'), p).toBe('DENY');
      expect(r.headers.get('x-content-type-options'), p).toBe('nosniff');
    }
  });

  it.skipIf(!CHROMIUM)(`renders every route under its CSP, with no violation or console error (Chromium: ${CHROMIUM ?? 'none found, skipped'})`, async () => {
    const { chromium } = await import('playwright-core');
    const browser = await chromium.launch({ executablePath: CHROMIUM!, args: ['--no-sandbox'] });
    try {
      const page = await browser.newPage();
      const problems: string[] = [];
      page.on('console', (m) => {
        if (m.type() === 'error') problems.push(`console: ${m.text()}`);
      });
      page.on('pageerror', (e) => problems.push(`page: ${e.message}`));
      await page.addInitScript(() => {
        document.addEventListener('securitypolicyviolation', (e) => {
          (window as unknown as { violations: string[] }).violations ??= [];
          (window as unknown as { violations: string[] }).violations.push(`${e.violatedDirective} ${e.blockedURI}`);
        });
      });
      await page.goto(s.url + '/docs/');
      await page.waitForSelector('.opblock-summary', { timeout: 20_000 });
      expect(await page.locator('.opblock').count()).toBeGreaterThanOrEqual(25);
      // biome-ignore lint/performance/useDomNodeTextContent: Playwright's Locator.innerText, not the DOM property
      expect(await page.locator('.info .title').innerText()).toContain('lamer-server');
      // open one operation: its schema and example render too
      await page.locator('.opblock-summary').first().click();
      await page.waitForSelector('.opblock-body', { timeout: 10_000 });
      const violations = await page.evaluate(() => (window as unknown as { violations?: string[] }).violations ?? []);
      expect(violations).toEqual([]);
      expect(problems).toEqual([]);
    } finally {
      await browser.close();
    }
  }, 60_000);
});
