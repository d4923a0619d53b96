/**
 * /metrics over HTTP (src/plugins/app/metrics.ts): after a played session the per-route latency histogram,
 * step counters, batch-size histogram, queue gauges, active sessions, loaded versions, engine /
 * backend info and training-job gauges have the exact values the traffic implies.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { trainingJobs } from '../../../src/db/schema.js';
import { sessionAfterFirstStep, startTestServer, type TestServer } from '../../helpers/index.js';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s.close();
});

/** Parse Prometheus text: `name{labels}` -> value (labels as written by prom-client). */
async function scrape(): Promise<Map<string, number>> {
  const r = await fetch(`${s.url}/metrics`);
  expect(r.status).toBe(200);
  expect(r.headers.get('content-type')).toMatch(/^text\/plain/);
  const out = new Map<string, number>();
  for (const line of (await r.text()).split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

const get = (m: Map<string, number>, key: string): number => {
  const v = m.get(key);
  if (v === undefined) throw new Error(`metric ${key} not exported; have: ${[...m.keys()].filter((k) => k.startsWith(key.split('{')[0]!)).join(', ')}`);
  return v;
};

describe('/metrics', () => {
  it('exports every metric family and the values move with traffic', async () => {
    const before = await scrape();
    expect(get(before, 'lamer_active_sessions')).toBe(0);
    expect(get(before, 'lamer_engine_batch_rows_count')).toBe(0);
    expect(get(before, 'lamer_model_loaded{version="test"}')).toBe(1);
    expect(get(before, 'lamer_engine_info{engine="test",backend="none"}')).toBe(1);
    expect(get(before, 'lamer_training_jobs{status="running"}')).toBe(0);

    const created = await s.call('POST', '/v1/sessions', { taskId: 'm', instructions: 'x', maxAttempts: 2 });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    expect(get(await scrape(), 'lamer_active_sessions')).toBe(1);
    // Attempt 0: two actions, then done (failed) -> a reflection; attempt 1: one action, then success.
    const posts = [
      { attempt: 0, step: 0, observation: 'a' },
      { attempt: 0, step: 1, observation: 'b' },
      { attempt: 0, step: 2, observation: 'c', done: true },
      { attempt: 1, step: 0, observation: 'a' },
      { attempt: 1, step: 1, observation: 'win', done: true, success: true, reward: 1 },
    ];
    for (const p of posts) expect((await s.call('POST', `/v1/sessions/${id}/steps`, p)).status).toBe(200);
    // An identical retry is replayed; a wrong position is rejected.
    expect((await s.call('POST', `/v1/sessions/${id}/steps`, posts[4])).status).toBe(200);
    expect((await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 5, step: 0, observation: 'x' })).status).toBe(409);

    const m = await scrape();
    const route = 'route="/v1/sessions/:id/steps"';
    expect(get(m, `http_request_duration_seconds_count{method="POST",${route},status_code="200"}`)).toBe(6);
    expect(get(m, `http_request_duration_seconds_count{method="POST",${route},status_code="409"}`)).toBe(1);
    expect(get(m, `http_request_duration_seconds_bucket{le="+Inf",method="POST",${route},status_code="200"}`)).toBe(6);
    expect(get(m, 'http_request_duration_seconds_count{method="POST",route="/v1/sessions",status_code="201"}')).toBe(1);
    // Step records: 5 action rows + 1 reflection; requests by outcome.
    expect(get(m, 'lamer_steps_total{kind="action",model_version="test"}')).toBe(5);
    expect(get(m, 'lamer_steps_total{kind="reflection",model_version="test"}')).toBe(1);
    expect(get(m, 'lamer_step_requests_total{outcome="recorded"}')).toBe(5);
    expect(get(m, 'lamer_step_requests_total{outcome="replayed"}')).toBe(1);
    expect(get(m, 'lamer_step_requests_total{outcome="rejected"}')).toBe(1);
    // Model calls: 3 acts (attempt 0 steps 0-1, attempt 1 step 0) + 1 reflection, 1 row each.
    expect(get(m, 'lamer_engine_batch_rows_count')).toBe(4);
    expect(get(m, 'lamer_engine_batch_rows_sum')).toBe(4);
    expect(get(m, 'lamer_engine_batch_rows_bucket{le="1"}')).toBe(4);
    expect(get(m, 'lamer_engine_forward_seconds_count')).toBe(4);
    expect(get(m, 'lamer_engine_queue_depth')).toBe(0);
    expect(get(m, 'lamer_model_calls_in_flight')).toBe(0);
    expect(get(m, 'lamer_active_sessions')).toBe(0);
    expect(get(m, 'lamer_sessions_created_total')).toBe(1);
    expect(get(m, 'lamer_sessions_ended_total{status="completed"}')).toBe(1);
    expect(get(m, 'lamer_rate_limited_total')).toBe(0);
    expect(m.has('process_cpu_seconds_total')).toBe(true);
  });

  it('training jobs: progress of running jobs and counts by status', async () => {
    // Rows as the job manager writes them (a running job mid-way, one finished).
    const now = Date.now();
    const row = { algorithm: 'lamer' as const, config: {}, metrics: [], resultVersion: null, error: null, createdAt: now, startedAt: now, finishedAt: null };
    s.app.store.sqlite!.db.insert(trainingJobs).values({ ...row, id: 'job_metrics_1', status: 'running', progress: 0.25 }).run();
    s.app.store.sqlite!.db.insert(trainingJobs).values({ ...row, id: 'job_metrics_0', status: 'succeeded', progress: 1, finishedAt: now }).run();
    const m = await scrape();
    expect(get(m, 'lamer_training_job_progress{job_id="job_metrics_1",algorithm="lamer"}')).toBe(0.25);
    expect(m.has('lamer_training_job_progress{job_id="job_metrics_0",algorithm="lamer"}')).toBe(false);
    expect(get(m, 'lamer_training_jobs{status="running"}')).toBe(1);
    expect(get(m, 'lamer_training_jobs{status="succeeded"}')).toBe(1);
    expect(get(m, 'lamer_training_jobs{status="queued"}')).toBe(0);
  });
});

