import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { renderActPrompt, renderReflectionPrompt, type PromptAttempt, type PromptStep } from '../../../src/agent/prompt.js';
import { generateCurriculum, generateDemos, parseCurriculum } from '../../../src/envs/demos.js';
import { initModel } from '../../../src/model/gpt.js';
import { DEFAULT_LIMITS } from '../../../src/model/sampling.js';
import { BOS, decode, encode, encodePrompt, EOS } from '../../../src/model/tokenizer.js';
import { GameTokenizer } from '../../../src/model/tokenizers.js';
import { gameVocabulary } from '../../../src/envs/vocab.js';
import { behaviourLogits, disposeBatch, makeBatch } from '../../../src/training/data/batch.js';
import { behaviourOutputs } from '../../../src/training/data/behaviour.js';
import { buildRlSamples, buildSftSamples, parseDemoJsonl, unpackSample, type DemoSession, type StepRecord, type TrainingSample } from '../../../src/training/data/data.js';
import { GptTrainable } from '../../../src/training/run/gpt-adapter.js';
import { sftLoss, tokenMean } from '../../../src/training/maths/losses.js';
import { entropyFromLogits } from '../../../src/model/logprobs.js';
import { entropyByKind } from '../../../src/training/run/job.js';
import { accumulateGradients, outputTokens, ppoLoss } from '../../../src/training/maths/ppo.js';

beforeAll(async () => { await tf.setBackend('cpu'); });

const rec = (sessionId: string, attempt: number, step: number, observation: string, reward: number, o: Partial<StepRecord> = {}): StepRecord => ({
  sessionId, taskId: 'T', attempt, step, kind: 'action', observation, reward, done: false, success: false, invalidAction: false,
  promptTokenIds: null, outputTokenIds: null, logprobs: null, modelVersion: 'base', ...o,
});
const out = (ids: number[]) => ({ promptTokenIds: [BOS, 1], outputTokenIds: ids, logprobs: ids.map(() => -1) });

// S1: attempt 0 = A (action invalid, reward -1) -> B (reward 0.5) -> C done, fail; reflection; attempt 1 = A -> W (reward 10) success
// S2: attempt 0 = A -> W (reward 10) success
const records: StepRecord[] = [
  rec('S1', 0, 0, 'A', 0, out([65])),
  rec('S1', 0, 1, 'B', -1, { invalidAction: true, ...out([66]) }),
  rec('S1', 0, 2, 'C', 0.5, { done: true }),
  rec('S1', 0, 2, 'C', 0, { kind: 'reflection', ...out([67, 68]) }),
  rec('S1', 1, 0, 'A', 0, out([69])),
  rec('S1', 1, 1, 'W', 10, { done: true, success: true }),
  rec('S2', 0, 0, 'A', 0, out([70])),
  rec('S2', 0, 1, 'W', 10, { done: true, success: true }),
];
const returns = { gammaStep: 0.5, gammaTraj: 0.5 };

