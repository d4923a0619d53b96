/**
 * SFT samples against the serving path: the prompts buildSftSamples trains on are the prompts the
 * builtin engine feeds the model when a session plays the same steps, also once a prompt no
 * longer fits the context (the engine then drops old steps with hysteresis, src/policy/builtin/
 * generate.ts, and a session's later prompts keep at least that many dropped).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { renderActPrompt, renderReflectionPrompt, type PromptAttempt, type PromptStep } from '../../../src/agent/prompt.js';
import { saveCheckpoint } from '../../../src/model/checkpoint.js';
import { initModel, type GPTConfig } from '../../../src/model/gpt.js';
import { decode, VOCAB_SIZE } from '../../../src/model/tokenizer.js';
import { createBuiltinEngineInstance, type BuiltinEngine } from '../../../src/policy/builtin-engine.js';
import { buildSftSamples, type DemoSession } from '../../../src/training/data/sft-data.js';

const CONFIG: GPTConfig = { vocab_size: VOCAB_SIZE, block_size: 192, n_layer: 1, n_head: 2, n_embd: 16 };
const LIMITS = { maxActionTokens: 8, maxReflectionTokens: 48 };

let engine: BuiltinEngine;
let dir: string;
beforeAll(async () => {
  engine = await createBuiltinEngineInstance({ backend: 'wasm', batchWindowMs: 1, limits: LIMITS });
  dir = await mkdtemp(path.join(os.tmpdir(), 'lamer-sft-'));
  const m = initModel(CONFIG, 5);
  await saveCheckpoint(m, dir, { version: 'v' });
  m.dispose();
  await engine.load('v', dir);
});
afterAll(async () => {
  await engine.dispose();
  await rm(dir, { recursive: true, force: true });
});

/** An attempt of `n` actions on 21-byte observations (47 bytes a rendered step), then a final observation. */
const attempt = (tag: string, n: number, success: boolean, reflection: string | null) => ({
  steps: [
    ...Array.from({ length: n }, (_, i) => ({ observation: `${tag}${'o'.repeat(19)}${i}`, action: `go${i}`, reward: 0, done: false, success: false })),
    { observation: `${tag}-end`, action: null, reward: success ? 10 : -1, done: true, success },
  ],
  reflection,
});

/** The prompt token ids the engine uses for every turn of `demo` played as one session, in order. */
async function servedPrompts(demo: DemoSession, sessionId: string): Promise<number[][]> {
  const out: number[][] = [];
  const previousAttempts: PromptAttempt[] = [];
  const sampling = { temperature: 0, topP: 1, topK: 0 };
  for (const [n, att] of demo.attempts.entries()) {
    const done: PromptStep[] = [];
    for (const s of att.steps) {
      if (s.action === null) break;
      const prompt = renderActPrompt({ instructions: demo.instructions, memory: demo.memory, attempt: n, previousAttempts, steps: done, observation: s.observation });
      out.push((await engine.act({ sessionId, modelVersion: 'v', prompt, sampling })).promptTokenIds);
      done.push({ observation: s.observation, action: s.action });
    }
    const last = att.steps[att.steps.length - 1]!;
    if (att.reflection !== null) {
      const prompt = renderReflectionPrompt({ instructions: demo.instructions, memory: demo.memory, attempt: n, previousAttempts, steps: done, finalObservation: last.observation });
      out.push((await engine.reflect({ sessionId, modelVersion: 'v', prompt, sampling })).promptTokenIds);
    }
    previousAttempts.push({ steps: done, finalObservation: last.observation, success: last.success, reflection: att.reflection });
  }
  return out;
}

describe('buildSftSamples prompts = served prompts', () => {
  it('attempts longer than the context: each acting and reflection prompt is the one the builtin engine serves', async () => {
    const demo: DemoSession = {
      env: 'minesweeper', taskId: 'm:seed=1', instructions: 'Play.', memory: 'reflection_only',
      attempts: [attempt('a', 7, false, 'The last cell was a mine.'), attempt('b', 7, true, null)],
    };
    const served = await servedPrompts(demo, 'sft-vs-serve');
    const { samples } = buildSftSamples([demo], { blockSize: CONFIG.block_size, ...LIMITS, pack: false });
    expect(samples.map((s) => [s.kind, s.attempt])).toEqual([
      ...Array(7).fill(['action', 0]), ['reflection', 0], ...Array(7).fill(['action', 1]),
    ]);
    // the case under test: the prompts outgrow the context in both attempts (a prompt shorter than the one before)
    expect([1, 2, 3, 4, 5, 6].some((i) => served[i]!.length < served[i - 1]!.length)).toBe(true);
    expect([9, 10, 11, 12, 13, 14].some((i) => served[i]!.length < served[i - 1]!.length)).toBe(true);
    expect(samples.map((s) => decode(s.promptTokenIds))).toEqual(served.map((p) => decode(p)));
    expect(samples.map((s) => s.promptTokenIds)).toEqual(served);
  });

  it('packed samples keep the served prompt of every step they hold as a prefix', async () => {
    const demo: DemoSession = {
      env: 'minesweeper', taskId: 'm:seed=2', instructions: 'Play.', memory: 'reflection_only',
      attempts: [attempt('c', 5, false, 'Avoid the corner.'), attempt('d', 5, true, null)],
    };
    const served = await servedPrompts(demo, 'sft-packed');
    const { samples } = buildSftSamples([demo], { blockSize: CONFIG.block_size, ...LIMITS });
    const seqs = samples.map((s) => [...s.promptTokenIds, ...s.outputTokenIds]);
    for (const p of served) expect(seqs.some((q) => q.length >= p.length && p.every((id, i) => q[i] === id))).toBe(true);
  });
});
