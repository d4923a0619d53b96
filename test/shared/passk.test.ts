/** pass@k of sessions (src/shared/passk.ts). */
import { describe, expect, it } from 'vitest';
import { passAtK, passAtKRate } from '../../src/shared/passk.js';

describe('pass@k', () => {
  const S = (...xs: boolean[]) => xs.map((success) => ({ success }));
  it('one session', () => {
    expect(passAtK(S(false, true), 3)).toEqual({ '1': false, '2': true, '3': true });
    expect(passAtK(S(true), 3)).toEqual({ '1': true, '2': true, '3': true });
    expect(passAtK(S(), 2)).toEqual({ '1': false, '2': false });
  });
  it('rates over sessions', () => {
    expect(passAtKRate([S(true), S(false, true), S(false, false, false), S(false, false, true)], 3)).toEqual({ '1': 0.25, '2': 0.5, '3': 0.75 });
    expect(passAtKRate([], 2)).toEqual({ '1': 0, '2': 0 });
  });
});
