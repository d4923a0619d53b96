import { describe, expect, it } from 'vitest';
import { computeAdvantages, type Turn } from '../../../src/training/maths/advantages.js';

const act = (taskId: string, sessionId: string, attempt: number, step: number, observation: string, reward: number, invalidAction = false): Turn =>
  ({ taskId, sessionId, attempt, step, kind: 'action', observation, reward, invalidAction });
const refl = (taskId: string, sessionId: string, attempt: number): Turn =>
  ({ taskId, sessionId, attempt, step: 0, kind: 'reflection', observation: '', reward: 0, invalidAction: false });

describe('GiGPO mean_norm, single attempt (gamma_step 0.5)', () => {
  // task A: s1 = X(r 0) -> Y(r 4): g = [2, 4], sum 4
  //         s2 = X(r 1, invalid) -> Z(r 0): g = [1, 0], sum 1; invalid turn scores 1 - 0.5
  // task B: two identical sessions: no signal -> skipped
  const turns: Turn[] = [
    act('A', 's1', 0, 1, 'Y', 4), act('A', 's1', 0, 0, 'X', 0), // out of order on purpose
    act('A', 's2', 0, 0, 'X', 1, true), act('A', 's2', 0, 1, 'Z', 0),
    act('B', 's3', 0, 0, 'P', 1), act('B', 's4', 0, 0, 'P', 1),
  ];
  const res = computeAdvantages(turns, { estimator: 'gigpo', returns: { gammaStep: 0.5, gammaTraj: 0.6 } });
  it('returns and episode scores', () => {
    expect(res.turns.map((t) => t.return)).toEqual([4, 2, 1, 0, 1, 1]);
    expect(res.turns.map((t) => t.episodeScore)).toEqual([4, 4, 0.5, 1, 1, 1]);
  });
  it('episode term: s - mean over the task (2.375)', () => {
    const e = res.turns.slice(0, 4).map((t) => t.episodeTerm);
    [1.625, 1.625, -1.875, -1.375].forEach((w, i) => expect(e[i]).toBeCloseTo(w, 9));
  });
  it('step term: G - mean over the anchor state (X: mean 1.5; Y, Z singletons)', () => {
    const s = res.turns.slice(0, 4).map((t) => t.stepTerm);
    [0, 0.5, -0.5, 0].forEach((w, i) => expect(s[i]).toBeCloseTo(w, 9));
  });
  it('advantage = episode + 1.0 x step', () => {
    const a = res.turns.map((t) => t.advantage);
    [1.625, 2.125, -2.375, -1.375, 0, 0].forEach((w, i) => expect(a[i]).toBeCloseTo(w, 9));
  });
  it('skips the group without signal and reports it', () => {
    expect(res.groups).toBe(2);
    expect(res.skippedGroups).toBe(1);
    expect(res.skippedTurns).toBe(2);
    expect(res.turns.map((t) => t.kept)).toEqual([true, true, true, true, false, false]);
  });
  it('stepCoef weights the step term', () => {
    const r2 = computeAdvantages(turns, { estimator: 'gigpo', stepCoef: 0, returns: { gammaStep: 0.5, gammaTraj: 0.6 } });
    expect(r2.turns[1].advantage).toBeCloseTo(1.625, 9);
  });
});

