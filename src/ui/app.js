// The dashboard's entry module: sign-in, the header, and the router that picks a view from the URL.
// Views live in views.js; every view is reachable by its own URL (/ui/..., see src/routes/ui).
import { html, render } from 'htm/preact';
import { useEffect, useState } from 'preact/hooks';
import { api, getKey, setKey, getIdentity, setIdentity, onUnauthorized, useLocation, ApiError } from './lib.js';
import { Overview, Sessions, SessionPage, Models, Jobs, JobPage, Compare, NotFound } from './views.js';

const NAV = [
  ['/ui/', 'Overview'],
  ['/ui/sessions', 'Sessions'],
  ['/ui/models', 'Models'],
  ['/ui/jobs', 'Training jobs'],
  ['/ui/compare', 'Compare'],
];

/** Views whose API routes need an admin key (the model and training routes): hidden from other keys. */
const ADMIN_VIEWS = ['/ui/models', '/ui/jobs'];

/** The view for a path: [component, params]. */
function route(path) {
  let m;
  if (path === '/ui/' || path === '/ui') return [Overview, {}];
  if (path === '/ui/sessions') return [Sessions, {}];
  if ((m = /^\/ui\/sessions\/([^/]+)$/.exec(path))) return [SessionPage, { id: decodeURIComponent(m[1]) }];
  if (path === '/ui/models') return [Models, {}];
  if (path === '/ui/jobs') return [Jobs, {}];
  if ((m = /^\/ui\/jobs\/([^/]+)$/.exec(path))) return [JobPage, { id: decodeURIComponent(m[1]) }];
  if (path === '/ui/compare') return [Compare, {}];
  return [NotFound, {}];
}

function SignIn({ onDone, error }) {
  const [key, setK] = useState('');
  const [err, setErr] = useState(error);
  const [busy, setBusy] = useState(false);
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true);
    setKey(key.trim());
    try {
      const w = await api('GET', '/v1/whoami');
      setIdentity(w);
      onDone(w);
    } catch (x) {
      setKey('');
      setErr(x.status === 401 ? 'This API key is not known to the server.' : x.message);
    } finally {
      setBusy(false);
    }
  };
  return html`<div class="card signin">
    <h1>lamer-server</h1>
    <p class="muted">Sign in with an API key (LAMER_API_KEYS). It is kept for this browser tab only (sessionStorage) and sent as a Bearer token.</p>
    ${err && html`<div class="error" data-testid="signin-error">${err}</div>`}
    <form onSubmit=${submit}>
      <label>API key<br /><input type="password" name="apiKey" autocomplete="off" value=${key} onInput=${(e) => setK(e.target.value)} style="width:100%" required /></label>
      <p><button class="primary" type="submit" disabled=${busy}>Sign in</button></p>
    </form>
  </div>`;
}

function App() {
  const loc = useLocation();
  const [me, setMe] = useState(null); // { tenant, admin, authRequired }
  const [auth, setAuth] = useState({ state: 'checking', error: null });

  const check = async () => {
    const mode = document.querySelector('meta[name="lamer-auth"]')?.content;
    // Without API keys every request is tenant default with admin rights: nothing to ask.
    if (mode === 'open') {
      setMe({ tenant: 'default', admin: true, authRequired: false });
      setAuth({ state: 'ok', error: null });
      return;
    }
    // With keys and none stored, sign in first (no refused request, no console error).
    if (!getKey()) {
      setAuth({ state: 'signin', error: null });
      return;
    }
    // A reload keeps the identity read at sign-in (no extra round trip before the view loads); it
    // is checked again in the background, and any 401 signs out.
    const known = getIdentity();
    if (known) {
      setMe(known);
      setAuth({ state: 'ok', error: null });
    }
    try {
      const w = await api('GET', '/v1/whoami');
      setIdentity(w);
      setMe(w);
      setAuth({ state: 'ok', error: null });
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) return; // onUnauthorized shows sign-in
      if (!known) setAuth({ state: 'signin', error: e.message });
    }
  };
  useEffect(() => {
    check();
    return onUnauthorized(() => { setKey(''); setMe(null); setAuth({ state: 'signin', error: 'Signed out: the API refused the key.' }); });
  }, []);

  if (auth.state === 'checking') return html`<p class="boot">Loading…</p>`;
  if (auth.state === 'signin') return html`<${SignIn} error=${auth.error} onDone=${(w) => { setMe(w); setAuth({ state: 'ok', error: null }); }} />`;

  const [View, params] = route(loc.path);
  const signOut = () => { setKey(''); setMe(null); setAuth({ state: 'signin', error: null }); };
  const active = (href) => (href === '/ui/' ? loc.path === '/ui/' : loc.path.startsWith(href));
  return html`
    <header class="top">
      <span class="brand">lamer-server</span>
      <nav>${NAV.filter(([href]) => me.admin || !ADMIN_VIEWS.includes(href)).map(([href, label]) => html`<a href=${href} class=${active(href) ? 'on' : ''}>${label}</a>`)}</nav>
      <span class="who" data-testid="whoami">tenant <b>${me.tenant}</b>${me.admin ? ' · admin' : ''}${me.authRequired ? html`<button onClick=${signOut}>Sign out</button>` : ' · open server (no API keys)'}</span>
    </header>
    <main><${View} ...${params} me=${me} query=${loc.query} key=${loc.path + '?' + loc.query} /></main>`;
}

render(html`<${App} />`, document.getElementById('root'));