describe('buildRlSamples', () => {
  it('lamer: rewards shift to the acting turn, cross-episode returns, GiGPO advantages', () => {
    const { samples, stats, scores } = buildRlSamples(records, { algorithm: 'lamer', returns });
    // G: a0 = [-1 + 0.5*0.5, 0.5] + 0.5*10 = [4.25, 5.5]; reflection 10; a1 10; S2 10
    expect(scores.map((s) => s.return)).toEqual([4.25, 5.5, 10, 10, 10]);
    // scores -1 (invalid), -0.5, 0 (the reflection's own), 10, 10: mean 3.7; anchor A: {4.25, 10, 10} mean 8.08333
    const want = [-4.7 - 3.833333, -4.2, -3.7, 6.3 + 1.916667, 6.3 + 1.916667];
    scores.forEach((s, i) => expect(s.advantage).toBeCloseTo(want[i], 4));
    expect(samples.map((s) => s.kind)).toEqual(['action', 'action', 'reflection', 'action', 'action']);
    expect(samples[2].outputTokenIds).toEqual([67, 68]);
    expect(samples[2].oldLogprobs).toEqual([-1, -1]);
    expect(stats.passAtK).toEqual({ 1: 0.5, 2: 1 });
    expect(stats.meanReturn).toBeCloseTo(6.5, 9); // (-0.5 + 10 + 10) / 3
    expect(stats).toMatchObject({ sessions: 2, tasks: 1, turns: 5, samples: 5, groups: 1, zeroAdvantageGroups: 0, zeroAdvantageTurns: 0, droppedTurns: 0, outputTokens: 6 });
  });
  it('gigpo: each attempt is its own episode and reflections are not trained', () => {
    const { scores } = buildRlSamples(records, { algorithm: 'gigpo', returns });
    expect(scores.map((s) => s.kind)).toEqual(['action', 'action', 'action', 'action']);
    expect(scores.map((s) => s.return)).toEqual([-0.75, 0.5, 10, 10]);
    // scores -1, -0.5, 10, 10 (mean 4.625); anchor A: {-0.75, 10, 10} mean 6.41667
    const want = [-5.625 - 7.166667, -5.125, 5.375 + 3.583333, 5.375 + 3.583333];
    scores.forEach((s, i) => expect(s.advantage).toBeCloseTo(want[i], 4));
  });
  it('keeps a task whose sessions all score the same: trained at advantage 0, counted', () => {
    const same = [rec('X', 0, 0, 'A', 0, { taskId: 'U', ...out([1]) }), rec('X', 0, 1, 'B', 1, { taskId: 'U', done: true }),
      rec('Y', 0, 0, 'A', 0, { taskId: 'U', ...out([2]) }), rec('Y', 0, 1, 'B', 1, { taskId: 'U', done: true })];
    const alone = buildRlSamples(records, { algorithm: 'grpo', returns });
    const { samples, stats } = buildRlSamples([...records, ...same], { algorithm: 'grpo', returns });
    // grpo trains no reflection: task T gives 4 turns (1 output token each), task U 2
    expect(stats).toMatchObject({ turns: 6, samples: 6, groups: 2, zeroAdvantageGroups: 1, zeroAdvantageTurns: 2, droppedTurns: 0, outputTokens: 6 });
    const u = samples.filter((s) => s.taskId === 'U');
    expect(u.map((s) => [s.sessionId, s.outputTokenIds, s.advantage])).toEqual([['X', [1], 0], ['Y', [2], 0]]);
    // task T's advantages are its own group's, unchanged by the zero group beside it
    expect(samples.filter((s) => s.taskId === 'T').map((s) => s.advantage)).toEqual(alone.samples.map((s) => s.advantage));
  });
  // groups of one, as the reference (docs/method.md#gigpo), through the records: gamma 0.5
  const lone: Array<{ name: string; algorithm: 'lamer' | 'gigpo' | 'grpo' | 'rloo'; recs: StepRecord[]; advantages: number[]; stats: Record<string, number> }> = [
    { // one acting turn A -> B (reward 3, done): score 3, task mean 0 -> 3; anchor A alone -> 0
      name: 'gigpo: a task with one turn trains on its raw score',
      algorithm: 'gigpo', recs: [rec('V1', 0, 0, 'A', 0, { taskId: 'V', ...out([5]) }), rec('V1', 0, 1, 'B', 3, { taskId: 'V', done: true })],
      advantages: [3], stats: { groups: 1, zeroAdvantageGroups: 0, zeroAdvantageTurns: 0, droppedTurns: 0, samples: 1 },
    },
    { // the same with reward 0: advantage 0, still a training sample
      name: 'gigpo: a lone turn scoring 0 is kept as a zero-advantage group',
      algorithm: 'gigpo', recs: [rec('V1', 0, 0, 'A', 0, { taskId: 'V', ...out([5]) }), rec('V1', 0, 1, 'B', 0, { taskId: 'V', done: true })],
      advantages: [0], stats: { groups: 1, zeroAdvantageGroups: 1, zeroAdvantageTurns: 1, droppedTurns: 0, samples: 1 },
    },
    { // lamer: a0 A -> B (reward -1, done, fail), reflection, a1 A -> W (reward 4, done).
      // G: a0 = -1 + 0.5 * 4 = 1, reflection 4, a1 4; scores -1, 0, 4: mean 1 -> episode [-2, -1, 3];
      // anchor A {1, 4} mean 2.5 -> [-1.5, 1.5]; the reflection alone in its step group -> 0
      name: 'lamer: a lone reflection gets step term 0',
      algorithm: 'lamer',
      recs: [rec('L1', 0, 0, 'A', 0, { taskId: 'W', ...out([5]) }), rec('L1', 0, 1, 'B', -1, { taskId: 'W', done: true }),
        rec('L1', 0, 1, 'B', 0, { taskId: 'W', kind: 'reflection', ...out([6, 7]) }),
        rec('L1', 1, 0, 'A', 0, { taskId: 'W', ...out([8]) }), rec('L1', 1, 1, 'W', 4, { taskId: 'W', done: true, success: true })],
      advantages: [-3.5, -1, 4.5], stats: { groups: 1, zeroAdvantageGroups: 0, zeroAdvantageTurns: 0, droppedTurns: 0, samples: 3 },
    },
    { // lamer: one attempt A -> B (reward 2, done) then a reflection with no next attempt: the
      // reflection is dropped, the acting turn is alone in its task -> raw score 2
      name: 'lamer: a dangling reflection is dropped and counted',
      algorithm: 'lamer',
      recs: [rec('L2', 0, 0, 'A', 0, { taskId: 'W2', ...out([5]) }), rec('L2', 0, 1, 'B', 2, { taskId: 'W2', done: true }),
        rec('L2', 0, 1, 'B', 0, { taskId: 'W2', kind: 'reflection', ...out([6]) })],
      advantages: [2], stats: { groups: 1, zeroAdvantageGroups: 0, zeroAdvantageTurns: 0, droppedTurns: 1, samples: 1 },
    },
    { // grpo: one turn of score 3 -> (3 - 0) / (1 + 1e-6)
      name: 'grpo: a group of one takes mean 0 and std 1',
      algorithm: 'grpo', recs: [rec('V1', 0, 0, 'A', 0, { taskId: 'V', ...out([5]) }), rec('V1', 0, 1, 'B', 3, { taskId: 'V', done: true })],
      advantages: [3 / (1 + 1e-6)], stats: { groups: 1, zeroAdvantageGroups: 0, samples: 1 },
    },
    { // rloo: one turn of score 3 -> 3
      name: 'rloo: a group of one keeps its score',
      algorithm: 'rloo', recs: [rec('V1', 0, 0, 'A', 0, { taskId: 'V', ...out([5]) }), rec('V1', 0, 1, 'B', 3, { taskId: 'V', done: true })],
      advantages: [3], stats: { groups: 1, zeroAdvantageGroups: 0, samples: 1 },
    },
  ];
  for (const row of lone) {
    it(`group of one: ${row.name}`, () => {
      const { samples, stats } = buildRlSamples(row.recs, { algorithm: row.algorithm, returns });
      expect(samples.map((s) => s.advantage)).toEqual(row.advantages);
      expect(stats).toMatchObject(row.stats);
    });
  }
  it("attaches each sample's behaviour policy: session sampling, and the candidates of constrained actions", () => {
    const sampling = { temperature: 0.7, topP: 0.8, topK: 20 };
    const recs = records.map((r) => ({ ...r, sampling, availableActions: r.kind === 'action' ? ['up', 'é'] : null }));
    const { samples } = buildRlSamples(recs, { algorithm: 'lamer', returns });
    expect(samples[0].behaviour).toEqual({ ...sampling, candidates: [[117, 112, EOS], [0xc3, 0xa9, EOS]] });
    expect(samples[2].kind).toBe('reflection');
    expect(samples[2].behaviour).toEqual(sampling);
    expect(buildRlSamples(records, { algorithm: 'lamer', returns }).samples[0].behaviour).toEqual({ temperature: 1, topP: 1, topK: 0 });
  });
  it('encodes the candidates with the trained model\'s tokenizer, in per-step and packed samples', () => {
    const tok = new GameTokenizer(gameVocabulary());
    const up = tok.encode('up')[0]!;
    const down = tok.encode('down')[0]!;
    const recs = records.map((r) => ({ ...r, availableActions: r.kind === 'action' ? ['up', 'é'] : null }));
    const { samples } = buildRlSamples(recs, { algorithm: 'lamer', returns, tokenizer: tok });
    expect(samples[0].behaviour!.candidates).toEqual([[up, EOS], [0xc3, 0xa9, EOS]]);
    // two acting turns whose served prompts extend each other are packed; each keeps its candidates
    const avail = ['up', 'down'];
    const packable = (id: string, second: number, reward: number): StepRecord[] => [
      rec(id, 0, 0, 'A', 0, { availableActions: avail, promptTokenIds: [BOS, 1], outputTokenIds: [up, EOS], logprobs: [-0.5, -0.1] }),
      rec(id, 0, 1, 'B', 0, { availableActions: avail, promptTokenIds: [BOS, 1, up, 2], outputTokenIds: [second, EOS], logprobs: [-0.7, -0.1] }),
      rec(id, 0, 2, 'C', reward, { done: true, success: reward > 0 }),
    ];
    const built = buildRlSamples([...packable('P', up, 1), ...packable('Q', down, 0)], { algorithm: 'grpo', returns, pack: true, blockSize: 64, tokenizer: tok });
    const packed = built.samples.filter((x) => x.packedTurns);
    expect(packed).toHaveLength(2);
    for (const x of packed) for (const t of x.packedTurns!) expect(t.candidates).toEqual([[up, EOS], [down, EOS]]);
  });
  it('rejects an output without matching logprobs', () => {
    const bad = [rec('S', 0, 0, 'A', 0, { promptTokenIds: [1], outputTokenIds: [2, 3], logprobs: [-1] })];
    expect(() => buildRlSamples(bad, { algorithm: 'rloo', returns })).toThrow(/logprobs/);
  });
});

