import { describe, expect, it } from 'vitest';
import { computeAdvantages, type Turn } from '../../../src/training/maths/advantages.js';

const act = (taskId: string, sessionId: string, attempt: number, step: number, observation: string, reward: number, invalidAction = false): Turn =>
  ({ taskId, sessionId, attempt, step, kind: 'action', observation, reward, invalidAction });
const refl = (taskId: string, sessionId: string, attempt: number): Turn =>
  ({ taskId, sessionId, attempt, step: 0, kind: 'reflection', observation: '', reward: 0, invalidAction: false });

describe('GiGPO mean_norm, single attempt (gamma_step 0.5)', () => {
  // task A: s1 = X(r 0) -> Y(r 4): g = [2, 4], sum 4
  //         s2 = X(r 1, invalid) -> Z(r 0): g = [1, 0], sum 1; invalid turn scores 1 - 0.5
  // task B: two identical sessions: every advantage 0 -> kept, counted as a zero-advantage group
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
  it('keeps the group without signal (advantages 0) and counts it', () => {
    expect(res.groups).toBe(2);
    expect(res.zeroAdvantageGroups).toBe(1);
    expect(res.zeroAdvantageTurns).toBe(2);
    expect(res.droppedTurns).toBe(0);
    expect(res.turns.map((t) => t.kept)).toEqual([true, true, true, true, true, true]);
    expect(res.turns.slice(4).map((t) => t.advantage)).toEqual([0, 0]);
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
  it('a reflection without a next attempt is dropped, not counted as a zero-advantage group', () => {
    expect(res.turns[4].kept).toBe(false);
    expect(res.turns[4].advantage).toBe(0);
    expect(res.zeroAdvantageGroups).toBe(0);
    expect(res.zeroAdvantageTurns).toBe(0);
    expect(res.droppedTurns).toBe(1);
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
    // group H has one turn: mean 0, std 1 as in the reference -> 3 / (1 + eps), trained
    expect(res.turns[3].advantage).toBe(3 / (1 + 1e-6));
    expect(res.turns[3].kept).toBe(true);
    expect(res.zeroAdvantageGroups).toBe(0);
  });
  it('RLOO: s_i - mean of the others', () => {
    const res = computeAdvantages(turns, { estimator: 'rloo', returns: { gammaStep: 1, gammaTraj: 0 } });
    expect(res.turns.slice(0, 3).map((t) => t.advantage)).toEqual([1, 1, -2]);
    // group H has one turn: the reference leaves its score as it is
    expect(res.turns[3].advantage).toBe(3);
    expect(res.zeroAdvantageGroups).toBe(0);
  });
  it('invalid penalty lowers the turn score (RLOO)', () => {
    const res = computeAdvantages([act('I', 'i1', 0, 0, 'a', 1, true), act('I', 'i2', 0, 0, 'a', 1)], { estimator: 'rloo', returns: { gammaStep: 1, gammaTraj: 0 } });
    expect(res.turns.map((t) => t.advantage)).toEqual([-0.5, 0.5]);
  });
  it('unknown estimator throws', () => {
    expect(() => computeAdvantages(turns, { estimator: 'ppo' as never, returns: { gammaStep: 1, gammaTraj: 0 } })).toThrow(/unknown estimator/);
  });
});

/*
 * Reference parity (docs/method.md#gigpo; mlbio-epfl/LaMer core_gigpo.py ~191-193 and ~300-302,
 * core_algos.py ~159-161 and ~320-323): a task group of one turn has mean 0 (and std 1), so its
 * episode term is the raw score; an anchor-state group of one turn has its own return as mean, so
 * its step term is 0; groups whose advantages are all 0 are kept and counted. Values are
 * hand-computed with gamma_step = gamma_traj = 0.5 (dyadic, so every value is exact in binary).
 */
describe('groups of one and zero-advantage groups (reference parity, exact values)', () => {
  const returns = { gammaStep: 0.5, gammaTraj: 0.5 };
  interface Row {
    name: string;
    estimator: 'gigpo' | 'grpo' | 'rloo';
    turns: Turn[];
    /** Per turn, in input order. */
    episodeTerm?: number[];
    stepTerm?: number[];
    advantage: number[];
    kept: boolean[];
    groups: number;
    zeroAdvantageGroups: number;
    zeroAdvantageTurns: number;
    droppedTurns: number;
  }
  const rows: Row[] = [
    { // one turn, reward 3: score 3, task mean taken as 0 -> episode term 3; anchor X alone -> step term 0
      name: 'GiGPO: a task with one turn keeps its raw score as the episode term, step term 0',
      estimator: 'gigpo', turns: [act('A', 's', 0, 0, 'X', 3)],
      episodeTerm: [3], stepTerm: [0], advantage: [3], kept: [true], groups: 1, zeroAdvantageGroups: 0, zeroAdvantageTurns: 0, droppedTurns: 0,
    },
    { // one turn, reward 2, invalid: score 2 - 0.5 = 1.5
      name: 'GiGPO: a lone invalid turn: raw score minus the penalty',
      estimator: 'gigpo', turns: [act('A', 's', 0, 0, 'X', 2, true)],
      episodeTerm: [1.5], stepTerm: [0], advantage: [1.5], kept: [true], groups: 1, zeroAdvantageGroups: 0, zeroAdvantageTurns: 0, droppedTurns: 0,
    },
    { // one turn, reward -1: a negative raw score stays negative
      name: 'GiGPO: a lone failing turn gets its negative score',
      estimator: 'gigpo', turns: [act('A', 's', 0, 0, 'X', -1)],
      episodeTerm: [-1], stepTerm: [0], advantage: [-1], kept: [true], groups: 1, zeroAdvantageGroups: 0, zeroAdvantageTurns: 0, droppedTurns: 0,
    },
    { // one turn, reward 0: advantage 0 -> a zero-advantage group, still trained
      name: 'GiGPO: a lone turn scoring 0 is a zero-advantage group, kept',
      estimator: 'gigpo', turns: [act('A', 's', 0, 0, 'X', 0)],
      episodeTerm: [0], stepTerm: [0], advantage: [0], kept: [true], groups: 1, zeroAdvantageGroups: 1, zeroAdvantageTurns: 1, droppedTurns: 0,
    },
    { // s1: X (r 0) -> Y (r 4): G [2, 4], score 4 each; s2: X (r 1): G [1], score 1.
      // episode: mean (4 + 4 + 1) / 3 = 3 -> [1, 1, -2]; anchor X {2, 1} mean 1.5 -> [0.5, -0.5];
      // anchor Y {4} alone -> 0
      name: 'GiGPO: an anchor state seen once has step term 0 inside a larger task',
      estimator: 'gigpo', turns: [act('A', 's1', 0, 0, 'X', 0), act('A', 's1', 0, 1, 'Y', 4), act('A', 's2', 0, 0, 'X', 1)],
      episodeTerm: [1, 1, -2], stepTerm: [0.5, 0, -0.5], advantage: [1.5, 1, -2.5], kept: [true, true, true], groups: 1, zeroAdvantageGroups: 0, zeroAdvantageTurns: 0, droppedTurns: 0,
    },
    { // LaMer trial alone in its task: a0 X (r 0) fails, reflection, a1 X (r 3).
      // G: a0 = 0 + 0.5 * 3 = 1.5, reflection G_0(1) = 3, a1 = 3. scores 0, 0, 3: mean 1 -> [-1, -1, 2].
      // anchor X {1.5, 3} mean 2.25 -> [-0.75, 0.75]; the reflection group has one turn -> 0
      name: 'GiGPO (LaMer): a lone reflection has step term 0',
      estimator: 'gigpo', turns: [act('L', 'l', 0, 0, 'X', 0), refl('L', 'l', 0), act('L', 'l', 1, 0, 'X', 3)],
      episodeTerm: [-1, -1, 2], stepTerm: [-0.75, 0, 0.75], advantage: [-1.75, -1, 2.75], kept: [true, true, true], groups: 1, zeroAdvantageGroups: 0, zeroAdvantageTurns: 0, droppedTurns: 0,
    },
    { // a task whose only trained turn is a lone action; its dangling reflection is dropped first,
      // so the group has one turn: a0 X (r 2) -> score 2 raw
      name: 'GiGPO: a dangling reflection is dropped and does not count in the group',
      estimator: 'gigpo', turns: [act('D', 'd', 0, 0, 'X', 2), refl('D', 'd', 0)],
      episodeTerm: [2, 0], stepTerm: [0, 0], advantage: [2, 0], kept: [true, false], groups: 1, zeroAdvantageGroups: 0, zeroAdvantageTurns: 0, droppedTurns: 1,
    },
    { // mixed batch. task Z: two identical sessions X (r 1): scores 1, 1, G 1, 1 -> all 0, kept.
      // task A: as the anchor row above. task B: one turn Y (r -2) -> raw -2.
      name: 'GiGPO: mixed batch: a zero-advantage group is kept beside groups with signal',
      estimator: 'gigpo',
      turns: [act('Z', 'z1', 0, 0, 'X', 1), act('A', 's1', 0, 0, 'X', 0), act('Z', 'z2', 0, 0, 'X', 1), act('A', 's1', 0, 1, 'Y', 4), act('B', 'b', 0, 0, 'Y', -2), act('A', 's2', 0, 0, 'X', 1)],
      episodeTerm: [0, 1, 0, 1, -2, -2], stepTerm: [0, 0.5, 0, 0, 0, -0.5], advantage: [0, 1.5, 0, 1, -2, -2.5],
      kept: [true, true, true, true, true, true], groups: 3, zeroAdvantageGroups: 1, zeroAdvantageTurns: 2, droppedTurns: 0,
    },
    { // GRPO: task G one turn r 2 -> (2 - 0) / (1 + 1e-6); task H two equal scores 1, 1 -> 0 / (0 + 1e-6) = 0
      name: 'GRPO: a group of one takes mean 0, std 1; an all-equal group is kept at 0',
      estimator: 'grpo', turns: [act('G', 'g', 0, 0, 'a', 2), act('H', 'h1', 0, 0, 'a', 1), act('H', 'h2', 0, 0, 'a', 1)],
      advantage: [2 / (1 + 1e-6), 0, 0], kept: [true, true, true], groups: 2, zeroAdvantageGroups: 1, zeroAdvantageTurns: 2, droppedTurns: 0,
    },
    { // RLOO: task G one turn r 2 -> 2 (no baseline); task H scores 1, 1 -> 1 - 1 = 0 each
      name: 'RLOO: a group of one keeps its score; an all-equal group is kept at 0',
      estimator: 'rloo', turns: [act('G', 'g', 0, 0, 'a', 2), act('H', 'h1', 0, 0, 'a', 1), act('H', 'h2', 0, 0, 'a', 1)],
      advantage: [2, 0, 0], kept: [true, true, true], groups: 2, zeroAdvantageGroups: 1, zeroAdvantageTurns: 2, droppedTurns: 0,
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const res = computeAdvantages(row.turns, { estimator: row.estimator, returns });
      if (row.episodeTerm) expect(res.turns.map((t) => t.episodeTerm)).toEqual(row.episodeTerm);
      if (row.stepTerm) expect(res.turns.map((t) => t.stepTerm)).toEqual(row.stepTerm);
      expect(res.turns.map((t) => t.advantage)).toEqual(row.advantage);
      expect(res.turns.map((t) => t.kept)).toEqual(row.kept);
      expect({ groups: res.groups, zeroAdvantageGroups: res.zeroAdvantageGroups, zeroAdvantageTurns: res.zeroAdvantageTurns, droppedTurns: res.droppedTurns })
        .toEqual({ groups: row.groups, zeroAdvantageGroups: row.zeroAdvantageGroups, zeroAdvantageTurns: row.zeroAdvantageTurns, droppedTurns: row.droppedTurns });
    });
  }
  it('a group is zero-advantage only when every advantage is within zeroTol', () => {
    // task A: scores 1 and 1 + 1e-7: episode terms -/+ 5e-8, step terms the same: advantages -/+ 1e-7
    const t = [act('A', 'a1', 0, 0, 'X', 1), act('A', 'a2', 0, 0, 'X', 1 + 1e-7)];
    expect(computeAdvantages(t, { estimator: 'gigpo', returns }).zeroAdvantageGroups).toBe(0);
    const loose = computeAdvantages(t, { estimator: 'gigpo', returns, zeroTol: 1e-6 });
    expect(loose.zeroAdvantageGroups).toBe(1);
    expect(loose.turns.every((x) => x.kept && x.advantage !== 0)).toBe(true); // counted, not zeroed
  });
});

describe("GiGPO with reflectionGroup 'own' (an ablation: reflections centred among themselves)", () => {
  const returns = { gammaStep: 0.95, gammaTraj: 0.6 };
  // Every attempt has one turn, so g_0 = r. Two trials of task T (each attempt's one turn sees 'A'):
  //   S1: a0 r 2, reflection, a1 r 10 -> G: a0 = 2 + 0.6 * 10 = 8, reflection G_0(1) = 10, a1 = 10
  //   S2: a0 r 2, reflection, a1 r 2  -> G: a0 = 2 + 0.6 * 2 = 3.2, reflection 2, a1 = 2
  // scores: actions 2, 10, 2, 2; reflections 0, 0.
  // step terms (either way): anchor A {8, 10, 3.2, 2} mean 5.8 -> 2.2, 4.2, -2.6, -3.8;
  //   reflections {10, 2} mean 6 -> 4, -4.
  // 'task': every turn against mean 16/6 = 8/3 -> actions -2/3, 22/3, -2/3, -2/3; reflections -8/3.
  // 'own': actions against mean 16/4 = 4 -> -2, 6, -2, -2; reflections against mean 0 -> 0.
  const two: Turn[] = [
    act('T', 'S1', 0, 0, 'A', 2), refl('T', 'S1', 0), act('T', 'S1', 1, 0, 'A', 10),
    act('T', 'S2', 0, 0, 'A', 2), refl('T', 'S2', 0), act('T', 'S2', 1, 0, 'A', 2),
  ];
  // One trial whose reflection is marked invalid: a0 'X' r -1, reflection (score 0 - 0.5), a1 'Y' r 10.
  // 'own': the reflection is alone in its kind (mean 0, as a task group of one): -0.5; actions
  //   {-1, 10} mean 4.5 -> -5.5, 5.5. 'task': mean (-1 - 0.5 + 10) / 3 = 8.5/3.
  //   Every anchor group (X, Y, the reflection) has one turn: step terms 0.
  const lone: Turn[] = [act('U', 'L', 0, 0, 'X', -1), { ...refl('U', 'L', 0), invalidAction: true }, act('U', 'L', 1, 0, 'Y', 10)];
  const rows: Array<{ name: string; turns: Turn[]; group: 'task' | 'own'; episodeTerm: number[]; stepTerm: number[] }> = [
    { name: "two trials, 'task' (the reference)", turns: two, group: 'task', episodeTerm: [-2 / 3, -8 / 3, 22 / 3, -2 / 3, -8 / 3, -2 / 3], stepTerm: [2.2, 4, 4.2, -2.6, -4, -3.8] },
    { name: "two trials, 'own'", turns: two, group: 'own', episodeTerm: [-2, 0, 6, -2, 0, -2], stepTerm: [2.2, 4, 4.2, -2.6, -4, -3.8] },
    { name: "a lone invalid reflection, 'task'", turns: lone, group: 'task', episodeTerm: [-1 - 8.5 / 3, -0.5 - 8.5 / 3, 10 - 8.5 / 3], stepTerm: [0, 0, 0] },
    { name: "a lone invalid reflection, 'own': alone in its kind, its raw score", turns: lone, group: 'own', episodeTerm: [-5.5, -0.5, 5.5], stepTerm: [0, 0, 0] },
    { // a task with one turn (solved at once): the same raw score either way
      name: "a task of one action turn, 'own'", turns: [act('V', 'O', 0, 0, 'X', 10)], group: 'own', episodeTerm: [10], stepTerm: [0],
    },
  ];
  for (const row of rows) {
    it(`table: ${row.name}`, () => {
      const res = computeAdvantages(row.turns, { estimator: 'gigpo', returns, reflectionGroup: row.group });
      row.episodeTerm.forEach((w, i) => expect(res.turns[i]!.episodeTerm).toBeCloseTo(w, 9));
      row.stepTerm.forEach((w, i) => expect(res.turns[i]!.stepTerm).toBeCloseTo(w, 9));
      row.episodeTerm.forEach((w, i) => expect(res.turns[i]!.advantage).toBeCloseTo(w + row.stepTerm[i]!, 9));
    });
  }
  it("'own' moves each reflection up by the task mean it no longer sees, and each action by the difference of the two means", () => {
    const task = computeAdvantages(two, { estimator: 'gigpo', returns }).turns;
    const own = computeAdvantages(two, { estimator: 'gigpo', returns, reflectionGroup: 'own' }).turns;
    // reflections: +8/3; actions: 8/3 - 4 = -4/3
    [1, 4].forEach((i) => expect(own[i]!.advantage - task[i]!.advantage).toBeCloseTo(8 / 3, 9));
    [0, 2, 3, 5].forEach((i) => expect(own[i]!.advantage - task[i]!.advantage).toBeCloseTo(-4 / 3, 9));
    // and leaves the default unchanged: 'task' is what no setting gives
    expect(computeAdvantages(two, { estimator: 'gigpo', returns, reflectionGroup: 'task' }).turns).toEqual(task);
  });
  it('GRPO and RLOO ignore it', () => {
    for (const estimator of ['grpo', 'rloo'] as const) {
      expect(computeAdvantages(two, { estimator, returns, reflectionGroup: 'own' }).turns).toEqual(computeAdvantages(two, { estimator, returns }).turns);
    }
  });
});
