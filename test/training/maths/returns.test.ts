import { describe, expect, it } from 'vitest';
import { discountedReturns, sessionReturns } from '../../../src/training/maths/returns.js';

const close = (got: number[], want: number[]) => {
  expect(got.length).toBe(want.length);
  got.forEach((g, i) => expect(g).toBeCloseTo(want[i], 3));
};

describe('discountedReturns (g_t = r_t + gamma g_{t+1})', () => {
  const table: Array<[number[], number, number[]]> = [
    [[1, 2, 3], 0.5, [2.75, 3.5, 3]],
    [[0, 0, 10], 0.95, [9.025, 9.5, 10]],
    [[-1, 0.5, 10], 1, [9.5, 10.5, 10]],
    [[5, 5], 0, [5, 5]],
    [[], 0.9, []],
  ];
  it.each(table)('rewards %j gamma %d', (r, g, want) => close(discountedReturns(r, g), want));
  it('rejects bad inputs', () => {
    expect(() => discountedReturns([1], 1.5)).toThrow(RangeError);
    expect(() => discountedReturns([NaN], 0.5)).toThrow(/not finite/);
  });
});

describe('sessionReturns: the worked example of docs/method.md#returns (gamma_step 0.95, gamma_traj 0.6)', () => {
  const rewards = [[0, 0, 0], [0, 10]];
  it('CODE recursion: attempt 0 [5.144, 5.415, 5.7], reflection 9.5, attempt 1 [9.5, 10]', () => {
    const R = sessionReturns(rewards, { gammaStep: 0.95, gammaTraj: 0.6, mode: 'code' });
    // 0.6*9.5 = 5.7; *0.95 = 5.415; *0.95 = 5.14425
    close(R.crossEpisode[0], [5.14425, 5.415, 5.7]);
    close(R.crossEpisode[1], [9.5, 10]);
    close(R.reflection, [9.5]);
    close(R.withinEpisode[0], [0, 0, 0]);
  });
  it('PAPER Eq. 4 (default): 5.7 for every step of attempt 0', () => {
    const R = sessionReturns(rewards, { gammaStep: 0.95, gammaTraj: 0.6 });
    close(R.crossEpisode[0], [5.7, 5.7, 5.7]);
    close(R.crossEpisode[1], [9.5, 10]);
    close(R.reflection, [9.5]);
  });
});

describe('sessionReturns: three attempts (gamma_step 0.5, gamma_traj 0.5), rewards [[1],[2,0],[0,4]]', () => {
  const rewards = [[1], [2, 0], [0, 4]];
  // g: [1] | [2, 0] | [2, 4]
  it('PAPER: G(n) = g(n) + sum_m 0.5^(m-n) g_0(m)', () => {
    const R = sessionReturns(rewards, { gammaStep: 0.5, gammaTraj: 0.5, mode: 'paper' });
    close(R.crossEpisode[0], [2.5]); // 1 + 0.5*2 + 0.25*2
    close(R.crossEpisode[1], [3, 1]); // + 0.5*2
    close(R.crossEpisode[2], [2, 4]);
    close(R.reflection, [3, 2]); // G_0(1), G_0(2)
  });
  it('CODE: G_t(n) = g_t(n) + 0.5^(T-1-t) * 0.5 * G_0(n+1)', () => {
    const R = sessionReturns(rewards, { gammaStep: 0.5, gammaTraj: 0.5, mode: 'code' });
    close(R.crossEpisode[2], [2, 4]);
    close(R.crossEpisode[1], [2.5, 1]); // 2 + 0.5*0.5*2 ; 0 + 0.5*2
    close(R.crossEpisode[0], [2.25]); // 1 + 0.5*2.5
    close(R.reflection, [2.5, 2]);
  });
});

describe('sessionReturns edge cases', () => {
  it('gamma_traj 0: attempts are independent', () => {
    const R = sessionReturns([[1, 1], [3]], { gammaStep: 1, gammaTraj: 0 });
    close(R.crossEpisode[0], [2, 1]);
    close(R.reflection, [3]);
  });
  it('an attempt without turns: g_0 = 0 (PAPER) and G_0 = gamma_traj G_0(n+1) (CODE)', () => {
    const p = sessionReturns([[], [2]], { gammaStep: 0.9, gammaTraj: 0.5, mode: 'paper' });
    expect(p.crossEpisode[0]).toEqual([]);
    close(p.reflection, [2]);
    const c = sessionReturns([[1], [], [4]], { gammaStep: 0.9, gammaTraj: 0.5, mode: 'code' });
    close(c.reflection, [2, 4]); // G_0(1) = 0.5*4
    close(c.crossEpisode[0], [2]); // 1 + 0.5*2
  });
  it('single attempt: G = g, no reflections', () => {
    const R = sessionReturns([[0, 1]], { gammaStep: 0.5, gammaTraj: 0.9 });
    close(R.crossEpisode[0], [0.5, 1]);
    expect(R.reflection).toEqual([]);
  });
  it('rejects a bad gamma_traj or mode', () => {
    expect(() => sessionReturns([[1]], { gammaStep: 0.5, gammaTraj: -0.1 })).toThrow(RangeError);
    expect(() => sessionReturns([[1]], { gammaStep: 0.5, gammaTraj: 0.1, mode: 'x' as never })).toThrow(/unknown return mode/);
  });
});
