/**
 * A step reads its session's state (row, the attempt's steps so far, the previous attempt, the
 * reflections) from memory between steps, and from the database after a restart: both give the
 * same prompts, actions and records. A version whose checkpoint folder changes is read with its
 * new prompt format by the next step. Real HTTP on an ephemeral port, real SQLite file, test engine.
 */
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { saveCheckpoint } from '../../../../src/model/checkpoint.js';
import { initModel } from '../../../../src/model/gpt.js';
import { GameTokenizer } from '../../../../src/model/tokenizers.js';
import { gameVocabulary } from '../../../../src/envs/vocab.js';
import { startTestServer, tmpDir, type TestServer } from '../../../helpers/index.js';

/** One session's steps: 3 attempts of 4 steps (0..3, step 3 done), the last attempt succeeds. */
const SCRIPT = Array.from({ length: 3 }, (_, attempt) =>
  Array.from({ length: 4 }, (_, step) => ({
    attempt,
    step,
    observation: `board ${attempt}.${step}`,
    reward: step === 0 ? 0 : -0.1,
    done: step === 3,
    success: step === 3 && attempt === 2,
    ...(step % 2 === 1 ? { availableActions: ['up', 'down', 'left', 'right'] } : {}),
  })),
).flat();

/** What the session recorded, without ids and times. */
function records(dataDir: string): unknown[] {
  const db = new Database(join(dataDir, 'lamer.db'), { readonly: true });
  try {
    const steps = db.prepare('SELECT attempt, step, kind, observation, prompt, output, action, answer FROM steps ORDER BY attempt, step, kind').all() as Array<Record<string, unknown>>;
    const refl = db.prepare('SELECT attempt, text FROM reflections ORDER BY attempt').all();
    const sess = db.prepare('SELECT status, attempts, next_attempt, next_step FROM sessions').all();
    // answers name the session id, which differs between runs
    return [steps.map((s) => ({ ...s, answer: typeof s.answer === 'string' ? s.answer.replace(/ses_[0-9a-z]+/g, 'ID') : s.answer })), refl, sess];
  } finally {
    db.close();
  }
}

const servers: TestServer[] = [];
afterAll(async () => {
  for (const s of servers) await s.close().catch(() => {});
});

async function start(dataDir: string): Promise<TestServer> {
  const s = await startTestServer({ dataDir });
  servers.push(s);
  return s;
}

/** Play SCRIPT in one session on a server over `dataDir`, restarting the server before each step index in `restarts`. */
async function play(dataDir: string, memory: string, restarts: Set<number>): Promise<unknown[]> {
  let s = await start(dataDir);
  const created = await s.call('POST', '/v1/sessions', { taskId: 't', instructions: 'Solve it.', maxAttempts: 3, maxSteps: 10, memory, sampling: { temperature: 1, topP: 1, topK: 0, seed: 5 } });
  expect(created.status).toBe(201);
  const id = created.body.id as string;
  for (let i = 0; i < SCRIPT.length; i++) {
    if (restarts.has(i)) {
      await s.close();
      s = await start(dataDir);
    }
    const r = await s.call('POST', `/v1/sessions/${id}/steps`, SCRIPT[i]);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
  }
  await s.close();
  return records(dataDir);
}

describe('session state between steps', () => {
  for (const memory of ['history_and_reflection', 'history_only', 'reflection_only']) {
    it(`${memory}: the records are the same whether each step reads the state from memory or after a restart`, async () => {
      const warm = await play(tmpDir(), memory, new Set());
      // restarts mid-attempt, right after an attempt ended (reflection written), and before the last step
      const cold = await play(tmpDir(), memory, new Set([2, 4, 11]));
      expect(cold).toEqual(warm);
      // the memory is in the prompts: the third attempt's first prompt shows what the mode shows
      const prompt = (warm[0] as Array<{ attempt: number; step: number; kind: string; prompt: string }>).find((r) => r.attempt === 2 && r.step === 0 && r.kind === 'action')!.prompt;
      expect(prompt.includes('Previous attempt 1')).toBe(memory !== 'reflection_only');
      expect(prompt.includes('board 1.3')).toBe(memory !== 'reflection_only');
      expect(prompt.includes('Reflections on earlier attempts')).toBe(memory !== 'history_only');
    }, 60_000);
  }

  it('a retried step, a conflicting one and one out of order are told apart as before', async () => {
    const s = await start(tmpDir());
    const id = (await s.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x' })).body.id as string;
    const first = await s.call('POST', `/v1/sessions/${id}/steps`, SCRIPT[0]);
    expect(first.status).toBe(200);
    expect((await s.call('POST', `/v1/sessions/${id}/steps`, SCRIPT[0])).body).toEqual(first.body);
    expect((await s.call('POST', `/v1/sessions/${id}/steps`, { ...SCRIPT[0], observation: 'other' })).body.type).toMatch(/step-conflict$/);
    expect((await s.call('POST', `/v1/sessions/${id}/steps`, SCRIPT[2])).body).toMatchObject({ expected: { attempt: 0, step: 1 } });
    expect((await s.call('POST', `/v1/sessions/${id}/steps`, SCRIPT[1])).status).toBe(200);
    // closed: no more steps, however the state was held
    expect((await s.call('DELETE', `/v1/sessions/${id}`)).status).toBe(200);
    expect((await s.call('POST', `/v1/sessions/${id}/steps`, SCRIPT[2])).body.type).toMatch(/session-not-active$/);
  });

  it("a version's new checkpoint folder (a compact prompt format) is read by the session's next step", async () => {
    const dir = tmpDir('lamer-format-');
    const tok = new GameTokenizer(gameVocabulary());
    const g = initModel({ vocab_size: tok.vocabSize, block_size: 16, n_layer: 1, n_head: 1, n_embd: 8 }, 1);
    await saveCheckpoint(g, join(dir, 'compact'), { version: 'base' }, { tokenizer: tok, promptFormat: { name: 'compact', envTags: ['bench'], historySteps: 0 } });
    g.dispose();
    const s = await start(join(dir, 'data'));
    const id = (await s.call('POST', '/v1/sessions', { taskId: 't', instructions: 'Solve it.', env: 'bench' })).body.id as string;
    expect((await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'A' })).status).toBe(200);
    await s.app.repos.models.setCheckpointDir(s.app.models.active().version, join(dir, 'compact'));
    s.app.models.invalidate();
    expect((await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 1, observation: 'B' })).status).toBe(200);
    const traj = await s.call('GET', `/v1/sessions/${id}/trajectory`);
    const prompts = traj.body.steps.map((x: { prompt: string }) => x.prompt);
    expect(prompts[0]).toBe('Solve it.\nObservation:\nA\nAction: ');
    expect(prompts[1]).toBe('[bench]\nB\n> ');
  });
});
