/** Request identity of a step (src/agent/step-hash.ts): canonical JSON and the step hash. */
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
