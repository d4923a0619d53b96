/**
 * The dashboard at `/ui` (docs/ui.md): a single page app of static ES modules served by this server,
 * no build step and nothing fetched from elsewhere at run time.
 *
 * - `GET /ui/`, `/ui/sessions`, `/ui/sessions/:id`, `/ui/models`, `/ui/jobs`, `/ui/jobs/:id`,
 *   `/ui/compare`: the page (src/ui/index.html); the browser-side router (src/ui/app.js) renders the
 *   view of the URL, so every view has a URL that survives a reload. `/ui` redirects to `/ui/`.
 * - `GET /ui/assets/*`: the app's own modules and CSS (src/ui/*.js, *.css).
 * - `GET /ui/vendor/:file`: an allowlist of the libraries' distribution files, read from
 *   node_modules (Preact, htm, uPlot), mapped to bare specifiers by the page's import map.
 *
 * These routes need no API key: the page holds no data. The app calls the `/v1` API with the key the
 * user signs in with (kept in sessionStorage), so tenants and admin rights are the API's. Every
 * answer carries a Content-Security-Policy that allows only this origin's scripts (and the inline
 * import map, by its sha256), no framing.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { FastifyPluginAsync } from 'fastify';
import fastifyStatic from '@fastify/static';
import { notFound } from '../../agent/errors.js';

/** Folder of the browser app (src/ui). */
export const UI_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../ui');

const require = createRequire(import.meta.url);
/** Root folder of an installed package (its main entry's nearest package.json named `name`). */
function pkgDir(name: string): string {
  let dir = path.dirname(require.resolve(name));
  for (;;) {
    const pj = path.join(dir, 'package.json');
    if (fs.existsSync(pj) && (JSON.parse(fs.readFileSync(pj, 'utf8')) as { name?: string }).name === name) return dir;
    const up = path.dirname(dir);
    if (up === dir) throw new Error(`dashboard: package ${name} not found (run npm ci)`);
    dir = up;
  }
}

/**
 * The vendor files the page may load: URL name -> absolute file. Minified ES module builds where the
 * package ships one (uPlot ships only an unminified ES module).
 */
export function vendorFiles(): Record<string, string> {
  const preact = pkgDir('preact');
  const htm = pkgDir('htm');
  const uplot = pkgDir('uplot');
  return {
    'preact.mjs': path.join(preact, 'dist/preact.module.js'),
    'preact-hooks.mjs': path.join(preact, 'hooks/dist/hooks.module.js'),
    'htm.mjs': path.join(htm, 'dist/htm.module.js'),
    'htm-preact.mjs': path.join(htm, 'preact/index.module.js'),
    'uplot.mjs': path.join(uplot, 'dist/uPlot.esm.js'),
    'uplot.css': path.join(uplot, 'dist/uPlot.min.css'),
  };
}

/** Browser paths of the views (Fastify patterns) that answer the page. */
export const VIEW_ROUTES = ['/ui/', '/ui/sessions', '/ui/sessions/:id', '/ui/models', '/ui/jobs', '/ui/jobs/:id', '/ui/compare'];

/** The inline import map's text, read from index.html, and the CSP that allows exactly it. */
function pageAndPolicy(html: string): { html: string; csp: string } {
  const m = /<script type="importmap">([\s\S]*?)<\/script>/.exec(html);
  if (!m) throw new Error('src/ui/index.html has no import map');
  const hash = createHash('sha256').update(m[1]!).digest('base64');
  const csp = [
    "default-src 'self'",
    `script-src 'self' 'sha256-${hash}'`,
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'none'",
  ].join('; ');
  return { html, csp };
}

const uiRoutes: FastifyPluginAsync = async (app) => {
  // The page tells the app whether the API wants a key (so it shows sign-in without a refused call).
  const page = fs.readFileSync(path.join(UI_DIR, 'index.html'), 'utf8').replace('%AUTH%', app.config.apiKeys.length > 0 ? 'required' : 'open');
  const { html, csp } = pageAndPolicy(page);
  const vendor = vendorFiles();
  for (const [name, file] of Object.entries(vendor)) {
    if (!fs.existsSync(file)) throw new Error(`dashboard: vendor file ${name} not found at ${file} (run npm ci)`);
  }

  // The app's own modules and styles only: `index.html` is served through the view routes (with its
  // CSP), and the type declarations for the tests (`*.d.ts`) are not served.
  await app.register(fastifyStatic, {
    root: UI_DIR,
    prefix: '/ui/assets/',
    index: false,
    wildcard: true,
    allowedPath: (p) => /\.(js|css)$/.test(p),
    cacheControl: true,
    maxAge: 0,
    // v10 passes the Fastify reply (older versions passed the raw response).
    setHeaders: (reply: { header: (k: string, v: string) => unknown }) => reply.header('content-security-policy', csp),
  });

  const h = { schema: { hide: true } };
  app.get('/ui', h, async (_req, reply) => reply.redirect('/ui/', 308));
  for (const url of VIEW_ROUTES) {
    app.get(url, h, async (_req, reply) => {
      reply.header('content-security-policy', csp).header('cache-control', 'no-cache').type('text/html; charset=utf-8');
      return html;
    });
  }
  app.get<{ Params: { file: string } }>('/ui/vendor/:file', h, async (req, reply) => {
    const file = vendor[req.params.file];
    if (!file) throw notFound(`dashboard file ${req.params.file}`);
    // Library files change only with package-lock.json; revalidated by ETag/Last-Modified.
    return reply.header('content-security-policy', csp).sendFile(path.basename(file), path.dirname(file), { cacheControl: true, maxAge: 0 });
  });
};

export default uiRoutes;
