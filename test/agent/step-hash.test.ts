/** Request identity of a step (src/agent/step-hash.ts): canonical JSON and the step hash. */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { canonicalJson, newSessionId, SESSION_ID, stepHash } from '../../src/agent/step-hash.js';

describe('request identity', () => {
  it('canonical JSON sorts keys and drops undefined', () => {
    expect(canonicalJson({ b: 1, a: [{ d: 2, c: undefined }], e: null })).toBe('{"a":[{"d":2}],"b":1,"e":null}');
  });
  it('explicit defaults hash like omitted fields; any change hashes differently', () => {
    const h = stepHash({ attempt: 0, step: 1, observation: 'o' });
    expect(stepHash({ attempt: 0, step: 1, observation: 'o', reward: 0, done: false, success: false, invalidAction: false })).toBe(h);
    expect(stepHash({ attempt: 0, step: 1, observation: 'o', reward: 1 })).not.toBe(h);
    expect(stepHash({ attempt: 0, step: 1, observation: 'o', info: { a: 1 } })).not.toBe(h);
  });
  it('hashes the canonical JSON of the body with defaults, as recorded steps were hashed', () => {
    const bodies = [
      { attempt: 0, step: 0, observation: 'o' },
      { attempt: 1, step: 3, observation: 'board\n"quoted" \u2028 é', reward: -0.1, done: false, success: false, availableActions: ['up', 'down', 'left', 'right'] },
      { attempt: 2, step: 8, observation: '', reward: 10, done: true, success: true, invalidAction: true, info: { z: [1, { b: null, a: 'x' }], a: 1.5e-7, m: undefined } },
      { attempt: 0, step: 1, observation: 'o', availableActions: [], info: {} },
    ];
    // digests of the same bodies as stored by earlier versions of the server (request_hash)
    expect(bodies.map((b) => stepHash(b))).toEqual([
      '71b87ed9c37716a4cb28778e0f92a2aea9f521c57188fcebb282fb9ab3160bde',
      '7de517bcaa147384b736fd70759526c3052a704e744ac6b2eda20a84ff861f74',
      '97607bc9cbbfaaa25be157456b9b077dd703d9af4ce6b39287a3089c74f1d724',
      'e70a4c67a45e710fb1f1a1dba6efe475aa9a43c60d7256976ac168e68b1dccc2',
    ]);
    for (const b of bodies) {
      const norm = { attempt: b.attempt, step: b.step, observation: b.observation, reward: b.reward ?? 0, done: b.done ?? false, success: b.success ?? false,
        availableActions: b.availableActions ?? null, invalidAction: b.invalidAction ?? false, info: b.info ?? null };
      expect(stepHash(b)).toBe(createHash('sha256').update(canonicalJson(norm)).digest('hex'));
    }
  });
});

describe('session ids', () => {
  it('are well formed and distinct across refills of the random pool (682 ids a refill)', () => {
    const ids = Array.from({ length: 3000 }, () => newSessionId(1_700_000_000_000));
    expect(ids.every((id) => SESSION_ID.test(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    // same millisecond: only the random part tells them apart, and it is not a counter
    const tails = ids.map((id) => id.slice(-12));
    expect(new Set(tails.map((t) => t.slice(0, 2))).size).toBeGreaterThan(200);
  });
});
