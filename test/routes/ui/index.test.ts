/**
 * The dashboard's routes (src/routes/ui): each view's URL answers the page with a CSP that allows
 * exactly its import map; the app's modules and the allowlisted library files are served, nothing
 * else (no index.html through the assets route, no path traversal, no other node_modules file); the
 * page tells the app whether keys are needed, and needs none itself; every import of every module
 * the page loads resolves (through the import map or a relative path) and is preloaded; the
 * JavaScript sent stays under 300 KB gzipped.
 */
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawCall, startTestServer, type TestServer } from '../../helpers/index.js';
import { VIEW_ROUTES } from '../../../src/routes/ui/index.js';

let open: TestServer;
let keyed: TestServer;
beforeAll(async () => {
  open = await startTestServer();
  keyed = await startTestServer({ apiKeys: [{ key: 'k', tenant: 'acme', admin: false }] });
});
afterAll(async () => {
  await open.close();
  await keyed.close();
});

async function get(s: TestServer, p: string) {
  const r = await fetch(s.url + p, { redirect: 'manual' });
  return { status: r.status, type: r.headers.get('content-type') ?? '', headers: r.headers, text: await r.text() };
}

const importMapOf = (html: string) => /<script type="importmap">([\s\S]*?)<\/script>/.exec(html)![1]!;

/**
 * Import specifiers of an ES module's static import and re-export statements (`import x from "m"`,
 * `export {a} from "m"`, `import "m"`, minified or not); a statement starts a line or follows `;`/`}`,
 * and its clause holds only names, braces, commas, `*` and `as`.
 */
function importsOf(js: string): string[] {
  return [...js.matchAll(/(?:^|[;}\n])\s*(?:import|export)\s*(?:[\w$*{}\s,]+?\s*from\s*)?["']([^"']+)["']/g)].map((m) => m[1]!);
}

describe('dashboard routes', () => {
  it('every view URL answers the page with a CSP allowing exactly its import map', async () => {
    const urls = VIEW_ROUTES.map((u) => u.replace(':id', 'ses_x'));
    expect(urls).toEqual(['/ui/', '/ui/sessions', '/ui/sessions/ses_x', '/ui/models', '/ui/jobs', '/ui/jobs/ses_x', '/ui/compare']);
    for (const u of urls) {
      const r = await get(open, u + (u === '/ui/compare' ? '?a=x&b=y' : ''));
      expect(r.status, u).toBe(200);
      expect(r.type).toBe('text/html; charset=utf-8');
      const hash = createHash('sha256').update(importMapOf(r.text)).digest('base64');
      const csp = r.headers.get('content-security-policy')!;
      expect(csp).toContain(`script-src 'self' 'sha256-${hash}'`);
      expect(csp).toContain("default-src 'self'");
      expect(csp).toContain("frame-ancestors 'none'");
      expect(r.text).toContain('<meta name="lamer-auth" content="open">');
    }
    const redirect = await get(open, '/ui');
    expect(redirect.status).toBe(308);
    expect(redirect.headers.get('location')).toBe('/ui/');
  });

  it('needs no key for the page; the page says keys are required; the API still does', async () => {
    const r = await get(keyed, '/ui/sessions');
    expect(r.status).toBe(200);
    expect(r.text).toContain('<meta name="lamer-auth" content="required">');
    expect((await get(keyed, '/v1/sessions')).status).toBe(401);
  });

  it('serves the referenced files and nothing else', async () => {
    const page = (await get(open, '/ui/')).text;
    const map = JSON.parse(importMapOf(page)) as { imports: Record<string, string> };
    const refs = [...page.matchAll(/(?:href|src)="(\/ui\/[^"]+)"/g)].map((m) => m[1]!);
    expect(refs.slice(0, 2)).toEqual(['/ui/vendor/uplot.css', '/ui/assets/style.css']);
    expect(refs[refs.length - 1]).toBe('/ui/assets/app.js');
    for (const u of [...refs, ...Object.values(map.imports)]) {
      const r = await get(open, u);
      expect(r.status, u).toBe(200);
      expect(r.type, u).toMatch(u.endsWith('.css') ? /^text\/css/ : /^(application|text)\/javascript/);
    }
    for (const bad of ['/ui/assets/index.html', '/ui/assets/metrics.d.ts', '/ui/assets/nope.js', '/ui/vendor/preact.js', '/ui/vendor/..%2Fpackage.json', '/ui/nowhere', '/ui/sessions/a/b']) {
      const r = await get(open, bad);
      expect(r.status, bad).toBe(404);
      expect(r.type).toMatch(/^application\/problem\+json/);
    }
    for (const raw of ['/ui/assets/../../app.ts', '/ui/assets/%2e%2e/%2e%2e/app.ts', '/ui/assets/..%2f..%2fapp.ts', '/ui/vendor/../../package.json']) {
      const r = await rawCall(open.url, 'GET', raw);
      expect([400, 403, 404], raw).toContain(r.status);
      expect(JSON.stringify(r.body)).not.toContain('buildApp');
    }
  });

  it('every import of every module the page loads resolves, and the JavaScript is under 300 KB gzipped', async () => {
    const page = (await get(open, '/ui/')).text;
    const map = JSON.parse(importMapOf(page)) as { imports: Record<string, string> };
    const seen = new Map<string, string>();
    const queue = ['/ui/assets/app.js', ...Object.values(map.imports)];
    while (queue.length) {
      const u = queue.shift()!;
      if (seen.has(u)) continue;
      const r = await get(open, u);
      expect(r.status, u).toBe(200);
      seen.set(u, r.text);
      for (const spec of importsOf(r.text)) {
        if (spec.startsWith('./')) queue.push(new URL(spec, `http://x${u}`).pathname);
        else {
          expect(map.imports, `${u} imports ${spec}`).toHaveProperty([spec]);
          queue.push(map.imports[spec]!);
        }
      }
    }
    expect([...seen.keys()].filter((u) => u.startsWith('/ui/assets/')).sort()).toEqual(['/ui/assets/app.js', '/ui/assets/charts.js', '/ui/assets/figures.js', '/ui/assets/lib.js', '/ui/assets/metrics.js', '/ui/assets/views.js']);
    // every module is preloaded (one parallel round of requests, not a waterfall of imports)
    const preloaded = [...page.matchAll(/<link rel="modulepreload" href="([^"]+)">/g)].map((m) => m[1]!);
    expect(new Set([...preloaded, '/ui/assets/app.js'])).toEqual(new Set(seen.keys()));
    const gzipped = [...seen.values()].reduce((n, js) => n + gzipSync(js).length, 0);
    expect(gzipped).toBeLessThan(300 * 1024);
  });
});
