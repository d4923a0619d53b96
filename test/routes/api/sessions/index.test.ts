/**
 * Session routes under size limits: `info` and `metadata` over LAMER_MAX_INFO_BYTES /
 * LAMER_MAX_METADATA_BYTES are 400 naming the field and store nothing; trajectories are read in
 * pages bounded by `limit` and by LAMER_TRAJECTORY_PAGE_BYTES, which together hold every row once,
 * in order. `DELETE /v1/sessions/{id}` abandons: the running attempt ends, nothing recorded is lost.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultLimits } from '../../../../src/config.js';
import { countRows, dumpDb, startTestServer, type TestServer } from '../../../helpers/index.js';

const INFO_BYTES = 20_000;
const METADATA_BYTES = 1_000;
const PAGE_BYTES = 64 * 1024;
let s: TestServer;

beforeAll(async () => {
  s = await startTestServer({
    limits: { ...defaultLimits, infoBytes: INFO_BYTES, metadataBytes: METADATA_BYTES, trajectoryPageBytes: PAGE_BYTES },
  });
});
afterAll(async () => {
  await s.close();
});

/** An `info` object whose JSON text is exactly `bytes` long. */
const infoOf = (bytes: number) => ({ pad: 'x'.repeat(bytes - '{"pad":""}'.length) });