describe('buildSftSamples', () => {
  const demo: DemoSession = {
    env: 'minesweeper', taskId: 'm:seed=1', instructions: 'Play.', memory: 'reflection_only',
    attempts: [
      { steps: [{ observation: 'o0', action: 'a', reward: 0, done: false, success: false }, { observation: 'o1', action: null, reward: -0.1, done: true, success: false }], reflection: 'r' },
      { steps: [{ observation: 'o0', action: 'b', reward: 0, done: false, success: false }, { observation: 'o2', action: null, reward: 10, done: true, success: true }], reflection: null },
    ],
  };
  it('renders the serving prompts and encodes outputs as text + EOS', () => {
    const { samples, stats } = buildSftSamples(parseDemoJsonl(JSON.stringify(demo) + '\n'), { blockSize: 4096 });
    expect(samples.map((s) => [s.kind, s.attempt])).toEqual([['action', 0], ['reflection', 0], ['action', 1]]);
    const join = (p: { head: string; steps: string[]; tail: string }) => p.head + p.steps.join('') + p.tail;
    expect(samples[0].promptTokenIds[0]).toBe(BOS);
    expect(decode(samples[0].promptTokenIds)).toBe(join(renderActPrompt({ instructions: 'Play.', memory: 'reflection_only', attempt: 0, previousAttempts: [], steps: [], observation: 'o0' })));
    expect(decode(samples[1].promptTokenIds)).toBe(join(renderReflectionPrompt({ instructions: 'Play.', memory: 'reflection_only', attempt: 0, previousAttempts: [], steps: [{ observation: 'o0', action: 'a' }], finalObservation: 'o1' })));
    expect(decode(samples[2].promptTokenIds)).toContain('Attempt 0: r');
    expect(samples[0].outputTokenIds).toEqual([...encode('a'), EOS]);
    expect(samples[1].outputTokenIds).toEqual([...encode('r'), EOS]);
    expect(stats.passAtK).toEqual({ 1: 0, 2: 1 });
  });
  it('fits prompts to blockSize minus the output reserve, dropping old steps first', () => {
    const long: DemoSession = { ...demo, attempts: [{ steps: Array.from({ length: 6 }, (_, i) => ({ observation: 'x'.repeat(40) + i, action: 'go', reward: 0, done: false, success: false })), reflection: null }] };
    const { samples } = buildSftSamples([long], { blockSize: 200, maxActionTokens: 48, maxReflectionTokens: 100, pack: false });
    expect(Math.max(...samples.map((s) => s.promptTokenIds.length))).toBeLessThanOrEqual(152);
    expect(decode(samples[5].promptTokenIds)).toContain('x'.repeat(40) + '5');
    expect(() => buildSftSamples([long], { blockSize: 100 })).toThrow(/no room/);
  });
  it('generated demos of the env helper train as they are', () => {
    const demos = generateDemos({ env: 'minesweeper', tasks: 3, seed: 1, failRate: 1 });
    const { samples, stats } = buildSftSamples(demos, { blockSize: 1024 });
    expect(samples.filter((s) => s.kind === 'reflection').length).toBeGreaterThan(0);
    expect(stats.sessions).toBe(3);
    expect(samples.every((s) => s.promptTokenIds.length <= 1024 - 48 && s.outputTokenIds[s.outputTokenIds.length - 1] === EOS)).toBe(true);
  });
  it('parseDemoJsonl names the bad line', () => {
    expect(() => parseDemoJsonl('\n{"x":1}\n')).toThrow(/line 2/);
    expect(() => parseDemoJsonl('{oops')).toThrow(/line 1/);
  });
});

/** Trained positions of a sample: position j of prompt ++ output -> the target trained there. */
function trainedMap(s: TrainingSample): Map<number, number> {
  const m = new Map<number, number>();
  const P = s.promptTokenIds.length;
  s.outputTokenIds.forEach((id, i) => {
    const t = s.lossTargets ? s.lossTargets[i]! : id;
    if (t >= 0) m.set(P + i - 1, t);
  });
  return m;
}

