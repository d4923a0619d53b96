import { describe, expect, it } from 'vitest';
import { renderActPrompt, renderReflectionPrompt } from '../../src/agent/prompt.js';
import { generateDemos } from '../../src/envs/demos.js';
import { BOS, decode, encode, EOS } from '../../src/model/tokenizer.js';
import { buildRlSamples, buildSftSamples, parseDemoJsonl, type DemoSession, type StepRecord } from '../../src/training/data.js';

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
    expect(stats).toMatchObject({ sessions: 2, tasks: 1, turns: 5, samples: 5, groups: 1, skippedGroups: 0, outputTokens: 6 });
  });
  it('gigpo: each attempt is its own episode and reflections are not trained', () => {
    const { scores } = buildRlSamples(records, { algorithm: 'gigpo', returns });
    expect(scores.map((s) => s.kind)).toEqual(['action', 'action', 'action', 'action']);
    expect(scores.map((s) => s.return)).toEqual([-0.75, 0.5, 10, 10]);
    // scores -1, -0.5, 10, 10 (mean 4.625); anchor A: {-0.75, 10, 10} mean 6.41667
    const want = [-5.625 - 7.166667, -5.125, 5.375 + 3.583333, 5.375 + 3.583333];
    scores.forEach((s, i) => expect(s.advantage).toBeCloseTo(want[i], 4));
  });
  it('skips a task whose sessions all score the same, and reports it', () => {
    const same = [rec('X', 0, 0, 'A', 0, { taskId: 'U', ...out([1]) }), rec('X', 0, 1, 'B', 1, { taskId: 'U', done: true }),
      rec('Y', 0, 0, 'A', 0, { taskId: 'U', ...out([2]) }), rec('Y', 0, 1, 'B', 1, { taskId: 'U', done: true })];
    const { samples, stats } = buildRlSamples([...records, ...same], { algorithm: 'grpo', returns });
    expect(stats.groups).toBe(2);
    expect(stats.skippedGroups).toBe(1);
    expect(samples.every((s) => s.taskId === 'T')).toBe(true);
  });
  it("attaches each sample's behaviour policy: session sampling, and the candidates of constrained actions", () => {
    const sampling = { temperature: 0.7, topP: 0.8, topK: 20 };
    const recs = records.map((r) => ({ ...r, sampling, availableActions: r.kind === 'action' ? ['up', 'é'] : null }));
    const { samples } = buildRlSamples(recs, { algorithm: 'lamer', returns });
    expect(samples[0].behaviour).toEqual({ ...sampling, candidates: [[117, 112, EOS], [0xc3, 0xa9, EOS]] });
    expect(samples[2].kind).toBe('reflection');
    expect(samples[2].behaviour).toEqual(sampling);
    expect(buildRlSamples(records, { algorithm: 'lamer', returns }).samples[0].behaviour).toEqual({ temperature: 1, topP: 1, topK: 0 });
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
    const { samples } = buildSftSamples([long], { blockSize: 200, maxActionTokens: 48, maxReflectionTokens: 100 });
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