describe('limits on info and metadata', () => {
  it('metadata: at the limit is kept, one byte over is 400 naming body/metadata', async () => {
    const ok = await s.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x', metadata: infoOf(METADATA_BYTES) });
    expect(ok.status).toBe(201);
    expect(JSON.stringify(ok.body.metadata)).toHaveLength(METADATA_BYTES);
    const before = dumpDb(s.dataDir);
    const r = await s.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x', metadata: infoOf(METADATA_BYTES + 1) });
    expect(r.status).toBe(400);
    expect(r.body.type).toBe('https://lamer-server.dev/problems/validation');
    expect(r.body.errors).toEqual([{ field: 'body/metadata', message: `is ${METADATA_BYTES + 1} bytes of JSON; at most ${METADATA_BYTES} are allowed (LAMER_MAX_METADATA_BYTES)` }]);
    // Multi-byte characters count as their UTF-8 bytes.
    const wide = await s.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x', metadata: { s: 'é'.repeat(600) } });
    expect(wide.status).toBe(400);
    expect(dumpDb(s.dataDir)).toBe(before);
  });

  it('info: at the limit is kept, over it is 400 naming body/info and the step can be posted again', async () => {
    const id = (await s.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x' })).body.id;
    const before = dumpDb(s.dataDir);
    const r = await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o', info: infoOf(INFO_BYTES + 1) });
    expect(r.status).toBe(400);
    expect(r.body.errors[0].field).toBe('body/info');
    expect(r.body.detail).toContain('LAMER_MAX_INFO_BYTES');
    expect(dumpDb(s.dataDir)).toBe(before);
    const ok = await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o', info: infoOf(INFO_BYTES) });
    expect(ok.status).toBe(200);
    const t = await s.call('GET', `/v1/sessions/${id}/trajectory`);
    expect(t.body.steps[0].info).toEqual(infoOf(INFO_BYTES));
  });
});

describe('trajectory pages', () => {
  let id: string;
  const N = 40; // action rows of attempt 0 (the last ends the attempt and adds a reflection row), then 5 of attempt 1
  const all: string[] = [];
  beforeAll(async () => {
    id = (await s.call('POST', '/v1/sessions', { taskId: 'long', instructions: 'x', maxSteps: 1000, maxAttempts: 2 })).body.id;
    for (let i = 0; i < N; i++) {
      const done = i === N - 1;
      const r = await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: i, observation: `obs ${i} ` + '"q"\n'.repeat(i % 2 ? 1 : 200), reward: 0, done, ...(done ? { success: false } : {}), info: infoOf(15_000) });
      expect(r.status).toBe(200);
      all.push(`0.${i}.action`);
    }
    all.push(`0.${N - 1}.reflection`);
    for (let i = 0; i < 5; i++) {
      expect((await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 1, step: i, observation: `again ${i}` })).status).toBe(200);
      all.push(`1.${i}.action`);
    }
  });

  async function readAll(query: string): Promise<{ rows: string[]; pages: number; maxPageBytes: number; rowBytes: number[] }> {
    const rows: string[] = [];
    const rowBytes: number[] = [];
    let cursor: string | null = null;
    let pages = 0;
    let maxPageBytes = 0;
    do {
      const q: string = `${query}${cursor ? `${query ? '&' : ''}cursor=${encodeURIComponent(cursor)}` : ''}`;
      const r = await s.call('GET', `/v1/sessions/${id}/trajectory${q ? `?${q}` : ''}`);
      expect(r.status).toBe(200);
      expect(r.body.sessionId).toBe(id);
      expect(r.body.steps.length).toBeGreaterThan(0);
      // A page is within the budget, unless it is one row larger than the budget by itself.
      if (r.body.steps.length > 1) maxPageBytes = Math.max(maxPageBytes, Buffer.byteLength(JSON.stringify(r.body)));
      rowBytes.push(...r.body.steps.map((x: unknown) => Buffer.byteLength(JSON.stringify(x)) + 1));
      rows.push(...r.body.steps.map((x: { attempt: number; step: number; kind: string }) => `${x.attempt}.${x.step}.${x.kind}`));
      cursor = r.body.nextCursor;
      pages++;
    } while (cursor !== null && pages < 100);
    return { rows, pages, maxPageBytes, rowBytes };
  }

  it('byte-bounded pages (default limit) hold every row once, in order, each under LAMER_TRAJECTORY_PAGE_BYTES', async () => {
    const { rows, pages, maxPageBytes, rowBytes } = await readAll('');
    expect(rows).toEqual(all);
    expect(maxPageBytes).toBeLessThanOrEqual(PAGE_BYTES);
    // Pages are filled: as many as packing the rows' real JSON sizes greedily into the budget
    // gives (the server estimates sizes before reading rows, so allow a page or two more).
    let greedy = 0;
    for (let i = 0, used = Infinity; i < rowBytes.length; i++) {
      if (used + rowBytes[i]! > PAGE_BYTES - 100) (greedy++, (used = 0));
      used += rowBytes[i]!;
    }
    expect(greedy).toBeGreaterThan(5);
    expect(pages).toBeGreaterThanOrEqual(greedy);
    expect(pages).toBeLessThanOrEqual(greedy + 2);
  });

  it('`limit` bounds the rows of a page; the reflection follows its action across a page boundary', async () => {
    const first = await s.call('GET', `/v1/sessions/${id}/trajectory?limit=1`);
    expect(first.body.steps).toHaveLength(1);
    expect(first.body.nextCursor).toBe('0.0.a');
    const { rows } = await readAll('limit=3');
    expect(rows).toEqual(all);
    const atEnd = await s.call('GET', `/v1/sessions/${id}/trajectory?limit=1&cursor=0.${N - 1}.a`);
    expect(atEnd.body.steps.map((x: { kind: string }) => x.kind)).toEqual(['reflection']);
    expect(atEnd.body.nextCursor).toBe(`0.${N - 1}.r`);
    const last = await s.call('GET', `/v1/sessions/${id}/trajectory?cursor=1.4.a`);
    expect(last.body).toEqual({ sessionId: id, steps: [], nextCursor: null });
  });

  it('a row larger than the page budget comes alone', async () => {
    const big = (await s.call('POST', '/v1/sessions', { taskId: 'big', instructions: 'x' })).body.id;
    const obs = 'y'.repeat(60_000);
    for (let i = 0; i < 3; i++) {
      expect((await s.call('POST', `/v1/sessions/${big}/steps`, { attempt: 0, step: i, observation: obs, info: infoOf(INFO_BYTES) })).status).toBe(200);
    }
    const p1 = await s.call('GET', `/v1/sessions/${big}/trajectory`);
    expect(p1.body.steps).toHaveLength(1);
    expect(p1.body.nextCursor).toBe('0.0.a');
  });

  it('bad limits and cursors are 400 naming the parameter', async () => {
    for (const [q, field] of [
      ['limit=0', 'querystring/limit'],
      ['limit=1001', 'querystring/limit'],
      ['cursor=abc', 'querystring/cursor'],
      ['cursor=1.2.x', 'querystring/cursor'],
      ['other=1', 'querystring'],
    ] as const) {
      const r = await s.call('GET', `/v1/sessions/${id}/trajectory?${q}`);
      expect(r.status, q).toBe(400);
      expect(r.body.type).toBe('https://lamer-server.dev/problems/validation');
      expect(r.body.errors[0].field, q).toContain(field);
    }
  });
});

const VALIDATION = 'https://lamer-server.dev/problems/validation';