describe('packed SFT samples', () => {
  const demos = generateCurriculum(parseCurriculum('minesweeper:4x4/2=3,sokoban:5x5/1=3'), { seed: 3, failRate: 0.7 }).sessions;

  it('one sequence per attempt whose trained targets are the union of the per-step samples\' (each prefix the served prompt)', () => {
    const packed = buildSftSamples(demos, { blockSize: 1024 });
    const plain = buildSftSamples(demos, { blockSize: 1024, pack: false });
    expect(plain.samples.every((s) => !s.lossTargets)).toBe(true);
    const packs = packed.samples.filter((s) => s.lossTargets);
    expect(packs.length).toBeGreaterThan(6);
    expect(packed.stats.turns).toBe(plain.stats.turns);
    expect(packed.stats.outputTokens).toBe(plain.stats.outputTokens);
    expect(packed.samples.filter((s) => s.kind === 'reflection')).toEqual(plain.samples.filter((s) => s.kind === 'reflection'));
    let covered = 0;
    for (const p of packs) {
      const d = demos[Number(p.sessionId.slice(5))]!;
      const steps = plain.samples.filter((s) => s.sessionId === p.sessionId && s.attempt === p.attempt && s.kind === 'action');
      const inPack = steps.filter((s) => s.promptTokenIds.length + s.outputTokenIds.length - 1 <= p.promptTokenIds.length + p.outputTokenIds.length - 1);
      expect(inPack[0]!.step).toBe(p.step);
      const full = [...p.promptTokenIds, ...p.outputTokenIds];
      const union = new Map<number, number>();
      const previousAttempts: PromptAttempt[] = d.attempts.slice(0, p.attempt).map((a) => ({
        steps: a.steps.filter((x) => x.action !== null).map((x) => ({ observation: x.observation, action: x.action! })),
        finalObservation: a.steps.at(-1)!.observation, success: a.steps.some((x) => x.success), reflection: a.reflection,
      }));
      for (const s of inPack) {
        // the tokens before the action are the prompt served at that step
        const done: PromptStep[] = d.attempts[p.attempt]!.steps.slice(0, s.step).map((x) => ({ observation: x.observation, action: x.action! }));
        const served = encodePrompt(renderActPrompt({ instructions: d.instructions, memory: d.memory, attempt: p.attempt, previousAttempts, steps: done, observation: d.attempts[p.attempt]!.steps[s.step]!.observation }), 1024 - DEFAULT_LIMITS.maxActionTokens);
        expect(served.droppedSteps).toBe(0);
        expect(full.slice(0, served.ids.length)).toEqual(served.ids);
        expect(s.promptTokenIds).toEqual(served.ids);
        for (const [j, t] of trainedMap(s)) union.set(j, t);
        covered++;
      }
      expect(trainedMap(p)).toEqual(union);
      // the steps that did not fit stay per-step samples, identical to the unpacked ones
      const rest = steps.slice(inPack.length);
      expect(packed.samples.filter((s) => s.sessionId === p.sessionId && s.attempt === p.attempt && s.kind === 'action' && !s.lossTargets)).toEqual(rest);
    }
    expect(covered).toBeGreaterThan(12);
    // total tokens: packing is cheaper
    const tokens = (xs: TrainingSample[]) => xs.reduce((a, s) => a + s.promptTokenIds.length + s.outputTokenIds.length, 0);
    expect(tokens(packed.samples)).toBeLessThan(tokens(plain.samples) / 1.5);
  });

  it('a small block keeps the longest fitting prefix of steps packed and the rest per-step', () => {
    const small = buildSftSamples(demos, { blockSize: 400 });
    const plain = buildSftSamples(demos, { blockSize: 400, pack: false });
    for (const s of small.samples) expect(s.promptTokenIds.length + s.outputTokenIds.length - 1).toBeLessThanOrEqual(400);
    expect(small.stats.outputTokens).toBe(plain.stats.outputTokens);
    const packedSteps = small.samples.filter((s) => s.lossTargets).length;
    expect(packedSteps).toBeGreaterThan(0);
    expect(small.samples.filter((s) => !s.lossTargets && s.kind === 'action').length).toBeGreaterThan(0);
  });

  it('the SFT loss of the packed samples on a GPT equals the token-weighted mean of the per-step losses', () => {
    const model = new GptTrainable(initModel({ vocab_size: 260, block_size: 1024, n_layer: 1, n_head: 2, n_embd: 16 }, 11));
    const one = [demos[0]!, demos[3]!];
    const packed = buildSftSamples(one, { blockSize: 1024 }).samples.filter((s) => s.kind === 'action');
    const plain = buildSftSamples(one, { blockSize: 1024, pack: false }).samples.filter((s) => s.kind === 'action');
    expect(packed.length).toBeLessThan(plain.length);
    const loss = (xs: TrainingSample[]) => {
      const b = makeBatch(xs, model);
      const v = tf.tidy(() => sftLoss(model.logits(b.inputs, false), b.targets, b.mask).dataSync()[0]!);
      const n = outputTokens(b);
      disposeBatch(b);
      return { v, n };
    };
    const p = loss(packed);
    const q = loss(plain);
    expect(p.n).toBe(q.n);
    expect(Math.abs(p.v - q.v)).toBeLessThan(1e-5);
    model.dispose();
  });
});

/**
 * Recorded sessions as the builtin engine serves them: per acting step the served prompt
 * (renderActPrompt + encodePrompt, as the engine fits it) and the output = the action's bytes +
 * EOS, logprobs made up (distinct per token), the session's sampling settings and, when
 * `constrained`, per-step availableActions. Session g of task T: actions acts[g], rewards r[g].
 */
function recordedSessions(acts: string[][], rewards: number[][], opts: { constrained?: boolean; blockSize?: number } = {}): StepRecord[] {
  const budget = (opts.blockSize ?? 1024) - DEFAULT_LIMITS.maxActionTokens;
  const sampling = { temperature: 0.8, topP: 0.95, topK: 0 };
  const recs: StepRecord[] = [];
  acts.forEach((actions, g) => {
    const done: PromptStep[] = [];
    actions.forEach((a, t) => {
      const observation = `board ${g}.${t}\n#..\n.#.`;
      const enc = encodePrompt(renderActPrompt({ instructions: 'Reveal cells.', memory: 'reflection_only', attempt: 0, previousAttempts: [], steps: done, observation }), budget);
      const output = [...encode(a), EOS];
      const available = opts.constrained ? [a, `flag ${t} ${g}`, ...(t % 2 === 0 ? ['reveal 9 9'] : [])] : null;
      recs.push(rec(`G${g}`, 0, t, observation, t === 0 ? 0 : rewards[g][t - 1], {
        promptTokenIds: enc.ids, outputTokenIds: output, logprobs: output.map((_, k) => -0.3 - 0.1 * k - 0.05 * t), sampling, availableActions: available,
      }));
      done.push({ observation, action: a });
    });
    const n = actions.length;
    recs.push(rec(`G${g}`, 0, n, `board ${g}.${n}`, rewards[g][n - 1], { done: true, success: rewards[g][n - 1] > 0, sampling }));
  });
  return recs;
}

