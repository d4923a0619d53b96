/**
 * A builtin checkpoint that declares a game tokenizer and the `compact` prompt format, served end
 * to end over real HTTP (builtin engine, wasm, SQLite file): sessions of a known env record compact
 * prompts in game tokens, other envs get their instructions, `/openai/v1` logprob tokens are the
 * version's pieces, and a byte checkpoint still serves chat prompts. Tensor count stays flat.
 */
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { saveCheckpoint } from '../../src/model/checkpoint.js';
import { initModel } from '../../src/model/gpt.js';
import { BOS, EOS, PAD, SEP } from '../../src/model/tokenizer.js';
import { GameTokenizer } from '../../src/model/tokenizers.js';
import { gameVocabulary } from '../../src/envs/vocab.js';
import { gridText } from '../../src/envs/grid.js';
import { COMPACT_REFLECTION_CHARS, cutChars } from '../../src/agent/prompt.js';
import { startTestServer, tmpDir, type TestServer } from '../helpers/index.js';

const tok = new GameTokenizer(gameVocabulary());
const INSTRUCTIONS = 'MineSweeper 3x3, 1 mine. Answer one hidden cell as (row, col).';
const board = gridText(['???', '?1?', '???'], 1);
const cells = ['(1, 1)', '(1, 2)', '(2, 1)', '(3, 3)'];
let compact: TestServer;
let bytes: TestServer;

beforeAll(async () => {
  const dir = tmpDir('lamer-compact-');
  const g = initModel({ vocab_size: tok.vocabSize, block_size: 384, n_layer: 1, n_head: 2, n_embd: 16 }, 7);
  await saveCheckpoint(g, join(dir, 'compact'), { version: 'base' }, {
    tokenizer: tok, promptFormat: { name: 'compact', envTags: ['minesweeper', 'sokoban'], historySteps: 0 }, sampling: { temperature: 0.7, topP: 0.8, topK: 20 },
  });
  g.dispose();
  const b = initModel({ vocab_size: 260, block_size: 512, n_layer: 1, n_head: 2, n_embd: 16 }, 7);
  await saveCheckpoint(b, join(dir, 'bytes'), { version: 'base' });
  b.dispose();
  compact = await startTestServer({ dataDir: join(dir, 'a'), engine: 'builtin', tfjsBackend: 'wasm', baseModelDir: join(dir, 'compact') });
  bytes = await startTestServer({ dataDir: join(dir, 'b'), engine: 'builtin', tfjsBackend: 'wasm', baseModelDir: join(dir, 'bytes') });
});
afterAll(async () => {
  await compact?.close();
  await bytes?.close();
});

/** Plays a session (temperature 1, `seed`): attempt 0 fails after `steps` steps (a reflection follows), attempt 1 acts once. */
async function play(s: TestServer, env: string | undefined, steps = 2, seed = 3): Promise<{ id: string; actions: string[] }> {
  const created = await s.call('POST', '/v1/sessions', { taskId: 'ms', instructions: INSTRUCTIONS, maxAttempts: 2, maxSteps: 10, ...(env ? { env } : {}), sampling: { temperature: 1, topP: 1, topK: 0, seed } });
  expect(created.status).toBe(201);
  const id = created.body.id as string;
  const actions: string[] = [];
  for (let step = 0; step < steps; step++) {
    const r = await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step, observation: board, availableActions: cells });
    expect(r.status).toBe(200);
    actions.push(r.body.action);
  }
  const end = await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: steps, observation: gridText(['*??', '?1?', '???'], 1), done: true, success: false });
  expect(end.status).toBe(200);
  const next = await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 1, step: 0, observation: board, availableActions: cells });
  expect(next.status).toBe(200);
  actions.push(next.body.action);
  const last = await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 1, step: 1, observation: board, done: true, success: true });
  expect(last.status).toBe(200);
  return { id, actions };
}

async function trajectory(s: TestServer, id: string): Promise<Array<Record<string, any>>> {
  const t = await s.call('GET', `/v1/sessions/${id}/trajectory`);
  expect(t.status).toBe(200);
  return t.body.steps;
}

