/**
 * Random streams of a session's model calls (src/agent/model-calls.ts `callSampling`), over real
 * HTTP with the builtin engine on a tiny GPT: one seed reproduces a session across server runs, and
 * every call (attempt, step, act/reflect) draws from its own stream, so a seeded session's actions
 * follow the sampling distribution instead of repeating step 0's draw.
 */
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { saveCheckpoint } from '../../src/model/checkpoint.js';
import { initModel } from '../../src/model/gpt.js';
import { startServer } from '../../src/server.js';
import { tmpDir } from '../helpers/index.js';

let dir: string;

beforeAll(async () => {
  dir = tmpDir('lamer-streams-');
  const m = initModel({ vocab_size: 260, block_size: 512, n_layer: 1, n_head: 2, n_embd: 16 }, 5);
  await saveCheckpoint(m, join(dir, 'base-model'), { version: 'base' });
  m.dispose();
});

/** A fresh server over its own database; plays one 24-step session and returns its actions. */
async function playOnce(run: string, sampling: Record<string, number>): Promise<string[]> {
  const server = await startServer({ port: 0, host: '127.0.0.1', dataDir: join(dir, run), engine: 'builtin', tfjsBackend: 'wasm', logLevel: 'silent', apiKeys: [], baseModelDir: join(dir, 'base-model') });
  try {
    const post = async (path: string, body: unknown) => {
      const r = await fetch(server.url + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      expect(r.status).toBeLessThan(300);
      return (await r.json()) as Record<string, any>;
    };
    const s = await post('/v1/sessions', { taskId: 'lr:1', instructions: 'Go left or right.', maxAttempts: 1, maxSteps: 30, sampling });
    const actions: string[] = [];
    for (let step = 0; step < 24; step++) {
      const a = await post(`/v1/sessions/${s.id}/steps`, { attempt: 0, step, observation: 'A corridor.', availableActions: ['left', 'right'] });
      actions.push(a.action as string);
    }
    return actions;
  } finally {
    await server.close();
  }
}

describe('seeded sessions', () => {
  it('draw each step from its own stream: at temperature 10 the 24 choices between two actions are mixed', async () => {
    const actions = await playOnce('a', { temperature: 10, topP: 1, topK: 0, seed: 11 });
    const lefts = actions.filter((x) => x === 'left').length;
    // temperature 10 makes p(left) within [0.4, 0.6] for this model (its logits differ by far less
    // than 4); Binomial(24, p) lies in [4, 20] with probability > 0.999 for such p
    expect(lefts).toBeGreaterThanOrEqual(4);
    expect(lefts).toBeLessThanOrEqual(20);
    // the same seed on a fresh server (new database, new engine) replays the session exactly
    expect(await playOnce('b', { temperature: 10, topP: 1, topK: 0, seed: 11 })).toEqual(actions);
    // another seed gives another session
    expect(await playOnce('c', { temperature: 10, topP: 1, topK: 0, seed: 12 })).not.toEqual(actions);
  }, 60_000);
});