/**
 * Packed RL samples against their per-step samples on `model`: the same per-token logprobs and
 * supports under the behaviour policy, and the same PPO losses and gradients (within 1e-5), with
 * clipping active.
 */
function expectSamePpo(model: GptTrainable, packed: TrainingSample[], plain: TrainingSample[]): void {
  // per-token logprobs under the behaviour policy (temperature 0.8, top-p 0.95, the UTF-8 guard)
  const pb = behaviourOutputs(model, packed);
  const qb = behaviourOutputs(model, plain);
  const fromPacked = packed.flatMap((s, i) => s.packedTurns!.map((t) => ({ lp: pb.logprobs[i].slice(t.start, t.start + t.length), sup: pb.supports[i]!.slice(t.start, t.start + t.length) })));
  expect(fromPacked).toHaveLength(plain.length);
  fromPacked.forEach((x, j) => {
    x.lp.forEach((v, k) => expect(Math.abs(v - qb.logprobs[j][k])).toBeLessThan(1e-5));
    expect(x.sup).toEqual(qb.supports[j]);
  });
  // PPO loss and gradients against the sampler's recorded logprobs (ratios away from 1: clipping shows)
  const coef = { clipCoef: 0.2, dualClip: 3, entCoef: 0.01 };
  const vars = model.trainableVariables();
  const run = (xs: TrainingSample[], sup: typeof pb.supports) => {
    const b = makeBatch(xs, model, undefined, sup);
    const r = accumulateGradients(model, vars, [b], [1], ppoLoss(coef));
    const g = r.grads.map((x) => x.dataSync() as Float32Array);
    tf.dispose(r.grads);
    const n = outputTokens(b);
    disposeBatch(b);
    return { losses: r.losses, g, n };
  };
  const a = run(packed, pb.supports);
  const b = run(plain, qb.supports);
  expect(a.n).toBe(b.n);
  for (const k of ['loss', 'pgLoss', 'entropy', 'clipFrac', 'dualClipFrac', 'approxKl'] as const) expect(Math.abs(a.losses[k] - b.losses[k]), k).toBeLessThan(1e-5);
  expect(b.losses.clipFrac).toBeGreaterThan(0);
  let d = 0;
  let norm = 0;
  a.g.forEach((x, i) => x.forEach((v, j) => { d = Math.max(d, Math.abs(v - b.g[i][j])); norm = Math.max(norm, Math.abs(v)); }));
  expect(d).toBeLessThan(1e-5);
  expect(norm).toBeGreaterThan(1e-4);
}

/**
 * Recorded LaMer sessions of one task with a reflection: per session, attempt 0 (its actions
 * fail), the reflection written after it, and attempt 1 (whose prompts show the reflection), with
 * the serving prompts token for token (acting budget block - 48, reflection budget
 * `reflectionBudget`, default block - 256) and the session's sampler.
 */
function reflectedSessions(plans: ReadonlyArray<{ attempts: Array<{ acts: string[]; rewards: number[] }>; reflection: string }>, opts: { reflectionBudget?: number; reflectAfterLast?: boolean } = {}): StepRecord[] {
  const sampling = { temperature: 0.8, topP: 0.95, topK: 0 };
  const actBudget = 1024 - DEFAULT_LIMITS.maxActionTokens;
  const reflBudget = opts.reflectionBudget ?? 1024 - DEFAULT_LIMITS.maxReflectionTokens;
  const base = { instructions: 'Reveal cells.', memory: 'reflection_only' as const };
  const recs: StepRecord[] = [];
  plans.forEach((plan, g) => {
    const previousAttempts: PromptAttempt[] = [];
    plan.attempts.forEach(({ acts, rewards }, n) => {
      const done: PromptStep[] = [];
      acts.forEach((a, t) => {
        const observation = `board ${g}.${n}.${t}\n#..\n.#.`;
        const enc = encodePrompt(renderActPrompt({ ...base, attempt: n, previousAttempts, steps: done, observation }), actBudget);
        const output = [...encode(a), EOS];
        recs.push(rec(`G${g}`, n, t, observation, t === 0 ? 0 : rewards[t - 1], {
          promptTokenIds: enc.ids, outputTokenIds: output, logprobs: output.map((_, k) => -0.3 - 0.1 * k - 0.05 * t), sampling,
        }));
        done.push({ observation, action: a });
      });
      const k = acts.length;
      const finalObservation = `board ${g}.${n}.${k}`;
      const success = rewards[k - 1] > 0;
      recs.push(rec(`G${g}`, n, k, finalObservation, rewards[k - 1], { done: true, success, sampling }));
      const last = n === plan.attempts.length - 1;
      if (!success && (!last || opts.reflectAfterLast)) {
        const enc = encodePrompt(renderReflectionPrompt({ ...base, attempt: n, previousAttempts, steps: done, finalObservation }), reflBudget);
        const output = [...encode(plan.reflection), EOS];
        recs.push(rec(`G${g}`, n, k, finalObservation, 0, {
          kind: 'reflection', promptTokenIds: enc.ids, outputTokenIds: output, logprobs: output.map((_, j) => -0.9 - 0.02 * j), sampling,
        }));
      }
      previousAttempts.push({ steps: done, finalObservation, success, reflection: !success && !last ? plan.reflection : null });
    });
  });
  return recs;
}

