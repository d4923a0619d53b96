// The dashboard's views. Each reads the /v1 API with the signed-in key and refreshes by polling
// (lib.js usePoll: one request chain per panel, intervals chosen so that an open tab costs the
// server well under one request per second; nothing is polled while the tab is hidden).
import { html } from 'htm/preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, qs, navigate, usePoll, pct, num, short, when, ks, parseProm, stepFigures, histogramQuantile, histogramDelta } from './lib.js';
import { LineChart } from './charts.js';
import { MEMORY_LABELS, memoryComparison, memoryLabel, stepCards, actionsTaken, gateHistory } from './figures.js';

// ------------------------------------------------------------------ small pieces

const ErrorBox = ({ error }) => (error ? html`<div class="error" data-testid="error">${error.message}${error.status ? ` (HTTP ${error.status})` : ''}</div>` : null);
const StatusChip = ({ s }) => {
  const cls = {
    completed: 'ok', succeeded: 'ok', passed: 'ok', active: 'run', running: 'run', queued: 'run', pending: 'run',
    failed: 'bad', abandoned: 'bad', expired: 'bad', cancelled: 'bad', error: 'bad', candidate: '', retired: '',
  }[s] ?? '';
  return html`<span class="chip ${cls}" data-testid="status">${s}</span>`;
};
const groupLabel = (g) => `${g.modelVersion} · ${g.env ?? '(no env)'}${g.mode ? ` · ${g.mode}` : ''}${g.memory ? ` · ${memoryLabel(g.memory)}` : ''}`;
const signedPts = (x) => (x === null || x === undefined ? '–' : `${x >= 0 ? '+' : '−'}${Math.abs(100 * x).toFixed(1)} pts`);
const Progress = ({ value }) => html`<div class="progress" title=${pct(value)}><div style=${`width:${(100 * value).toFixed(1)}%`}></div></div>`;
const Loading = ({ q }) => (q.loading && !q.data ? html`<p class="muted">Loading…</p>` : null);

/** An in-page confirm step: renders `label` as a button, then asks `question` with Confirm / Cancel. */
function Confirm({ label, question, onConfirm, cls = 'primary', testid, disabled }) {
  const [open, setOpen] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  if (!open) return html`<button class=${cls} data-testid=${testid} disabled=${disabled} onClick=${() => { setOpen(true); setError(null); }}>${label}</button>`;
  const go = async () => {
    setBusy(true);
    try { await onConfirm(); setOpen(false); } catch (e) { setError(e); } finally { setBusy(false); }
  };
  return html`<div class="confirm" data-testid=${testid && `${testid}-confirm`}>
    <div>${question}</div>
    <${ErrorBox} error=${error} />
    <p><button class=${cls} data-testid=${testid && `${testid}-yes`} disabled=${busy} onClick=${go}>Confirm</button> <button onClick=${() => setOpen(false)} disabled=${busy}>Cancel</button></p>
  </div>`;
}