describe('a compact checkpoint with a game vocabulary', () => {
  it('gives sessions its declared default sampling, field by field; a checkpoint without one gives temperature 1', async () => {
    const open = async (s: TestServer, sampling?: Record<string, number>) => {
      const r = await s.call('POST', '/v1/sessions', { taskId: 'ms', instructions: INSTRUCTIONS, env: 'minesweeper', ...(sampling ? { sampling } : {}) });
      expect(r.status).toBe(201);
      const got = await s.call('GET', `/v1/sessions/${r.body.id}`);
      expect(got.body.sampling).toEqual(r.body.sampling);
      await s.call('DELETE', `/v1/sessions/${r.body.id}`);
      return r.body.sampling;
    };
    expect(await open(compact)).toEqual({ temperature: 0.7, topP: 0.8, topK: 20 });
    expect(await open(compact, { temperature: 0.2, seed: 5 })).toEqual({ temperature: 0.2, topP: 0.8, topK: 20, seed: 5 });
    expect(await open(compact, { temperature: 1, topP: 1, topK: 0 })).toEqual({ temperature: 1, topP: 1, topK: 0 });
    expect(await open(bytes)).toEqual({ temperature: 1, topP: 1, topK: 0 });
    expect(await open(bytes, { topK: 5 })).toEqual({ temperature: 1, topP: 1, topK: 5 });
  });

  it('records compact prompts in game tokens for a known env, and chooses among the candidates', async () => {
    const { id, actions } = await play(compact, 'minesweeper');
    for (const a of actions) expect(cells).toContain(a);
    const rows = await trajectory(compact, id);
    expect(rows.map((r) => `${r.attempt}.${r.step}.${r.kind}`)).toEqual(['0.0.action', '0.1.action', '0.2.action', '0.2.reflection', '1.0.action', '1.1.action']);
    const first = rows[0]!;
    // the tag instead of the instructions, no step history, the board, the cue
    expect(first.prompt).toBe(`[minesweeper]\n${board}\n> `);
    expect(rows[1]!.prompt).toBe(first.prompt);
    expect(first.promptTokenIds).toEqual([BOS, ...tok.encode(first.prompt)]);
    expect(first.promptTokenIds).toEqual([BOS, 367, 10, 355, 347, 63, 63, 63, 348, 63, 49, 63, 349, 63, 63, 63, 369]);
    expect(first.droppedSteps).toBe(0);
    // the action chosen among candidates is one piece token (then EOS), its logprob recorded
    expect(first.outputTokenIds).toEqual(tok.encodeCandidate(first.action));
    expect(first.outputTokenIds[0]).toBeGreaterThanOrEqual(260);
    expect(first.logprobs).toHaveLength(2);
    // the reflection prompt: the last step, the final board and the reflection cue
    const refl = rows[3]!;
    expect(refl.prompt).toBe(`[minesweeper]\n${board}\n> ${actions[1]}\n${gridText(['*??', '?1?', '???'], 1)}\n! `);
    expect(refl.promptTokenIds).toEqual([BOS, ...tok.encode(refl.prompt)]);
    for (const t of refl.outputTokenIds) expect(t >= 0 && t < tok.vocabSize && ![BOS, SEP, PAD].includes(t)).toBe(true);
    expect(tok.decode(refl.outputTokenIds)).toBe(refl.output);
    // the next attempt reads the reflection as one memory line (whitespace collapsed, cut to 200 characters)
    const mem = await compact.call('GET', `/v1/sessions/${id}/memory`);
    const text = cutChars((mem.body.reflections[0].text as string).replace(/\s+/g, ' ').trim(), COMPACT_REFLECTION_CHARS);
    expect(rows[4]!.prompt).toBe(`[minesweeper]\nm ${text}\n${board}\n> `);
    expect(rows[4]!.promptTokenIds).toEqual([BOS, ...tok.encode(rows[4]!.prompt)]);
  });

  it('gives a session of an env it was not trained on (or none) the instructions', async () => {
    for (const env of ['blackjack', undefined]) {
      const { id } = await play(compact, env, 1);
      const rows = await trajectory(compact, id);
      expect(rows[0]!.prompt).toBe(`${INSTRUCTIONS}\n${board}\n> `);
      expect(rows[0]!.promptTokenIds).toEqual([BOS, ...tok.encode(rows[0]!.prompt)]);
    }
  });

  it('writes /openai/v1 logprob tokens and bytes in the version\'s vocabulary', async () => {
    const r = await compact.call('POST', '/openai/v1/chat/completions', {
      model: 'base', messages: [{ role: 'user', content: `[minesweeper]\n${board}\n> ` }], guided_choice: ['(1, 1)', '(3, 3)'], logprobs: true, return_token_ids: true, seed: 1,
    });
    expect(r.status).toBe(200);
    const c = r.body.choices[0];
    expect(['(1, 1)', '(3, 3)']).toContain(c.message.content);
    expect(c.token_ids).toEqual(tok.encodeCandidate(c.message.content));
    expect(r.body.prompt_token_ids).toEqual([BOS, ...tok.encode(`[minesweeper]\n${board}\n> `)]);
    const [piece, eos] = c.logprobs.content;
    expect(piece.token).toBe(c.message.content);
    expect(piece.bytes).toEqual([...Buffer.from(c.message.content, 'utf8')]);
    expect(eos).toMatchObject({ token: '<|eos|>', bytes: [] });
    expect(c.token_ids[1]).toBe(EOS);
    const ids = await compact.call('POST', '/openai/v1/completions', { model: 'base', prompt: '[sokoban]\n> ', max_tokens: 6, logprobs: 0, return_tokens_as_token_ids: true, return_token_ids: true, seed: 2 });
    expect(ids.status).toBe(200);
    const ch = ids.body.choices[0];
    expect(ch.logprobs.tokens).toEqual(ch.token_ids.map((t: number) => `token_id:${t}`));
    // text offsets advance by each token's bytes in this vocabulary
    let off = 0;
    expect(ch.logprobs.text_offset).toEqual(ch.token_ids.map((t: number) => { const o = off; off += tok.tokenBytes(t).length; return o; }));
  });

  it('never samples BOS, SEP or PAD into a reflection at temperature 1, over many sessions of a random model; tfjs memory stays flat', async () => {
    const specials = [BOS, SEP, PAD];
    for (const s of [compact, bytes]) {
      await play(s, 'minesweeper', 1, 100);
      const before = tf.memory().numTensors;
      let sampled = 0;
      for (let seed = 0; seed < 12; seed++) {
        const { id } = await play(s, 'minesweeper', 1, seed);
        const refl = (await trajectory(s, id)).find((r) => r.kind === 'reflection')!;
        const out = refl.outputTokenIds as number[];
        expect(out.filter((t) => specials.includes(t))).toEqual([]);
        // EOS still ends a reflection: it is the last token when present
        expect(out.indexOf(EOS)).toBe(out.includes(EOS) ? out.length - 1 : -1);
        expect(refl.logprobs).toHaveLength(out.length);
        for (const lp of refl.logprobs) expect(lp).toBeLessThanOrEqual(0);
        sampled += out.length;
      }
      // the random model gives each special token about 1/V of the mass (V = 381 or 260 ids), so
      // unmasked about one sampled token in 90 to 130 would be BOS, SEP or PAD: over this many
      // tokens (over 800 from each checkpoint with these seeds) several would appear
      expect(sampled).toBeGreaterThan(800);
      expect(tf.memory().numTensors).toBe(before);
    }
  });

  it('keeps tfjs memory flat over many steps', async () => {
    await play(compact, 'minesweeper', 3);
    const before = tf.memory().numTensors;
    for (let i = 0; i < 3; i++) await play(compact, 'minesweeper', 6);
    expect(tf.memory().numTensors).toBe(before);
  });
});

