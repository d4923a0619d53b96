/** TestEngine (src/policy/test-engine.ts): the deterministic engine of the 'test' configuration. */
import { describe, expect, it } from 'vitest';
import { TestEngine } from '../../src/policy/test-engine.js';

describe('TestEngine', () => {
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
