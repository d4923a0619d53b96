/**
 * SFT data and training checkpoints of a compact base (src/training/sft-data.ts with its
 * tokenizer/format options, src/training/gpt-adapter.ts): demonstrations train the prompts the
 * builtin engine serves for a game-vocabulary checkpoint, and versions saved from it keep its
 * tokenizer and prompt format.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import path from 'node:path';
import { renderActPrompt, renderReflectionPrompt, type PromptAttempt, type PromptStep } from '../../../src/agent/prompt.js';
import { checkpointText, readCheckpointMetadata, saveCheckpoint } from '../../../src/model/checkpoint.js';
import { initModel, type GPTConfig } from '../../../src/model/gpt.js';
import { BOS, EOS } from '../../../src/model/tokenizer.js';
import { GameTokenizer } from '../../../src/model/tokenizers.js';
import type { CompactPromptFormat } from '../../../src/model/prompt-format.js';
import { gameVocabulary } from '../../../src/envs/vocab.js';
import { gridText } from '../../../src/envs/grid.js';
import { createBuiltinEngineInstance, type BuiltinEngine } from '../../../src/policy/builtin-engine.js';
import { buildSftSamples, type DemoSession } from '../../../src/training/data/sft-data.js';
import { createModelIO } from '../../../src/training/run/gpt-adapter.js';
import { tmpDir } from '../../helpers/index.js';

const tok = new GameTokenizer(gameVocabulary());
const format: CompactPromptFormat = { name: 'compact', envTags: ['minesweeper', 'sokoban'], historySteps: 0 };
const CONFIG: GPTConfig = { vocab_size: tok.vocabSize, block_size: 192, n_layer: 1, n_head: 2, n_embd: 16 };
const LIMITS = { maxActionTokens: 8, maxReflectionTokens: 48 };

let engine: BuiltinEngine;
let dir: string;
beforeAll(async () => {
  engine = await createBuiltinEngineInstance({ backend: 'wasm', batchWindowMs: 1, limits: LIMITS });
  dir = path.join(tmpDir('lamer-sft-compact-'), 'base');
  const m = initModel(CONFIG, 5);
  await saveCheckpoint(m, dir, { version: 'base' }, { tokenizer: tok, promptFormat: format });
  m.dispose();
  await engine.load('base', dir);
});
afterAll(async () => {
  await engine.dispose();
});

const board = (i: number) => gridText([`?${i % 8}?`, '???', '??.'], 1);
const attempt = (n: number, success: boolean, reflection: string | null) => ({
  steps: [
    ...Array.from({ length: n }, (_, i) => ({ observation: board(i), action: `(${i + 1}, 1)`, reward: 0, done: false, success: false })),
    { observation: board(9), action: null, reward: success ? 10 : -1, done: true, success },
  ],
  reflection,
});

describe('buildSftSamples for a compact game-vocabulary base', () => {
  it('trains exactly the prompts the engine serves, in game tokens, one sample per turn', async () => {
    const demo: DemoSession = {
      env: 'minesweeper', taskId: 'm:seed=1', instructions: 'Play MineSweeper.', memory: 'reflection_only',
      attempts: [attempt(3, false, '(3, 1) was a mine.'), attempt(2, true, null)],
    };
    const served: number[][] = [];
    const previousAttempts: PromptAttempt[] = [];
    const sampling = { temperature: 0, topP: 1, topK: 0 };
    for (const [n, att] of demo.attempts.entries()) {
      const done: PromptStep[] = [];
      for (const s of att.steps) {
        if (s.action === null) break;
        const prompt = renderActPrompt({ format, env: demo.env, instructions: demo.instructions, memory: demo.memory, attempt: n, previousAttempts, steps: done, observation: s.observation });
        served.push((await engine.act({ sessionId: 'sft-compact', modelVersion: 'base', prompt, sampling })).promptTokenIds);
        done.push({ observation: s.observation, action: s.action });
      }
      const last = att.steps[att.steps.length - 1]!;
      if (att.reflection !== null) {
        const prompt = renderReflectionPrompt({ format, env: demo.env, instructions: demo.instructions, memory: demo.memory, attempt: n, previousAttempts, steps: done, finalObservation: last.observation });
        served.push((await engine.reflect({ sessionId: 'sft-compact', modelVersion: 'base', prompt, sampling })).promptTokenIds);
      }
      previousAttempts.push({ steps: done, finalObservation: last.observation, success: last.success, reflection: att.reflection });
    }
    const { samples } = buildSftSamples([demo], { blockSize: CONFIG.block_size, ...LIMITS, tokenizer: tok, format });
    // compact prompts do not extend each other (no step history), so nothing is packed
    expect(samples.map((s) => [s.kind, s.attempt, s.step])).toEqual([['action', 0, 0], ['action', 0, 1], ['action', 0, 2], ['reflection', 0, 3], ['action', 1, 0], ['action', 1, 1]]);
    expect(samples.map((s) => s.promptTokenIds)).toEqual(served);
    expect(samples[0]!.promptTokenIds).toEqual([BOS, ...tok.encode(`[minesweeper]\n${board(0)}\n> `)]);
    expect(samples[0]!.outputTokenIds).toEqual([260 + 9 * 1 + 1, EOS]);
    expect(tok.decode(samples[4]!.promptTokenIds)).toBe(`[minesweeper]\nm (3, 1) was a mine.\n${board(0)}\n> `);
    expect(samples[3]!.outputTokenIds).toEqual([...tok.encode('(3, 1) was a mine.'), EOS]);
    expect(samples[3]!.outputTokenIds.slice(0, 2)).toEqual([260 + 9 * 3 + 1, 373]);
  });
});

describe('gpt-adapter', () => {
  it('saves versions trained from a compact base with its tokenizer and prompt format', async () => {
    const io = await createModelIO({ backend: 'wasm' });
    const m = await io.load(dir);
    const out = path.join(tmpDir('lamer-adapter-'), 'v1');
    try {
      await io.save(m, out, { version: 'v1', parent: 'base' });
    } finally {
      m.dispose();
    }
    const md = await readCheckpointMetadata(out);
    expect(md.version).toBe('v1');
    expect(md.tokenizer).toEqual(tok.spec);
    expect(checkpointText(md).promptFormat).toEqual(format);
  });
});
