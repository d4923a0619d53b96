/** TestEngine (src/policy/test-engine.ts): the deterministic engine of the 'test' configuration. */
import { describe, expect, it } from 'vitest';
import { fnv1a, TestEngine } from '../../src/policy/test-engine.js';

describe('TestEngine', () => {
  it('answers by the FNV-1a hash of prompt text, "|" and seed, and records the prompt as its UTF-8 bytes', async () => {
    const e = new TestEngine();
    expect(fnv1a('b|c', fnv1a('a'))).toBe(fnv1a('ab|c'));
    for (const seed of [undefined, 0, 7919]) {
      const prompt = { head: 'Push é ', steps: ['up\n', '😀\n'], tail: 'Attempt 1 ended\nAction:' };
      const text = 'Push é up\n😀\nAttempt 1 ended\nAction:';
      const h = fnv1a(`${text}|${seed ?? ''}`);
      const sampling = { temperature: 1, topP: 1, topK: 0, ...(seed === undefined ? {} : { seed }) };
      const act = await e.act({ sessionId: 's', modelVersion: 'test', prompt, sampling, availableActions: ['a', 'b', 'c'] });
      expect([act.output, act.choiceIndex]).toEqual([['a', 'b', 'c'][h % 3], h % 3]);
      expect(act.promptTokenIds).toEqual([...Buffer.from(text, 'utf8')]);
      expect(act.promptText).toBe(text);
      expect((await e.act({ sessionId: 's', modelVersion: 'test', prompt, sampling })).output).toBe(`move ${h % 4}`);
      const refl = await e.reflect({ sessionId: 's', modelVersion: 'test', prompt, sampling });
      expect(refl.output).toBe(`Attempt 1 failed. Next time try a different first move (${h % 97}).`);
    }
  });

  it('is deterministic and picks from availableActions', async () => {
    const e = new TestEngine();
    const req = { sessionId: 's', modelVersion: 'test', prompt: { head: 'h', steps: [], tail: 't' }, sampling: { temperature: 1, topP: 1, topK: 0, seed: 1 } };
    const a = await e.act({ ...req, availableActions: ['x', 'y', 'z'] });
    const b = await e.act({ ...req, availableActions: ['x', 'y', 'z'] });
    expect(a).toEqual(b);
    expect(['x', 'y', 'z'][a.choiceIndex!]).toBe(a.output);
    expect(a.promptTokenIds).toEqual([104, 116]);
    expect((await e.act(req)).output).toMatch(/^move [0-3]$/);
    expect(await e.score({ modelVersion: 'test', prompt: req.prompt, candidates: ['ab', ''] })).toEqual([2 * Math.log(1 / 256), 0]);
  });
});