/** Every page of a cursor-paged list route (`items` or `steps` plus `nextCursor`). */
async function allPages(path, field, limit) {
  const out = [];
  let cursor;
  do {
    const sep = path.includes('?') ? '&' : '?';
    const page = await api('GET', `${path}${sep}limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    out.push(...page[field]);
    cursor = page.nextCursor;
  } while (cursor);
  return out;
}

// ------------------------------------------------------------------ stats panels

/** pass@1..K against k: one line per group; with its table. */
function PassAtKPanel({ groups, title = 'pass@k against k', testid = 'passk' }) {
  const K = Math.max(0, ...groups.map((g) => Math.max(0, ...ks(g.passAtK))));
  const x = Array.from({ length: K }, (_, i) => i + 1);
  return html`<div class="card"><h2>${title}</h2>
    ${K === 0 ? html`<p class="muted">No completed sessions yet.</p>` : html`
      <${LineChart} x=${x} xLabel="k (attempts)" yLabel="pass@k" yRange=${[0, 1]} series=${groups.map((g) => ({ label: groupLabel(g), values: x.map((k) => g.passAtK[k] ?? null) }))} />
      <table data-testid=${testid}><thead><tr><th>version · env · mode · memory</th><th class="num">sessions</th>${x.map((k) => html`<th class="num">pass@${k}</th>`)}</tr></thead>
      <tbody>${groups.map((g) => html`<tr data-group=${groupLabel(g)}><td>${groupLabel(g)}</td><td class="num">${g.sessions}</td>${x.map((k) => html`<td class="num" data-k=${k}>${pct(g.passAtK[k])}</td>`)}</tr>`)}</tbody></table>`}
  </div>`;
}

/** Success rate by attempt number (attempts are 0-based, as in the API); with its table. */
function SuccessPanel({ groups, title = 'Success rate by attempt', testid = 'success' }) {
  const A = Math.max(0, ...groups.map((g) => g.successByAttempt.length));
  const x = Array.from({ length: A }, (_, i) => i);
  return html`<div class="card"><h2>${title}</h2>
    ${A === 0 ? html`<p class="muted">No completed sessions yet.</p>` : html`
      <${LineChart} x=${x} xLabel="attempt" yLabel="success rate" yRange=${[0, 1]} series=${groups.map((g) => ({ label: groupLabel(g), values: x.map((a) => g.successByAttempt[a] ?? null) }))} />
      <table data-testid=${testid}><thead><tr><th>version · env · mode · memory</th>${x.map((a) => html`<th class="num">attempt ${a}</th>`)}</tr></thead>
      <tbody>${groups.map((g) => html`<tr data-group=${groupLabel(g)}><td>${groupLabel(g)}</td>${x.map((a) => html`<td class="num" data-attempt=${a} title=${`${g.attemptsPlayed[a] ?? 0} sessions played it`}>${pct(g.successByAttempt[a])}</td>`)}</tr>`)}</tbody></table>
      <div class="legend-note">Of the sessions that played an attempt (a session stops at its first success).</div>`}
  </div>`;
}

/**
 * What memory adds: for each version, env and mode with sessions of more than one memory, pass@k
 * of each memory beside independent retries (single-attempt sessions read as retries), and the
 * difference in percentage points.
 */
function MemoryPanel({ groups }) {
  const blocks = memoryComparison(groups);
  return html`<div class="card"><h2>What memory adds (pass@k by memory, beside independent retries)</h2>
    ${blocks.length === 0
      ? html`<p class="muted" data-testid="memory-none">No version and env has sessions of more than one memory yet. Play independent retries beside LaMer sessions (<span class="mono">lamer eval --independent-attempts</span>) to compare.</p>`
      : blocks.map((b) => html`<table data-testid="memory-compare" data-block=${`${b.modelVersion} · ${b.env ?? '(no env)'} · ${b.mode}`}>
        <thead><tr><th>${b.modelVersion} · ${b.env ?? '(no env)'} · ${b.mode}</th><th class="num">sessions</th>${Array.from({ length: b.K }, (_, i) => html`<th class="num">pass@${i + 1}</th>`)}${b.K > 0 && html`<th class="num">vs independent @${b.K}</th>`}</tr></thead>
        <tbody>${b.rows.map(({ group: g, gain }) => html`<tr data-memory=${g.memory}><td>${memoryLabel(g.memory)}</td><td class="num" title=${g.memory === 'none' ? `${g.runs} chains of retries` : ''}>${g.sessions}</td>${Array.from({ length: b.K }, (_, i) => html`<td class="num" data-k=${i + 1}>${pct(g.passAtK[i + 1])}</td>`)}${b.K > 0 && html`<td class="num" data-field="gain">${signedPts(gain[b.K - 1])}</td>`}</tr>`)}</tbody></table>`)}
    <div class="legend-note">Independent retries: a task's single-attempt sessions read as chains of up to 3 tries that stop at the first success, as <span class="mono">lamer eval --independent-attempts</span> plays them.</div>
  </div>`;
}

/** Trajectory diversity per version (x: versions in creation order), one line per env. */
function DiversityPanel({ groups, order }) {
  const versions = [...new Set(groups.map((g) => g.modelVersion))].sort((a, b) => (order.indexOf(a) - order.indexOf(b)) || a.localeCompare(b));
  const lines = [...new Map(groups.map((g) => [JSON.stringify([g.env, g.memory]), { env: g.env, memory: g.memory }])).values()];
  const x = versions.map((_, i) => i);
  const at = (v, l) => groups.find((g) => g.modelVersion === v && g.env === l.env && g.memory === l.memory);
  return html`<div class="card"><h2>Trajectory diversity per version</h2>
    ${versions.length === 0 ? html`<p class="muted">No completed sessions yet.</p>` : html`
      <${LineChart} x=${x} xTicks=${versions} xLabel="version" yLabel="nats" series=${lines.map((l) => ({ label: `${l.env ?? '(no env)'}${l.memory ? ` · ${memoryLabel(l.memory)}` : ''}`, values: versions.map((v) => at(v, l)?.diversity ?? null) }))} />
      <table data-testid="diversity"><thead><tr><th>version</th><th>env</th><th>memory</th><th class="num">sessions</th><th class="num">tasks</th><th class="num">diversity (nats)</th></tr></thead>
      <tbody>${groups.map((g) => html`<tr data-group=${`${g.modelVersion} · ${g.env ?? '(no env)'} · ${memoryLabel(g.memory)}`}><td>${g.modelVersion}</td><td>${g.env ?? '–'}</td><td>${memoryLabel(g.memory)}</td><td class="num">${g.sessions}</td><td class="num">${g.tasks}</td><td class="num" data-field="diversity">${num(g.diversity)}</td></tr>`)}</tbody></table>
      <div class="legend-note">Entropy of the distinct action sequences played on each task, mean over tasks. A line falling from one version to the next is exploration collapse.</div>`}
  </div>`;
}

// ------------------------------------------------------------------ live serving figures

/** Scrapes /metrics every 5 s and derives steps/s and the step route's latency p50/p99 over the last window. */
function LiveMetrics() {
  const prev = useRef(null);
  const [hist, setHist] = useState({ t: [], sps: [] });
  const q = usePoll(async () => {
    const r = await fetch('/metrics');
    if (!r.ok) throw new Error(`/metrics answered HTTP ${r.status}`);
    const now = { at: performance.now() / 1000, ...stepFigures(parseProm(await r.text())) };
    const before = prev.current;
    prev.current = now;
    if (!before) return { ...now, sps: null, window: null, cumulative: now.buckets };
    const sps = (now.steps - before.steps) / (now.at - before.at);
    const window = histogramDelta(now.buckets, before.buckets);
    setHist((h) => ({ t: [...h.t, Math.round(Date.now() / 1000)].slice(-60), sps: [...h.sps, sps].slice(-60) }));
    return { ...now, sps, window, cumulative: now.buckets };
  }, [], { intervalMs: 5000 });
  const d = q.data;
  const inWindow = d?.window && d.window.length && d.window[d.window.length - 1][1] > 0;
  const b = inWindow ? d.window : d?.cumulative ?? [];
  const ms = (s) => (s === null ? '–' : `${(1000 * s).toFixed(s < 0.01 ? 2 : 1)} ms`);
  return html`<div class="card"><h2>Serving, live <span class="muted" style="font-weight:400">(from /metrics, every 5 s)</span></h2>
    <${ErrorBox} error=${q.error} />
    <div class="kpis">
      <div class="kpi"><div class="v" data-testid="steps-per-s">${d?.sps === null || !d ? '…' : d.sps.toFixed(2)}</div><div class="l">steps/s</div></div>
      <div class="kpi"><div class="v" data-testid="latency-p50">${ms(histogramQuantile(0.5, b))}</div><div class="l">step latency p50 ${inWindow ? '(last 5 s)' : '(since start)'}</div></div>
      <div class="kpi"><div class="v" data-testid="latency-p99">${ms(histogramQuantile(0.99, b))}</div><div class="l">step latency p99 ${inWindow ? '(last 5 s)' : '(since start)'}</div></div>
      <div class="kpi"><div class="v" data-testid="steps-total">${d ? d.steps : '…'}</div><div class="l">steps served since start</div></div>
    </div>
    ${hist.t.length > 1 && html`<${LineChart} x=${hist.t.map((_, i) => i * 5)} xLabel="seconds on this page" yLabel="steps/s" height=${140} series=${[{ label: 'steps/s', values: hist.sps }]} />`}
  </div>`;
}

// ------------------------------------------------------------------ overview

export function Overview({ me }) {
  const ready = usePoll(async () => {
    const r = await fetch('/readyz');
    return r.json();
  }, [], { intervalMs: 30000 });
  const stats = usePoll(() => api('GET', '/v1/stats'), [], { intervalMs: 15000 });
  const div = usePoll(() => api('GET', '/v1/stats/diversity'), [], { intervalMs: 30000 });
  const models = usePoll(() => (me.admin ? api('GET', '/v1/models') : Promise.resolve(null)), [], { intervalMs: 30000, live: me.admin });
  const running = usePoll(() => (me.admin ? api('GET', '/v1/training/jobs?status=running&limit=1') : Promise.resolve(null)), [], { intervalMs: 10000, live: me.admin });
  const order = (models.data?.items ?? []).slice().sort((a, b) => a.createdAt.localeCompare(b.createdAt)).map((m) => m.version);
  const job = running.data?.items?.[0];
  return html`<h1>Overview</h1>
    <div class="kpis" style="margin-bottom:14px">
      <div class="kpi"><div class="v" data-testid="active-version">${ready.data?.model?.version ?? '…'}</div><div class="l">active version (${ready.data?.engine ?? '…'} engine, ${ready.data?.backend ?? '…'})</div></div>
      <div class="kpi"><div class="v" data-testid="completed-sessions">${stats.data?.sessions ?? '…'}</div><div class="l">completed sessions</div></div>
      ${me.admin && html`<div class="kpi" data-testid="running-job">${job
        ? html`<div class="v"><a href=${`/ui/jobs/${job.id}`}>${job.algorithm} ${pct(job.progress)}</a></div><div class="l">running job ${job.id}, iteration ${job.iterations}</div><${Progress} value=${job.progress} />`
        : html`<div class="v muted">none</div><div class="l">running training job</div>`}</div>`}
    </div>
    <${LiveMetrics} />
    <${ErrorBox} error=${stats.error} />
    <${MemoryPanel} groups=${stats.data?.groups ?? []} />
    <div class="grid">
      <${PassAtKPanel} groups=${stats.data?.groups ?? []} title="pass@k against k, per version, env and memory (the LaMer curve)" />
      <${SuccessPanel} groups=${stats.data?.groups ?? []} />
    </div>
    <${ErrorBox} error=${div.error} />
    <${DiversityPanel} groups=${div.data?.groups ?? []} order=${order} />`;
}

// ------------------------------------------------------------------ sessions

const FILTERS = ['status', 'env', 'mode', 'modelVersion', 'taskId'];

export function Sessions({ query }) {
  const f = Object.fromEntries(FILTERS.map((k) => [k, query.get(k) ?? '']));
  const cursor = query.get('cursor') ?? '';
  const limit = Number(query.get('limit') ?? 50);
  const q = usePoll(() => api('GET', `/v1/sessions${qs({ ...f, cursor, limit })}`), [JSON.stringify(f), cursor, limit], { intervalMs: 10000 });
  const [draft, setDraft] = useState(f);
  const apply = (e) => { e.preventDefault(); navigate(`/ui/sessions${qs(draft)}`); };
  const set = (k) => (e) => setDraft({ ...draft, [k]: e.target.value });
  return html`<h1>Sessions</h1>
    <form class="filters" onSubmit=${apply} data-testid="session-filters">
      <label>status<select value=${draft.status} onChange=${set('status')} name="status"><option value="">any</option>${['active', 'completed', 'abandoned', 'expired'].map((s) => html`<option>${s}</option>`)}</select></label>
      <label>mode<select value=${draft.mode} onChange=${set('mode')} name="mode"><option value="">any</option><option>train</option><option>eval</option></select></label>
      <label>env<input value=${draft.env} onInput=${set('env')} name="env" size="12" /></label>
      <label>model version<input value=${draft.modelVersion} onInput=${set('modelVersion')} name="modelVersion" size="12" /></label>
      <label>task id<input value=${draft.taskId} onInput=${set('taskId')} name="taskId" size="16" /></label>
      <button class="primary" type="submit">Filter</button>
      <a href="/ui/sessions">clear</a>
    </form>
    <${ErrorBox} error=${q.error} /><${Loading} q=${q} />
    ${q.data && html`<div class="card"><table data-testid="sessions">
      <thead><tr><th>session</th><th>task</th><th>env</th><th>mode</th><th>status</th><th>version</th><th>attempts</th><th>pass@k</th><th>updated</th></tr></thead>
      <tbody>${q.data.items.map((s) => html`<tr data-id=${s.id}>
        <td class="mono"><a href=${`/ui/sessions/${s.id}`}>${s.id}</a></td><td class="mono">${s.taskId}</td><td>${s.env ?? '–'}</td><td>${s.mode}</td><td><${StatusChip} s=${s.status} /></td><td>${s.modelVersion}</td>
        <td>${s.attempts.map((a) => html`<span class="chip ${a.success ? 'ok' : a.status === 'running' ? 'run' : 'bad'}" title=${`return ${short(a.return)}`}>${a.attempt}</span>`)}</td>
        <td data-field="passAtK">${ks(s.passAtK).map((k) => html`<span class="chip ${s.passAtK[k] ? 'ok' : ''}">@${k}${s.passAtK[k] ? '✓' : '✗'}</span>`)}</td>
        <td class="muted">${when(s.updatedAt)}</td></tr>`)}</tbody></table>
      ${q.data.items.length === 0 && html`<p class="muted">No sessions match.</p>`}
      <div class="pager">
        ${cursor && html`<a href=${`/ui/sessions${qs({ ...f, limit: query.get('limit') })}`} data-testid="first-page">« first page</a>`}
        ${q.data.nextCursor ? html`<a href=${`/ui/sessions${qs({ ...f, limit: query.get('limit'), cursor: q.data.nextCursor })}`} data-testid="next-page">next page »</a>` : html`<span class="muted">end of list</span>`}
      </div></div>`}`;
}

/**
 * One step of an attempt's timeline: the observation (monospace, as sent), the reward it carried,
 * the action, tagged "(invalid)" when the env rejected it (`r.invalid`, figures.js stepCards). A turn of
 * the session's OpenAI-compatible endpoint (r.turn) also shows its API, the model call's latency and
 * why the output ended.
 */
function StepCard({ r }) {
  const turn = r.turn ? html`<span data-field="turn">${r.turn.api === 'chat' ? 'chat' : 'completion'} turn · ${Math.round(r.turn.latencyMs)} ms · ${r.turn.finishReason}${r.turn.memory ? ' · memory' : ''}</span>` : '';
  return html`<div class="step ${r.invalid ? 'invalid' : ''}" data-testid="step" data-attempt=${r.attempt} data-step=${r.step}>
    <div class="meta"><span>step ${r.step}</span>${turn}<span data-field="reward">reward ${short(r.reward)}</span></div>
    <pre class="obs" data-field="observation">${r.observation}</pre>
    <div class="act">${r.action !== null ? html`→ <b data-field="action">${r.action}</b>${r.invalid ? html` <span class="bad" data-field="invalid">(invalid)</span>` : ''}` : html`<span class="muted">${r.done ? (r.success ? 'done: success' : 'done') : 'no action'}</span>`}</div>
  </div>`;
}

/** The reflection written after `attempt`, with an edit form and a confirm step (PUT .../memory/{attempt}). */
function Reflection({ session, refl, onSaved }) {
  const [editing, setEditing] = useState(false);
  const [text, setText] = useState(refl.text);
  useEffect(() => { if (!editing) setText(refl.text); }, [refl.text, editing]);
  const save = async () => {
    await api('PUT', `/v1/sessions/${encodeURIComponent(session.id)}/memory/${refl.attempt}`, { text: text.trim() });
    setEditing(false);
    onSaved();
  };
  return html`<div class="reflection" data-testid="reflection" data-attempt=${refl.attempt}>
    <div class="muted" style="font-size:12px">Reflection after attempt ${refl.attempt} · written by <b data-field="source">${refl.source}</b> · ${when(refl.updatedAt)}</div>
    ${editing
      ? html`<textarea data-testid="reflection-text" maxlength="2000" value=${text} onInput=${(e) => setText(e.target.value)}></textarea>
        <div style="display:flex;gap:8px;align-items:start">
          <${Confirm} label="Save…" testid="reflection-save" disabled=${!text.trim() || text.trim() === refl.text}
            question=${html`Replace the reflection written after attempt ${refl.attempt}? The policy reads the new text in the prompts of the attempts that follow (source becomes <b>human</b>).`}
            onConfirm=${save} />
          <button onClick=${() => setEditing(false)}>Discard</button></div>`
      : html`<div class="text" data-field="text">${refl.text}</div>
        <p style="margin:6px 0 0"><button data-testid="reflection-edit" onClick=${() => setEditing(true)}>Edit</button></p>`}
  </div>`;
}

export function SessionPage({ id }) {
  const s = usePoll(() => api('GET', `/v1/sessions/${encodeURIComponent(id)}`), [id], { intervalMs: 4000, live: (d) => d?.status === 'active' });
  const ses = s.data;
  // The trajectory is re-read only when the session changed (a step or a reflection was recorded).
  const t = usePoll(() => (ses ? allPages(`/v1/sessions/${encodeURIComponent(id)}/trajectory`, 'steps', 1000) : Promise.resolve(null)), [id, ses?.updatedAt, ses?.reflections?.map((r) => r.updatedAt).join()], { live: false });
  if (s.error && !ses) return html`<h1>Session ${id}</h1><${ErrorBox} error=${s.error} />`;
  if (!ses) return html`<p class="muted">Loading…</p>`;
  const rows = (t.data ?? []).filter((r) => r.kind === 'action');
  const attempts = ses.attempts.map((a) => ({ ...a, rows: stepCards(rows.filter((r) => r.attempt === a.attempt)) }));
  // `steps` of an attempt counts observations, the final one included; maxSteps caps actions
  const actions = (a) => (t.data ? String(actionsTaken(a.rows)) : '…');
  return html`<h1>Session <span class="mono">${ses.id}</span> <${StatusChip} s=${ses.status} /></h1>
    <${ErrorBox} error=${s.error || t.error} />
    <div class="grid">
      <div class="card"><h2>Session</h2><dl class="kv">
        <dt>task</dt><dd class="mono" data-field="taskId">${ses.taskId}</dd>
        <dt>env · mode</dt><dd>${ses.env ?? '–'} · ${ses.mode}</dd>
        <dt>model version</dt><dd data-field="modelVersion">${ses.modelVersion}</dd>
        <dt>sampling</dt><dd data-field="sampling">temperature ${ses.sampling.temperature}, top-p ${ses.sampling.topP}, top-k ${ses.sampling.topK}${ses.sampling.seed !== undefined ? `, seed ${ses.sampling.seed}` : ''}</dd>
        <dt>memory</dt><dd>${ses.memory}${ses.memoryPlacement && ses.memoryPlacement !== 'system' ? ` · ${ses.memoryPlacement}` : ''}</dd>
        <dt>limits</dt><dd data-field="limits">${ses.maxAttempts} attempts × up to ${ses.maxSteps} actions (${ses.maxSteps + 1} observations with the final one)</dd>
        <dt>next</dt><dd>${ses.next ? `attempt ${ses.next.attempt}, step ${ses.next.step}` : '–'}</dd>
        <dt>created · updated</dt><dd>${when(ses.createdAt)} · ${when(ses.updatedAt)}</dd>
      </dl></div>
      <div class="card"><h2>pass@k</h2>
        <table data-testid="session-passk"><thead><tr>${ks(ses.passAtK).map((k) => html`<th>pass@${k}</th>`)}</tr></thead>
        <tbody><tr>${ks(ses.passAtK).map((k) => html`<td data-k=${k} class=${ses.passAtK[k] ? 'ok' : 'bad'}>${ses.passAtK[k] ? 'solved' : 'not solved'}</td>`)}</tr></tbody></table>
        <h2 style="margin-top:12px">Attempts</h2>
        <table data-testid="attempts"><thead><tr><th>attempt</th><th>status</th><th class="num">actions</th><th class="num">observations</th><th class="num">return</th><th>end</th></tr></thead>
        <tbody>${attempts.map((a) => html`<tr data-attempt=${a.attempt}><td>${a.attempt}</td><td><${StatusChip} s=${a.status} /></td><td class="num" data-field="actions">${actions(a)}</td><td class="num" data-field="observations">${a.steps}</td><td class="num" data-field="return">${short(a.return)}</td><td>${a.endReason ?? '–'}</td></tr>`)}</tbody></table>
      </div>
    </div>
    ${attempts.map((a) => {
      const refl = ses.reflections.find((r) => r.attempt === a.attempt);
      return html`<div class="attempt ${a.status}" data-testid="attempt" data-attempt=${a.attempt}>
        <h2>Attempt ${a.attempt} <${StatusChip} s=${a.status} /> <span class="muted" style="font-weight:400">return ${short(a.return)} · ${actions(a)} actions · ${a.steps} observations${a.endReason ? ` · ${a.endReason}` : ''}</span></h2>
        <div class="timeline">${a.rows.map((r) => html`<${StepCard} r=${r} />`)}${t.loading && !t.data ? html`<span class="muted">loading steps…</span>` : ''}</div>
      </div>
      ${refl && html`<${Reflection} session=${ses} refl=${refl} onSaved=${s.reload} />`}`;
    })}`;
}

// ------------------------------------------------------------------ models

const AdminOnly = () => html`<h1>Admin key needed</h1><p class="muted">The model and training routes of the API need an admin API key.</p>`;

/** Per-version totals from the stats groups: completed sessions and pass@1 (weighted by sessions). */
function perVersion(groups) {
  const m = new Map();
  for (const g of groups) {
    const v = m.get(g.modelVersion) ?? { sessions: 0, solved1: 0 };
    v.sessions += g.sessions;
    v.solved1 += (g.passAtK['1'] ?? 0) * g.sessions;
    m.set(g.modelVersion, v);
  }
  return m;
}

function Lineage({ items }) {
  const byParent = new Map();
  const names = new Set(items.map((m) => m.version));
  for (const m of items) {
    const p = m.parent && names.has(m.parent) ? m.parent : null;
    byParent.set(p, [...(byParent.get(p) ?? []), m]);
  }
  const node = (m) => html`<li data-version=${m.version}><b>${m.version}</b> <${StatusChip} s=${m.status} />
    ${m.jobId ? html` <span class="muted">by job <a href=${`/ui/jobs/${m.jobId}`}>${m.jobId}</a></span>` : m.parent ? html` <span class="muted">from ${m.parent}</span>` : ''}
    ${byParent.has(m.version) && html`<ul>${byParent.get(m.version).map(node)}</ul>`}</li>`;
  return html`<div class="lineage" data-testid="lineage"><ul>${(byParent.get(null) ?? []).map(node)}</ul></div>`;
}

/** A gate's difference with its interval: "+2.3 pts [−1.0, +5.5]". */
const interval = (d) => (d ? `${signedPts(d.mean)} [${signedPts(d.lo)}, ${signedPts(d.hi)}]` : '–');

/**
 * The promotion gates of the versions (src/ui/figures.js gateHistory): the gate's pass@k of each
 * gated version, new against the version active at its gate, as a chart (does it rise?) and a
 * table with the paired difference, the margin and the outcome.
 */
function GatePanel({ items }) {
  const rows = gateHistory(items);
  if (rows.length === 0) {
    return html`<div class="card"><h2>Promotion gates</h2><p class="muted" data-testid="gates-none">No version was made by a job
      with a promotion gate yet (a job's <span class="mono">gate</span>, or <span class="mono">LAMER_TRAIN_GATE_TASKS</span> for
      scheduled jobs).</p></div>`;
  }
  const series = [
    { label: 'new version', values: rows.map((r) => r.candidate) },
    { label: 'active version at its gate', values: rows.map((r) => r.incumbent) },
  ];
  const heads = ['new', 'active at the gate', 'new − active [95% interval]', 'margin', 'vs last promoted'];
  const small = 'font-size:11px';
  return html`<div class="card"><h2>Promotion gates: pass@k of each version on its gate's held-out tasks</h2>
    <${LineChart} x=${rows.map((_, i) => i)} xTicks=${rows.map((r) => r.version)} xLabel="version (gated, oldest first)"
      yLabel="pass@k" yRange=${[0, 1]} series=${series} testid="gates-chart" />
    <table data-testid="gates"><thead><tr><th>version</th><th>gate</th><th>tasks</th>
      ${heads.map((h) => html`<th class="num">${h}</th>`)}<th>outcome</th></tr></thead>
      <tbody>${rows.map((r) => html`<tr data-version=${r.version}>
        <td><b>${r.version}</b> <${StatusChip} s=${r.modelStatus} /></td>
        <td data-field="gate"><${StatusChip} s=${r.status} />${
          r.status === 'running' && html` <span class="muted">${pct(r.progress)}</span>`}</td>
        <td>${r.metric} · ${r.tasks} × ${r.env}</td>
        <td class="num" data-field="candidate">${pct(r.candidate)}</td>
        <td class="num" data-field="incumbent">${pct(r.incumbent)}<div class="muted" style=${small}>${r.incumbentVersion ?? ''}</div></td>
        <td class="num" data-field="difference">${interval(r.difference)}</td>
        <td class="num" data-field="margin">${signedPts(r.margin)}${r.decision === 'lower-bound' ? ' (lower bound)' : ''}</td>
        <td class="num" data-field="rise">${signedPts(r.rise)}</td>
        <td data-field="outcome"><b>${r.promoted ? 'promoted' : 'not promoted'}</b>
          <div class="muted" style=${`${small};max-width:320px`}>${r.reason ?? ''}</div></td></tr>`)}</tbody></table>
    <div class="legend-note">Each gate plays the same held-out tasks with the new version and the version active then, and
      activates the new one only when the difference beats the margin. "vs last promoted": the new version's pass@k minus
      that of the last promoted version gated on the same tasks; a column of falling or flat values is a loop that does not
      improve.</div></div>`;
}

export function Models({ me }) {
  if (!me.admin) return html`<${AdminOnly} />`;
  const q = usePoll(() => api('GET', '/v1/models'), [], { intervalMs: 15000 });
  const stats = usePoll(() => api('GET', '/v1/stats'), [], { intervalMs: 30000 });
  const pv = perVersion(stats.data?.groups ?? []);
  const items = (q.data?.items ?? []).slice().sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  const activeModel = items.find((m) => m.version === q.data?.active);
  const activate = async (v) => { await api('POST', `/v1/models/${encodeURIComponent(v)}/activate`); q.reload(); };
  return html`<h1>Models</h1>
    <${ErrorBox} error=${q.error} /><${Loading} q=${q} />
    ${q.data && html`<div class="kpis" style="margin-bottom:14px"><div class="kpi"><div class="v" data-testid="active-version">${q.data.active}</div><div class="l">active version</div></div></div>
    <div class="grid">
      <div class="card"><h2>Lineage (parent → child, with the producing job)</h2><${Lineage} items=${items} /></div>
    </div>
    <div class="card"><h2>Versions</h2><table data-testid="models">
      <thead><tr><th>version</th><th>status</th><th>parent</th><th>job</th><th>engine</th><th>loaded</th><th class="num">completed sessions</th><th class="num">pass@1</th><th>metrics</th><th>created</th><th></th></tr></thead>
      <tbody>${items.map((m) => {
        const st = pv.get(m.version);
        const rollback = activeModel && activeModel.parent === m.version;
        return html`<tr data-version=${m.version}>
          <td><b>${m.version}</b></td><td><${StatusChip} s=${m.status} /></td><td>${m.parent ?? '–'}</td>
          <td>${m.jobId ? html`<a href=${`/ui/jobs/${m.jobId}`}>${m.jobId}</a>` : '–'}</td>
          <td>${m.engine}${m.remote ? html`<div class="muted mono" style="font-size:11px">${m.remote.kind} ${m.remote.model} @ ${m.remote.baseUrl}</div>` : ''}</td>
          <td>${m.loaded ? 'yes' : 'no'}</td>
          <td class="num" data-field="sessions">${st?.sessions ?? 0}</td><td class="num" data-field="pass1">${st && st.sessions ? pct(st.solved1 / st.sessions) : '–'}</td>
          <td class="mono" style="font-size:11px;max-width:260px">${Object.entries(m.metrics ?? {}).filter(([, v]) => typeof v === 'number' || typeof v === 'string').slice(0, 6).map(([k, v]) => html`<div>${k}: ${typeof v === 'number' ? short(v) : v.slice(0, 40)}</div>`)}</td>
          <td class="muted">${when(m.createdAt)}</td>
          <td>${m.status !== 'active' && html`<${Confirm} label=${rollback ? 'Roll back to this' : 'Activate'} testid=${`activate-${m.version}`}
              question=${html`Make <b>${m.version}</b> the active version? New sessions use it; running sessions keep theirs.`} onConfirm=${() => activate(m.version)} />`}</td></tr>`;
      })}</tbody></table></div>
    <${GatePanel} items=${items} />`}`;
}

// ------------------------------------------------------------------ jobs

const ALGORITHMS = ['lamer', 'gigpo', 'grpo', 'rloo', 'sft'];

/** The admin form that starts a training job (POST /v1/training/jobs). */
function StartJobForm({ versions }) {
  const [f, setF] = useState({ algorithm: 'lamer', baseVersion: '', version: '', activateWhenDone: false, env: '', dataVersion: '', maxSessions: '', demos: '', lr: '', epochs: '', minibatchSize: '' });
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const set = (k) => (e) => setF({ ...f, [k]: e.target.type === 'checkbox' ? e.target.checked : e.target.value });
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    const body = { algorithm: f.algorithm, activateWhenDone: f.activateWhenDone };
    if (f.baseVersion) body.baseVersion = f.baseVersion;
    if (f.version) body.version = f.version;
    if (f.algorithm === 'sft') body.demonstrations = { path: f.demos };
    else {
      const data = {};
      if (f.env) data.env = f.env;
      if (f.dataVersion) data.modelVersion = f.dataVersion;
      if (f.maxSessions) data.maxSessions = Number(f.maxSessions);
      if (Object.keys(data).length) body.data = data;
    }
    const hp = {};
    if (f.lr) hp.lr = Number(f.lr);
    if (f.epochs) hp.epochs = Number(f.epochs);
    if (f.minibatchSize) hp.minibatchSize = Number(f.minibatchSize);
    if (Object.keys(hp).length) body.hyperparameters = hp;
    try {
      const job = await api('POST', '/v1/training/jobs', body);
      navigate(`/ui/jobs/${job.id}`);
    } catch (x) { setError(x); } finally { setBusy(false); }
  };
  return html`<div class="card" data-testid="start-job"><h2>Start a training job</h2>
    <${ErrorBox} error=${error} />
    ${error?.problem?.errors && html`<ul class="bad">${error.problem.errors.map((x) => html`<li>${x.field}: ${x.message}</li>`)}</ul>`}
    <form class="stack" onSubmit=${submit}>
      <label>algorithm<select name="algorithm" value=${f.algorithm} onChange=${set('algorithm')}>${ALGORITHMS.map((a) => html`<option>${a}</option>`)}</select></label>
      <label>base version<select name="baseVersion" value=${f.baseVersion} onChange=${set('baseVersion')}><option value="">(the active one)</option>${versions.map((v) => html`<option>${v}</option>`)}</select></label>
      <label>new version name<input name="version" value=${f.version} onInput=${set('version')} placeholder="default: <algorithm>-<job id>" /></label>
      ${f.algorithm === 'sft'
        ? html`<label>demonstrations (JSONL under dataDir/demos/)<input name="demos" required value=${f.demos} onInput=${set('demos')} /></label>`
        : html`<label>data: env<input name="env" value=${f.env} onInput=${set('env')} /></label>
          <label>data: sessions of version<input name="dataVersion" value=${f.dataVersion} onInput=${set('dataVersion')} /></label>
          <label>data: max sessions<input name="maxSessions" type="number" min="1" value=${f.maxSessions} onInput=${set('maxSessions')} /></label>`}
      <label>learning rate<input name="lr" type="number" step="any" min="0" value=${f.lr} onInput=${set('lr')} /></label>
      <label>epochs<input name="epochs" type="number" min="1" max="100" value=${f.epochs} onInput=${set('epochs')} /></label>
      <label>minibatch size<input name="minibatchSize" type="number" min="1" value=${f.minibatchSize} onInput=${set('minibatchSize')} /></label>
      <label style="flex-direction:row;gap:6px;align-items:center"><input type="checkbox" name="activateWhenDone" checked=${f.activateWhenDone} onChange=${set('activateWhenDone')} /> activate when done</label>
      <div><button class="primary" type="submit" disabled=${busy}>Start job</button></div>
    </form></div>`;
}

export function Jobs({ me, query }) {
  if (!me.admin) return html`<${AdminOnly} />`;
  const status = query.get('status') ?? '';
  const algorithm = query.get('algorithm') ?? '';
  const cursor = query.get('cursor') ?? '';
  const q = usePoll(() => api('GET', `/v1/training/jobs${qs({ status, algorithm, cursor })}`), [status, algorithm, cursor], { intervalMs: 5000 });
  const models = usePoll(() => api('GET', '/v1/models'), [], { live: false });
  const go = (k) => (e) => navigate(`/ui/jobs${qs({ status, algorithm, [k]: e.target.value })}`);
  return html`<h1>Training jobs</h1>
    <div class="filters">
      <label>status<select value=${status} onChange=${go('status')}><option value="">any</option>${['queued', 'running', 'succeeded', 'failed', 'cancelled'].map((s) => html`<option>${s}</option>`)}</select></label>
      <label>algorithm<select value=${algorithm} onChange=${go('algorithm')}><option value="">any</option>${ALGORITHMS.map((s) => html`<option>${s}</option>`)}</select></label>
    </div>
    <${ErrorBox} error=${q.error} /><${Loading} q=${q} />
    ${q.data && html`<div class="card"><table data-testid="jobs">
      <thead><tr><th>job</th><th>algorithm</th><th>status</th><th>progress</th><th class="num">iterations</th><th>base → result</th><th>created</th></tr></thead>
      <tbody>${q.data.items.map((j) => html`<tr data-id=${j.id}><td class="mono"><a href=${`/ui/jobs/${j.id}`}>${j.id}</a></td><td>${j.algorithm}</td><td><${StatusChip} s=${j.status} /></td>
        <td style="min-width:120px"><${Progress} value=${j.progress} /></td><td class="num">${j.iterations}</td>
        <td>${j.baseVersion} → ${j.resultVersion ?? j.version ?? '…'}<${GateChip} gate=${j.gate} /></td>
        <td class="muted">${when(j.createdAt)}</td></tr>`)}</tbody></table>
      ${q.data.items.length === 0 && html`<p class="muted">No training jobs.</p>`}
      <div class="pager">${cursor && html`<a href=${`/ui/jobs${qs({ status, algorithm })}`}>« first page</a>`}${q.data.nextCursor ? html`<a href=${`/ui/jobs${qs({ status, algorithm, cursor: q.data.nextCursor })}`}>next page »</a>` : html`<span class="muted">end of list</span>`}</div>
    </div>`}
    <${StartJobForm} versions=${(models.data?.items ?? []).map((m) => m.version)} />`;
}

/** Metrics charted per iteration on the job page: [title, [field...]]. */
const CURVES = [
  ['loss', ['loss', 'pgLoss']],
  ['mean return', ['meanReturn']],
  ['pass@k', ['passAtK'], [0, 1]],
  ['entropy (nats)', ['entropy']],
  ['approx. KL', ['approxKl']],
  ['clip fraction', ['clipFrac', 'dualClipFrac'], [0, 1]],
  ['learning rate', ['lr']],
];

/** A job's gate in the jobs list: its status, and whether it promoted the version. */
const GateChip = ({ gate }) => (gate
  ? html` <span class="muted">gate</span> <${StatusChip} s=${gate.status} />${gate.promoted ? ' promoted' : ''}`
  : null);
/** How a job's version becomes active. */
const activation = (j) => (j.activateWhenDone ? ' (activated when done)' : j.gate ? ' (activated if its gate passes)' : '');

/** A job's promotion gate: its settings, state and figures. */
function JobGate({ g }) {
  const k = /^pass@(\d+)$/.exec(g.metric)?.[1] ?? '1';
  const rule = `${g.metric} new − active ${g.decision === 'lower-bound' ? '(95% lower bound)' : '(mean)'} above ${signedPts(g.margin)}`;
  const both = `${g.candidate ?? '…'} ${pct(g.candidatePassAtK?.[k])} · ${g.incumbent ?? '…'} ${pct(g.incumbentPassAtK?.[k])}`;
  const outcome = g.promoted ? 'promoted' : g.status === 'pending' || g.status === 'running' ? '…' : 'not promoted';
  return html`<div class="card" data-testid="job-gate"><h2>Promotion gate <${StatusChip} s=${g.status} /></h2>
    ${g.status === 'running' && html`<${Progress} value=${g.progress} />`}
    <dl class="kv">
      <dt>tasks</dt><dd>${g.tasks} × ${g.env}, seeds ${g.seedStart}…, ${g.attempts} attempts</dd>
      <dt>rule</dt><dd>${rule}</dd>
      <dt>new · active</dt><dd data-field="gate-passk">${both}</dd>
      <dt>difference</dt>
      <dd data-field="gate-difference">${interval(g.difference)}${g.difference ? ` over ${g.difference.tasks} tasks` : ''}</dd>
      <dt>outcome</dt><dd data-field="gate-outcome">${outcome}${g.reason ? html`<div class="muted">${g.reason}</div>` : ''}</dd>
    </dl></div>`;
}

export function JobPage({ id, me }) {
  if (!me.admin) return html`<${AdminOnly} />`;
  const q = usePoll(() => api('GET', `/v1/training/jobs/${encodeURIComponent(id)}`), [id], { intervalMs: 3000, live: (j) => j && (j.status === 'queued' || j.status === 'running') });
  const j = q.data;
  if (!j) return html`<h1>Job ${id}</h1><${ErrorBox} error=${q.error} /><${Loading} q=${q} />`;
  const it = j.metrics.map((m) => m.iteration);
  const kset = [...new Set(j.metrics.flatMap((m) => ks(m.passAtK)))].sort((a, b) => a - b);
  const seriesFor = (fields) => fields[0] === 'passAtK'
    ? kset.map((k) => ({ label: `pass@${k}`, values: j.metrics.map((m) => m.passAtK?.[k] ?? null) }))
    : fields.map((f) => ({ label: f, values: j.metrics.map((m) => m[f]) }));
  // A remote version's job exports its training batch for an external trainer: `dataset` { path, samples }.
  const dataset = j.dataset?.path ? j.dataset : null;
  const last = j.lastMetrics;
  return html`<h1>Job <span class="mono">${j.id}</span> <${StatusChip} s=${j.status} /></h1>
    <${ErrorBox} error=${q.error} />
    ${j.error && html`<div class="error" data-testid="job-error">${j.error}</div>`}
    <div class="grid">
      <div class="card"><h2>Progress</h2>
        <${Progress} value=${j.progress} /><p data-testid="job-progress">${pct(j.progress)} · ${j.iterations} iterations</p>
        <dl class="kv">
          <dt>algorithm</dt><dd data-field="algorithm">${j.algorithm}</dd>
          <dt>base → result</dt>
          <dd>${j.baseVersion} → <span data-field="resultVersion">${j.resultVersion ?? j.version ?? '…'}</span>${activation(j)}</dd>
          <dt>data</dt><dd class="mono">${j.data ? JSON.stringify(j.data) : j.demonstrations ?? (j.algorithm === 'sft' ? '–' : 'every completed train session')}</dd>
          ${dataset && html`<dt>dataset (remote version)</dt><dd class="mono" data-field="dataset">${dataset.path}${typeof dataset.samples === 'number' ? ` (${dataset.samples} samples)` : ''}</dd>`}
          <dt>hyperparameters</dt><dd class="mono" style="font-size:11px">${JSON.stringify(j.hyperparameters)}</dd>
          <dt>created · started · finished</dt><dd>${when(j.createdAt)} · ${when(j.startedAt)} · ${when(j.finishedAt)}</dd>
        </dl>
        ${(j.status === 'queued' || j.status === 'running') && html`<p><${Confirm} cls="danger" label="Cancel job" testid="cancel-job"
          question=${j.status === 'running' ? 'Cancel this job? It stops after its current iteration.' : 'Cancel this queued job?'}
          onConfirm=${async () => { await api('POST', `/v1/training/jobs/${encodeURIComponent(j.id)}/cancel`); q.reload(); }} /></p>`}
      </div>
      ${j.gate && html`<${JobGate} g=${j.gate} />`}
      <div class="card"><h2>Data</h2>${j.dataStats ? html`<dl class="kv" data-testid="data-stats">
        ${['sessions', 'tasks', 'turns', 'samples', 'groups', 'zeroAdvantageGroups', 'zeroAdvantageTurns', 'droppedTurns', 'outputTokens'].map((k) => html`<dt>${k}</dt><dd data-field=${k}>${j.dataStats[k]}</dd>`)}
        <dt>mean return</dt><dd>${num(j.dataStats.meanReturn)}</dd>
        <dt>pass@k</dt><dd>${ks(j.dataStats.passAtK).map((k) => `@${k} ${pct(j.dataStats.passAtK[k])}`).join(' · ')}</dd></dl>` : html`<p class="muted">Known once the data is read.</p>`}
        ${last && html`<h2 style="margin-top:12px">Last iteration</h2><table data-testid="last-metrics"><tbody>
          ${['iteration', 'loss', 'meanReturn', 'entropy', 'approxKl', 'clipFrac', 'lr', 'tokensPerSec'].map((k) => html`<tr><th>${k}</th><td class="num" data-field=${k}>${k === 'iteration' ? last[k] : num(last[k], 5)}</td></tr>`)}</tbody></table>`}
      </div>
    </div>
    ${j.metrics.length === 0 ? html`<p class="muted">No iteration reported yet.</p>` : html`<div class="grid" data-testid="curves">
      ${CURVES.map(([title, fields, yRange]) => html`<div class="card"><h2>${title}</h2><${LineChart} x=${it} xLabel="iteration" yLabel=${title} yRange=${yRange ?? null} height=${180} series=${seriesFor(fields)} /></div>`)}</div>`}`;
}

// ------------------------------------------------------------------ compare: what B would have done

/** The newest stored replay on version `b` of sessions recorded with version `a` (listed without steps), or null. */
async function latestReplay(a, b) {
  const list = await api('GET', `/v1/replays${qs({ modelVersion: b, limit: 50 })}`);
  return list.items.find((r) => r.sessions.length > 0 && r.sessions.every((x) => x.modelVersion === a)) ?? null;
}

const signedNats = (x) => (x === null || x === undefined ? '–' : `${x >= 0 ? '+' : '−'}${Math.abs(x).toFixed(3)}`);
const RANK_TITLE = 'rank among the calls where the versions differ most';

/**
 * One replayed call: the observation, what A did, what B would have done, the logprob each gives
 * A's action, and its `rank` among the calls where the two differ most.
 */
function ReplayRow({ r, rank }) {
  const mine = r.replayed;
  const cls = mine && !mine.agrees ? 'differs' : '';
  return html`<tr class=${cls} data-testid="replay-step" data-session=${r.sessionId} data-attempt=${r.attempt} data-step=${r.step}>
    <td><a class="mono" href=${`/ui/sessions/${encodeURIComponent(r.sessionId)}`}>${r.sessionId.slice(-8)}</a></td>
    <td class="num">${r.attempt} · ${r.step}${r.kind === 'turn' ? ' (turn)' : ''}</td>
    <td><pre class="obs small" data-field="observation">${r.observation}</pre></td>
    <td class="mono" data-field="recorded">${r.recorded.action}</td>
    <td class="mono"><span data-field="replayed">${mine ? mine.action : html`<span class="muted">skipped: ${r.skipped}</span>`}</span>
      ${rank ? html` <span class="chip bad" data-field="rank" title=${RANK_TITLE}>#${rank}</span>` : ''}</td>
    <td class="num" data-field="recorded-logprob">${num(r.recorded.logprob)}</td>
    <td class="num" data-field="replayed-logprob">${num(mine?.logprob)}</td>
    <td class="num" data-field="diff">${signedNats(r.logprobDiff)}</td>
  </tr>`;
}

/**
 * "What B would have done here": a replay of A's recorded sessions on B (`POST /v1/replays`, the
 * newest `n` sessions of A, the compare view's env): at every recorded step, A's action and B's own
 * (greedy), and the logprob each version gives A's action (docs/replay.md). Shows the report named
 * in the URL (`replay=`), else the newest stored one of A on B.
 */
function ReplayPanel({ a, b, env, replayId, href }) {
  const [n, setN] = useState(5);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const q = usePoll(async () => {
    const id = replayId || (await latestReplay(a, b))?.id;
    return id ? api('GET', `/v1/replays/${encodeURIComponent(id)}`) : null;
  }, [a, b, replayId], { live: false });
  const run = async () => {
    setBusy(true);
    setError(null);
    try {
      const r = await api('POST', '/v1/replays', { modelVersion: b, filter: { modelVersion: a, ...(env ? { env } : {}), limit: n } });
      navigate(href({ replay: r.id }), true);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const r = q.data;
  const rank = new Map((r?.summary.mostDifferent ?? []).map((i, k) => [i, k + 1]));
  return html`<div class="card" data-testid="replay">
    <h2>What ${b} would have done here</h2>
    <p class="muted">Replays ${a}'s recorded sessions on ${b}: at each recorded step, ${b}'s own action for the same prompt
      (${r ? r.decoding : 'greedy'}) beside ${a}'s, and the log-probability (nats) each version gives ${a}'s action.</p>
    <div class="filters">
      <label>newest sessions of ${a}<input type="number" name="replay-sessions" min="1" max="100" value=${n}
        onInput=${(e) => setN(Number(e.target.value) || 1)} /></label>
      <button class="primary" data-testid="replay-run" disabled=${busy} onClick=${run}>${busy ? 'Replaying…' : `Replay on ${b}`}</button>
    </div>
    <${ErrorBox} error=${error || q.error} />
    <${Loading} q=${q} />
    ${!q.loading && !r && html`<p class="muted" data-testid="replay-none">No replay of ${a}'s sessions on ${b} yet.</p>`}
    ${r && html`<div class="kpis" data-testid="replay-summary">
        <div class="kpi"><div class="v" data-field="agreement">${pct(r.summary.agreement)}</div>
          <div class="l">same action (${r.summary.agreeing} of ${r.summary.replayed})</div></div>
        <div class="kpi"><div class="v" data-field="meanLogprobDiff">${signedNats(r.summary.meanLogprobDiff)}</div>
          <div class="l">mean logprob of ${a}'s action, ${b} − ${a}</div></div>
        <div class="kpi"><div class="v" data-field="calls">${r.summary.calls}</div>
          <div class="l">recorded calls · ${r.sessions.length} sessions · ${r.summary.skipped} skipped</div></div>
      </div>
      <p class="muted" data-field="report">Report <span class="mono">${r.id}</span> · ${when(r.createdAt)}</p>
      <table data-testid="replay-steps"><thead><tr><th>session</th><th class="num">attempt · step</th><th>observation</th><th>${a} did</th>
        <th>${b} would do</th><th class="num">logprob, ${a}</th><th class="num">logprob, ${b}</th><th class="num">Δ</th></tr></thead>
        <tbody>${r.steps.map((x, i) => html`<${ReplayRow} r=${x} rank=${rank.get(i)} />`)}</tbody></table>
      <p class="legend-note">#1, #2, …: the calls where the two versions differ most (largest |Δ| first, then other actions
        without a Δ).</p>`}
  </div>`;
}

// ------------------------------------------------------------------ compare

export function Compare({ me, query }) {
  const a = query.get('a') ?? '';
  const b = query.get('b') ?? '';
  const env = query.get('env') ?? '';
  const memory = query.get('memory') ?? '';
  // The versions to choose from: the registry (admin keys) and those with completed sessions.
  const all = usePoll(() => api('GET', '/v1/stats'), [], { live: false });
  const models = usePoll(() => (me.admin ? api('GET', '/v1/models') : Promise.resolve(null)), [], { live: false });
  const versions = [...new Set([...(models.data?.items ?? []).map((m) => m.version), ...(all.data?.groups ?? []).map((g) => g.modelVersion)])];
  const envs = [...new Set((all.data?.groups ?? []).map((g) => g.env).filter((e) => e !== null))];
  const one = (v) => (v ? Promise.all([api('GET', `/v1/stats${qs({ modelVersion: v, env, memory })}`), api('GET', `/v1/stats/diversity${qs({ modelVersion: v, env, memory })}`)]) : Promise.resolve(null));
  const q = usePoll(() => Promise.all([one(a), one(b)]), [a, b, env, memory], { intervalMs: 20000 });
  const replay = query.get('replay') ?? '';
  const href = (o) => `/ui/compare${qs({ a, b, env, memory, replay, ...o })}`;
  const pick = (k) => (e) => navigate(href({ [k]: e.target.value, replay: '' }), true);
  const groups = [];
  const divs = [];
  for (const [v, r] of [[a, q.data?.[0]], [b, q.data?.[1]]]) {
    if (!v || !r) continue;
    groups.push({ ...r[0], modelVersion: v, env: env || 'all envs', mode: null });
    const d = r[1].groups;
    const n = d.reduce((s, g) => s + g.tasks, 0);
    divs.push({ v, diversity: n ? d.reduce((s, g) => s + g.diversity * g.tasks, 0) / n : null, sessions: r[0].sessions });
  }
  return html`<h1>Compare versions</h1>
    <div class="filters" data-testid="compare-pick">
      <label>version A<select name="a" value=${a} onChange=${pick('a')}><option value="">choose…</option>${versions.map((v) => html`<option>${v}</option>`)}</select></label>
      <label>version B<select name="b" value=${b} onChange=${pick('b')}><option value="">choose…</option>${versions.map((v) => html`<option>${v}</option>`)}</select></label>
      <label>env<select name="env" value=${env} onChange=${pick('env')}><option value="">all</option>${envs.map((e) => html`<option>${e}</option>`)}</select></label>
      <label>memory<select name="memory" value=${memory} onChange=${pick('memory')}><option value="">all</option>${Object.entries(MEMORY_LABELS).map(([m, l]) => html`<option value=${m}>${l}</option>`)}</select></label>
    </div>
    <${ErrorBox} error=${q.error} />
    ${groups.length > 0 && html`<div class="grid">
      <${PassAtKPanel} groups=${groups} title="pass@k by attempt budget k" testid="compare-passk" />
      <${SuccessPanel} groups=${groups} title="Success rate by attempt" testid="compare-success" />
    </div>
    <div class="card"><h2>Trajectory diversity</h2><table data-testid="compare-diversity"><thead><tr><th>version</th><th class="num">completed sessions</th><th class="num">diversity (nats, mean over tasks)</th></tr></thead>
      <tbody>${divs.map((d) => html`<tr data-version=${d.v}><td>${d.v}</td><td class="num">${d.sessions}</td><td class="num">${num(d.diversity)}</td></tr>`)}</tbody></table></div>`}
    ${groups.length === 0 && html`<p class="muted">Choose two versions (for example a LaMer and a GiGPO result) to see their curves side by side.</p>`}
    ${a && b && html`<${ReplayPanel} a=${a} b=${b} env=${env} replayId=${replay} href=${href} />`}`;
}

export const NotFound = () => html`<h1>Not found</h1><p>No view at this address. <a href="/ui/">Overview</a></p>`;