describe('packed RL samples', () => {
  // two sessions of one task, 3 acting steps each, different returns: every turn has an advantage
  const acts = [['reveal 0 0', 'reveal 1 2', 'flag 3 3'], ['reveal 0 0', 'reveal 2 1', 'reveal 3 0']];
  const rewards = [[0.1, 0.2, 1], [0.1, -0.5, -1]];
  const opts = { algorithm: 'lamer' as const, returns, blockSize: 1024 };

  it("one sample per attempt whose turns give back the per-step samples exactly; the same scores and trained tokens", () => {
    const records = recordedSessions(acts, rewards);
    // the served prompt of step t+1 is step t's prompt + its output without EOS + the next tail
    const [s0, s1] = records;
    expect(s1.promptTokenIds!.slice(0, s0.promptTokenIds!.length + s0.outputTokenIds!.length - 1)).toEqual([...s0.promptTokenIds!, ...s0.outputTokenIds!.slice(0, -1)]);
    const packed = buildRlSamples(records, opts);
    const plain = buildRlSamples(records, { ...opts, pack: false });
    expect(plain.samples).toHaveLength(6);
    expect(packed.samples).toHaveLength(2);
    expect(packed.scores).toEqual(plain.scores);
    expect(packed.stats.outputTokens).toBe(plain.stats.outputTokens);
    const p = packed.samples[0];
    expect(p.packedTurns!.map((t) => t.step)).toEqual([0, 1, 2]);
    // the sequence is the last step's prompt + output; the first step's EOS is trained where the next tail starts
    expect([...p.promptTokenIds, ...p.outputTokenIds]).toEqual([...records[2].promptTokenIds!, ...records[2].outputTokenIds!]);
    const t0 = p.packedTurns![0];
    const eos = t0.start + t0.length - 1;
    expect(p.lossTargets![eos]).toBe(EOS);
    expect(p.outputTokenIds[eos]).toBe(encode('\n')[0]); // the next tail's first token
    expect(p.lossTargets![eos + 1]).toBe(-1);
    expect(p.advantages!.filter((a, i) => p.lossTargets![i] < 0 && a !== 0)).toEqual([]);
    expect(packed.samples.flatMap(unpackSample)).toEqual(plain.samples);
    // tokens trained (non-padding positions): the per-step sum of prompt + output - 1, O(k^2), vs one sequence per attempt
    const positions = (xs: TrainingSample[]) => xs.reduce((n, s) => n + s.promptTokenIds.length + s.outputTokenIds.length - 1, 0);
    expect(positions(packed.samples)).toBeLessThan(positions(plain.samples) / 2);
  });

  it('on a GPT: the same per-token logprobs, PPO loss and gradients as the per-step samples (within 1e-5)', () => {
    const model = new GptTrainable(initModel({ vocab_size: 260, block_size: 1024, n_layer: 1, n_head: 2, n_embd: 16 }, 5));
    const records = recordedSessions(acts, rewards);
    expectSamePpo(model, buildRlSamples(records, opts).samples, buildRlSamples(records, { ...opts, pack: false }).samples);
    model.dispose();
  });

  it('constrained steps: each turn keeps its own candidates; the support per position is the per-step one', () => {
    const model = new GptTrainable(initModel({ vocab_size: 260, block_size: 1024, n_layer: 1, n_head: 2, n_embd: 16 }, 6));
    const records = recordedSessions(acts, rewards, { constrained: true });
    const packed = buildRlSamples(records, opts).samples;
    const plain = buildRlSamples(records, { ...opts, pack: false }).samples;
    expect(packed).toHaveLength(2);
    expect(packed[0].packedTurns!.map((t) => t.candidates)).toEqual(plain.slice(0, 3).map((s) => s.behaviour!.candidates));
    expect(packed[0].behaviour).toEqual({ temperature: 0.8, topP: 0.95, topK: 0 });
    const pb = behaviourOutputs(model, packed);
    const qb = behaviourOutputs(model, plain);
    const pm = makeBatch(packed, model, undefined, pb.supports);
    const qm = makeBatch(plain, model, undefined, qb.supports);
    const pmask = pm.supportMask!.arraySync();
    const qmask = qm.supportMask!.arraySync();
    let j = 0;
    packed.forEach((s, i) => s.packedTurns!.forEach((t) => {
      const q = plain[j];
      const qStart = qm.outputPositions[j].start;
      expect(pb.supports[i]!.slice(t.start, t.start + t.length)).toEqual(qb.supports[j]);
      for (let k = 0; k < t.length; k++) {
        const pr = pmask[i][pm.outputPositions[i].start + t.start + k];
        const qr = qmask[j][qStart + k];
        expect(pr.map((x) => x === 0)).toEqual(qr.map((x) => x === 0));
      }
      expect(q.outputTokenIds).toEqual(s.lossTargets!.slice(t.start, t.start + t.length));
      j++;
    }));
    // the observations between the actions allow the whole vocabulary (their mask is 0 anyway)
    const obs = packed[0].lossTargets!.findIndex((x, i) => x < 0 && i > 0);
    expect(pmask[0][pm.outputPositions[0].start + obs].every((x) => x === 0)).toBe(true);
    expect(pm.mask.arraySync()[0][pm.outputPositions[0].start + obs]).toBe(0);
    [pm, qm].forEach(disposeBatch);
    model.dispose();
  });

  it('falls back to per-step samples from the first turn whose prompt does not extend the previous one', () => {
    const records = recordedSessions(acts, rewards);
    // session G0: step 1 served another prompt (e.g. steps dropped): nothing packs; G1: step 2 did: steps 0-1 pack
    const broken = records.map((r) => {
      if (r.sessionId === 'G0' && r.step === 1) return { ...r, promptTokenIds: [BOS, ...r.promptTokenIds!.slice(2)] };
      if (r.sessionId === 'G1' && r.step === 2) return { ...r, promptTokenIds: [...r.promptTokenIds!.slice(0, 30), 32, ...r.promptTokenIds!.slice(30)] };
      return r;
    });
    const { samples } = buildRlSamples(broken, opts);
    expect(samples.map((s) => [s.sessionId, s.step, s.packedTurns?.map((t) => t.step) ?? null])).toEqual([
      ['G0', 0, null], ['G0', 1, null], ['G0', 2, null], ['G1', 0, [0, 1]], ['G1', 2, null],
    ]);
    const plain = buildRlSamples(broken, { ...opts, pack: false }).samples;
    expect(samples.flatMap(unpackSample)).toEqual(plain);
    // an output whose text the next prompt does not show (free text: the action is its first line) does not pack
    const chatty = records.map((r) => (r.sessionId === 'G0' && r.step === 0 ? { ...r, outputTokenIds: [...encode('reveal 0 0\nbecause'), EOS], logprobs: new Array(19).fill(-1) } : r));
    expect(buildRlSamples(chatty, opts).samples.filter((s) => s.sessionId === 'G0').map((s) => s.packedTurns ?? null)).toEqual([null, null, null]);
    // a block too small for the whole attempt packs the steps that fit; no blockSize or pack: false packs nothing
    const small = buildRlSamples(records, { ...opts, blockSize: records[1].promptTokenIds!.length + records[1].outputTokenIds!.length - 1 }).samples;
    expect(small[0].packedTurns!.map((t) => t.step)).toEqual([0, 1]);
    expect(buildRlSamples(records, { algorithm: 'lamer', returns }).samples).toEqual(buildRlSamples(records, { ...opts, pack: false }).samples);
  });

  describe('with the reflection', () => {
    // two sessions whose attempt 0 fails and whose attempt 1 goes differently: the reflections
    // (returns G_0 of attempt 1) and the acting turns all have advantages
    const plans = [
      { attempts: [{ acts: ['reveal 0 0', 'reveal 1 2'], rewards: [0.1, -1] }, { acts: ['reveal 0 0', 'flag 1 2'], rewards: [0.1, 1] }], reflection: 'Row 1 hides a mine: flag it.' },
      { attempts: [{ acts: ['reveal 0 0', 'reveal 2 1'], rewards: [0.2, -1] }, { acts: ['reveal 3 3', 'reveal 2 1'], rewards: [0.1, -1] }], reflection: 'Start from a corner.' },
    ];

    it("packs the reflection last into its attempt's sequence; unpacking gives back the per-step samples exactly", () => {
      const records = reflectedSessions(plans);
      const refl = records.find((r) => r.sessionId === 'G0' && r.kind === 'reflection')!;
      const lastAct = records.find((r) => r.sessionId === 'G0' && r.attempt === 0 && r.step === 1)!;
      // the recorded reflection prompt is the last acting prompt + its action without EOS + the reflection tail
      expect(refl.promptTokenIds!.slice(0, lastAct.promptTokenIds!.length + lastAct.outputTokenIds!.length - 1)).toEqual([...lastAct.promptTokenIds!, ...lastAct.outputTokenIds!.slice(0, -1)]);
      const packed = buildRlSamples(records, opts);
      const plain = buildRlSamples(records, { ...opts, pack: false });
      expect(plain.samples.map((s) => [s.sessionId, s.attempt, s.step, s.kind])).toEqual([
        ['G0', 0, 0, 'action'], ['G0', 0, 1, 'action'], ['G0', 0, 2, 'reflection'], ['G0', 1, 0, 'action'], ['G0', 1, 1, 'action'],
        ['G1', 0, 0, 'action'], ['G1', 0, 1, 'action'], ['G1', 0, 2, 'reflection'], ['G1', 1, 0, 'action'], ['G1', 1, 1, 'action'],
      ]);
      expect(packed.samples.map((s) => [s.sessionId, s.attempt, s.kind, s.packedTurns!.map((t) => t.kind ?? t.step)])).toEqual([
        ['G0', 0, 'action', [0, 1, 'reflection']], ['G0', 1, 'action', [0, 1]], ['G1', 0, 'action', [0, 1, 'reflection']], ['G1', 1, 'action', [0, 1]],
      ]);
      expect(packed.scores).toEqual(plain.scores);
      expect(packed.stats.outputTokens).toBe(plain.stats.outputTokens);
      // the sequence is the reflection's prompt + output; the last action's EOS trains where the reflection tail starts
      const p = packed.samples[0];
      expect([...p.promptTokenIds, ...p.outputTokenIds]).toEqual([...refl.promptTokenIds!, ...refl.outputTokenIds!]);
      const [t1, tr] = p.packedTurns!.slice(1);
      expect(p.lossTargets![t1.start + t1.length - 1]).toBe(EOS);
      expect(p.outputTokenIds[t1.start + t1.length - 1]).toBe(encode('\n')[0]);
      expect(tr).toEqual({ step: 2, kind: 'reflection', start: p.outputTokenIds.length - refl.outputTokenIds!.length, length: refl.outputTokenIds!.length, advantage: tr.advantage, return: tr.return });
      expect(p.lossTargets!.slice(tr.start)).toEqual(refl.outputTokenIds);
      expect(p.oldLogprobs!.slice(tr.start)).toEqual(refl.logprobs);
      // its own advantage at its positions, not the acting turns'
      const reflScore = plain.scores.find((x) => x.sessionId === 'G0' && x.kind === 'reflection')!;
      expect(reflScore.advantage).not.toBe(0);
      expect(tr.advantage).toBe(reflScore.advantage);
      expect(p.advantages!.slice(tr.start)).toEqual(refl.outputTokenIds!.map(() => reflScore.advantage));
      expect(p.advantages![t1.start]).not.toBe(reflScore.advantage);
      expect(packed.samples.flatMap(unpackSample)).toEqual(plain.samples);
      // gigpo trains no reflection: its packed samples are the acting turns alone
      const gigpo = buildRlSamples(records, { ...opts, algorithm: 'gigpo' });
      expect(gigpo.samples.flatMap((s) => s.packedTurns!.map((t) => t.kind ?? 'action'))).toEqual(new Array(8).fill('action'));
      expect(gigpo.samples.flatMap(unpackSample)).toEqual(buildRlSamples(records, { ...opts, algorithm: 'gigpo', pack: false }).samples);
    });

    it("a reflection after the session's last attempt (not trained) leaves the last action's EOS trained in the sequence", () => {
      const records = reflectedSessions(plans, { reflectAfterLast: true });
      const late = records.filter((r) => r.kind === 'reflection' && r.attempt === 1);
      expect(late.map((r) => r.sessionId)).toEqual(['G1']);
      const packed = buildRlSamples(records, opts);
      const plain = buildRlSamples(records, { ...opts, pack: false });
      expect(plain.scores.find((x) => x.sessionId === 'G1' && x.attempt === 1 && x.kind === 'reflection')!.kept).toBe(false);
      const g1 = packed.samples.find((s) => s.sessionId === 'G1' && s.attempt === 1)!;
      expect(g1.packedTurns!.map((t) => t.kind ?? t.step)).toEqual([0, 1]);
      const last = g1.packedTurns![1];
      expect(last.start + last.length).toBe(g1.outputTokenIds.length);
      expect(g1.lossTargets!.at(-1)).toBe(EOS);
      expect(packed.stats.outputTokens).toBe(plain.stats.outputTokens);
      expect(packed.samples.flatMap(unpackSample)).toEqual(plain.samples);
    });

    it('on a GPT: the same per-token logprobs, PPO loss and gradients as the per-step samples with the reflection (within 1e-5)', () => {
      const model = new GptTrainable(initModel({ vocab_size: 260, block_size: 1024, n_layer: 1, n_head: 2, n_embd: 16 }, 7));
      const records = reflectedSessions(plans);
      // the failed attempts with their reflections (attempt 1 only sets the reflections' returns)
      const packed = buildRlSamples(records, opts).samples.filter((s) => s.attempt === 0);
      expect(packed.map((s) => s.packedTurns!.map((t) => t.kind ?? t.step))).toEqual([[0, 1, 'reflection'], [0, 1, 'reflection']]);
      expectSamePpo(model, packed, buildRlSamples(records, { ...opts, pack: false }).samples.filter((s) => s.attempt === 0));
      model.dispose();
    });

    it('counts the reflection tokens (dataStats) and splits the entropy into action and reflection tokens, packed or not', () => {
      const records = reflectedSessions(plans);
      const reflOut = records.filter((r) => r.kind === 'reflection').reduce((n, r) => n + r.outputTokenIds!.length, 0);
      const packed = buildRlSamples(records, opts);
      const plain = buildRlSamples(records, { ...opts, pack: false });
      expect(reflOut).toBeGreaterThan(0);
      expect(packed.stats.reflectionTokens).toBe(reflOut);
      expect(plain.stats.reflectionTokens).toBe(reflOut);
      expect(buildRlSamples(records, { ...opts, algorithm: 'gigpo' }).stats.reflectionTokens).toBe(0);
      const model = new GptTrainable(initModel({ vocab_size: 260, block_size: 1024, n_layer: 1, n_head: 2, n_embd: 16 }, 8));
      const coef = { clipCoef: 0.2, dualClip: 3, entCoef: 0.01 };
      const split = (xs: TrainingSample[]) => {
        const b = makeBatch(xs, model);
        // the mask marks exactly the reflections' trained positions
        const refl = (b.reflectionMask!.arraySync() as number[][]).flat().reduce((n, x) => n + x, 0);
        const r = accumulateGradients(model, model.trainableVariables(), [b], [1], ppoLoss(coef));
        // the same entropy over each kind's positions alone, from the logits (behaviour policy: temperature 0.8)
        const [hAct, hRefl] = tf.tidy(() => {
          const h = entropyFromLogits(behaviourLogits(model.logits(b.inputs, false), b));
          const rm = tf.mul(b.reflectionMask!, b.mask);
          return [tokenMean(h, tf.sub(b.mask, rm)).dataSync()[0], tokenMean(h, rm).dataSync()[0]];
        });
        tf.dispose(r.grads);
        disposeBatch(b);
        return { refl, losses: r.losses, hAct, hRefl, n: outputTokens(b) };
      };
      for (const xs of [packed.samples, plain.samples]) {
        const m = split(xs);
        expect(m.refl).toBe(reflOut);
        expect(m.losses.reflectionShare).toBeCloseTo(reflOut / m.n, 6);
        const { actionEntropy, reflectionEntropy } = entropyByKind(m.losses.entropy, m.losses.reflectionShare, m.losses.reflectionEntropyShare);
        expect(actionEntropy!).toBeCloseTo(m.hAct, 4);
        expect(reflectionEntropy!).toBeCloseTo(m.hRefl, 4);
        expect(m.losses.entropy).toBeCloseTo((1 - m.losses.reflectionShare) * actionEntropy! + m.losses.reflectionShare * reflectionEntropy!, 5);
      }
      // a step without reflections has no reflection entropy, and one with nothing else no action entropy
      expect(entropyByKind(1.2, 0, 0)).toEqual({ actionEntropy: 1.2, reflectionEntropy: null });
      expect(entropyByKind(0.7, 1, 0.7)).toEqual({ actionEntropy: null, reflectionEntropy: 0.7 });
      model.dispose();
    }, 180_000); // a GPT forward and backward per layout: 14 s alone, over 60 s on two busy cores

    it('stays a separate sample when its prompt does not extend the sequence, uses another sampler, or does not fit the block', () => {
      const kinds = (xs: TrainingSample[]) => xs.map((s) => [s.sessionId, s.attempt, s.kind, s.packedTurns?.map((t) => t.kind ?? t.step) ?? null]);
      const check = (records: StepRecord[], o: typeof opts = opts) => {
        const { samples } = buildRlSamples(records, o);
        expect(samples.flatMap(unpackSample)).toEqual(buildRlSamples(records, { ...o, pack: false }).samples);
        return kinds(samples);
      };
      const separate = [
        ['G0', 0, 'action', [0, 1]], ['G0', 0, 'reflection', null], ['G0', 1, 'action', [0, 1]],
        ['G1', 0, 'action', [0, 1]], ['G1', 0, 'reflection', null], ['G1', 1, 'action', [0, 1]],
      ];
      // a reflection budget so small that its prompt drops the attempt's first step
      const records = reflectedSessions(plans);
      const reflLen = records.find((r) => r.kind === 'reflection')!.promptTokenIds!.length;
      const dropped = reflectedSessions(plans, { reflectionBudget: reflLen - 5 });
      expect(dropped.find((r) => r.kind === 'reflection')!.promptTokenIds!.length).toBeLessThan(reflLen - 5);
      expect(check(dropped)).toEqual(separate);
      // another temperature for the reflection (one temperature per packed sequence)
      expect(check(records.map((r) => (r.kind === 'reflection' ? { ...r, sampling: { temperature: 1, topP: 0.95, topK: 0 } } : r)))).toEqual(separate);
      // a block that holds attempt 0's acting turns but not its reflection's prompt + output
      const refl0 = records.find((r) => r.sessionId === 'G0' && r.kind === 'reflection')!;
      const small = check(records, { ...opts, blockSize: refl0.promptTokenIds!.length + refl0.outputTokenIds!.length - 2 });
      expect(small.slice(0, 3)).toEqual(separate.slice(0, 3));
      // an acting turn that breaks the run: the reflection is compared only after every acting turn
      const broken = records.map((r) => (r.sessionId === 'G0' && r.attempt === 0 && r.step === 1 ? { ...r, promptTokenIds: [BOS, ...r.promptTokenIds!.slice(2)] } : r));
      expect(check(broken).slice(0, 4)).toEqual([['G0', 0, 'action', null], ['G0', 0, 'action', null], ['G0', 0, 'reflection', null], ['G0', 1, 'action', [0, 1]]]);
    });
  });
});