describe('GiGPO for LaMer: multi-attempt with reflections (gamma_step 0.95, gamma_traj 0.6, PAPER)', () => {
  // L1: attempt 0 A(r 0) fails, reflection, attempt 1 A(r 10). L2: attempt 0 A(r 10), plus a dangling reflection.
  // G: L1a0 = 0 + 0.6*10 = 6, reflection = G_0(1) = 10, L1a1 = 10, L2a0 = 10
  // episode scores: 0, 0 (a reflection earns no reward of its own; reference
  // metarl_rollout_loop.py:589), 10, 10 -> mean 5
  // anchor 'A': G in {6, 10, 10}, mean 26/3; reflections: one group of one
  const turns: Turn[] = [
    act('T', 'L1', 0, 0, 'A', 0), refl('T', 'L1', 0), act('T', 'L1', 1, 0, 'A', 10),
    act('T', 'L2', 0, 0, 'A', 10), refl('T', 'L2', 0),
  ];
  const res = computeAdvantages(turns, { estimator: 'gigpo', returns: { gammaStep: 0.95, gammaTraj: 0.6 } });
  it('reflection turns get the next attempt return, and an episode score of 0', () => {
    expect(res.turns[1].return).toBeCloseTo(10, 9);
    expect(res.turns[1].episodeScore).toBe(0);
    expect(res.turns[0].return).toBeCloseTo(6, 9);
  });
  it('advantages', () => {
    const want = [-5 + (6 - 26 / 3), -5, 5 + (10 - 26 / 3), 5 + (10 - 26 / 3)];
    [0, 1, 2, 3].forEach((k, i) => expect(res.turns[k].advantage).toBeCloseTo(want[i], 9));
    expect(res.turns[0].advantage).toBeCloseTo(-7.6667, 3);
    expect(res.turns[2].advantage).toBeCloseTo(6.3333, 3);
  });
  // table: reflection episode scores and terms, hand-computed (gamma_step 0.95, gamma_traj 0.6, PAPER)
  const table: Array<{ name: string; turns: Turn[]; idx: number; score: number; episodeTerm: number; stepTerm: number }> = [
    { // one trial: a0 r=-1 fails, reflection, a1 r=10. scores [-1, 0, 10] mean 3; G: a0 = -1 + 6 = 5, refl 10, a1 10
      name: 'single trial: the reflection is centred at 0 - 3',
      turns: [act('T', 'S', 0, 0, 'A', -1), refl('T', 'S', 0), act('T', 'S', 1, 0, 'B', 10)], idx: 1, score: 0, episodeTerm: -3, stepTerm: 0,
    },
    { // two trials; reflections: G 10 (S1) and G_0(1) = -1 (S2): group mean 4.5. scores [-1,0,10,-1,0,-1] mean 7/6
      name: 'two reflections share one step group, credited by their returns',
      turns: [act('T', 'S1', 0, 0, 'A', -1), refl('T', 'S1', 0), act('T', 'S1', 1, 0, 'A', 10), act('T', 'S2', 0, 0, 'A', -1), refl('T', 'S2', 0), act('T', 'S2', 1, 0, 'A', -1)],
      idx: 4, score: 0, episodeTerm: -7 / 6, stepTerm: -1 - 4.5,
    },
    { // a malformed reflection: 0 - 0.5; scores [-1, -0.5, 10] mean 8.5/3
      name: 'an invalid reflection pays the penalty',
      turns: [act('T', 'S', 0, 0, 'A', -1), { ...refl('T', 'S', 0), invalidAction: true }, act('T', 'S', 1, 0, 'B', 10)], idx: 1, score: -0.5, episodeTerm: -0.5 - 8.5 / 3, stepTerm: 0,
    },
  ];
  for (const row of table) {
    it(`table: ${row.name}`, () => {
      const r = computeAdvantages(row.turns, { estimator: 'gigpo', returns: { gammaStep: 0.95, gammaTraj: 0.6 } }).turns[row.idx];
      expect(r.episodeScore).toBeCloseTo(row.score, 9);
      expect(r.episodeTerm).toBeCloseTo(row.episodeTerm, 9);
      expect(r.stepTerm).toBeCloseTo(row.stepTerm, 9);
      expect(r.advantage).toBeCloseTo(row.episodeTerm + row.stepTerm, 9);
    });
  }
  it('a reflection without a next attempt is dropped, not counted as a skipped group', () => {
    expect(res.turns[4].kept).toBe(false);
    expect(res.skippedGroups).toBe(0);
    expect(res.skippedTurns).toBe(1);
  });
  it('CODE mode changes the return of multi-turn earlier attempts', () => {
    const t2: Turn[] = [act('T', 'L', 0, 0, 'a', 0), act('T', 'L', 0, 1, 'b', 0), refl('T', 'L', 0), act('T', 'L', 1, 0, 'a', 10)];
    const code = computeAdvantages(t2, { estimator: 'gigpo', returns: { gammaStep: 0.5, gammaTraj: 0.6, mode: 'code' } });
    const paper = computeAdvantages(t2, { estimator: 'gigpo', returns: { gammaStep: 0.5, gammaTraj: 0.6, mode: 'paper' } });
    expect(code.turns[0].return).toBeCloseTo(3, 9); // 0.5 * 0.6 * 10
    expect(paper.turns[0].return).toBeCloseTo(6, 9); // 0.6 * 10
  });
});

describe('GRPO and RLOO (scores s = [2, 2, 0]: session g1 two turns of reward 1, session g2 one turn of 0)', () => {
  const turns: Turn[] = [act('G', 'g1', 0, 0, 'a', 1), act('G', 'g1', 0, 1, 'b', 1), act('G', 'g2', 0, 0, 'a', 0), act('H', 'h1', 0, 0, 'a', 3)];
  it('GRPO: (s - 4/3) / (unbiased std 1.1547 + eps)', () => {
    const res = computeAdvantages(turns, { estimator: 'grpo', returns: { gammaStep: 1, gammaTraj: 0 } });
    const sd = Math.sqrt(4 / 3);
    [(2 - 4 / 3) / (sd + 1e-6), (2 - 4 / 3) / (sd + 1e-6), (0 - 4 / 3) / (sd + 1e-6)].forEach((w, i) => expect(res.turns[i].advantage).toBeCloseTo(w, 9));
    expect(res.turns[0].advantage).toBeCloseTo(0.57735, 4);
    expect(res.turns[2].advantage).toBeCloseTo(-1.1547, 4);
    // group H has one turn: advantage 0 -> skipped
    expect(res.skippedGroups).toBe(1);
    expect(res.turns[3].kept).toBe(false);
  });
  it('RLOO: s_i - mean of the others', () => {
    const res = computeAdvantages(turns, { estimator: 'rloo', returns: { gammaStep: 1, gammaTraj: 0 } });
    expect(res.turns.slice(0, 3).map((t) => t.advantage)).toEqual([1, 1, -2]);
    expect(res.turns[3].advantage).toBe(0);
    expect(res.skippedGroups).toBe(1);
  });
  it('invalid penalty lowers the turn score (RLOO)', () => {
    const res = computeAdvantages([act('I', 'i1', 0, 0, 'a', 1, true), act('I', 'i2', 0, 0, 'a', 1)], { estimator: 'rloo', returns: { gammaStep: 1, gammaTraj: 0 } });
    expect(res.turns.map((t) => t.advantage)).toEqual([-0.5, 0.5]);
  });
  it('unknown estimator throws', () => {
    expect(() => computeAdvantages(turns, { estimator: 'ppo' as never, returns: { gammaStep: 1, gammaTraj: 0 } })).toThrow(/unknown estimator/);
  });
});
