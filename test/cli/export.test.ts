/**
 * `lamer export` against a real server run: sessions played over HTTP, then
 * exported as JSONL; every line validates against docs/export.schema.json (ajv), lines match the
 * trajectory exactly, filters select the right sessions, and the CLI writes to stdout.
 */
import fs from 'node:fs';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Ajv } from 'ajv';
import { Writable } from 'node:stream';
import { run, parseSince, writeJsonl } from '../../src/cli/export.js';
import { exportLines, type ExportLine } from '../../src/db/export.js';
import { writeTurnScores } from '../../src/training/data/select.js';
import { startTestServer, type TestServer } from '../helpers/index.js';

const repo = path.resolve(import.meta.dirname, '../..');
const schema = JSON.parse(fs.readFileSync(path.join(repo, 'docs/export.schema.json'), 'utf8'));
const ajv = new Ajv({ allErrors: true, strict: true });
ajv.addFormat('date-time', (s: string) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/.test(s) && !Number.isNaN(Date.parse(s)));
const validate = ajv.compile(schema);

let s: TestServer;
let played: string; // completed train session, 3 attempts
let active: string; // eval session left active
let t0: number;

async function step(id: string, body: Record<string, unknown>) {
  const r = await s.call('POST', `/v1/sessions/${id}/steps`, body);
  expect(r.status).toBe(200);
  return r.body;
}

beforeAll(async () => {
  s = await startTestServer();
  t0 = Date.now();
  played = (await s.call('POST', '/v1/sessions', { taskId: 'ms-1', instructions: 'Find the safe cells.', env: 'minesweeper', mode: 'train' })).body.id;
  for (let a = 0; a < 3; a++) {
    await step(played, { attempt: a, step: 0, observation: `board ${a}`, availableActions: ['reveal 1 1', 'reveal 2 2'] });
    await step(played, { attempt: a, step: 1, observation: 'next', reward: 0.5 });
    await step(played, { attempt: a, step: 2, observation: a === 2 ? 'won' : 'boom', reward: a === 2 ? 1 : -1, done: true, success: a === 2 });
  }
  active = (await s.call('POST', '/v1/sessions', { taskId: 'sk-1', instructions: 'Push the box.', env: 'sokoban', mode: 'eval' })).body.id;
  await step(active, { attempt: 0, step: 0, observation: 'room' });
  // Returns and advantages as a training job stores them.
  await writeTurnScores(s.app.repos.trainingData, [{ sessionId: played, attempt: 2, step: 1, kind: 'action', return: 1.75, advantage: 0.5, kept: true }]);
});
afterAll(async () => {
  await s.close();
});

function readLines(file: string): ExportLine[] {
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as ExportLine);
}

