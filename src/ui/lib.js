// Shared browser-side helpers of the dashboard: the API client (Bearer key from sessionStorage,
// problem+json errors), the router (History API), polling with backoff, number formats and the
// parser of the server's Prometheus metrics. Plain ES module, no build step.
import { useEffect, useRef, useState, useCallback } from 'preact/hooks';

const KEY = 'lamer.apiKey';

/** The API key of this browser session, or '' (no keys configured, or not signed in yet). */
export const getKey = () => sessionStorage.getItem(KEY) ?? '';
/** Sets (or with '' removes) the key; the identity read with the previous key is forgotten. */
export const setKey = (k) => {
  sessionStorage.removeItem(WHO);
  if (k) sessionStorage.setItem(KEY, k); else sessionStorage.removeItem(KEY);
};
const WHO = 'lamer.whoami';
/** The `GET /v1/whoami` answer for the stored key ({ tenant, admin, authRequired }), or null. */
export const getIdentity = () => {
  try { return JSON.parse(sessionStorage.getItem(WHO) ?? 'null'); } catch { return null; }
};
export const setIdentity = (w) => sessionStorage.setItem(WHO, JSON.stringify(w));

/** An API error: HTTP status and the RFC 9457 problem document (or a plain message). */
export class ApiError extends Error {
  constructor(status, problem) {
    super(problem?.detail || problem?.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

/** Listeners told when the API answers 401 (the key was removed or is wrong): the app shows sign-in. */
const unauthorizedListeners = new Set();
export const onUnauthorized = (fn) => (unauthorizedListeners.add(fn), () => unauthorizedListeners.delete(fn));

/**
 * Calls the API: `method` and `path` (with query), JSON `body`; returns the parsed JSON.
 * @throws ApiError for a non-2xx answer (401 also tells the listeners).
 */
export async function api(method, path, body) {
  const headers = { accept: 'application/json' };
  const key = getKey();
  if (key) headers.authorization = `Bearer ${key}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = { detail: text.slice(0, 300) }; }
  if (!r.ok) {
    if (r.status === 401) for (const fn of unauthorizedListeners) fn();
    throw new ApiError(r.status, data);
  }
  return data;
}

/** Query string of the defined, non-empty entries of `o` ('' when none). */
export function qs(o) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(o)) if (v !== undefined && v !== null && v !== '') p.set(k, String(v));
  const s = p.toString();
  return s ? `?${s}` : '';
}

// ------------------------------------------------------------------ router

const routeListeners = new Set();
/** Go to `href` (a /ui path) without reloading; `replace` rewrites the history entry. */
export function navigate(href, replace = false) {
  if (replace) history.replaceState(null, '', href); else history.pushState(null, '', href);
  for (const fn of routeListeners) fn();
  if (!replace) window.scrollTo(0, 0);
}
window.addEventListener('popstate', () => { for (const fn of routeListeners) fn(); });
// Links inside the app are handled by the router (plain left clicks only; new tabs work as usual).
document.addEventListener('click', (e) => {
  const a = e.target.closest?.('a[href]');
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || a.target) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || !url.pathname.startsWith('/ui/')) return;
  e.preventDefault();
  navigate(url.pathname + url.search);
});

/** The current location as { path, query } and a re-render on every navigation. */
export function useLocation() {
  const [, force] = useState(0);
  useEffect(() => {
    const fn = () => force((n) => n + 1);
    routeListeners.add(fn);
    return () => routeListeners.delete(fn);
  }, []);
  return { path: location.pathname, query: new URLSearchParams(location.search) };
}

// ------------------------------------------------------------------ polling

/**
 * Loads `load()` now and again every `intervalMs` while `live` is true, or `live(data)` is true for a
 * function (e.g. only while the session is active), and the page is visible, backing
 * off (x2 per failure, up to 60 s) while it fails. One request chain per hook: the next load starts
 * only after the previous one finished, so a slow server is never flooded. `deps` restart it.
 * @returns { data, error, loading, reload }
 */
export function usePoll(load, deps, { intervalMs = 10000, live = true } = {}) {
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const gen = useRef(0);
  const timer = useRef(null);
  const run = useCallback(async (g, delay) => {
    clearTimeout(timer.current);
    let next = delay;
    let again = typeof live === 'function' ? true : live;
    try {
      const data = await load();
      if (g !== gen.current) return;
      setState({ data, error: null, loading: false });
      next = intervalMs;
      if (typeof live === 'function') again = live(data);
    } catch (error) {
      if (g !== gen.current) return;
      setState((s) => ({ data: s.data, error, loading: false }));
      next = Math.min(60000, Math.max(intervalMs, delay * 2));
      if (error.status === 401 || error.status === 403 || error.status === 404) next = 0; // no point retrying
    }
    if (again && next > 0) timer.current = setTimeout(() => schedule(g, next), next);
  }, deps); // eslint-disable-line
  // While the tab is hidden nothing is polled; the next load runs when it is shown again.
  const schedule = (g, delay) => {
    if (g !== gen.current) return;
    if (document.hidden) {
      const onShow = () => { document.removeEventListener('visibilitychange', onShow); run(g, delay); };
      document.addEventListener('visibilitychange', onShow);
      return;
    }
    run(g, delay);
  };
  useEffect(() => {
    const g = ++gen.current;
    setState((s) => ({ ...s, loading: true }));
    run(g, intervalMs);
    return () => { gen.current++; clearTimeout(timer.current); };
  }, deps); // eslint-disable-line
  const reload = () => { const g = ++gen.current; run(g, intervalMs); };
  return { ...state, reload };
}

// ------------------------------------------------------------------ formats

export const pct = (x) => (x === null || x === undefined || Number.isNaN(x) ? '–' : `${(100 * x).toFixed(1)}%`);
export const num = (x, d = 3) => (x === null || x === undefined || Number.isNaN(x) ? '–' : Number(x).toFixed(d));
/** A value as shown on the dashboard: at most 4 decimals, no float noise (-0.8999999999999999 -> -0.9). */
export const short = (x) => (x === null || x === undefined ? '–' : String(Number(Number(x).toFixed(4))));
export const when = (iso) => (iso ? new Date(iso).toLocaleString() : '–');
/** pass@k keys of a `{ "1": x, "2": y }` object, as sorted numbers. */
export const ks = (o) => Object.keys(o ?? {}).map(Number).sort((a, b) => a - b);

export { parseProm, stepFigures, histogramQuantile, histogramDelta } from './metrics.js';