describe('GET /v1/sessions cursor', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
    // two sessions: a page of one has a next cursor
    for (let i = 0; i < 2; i++) await s.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x' });
  });
  afterAll(async () => {
    await s.close();
  });

  it.each([
    ['garbage', 'garbage'],
    ['a tampered cursor (right shape, no such session)', 'ses_000000000000000000000'],
  ])('%s -> 400 naming querystring/cursor', async (_name, cursor) => {
    const r = await s.call('GET', `/v1/sessions?cursor=${cursor}`);
    expect(r.status).toBe(400);
    expect(r.body.type).toBe(VALIDATION);
    expect(r.body.errors[0].field).toBe('querystring/cursor');
  });

  it('a tampered real cursor -> 400; the real one pages on', async () => {
    const page = await s.call('GET', '/v1/sessions?limit=1');
    const cursor: string = page.body.nextCursor;
    expect(cursor).toMatch(/^ses_/);
    const tampered = cursor.slice(0, -1) + (cursor.endsWith('0') ? '1' : '0');
    expect((await s.call('GET', `/v1/sessions?limit=1&cursor=${tampered}`)).status).toBe(400);
    const next = await s.call('GET', `/v1/sessions?limit=1&cursor=${cursor}`);
    expect(next.status).toBe(200);
    expect(next.body.items).toHaveLength(1);
  });
});

describe('DELETE /v1/sessions/{id} abandons the session', () => {
  it('ends the running attempt (failed, endReason abandoned), keeps every step readable and listed, and refuses further steps', async () => {
    const id = (await s.call('POST', '/v1/sessions', { taskId: 'abandon', instructions: 'x', maxAttempts: 2 })).body.id;
    // attempt 0 fails (a reflection is written), attempt 1 runs two steps, then the client abandons
    await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'a' });
    await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 1, observation: 'b', reward: -1, done: true });
    await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 1, step: 0, observation: 'c' });
    await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 1, step: 1, observation: 'd', reward: 0.5 });
    const rowsBefore = countRows(s.dataDir, 'SELECT count(*) AS n FROM steps WHERE session_id = ?', id);
    expect(rowsBefore).toBe(5); // 4 posted steps + the reflection turn
    const ended = [
      { attempt: 0, status: 'failed', steps: 2, return: -1, success: false, endReason: 'done' },
      { attempt: 1, status: 'failed', steps: 2, return: 0.5, success: false, endReason: 'abandoned' },
    ];

    const d = await s.call('DELETE', `/v1/sessions/${id}`);
    expect(d.status).toBe(200);
    expect(d.body).toMatchObject({ id, status: 'abandoned', next: null, attempts: ended, passAtK: { '1': false, '2': false } });
    expect(d.body.reflections).toHaveLength(1);

    const got = await s.call('GET', `/v1/sessions/${id}`);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ status: 'abandoned', next: null, attempts: ended });
    expect((await s.call('GET', '/v1/sessions?status=abandoned')).body.items.map((x: { id: string }) => x.id)).toContain(id);
    const t = await s.call('GET', `/v1/sessions/${id}/trajectory`);
    expect(t.body.steps.map((r: { observation: string; kind: string }) => `${r.kind}:${r.observation}`)).toEqual(['action:a', 'action:b', 'reflection:b', 'action:c', 'action:d']);

    const before = dumpDb(s.dataDir);
    const step = await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 1, step: 2, observation: 'e' });
    expect(step.status).toBe(409);
    expect(step.type).toContain('application/problem+json');
    expect(step.body).toMatchObject({ type: 'https://lamer-server.dev/problems/session-not-active', detail: `session '${id}' is abandoned` });
    // a second DELETE answers the same session and changes nothing
    const again = await s.call('DELETE', `/v1/sessions/${id}`);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(d.body);
    expect(dumpDb(s.dataDir)).toBe(before);
  });

  it('between attempts (none running) and before any step, the attempts are unchanged', async () => {
    const fresh = (await s.call('POST', '/v1/sessions', { taskId: 'abandon', instructions: 'x' })).body.id;
    expect((await s.call('DELETE', `/v1/sessions/${fresh}`)).body).toMatchObject({ status: 'abandoned', attempts: [] });
    const between = (await s.call('POST', '/v1/sessions', { taskId: 'abandon', instructions: 'x', maxAttempts: 2 })).body.id;
    await s.call('POST', `/v1/sessions/${between}/steps`, { attempt: 0, step: 0, observation: 'a' });
    await s.call('POST', `/v1/sessions/${between}/steps`, { attempt: 0, step: 1, observation: 'b', done: true });
    const d = await s.call('DELETE', `/v1/sessions/${between}`);
    expect(d.body.attempts).toEqual([{ attempt: 0, status: 'failed', steps: 2, return: 0, success: false, endReason: 'done' }]);
  });

  it('a completed session is 409 session-not-active and stays completed', async () => {
    const id = (await s.call('POST', '/v1/sessions', { taskId: 'abandon', instructions: 'x', maxAttempts: 1 })).body.id;
    await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'a' });
    await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 1, observation: 'b', done: true, success: true });
    const before = dumpDb(s.dataDir);
    const d = await s.call('DELETE', `/v1/sessions/${id}`);
    expect(d.status).toBe(409);
    expect(d.body.type).toBe('https://lamer-server.dev/problems/session-not-active');
    expect(dumpDb(s.dataDir)).toBe(before);
  });
});