describe('lamer export', () => {
  it('writes one schema-valid line per step record, equal to the trajectory', async () => {
    const out = path.join(s.dataDir, 'all.jsonl');
    expect(await run(['--data-dir', s.dataDir, '--out', out])).toBe(0);
    const lines = readLines(out);
    // played: 3 attempts x 3 steps + 2 reflections; active: 1 step.
    expect(lines).toHaveLength(12);
    for (const l of lines) {
      const ok = validate(l);
      expect(validate.errors ?? []).toEqual([]);
      expect(ok).toBe(true);
    }
    const mine = lines.filter((l) => l.sessionId === played);
    expect(mine.map((l) => `${l.attempt}/${l.step}/${l.kind}`)).toEqual([
      '0/0/action', '0/1/action', '0/2/action', '0/2/reflection',
      '1/0/action', '1/1/action', '1/2/action', '1/2/reflection',
      '2/0/action', '2/1/action', '2/2/action',
    ]);
    const traj = (await s.call('GET', `/v1/sessions/${played}/trajectory`)).body.steps as Array<Record<string, unknown>>;
    expect(traj).toHaveLength(11);
    mine.forEach((l, i) => {
      const t = traj[i]!;
      for (const k of ['attempt', 'step', 'kind', 'observation', 'reward', 'done', 'success', 'prompt', 'output', 'action', 'promptTokenIds', 'outputTokenIds', 'logprobs', 'modelVersion', 'return', 'advantage', 'createdAt', 'availableActions', 'droppedSteps', 'promptTruncatedChars', 'invalidAction']) {
        expect([k, l[k as keyof ExportLine]]).toEqual([k, t[k]]);
      }
      expect(l).toMatchObject({ schemaVersion: 1, tenant: 'default', taskId: 'ms-1', env: 'minesweeper', mode: 'train', sessionStatus: 'completed' });
    });
    const scored = mine.find((l) => l.attempt === 2 && l.step === 1 && l.kind === 'action')!;
    expect([scored.return, scored.advantage]).toEqual([1.75, 0.5]);
    expect(mine[0]!.return).toBeNull();
    // A step with a model call: token ids and logprobs line up; the attempt's last step has none.
    expect(mine[0]!.outputTokenIds!.length).toBe(mine[0]!.logprobs!.length);
    expect(mine[0]!.outputTokenIds!.length).toBeGreaterThan(0);
    expect(['reveal 1 1', 'reveal 2 2']).toContain(mine[0]!.action);
    expect(mine[2]).toMatchObject({ prompt: null, output: null, outputTokenIds: null, logprobs: null, promptTruncatedChars: null, done: true, reward: -1 });
    expect(mine[0]!.promptTruncatedChars).toBe(0);
    expect(mine[3]!.output).toMatch(/^Attempt 0 failed/);
  });

  it('filters: completed-only, env, mode, model version, since', () => {
    const db = path.join(s.dataDir, 'lamer.db');
    const ids = (f: Parameters<typeof exportLines>[1]) => [...new Set([...exportLines(db, f)].map((l) => l.sessionId))];
    expect(ids({})).toEqual([played, active]);
    expect(ids({ completedOnly: true })).toEqual([played]);
    expect(ids({ env: 'sokoban' })).toEqual([active]);
    expect(ids({ mode: 'train' })).toEqual([played]);
    expect(ids({ modelVersion: 'test' })).toEqual([played, active]);
    expect(ids({ modelVersion: 'other' })).toEqual([]);
    expect(ids({ since: t0 - 60_000 })).toEqual([played, active]);
    expect(ids({ since: Date.now() + 60_000 })).toEqual([]);
    expect(parseSince('2026-01-02T03:04:05Z')).toBe(Date.UTC(2026, 0, 2, 3, 4, 5));
    expect(parseSince('12345')).toBe(12345);
    expect(() => parseSince('yesterday')).toThrow(/--since/);
  });

  it('bad options exit 2; the CLI streams to stdout', async () => {
    expect(await run(['--data-dir', path.join(s.dataDir, 'nope')])).toBe(2);
    expect(await run(['--mode', 'both', '--data-dir', s.dataDir])).toBe(2);
    expect(await run(['--bogus'])).toBe(2);
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', path.join(repo, 'src/cli/index.ts'), 'export', '--data-dir', s.dataDir, '--completed-only', '--mode', 'train'],
      { cwd: repo, maxBuffer: 64 * 1024 * 1024 },
    );
    const lines = stdout.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as ExportLine);
    expect(lines).toHaveLength(11);
    expect(lines.every((l) => l.sessionId === played && validate(l))).toBe(true);
    expect(stderr).toMatch(/lamer export: 11 steps of 1 session(?!s)/);
  });
  it('reads in short chunks: the same lines, and no snapshot pinned between chunks (the WAL can be truncated mid-export)', async () => {
    const db = path.join(s.dataDir, 'lamer.db');
    const whole = [...exportLines(db, {})];
    for (const n of [1, 2, 3, 11, 12, 1000]) expect([...exportLines(db, {}, n)]).toEqual(whole);
    const live = s.app.store.sqlite!.sqlite;
    const it = exportLines(db, {}, 2);
    expect(it.next().value).toEqual(whole[0]);
    // A write while the export is paused between lines, then a full checkpoint that must wait for
    // every reader of the WAL: it completes because the export holds no read transaction.
    const extra = (await s.call('POST', '/v1/sessions', { taskId: 'late', instructions: 'x', env: 'late' })).body.id as string;
    const cp = live.pragma('wal_checkpoint(TRUNCATE)') as Array<{ busy: number }>;
    expect(cp[0]!.busy).toBe(0);
    expect(fs.statSync(`${db}-wal`).size).toBe(0);
    const rest = [...it];
    expect([whole[0], ...rest]).toEqual(whole);
    await s.call('DELETE', `/v1/sessions/${extra}`);
  });
});

describe('writeJsonl back-pressure', () => {
  const lines = (n: number) => Array.from({ length: n }, (_, i) => ({ sessionId: `s${Math.floor(i / 4)}`, attempt: 0, step: i % 4 }) as unknown as ExportLine);

  it('408 lines through a slow stream: every drain wait cleans up (no listener left, no MaxListenersExceededWarning)', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on('warning', onWarning);
    let waits = 0;
    const out = new Writable({ highWaterMark: 16, write: (_c, _e, cb) => void setImmediate(cb) });
    out.on('drain', () => waits++);
    try {
      expect(await writeJsonl(lines(408), out)).toEqual({ lines: 408, sessions: 102 });
      await new Promise((r) => setImmediate(r));
    } finally {
      process.off('warning', onWarning);
    }
    expect(waits).toBeGreaterThan(100);
    expect(out.listenerCount('error')).toBe(0);
    expect(out.listenerCount('drain')).toBe(1); // this test's own
    expect(warnings).toEqual([]);
  });

  it('an error of the stream while waiting for drain rejects with it', async () => {
    const out = new Writable({ highWaterMark: 16, write: (_c, _e, cb) => void setImmediate(() => cb(Object.assign(new Error('disk full'), { code: 'ENOSPC' }))) });
    await expect(writeJsonl(lines(50), out)).rejects.toThrow('disk full');
    expect(out.listenerCount('error')).toBe(0);
  });
});