describe('a compact checkpoint behind a remote lamer version', () => {
  it('records the chat prompt sent; the remote\'s game-vocabulary prompt ids, which this server cannot decode, count as not returned', async () => {
    const remote = await startTestServer({
      engine: 'openai', dataDir: tmpDir(),
      openai: { baseUrl: `${compact.url}/openai/v1`, model: 'base', kind: 'lamer', concurrency: 2, timeoutMs: 30_000, maxRetries: 0, maxActionTokens: 12, maxReflectionTokens: 24 },
    });
    try {
      const { id, actions } = await play(remote, 'minesweeper', 1);
      for (const a of actions) expect(cells).toContain(a);
      const rows = await trajectory(remote, id);
      // remote versions read chat prompts; ids of another vocabulary describe a prompt this server
      // cannot check against the text sent, so they are recorded as not returned (null)
      expect(rows[0]!.prompt).toBe(`${INSTRUCTIONS}\nObservation:\n${board}\nAction: `);
      expect(rows[0]!.promptTokenIds).toBeNull();
      expect(rows[0]!.promptTruncatedChars).toBe(0);
    } finally {
      await remote.close();
    }
  });
});

describe('a byte checkpoint', () => {
  it('still serves chat prompts in bytes, whatever the env', async () => {
    const { id, actions } = await play(bytes, 'minesweeper', 1);
    for (const a of actions) expect(cells).toContain(a);
    const rows = await trajectory(bytes, id);
    expect(rows[0]!.prompt).toBe(`${INSTRUCTIONS}\nObservation:\n${board}\nAction: `);
    expect(rows[0]!.promptTokenIds).toEqual([BOS, ...Buffer.from(rows[0]!.prompt, 'utf8')]);
    for (const r of rows) for (const t of [...(r.promptTokenIds ?? []), ...(r.outputTokenIds ?? [])]) expect(t).toBeLessThan(260);
    const c = await bytes.call('POST', '/openai/v1/chat/completions', { model: 'base', messages: [{ role: 'user', content: 'x' }], guided_choice: ['é'], logprobs: true });
    expect(c.body.choices[0].logprobs.content.map((t: any) => t.bytes)).toEqual([[0xc3], [0xa9], []]);
  });
});
