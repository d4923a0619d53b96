/**
 * Replay of a recorded call on the builtin engine (src/policy/builtin/replay.ts): the version
 * that recorded a call (act: free text and candidates, seeded or greedy) gives back its recorded
 * logprobs and, decoding as it sampled, its recorded answer; the prompt is read from the given
 * token ids, or fitted from the text when they leave no room; too long or foreign answers are
 * refused before any model work; no session's KV cache is touched; tfjs memory stays flat.
 */
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBuiltinEngineInstance, type BuiltinEngine } from '../../../src/policy/builtin-engine.js';
import { EngineLimitError, type ActRequest, type SamplingParams } from '../../../src/policy/engine.js';
import { tmpDir, writeTinyGptCheckpoint } from '../../helpers/index.js';

let e: BuiltinEngine;
const prompt = { head: 'Find the exit.', steps: ['\nObservation:\nhall\nAction: north'], tail: '\nObservation:\nstairs\nAction: ' };
const CANDIDATES = ['north', 'south', 'east', 'west'];

beforeAll(async () => {
  const dir = tmpDir('lamer-replay-engine-');
  await writeTinyGptCheckpoint(join(dir, 'v1'), 3);
  await writeTinyGptCheckpoint(join(dir, 'v2'), 4);
  e = await createBuiltinEngineInstance({ backend: 'wasm', batchWindowMs: 0, limits: { maxActionTokens: 12 } });
  await e.load('v1', join(dir, 'v1'));
  await e.load('v2', join(dir, 'v2'));
}, 60_000);
afterAll(async () => {
  await e?.dispose();
});

/** Records a call with `act`, then replays it on `version` with the recorded prompt ids and answer. */
async function recordAndReplay(sampling: SamplingParams, candidates?: string[], version = 'v1', decode: SamplingParams = sampling) {
  const req: ActRequest = { sessionId: 's1', modelVersion: 'v1', prompt, sampling, ...(candidates ? { availableActions: candidates } : {}) };
  const g = await e.act(req);
  const a = await e.replay({
    modelVersion: version, prompt, promptTokenIds: g.promptTokenIds, sampling: decode, ...(candidates ? { candidates } : {}),
    score: { tokenIds: g.outputTokenIds, sampling: { temperature: sampling.temperature, topP: sampling.topP, topK: sampling.topK } },
  });
  return { g, a };
}

describe('replay on the builtin engine', () => {
  it.each([
    ['free text, seeded, top-k and top-p', { temperature: 0.8, topP: 0.9, topK: 50, seed: 5 }, undefined],
    ['candidates, seeded', { temperature: 1, topP: 1, topK: 0, seed: 6 }, CANDIDATES],
    ['free text, greedy', { temperature: 0, topP: 1, topK: 0 }, undefined],
    ['candidates, greedy', { temperature: 0, topP: 1, topK: 0 }, CANDIDATES],
  ] as const)('gives the recording version its own answer and logprobs back (%s)', async (_name, sampling, candidates) => {
    const { g, a } = await recordAndReplay(sampling, candidates ? [...candidates] : undefined);
    expect(a.promptFrom).toBe('tokens');
    expect(a.generation.output).toBe(g.output);
    expect(a.generation.outputTokenIds).toEqual(g.outputTokenIds);
    expect(a.generation.promptTokenIds).toEqual(g.promptTokenIds);
    expect(a.scoredLogprobs).toHaveLength(g.logprobs.length);
    a.scoredLogprobs!.forEach((x, i) => expect(Math.abs(x! - g.logprobs[i]!)).toBeLessThan(1e-5));
    a.generation.logprobs.forEach((x, i) => expect(Math.abs(x - g.logprobs[i]!)).toBeLessThan(1e-5));
  });

  it("scores another version's answer token by token and leaves the session's cache alone", async () => {
    const cached = e.cachedSessions();
    const { g, a } = await recordAndReplay({ temperature: 1, topP: 1, topK: 0, seed: 9 }, CANDIDATES, 'v2', { temperature: 0, topP: 1, topK: 0 });
    expect(a.scoredLogprobs).toHaveLength(g.outputTokenIds.length);
    expect(a.scoredLogprobs!.every((x) => x !== null && x <= 0)).toBe(true);
    expect(CANDIDATES).toContain(a.generation.output);
    expect(a.generation.modelVersion).toBe('v2');
    expect(e.cachedSessions()).toBe(cached);
  });

  it('gives null for a token outside the support (top-k 1 keeps only the most likely token)', async () => {
    const g = await e.act({ sessionId: 's2', modelVersion: 'v1', prompt, sampling: { temperature: 1, topP: 1, topK: 0, seed: 1 } });
    const a = await e.replay({
      modelVersion: 'v1', prompt, promptTokenIds: g.promptTokenIds, sampling: { temperature: 0, topP: 1, topK: 0 },
      score: { tokenIds: [...g.outputTokenIds, 0x80], sampling: { temperature: 1, topP: 1, topK: 1 } },
    });
    // a lone continuation byte after a complete character is never allowed
    expect(a.scoredLogprobs!.at(-1)).toBeNull();
    expect(a.scoredLogprobs!.filter((x) => x !== null).every((x) => x === 0)).toBe(true);
  });

  it('fits the text prompt when the given ids leave no room, and refuses answers it cannot score', async () => {
    const a = await e.replay({ modelVersion: 'v1', prompt, promptTokenIds: new Array(380).fill(65), sampling: { temperature: 0, topP: 1, topK: 0 } });
    expect(a.promptFrom).toBe('text');
    expect(a.scoredLogprobs).toBeNull();
    const tooLong = e.replay({ modelVersion: 'v1', prompt, sampling: { temperature: 0, topP: 1, topK: 0 }, score: { tokenIds: new Array(200).fill(65), sampling: { temperature: 1, topP: 1, topK: 0 } } });
    await expect(tooLong).rejects.toBeInstanceOf(EngineLimitError);
    await expect(tooLong).rejects.toThrow('is 200 tokens; model version v1 scores answers of at most 192 tokens');
    const foreign = e.replay({ modelVersion: 'v1', prompt, sampling: { temperature: 0, topP: 1, topK: 0 }, score: { tokenIds: [300], sampling: { temperature: 1, topP: 1, topK: 0 } } });
    await expect(foreign).rejects.toThrow("outside model version v1's vocabulary of 260");
  });

  it('keeps tf.memory().numTensors flat over many replays', async () => {
    await recordAndReplay({ temperature: 1, topP: 1, topK: 0, seed: 2 }, CANDIDATES, 'v2');
    e.release('s1');
    const baseline = tf.memory().numTensors;
    for (let i = 0; i < 20; i++) {
      await recordAndReplay({ temperature: 1, topP: 0.95, topK: 0, seed: i }, i % 2 ? CANDIDATES : undefined, i % 3 ? 'v1' : 'v2');
      e.release('s1');
    }
    expect(tf.memory().numTensors).toBe(baseline);
  });
});