/** One sample of /metrics, 0 when absent. */
async function metric(s: TestServer, name: string): Promise<number> {
  const text = await (await fetch(`${s.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(name + ' '));
  return line ? Number(line.slice(name.length + 1)) : 0;
}

describe('step metrics', () => {
  let s: TestServer;
  let id: string;
  beforeAll(async () => {
    s = await startTestServer();
    id = await sessionAfterFirstStep(s);
  });
  afterAll(async () => {
    await s.close();
  });

  const REJECTED = 'lamer_step_requests_total{outcome="rejected"}';

  it('every 4xx answer of the step routes counts as rejected once', async () => {
    const url = `/v1/sessions/${id}/steps`;
    const cases: Array<[unknown, Record<string, string>, number]> = [
      [{ attempt: '0', step: 1, observation: 'o' }, {}, 400], // schema validation
      ['{"attempt":0,"step":1,"observation":"' + 'x'.repeat(3 * 1024 * 1024) + '"}', {}, 413],
      ['{"attempt":0,"step":1,"observation":"o"}', { 'content-type': 'text/plain' }, 415],
      [{ attempt: 0, step: 7, observation: 'o' }, {}, 409], // out of order (from the agent)
    ];
    for (const [body, headers, status] of cases) {
      const before = await metric(s, REJECTED);
      expect((await s.call('POST', url, body, headers)).status).toBe(status);
      expect(await metric(s, REJECTED), `status ${status}`).toBe(before + 1);
    }
  });

  it('batch: a whole-batch 400 counts once, each rejected item once; the route label is /v1/steps:batch', async () => {
    let before = await metric(s, REJECTED);
    expect((await s.call('POST', '/v1/steps:batch', { items: [] })).status).toBe(400);
    expect(await metric(s, REJECTED)).toBe(before + 1);
    before = await metric(s, REJECTED);
    const items = [
      { sessionId: id, attempt: 0, step: 9, observation: 'o' },
      { sessionId: 'ses_nope', attempt: 0, step: 0, observation: 'o' },
    ];
    const r = await s.call('POST', '/v1/steps:batch', { items });
    expect(r.status).toBe(200);
    expect(r.body.results.map((x: { error: { status: number } }) => x.error.status)).toEqual([409, 404]);
    expect(await metric(s, REJECTED)).toBe(before + 2);
    expect(await metric(s, 'http_request_duration_seconds_count{method="POST",route="/v1/steps:batch",status_code="200"}')).toBeGreaterThanOrEqual(1);
    expect(await metric(s, 'http_request_duration_seconds_count{method="POST",route="/v1/steps::batch",status_code="200"}')).toBe(0);
  });
});
