/**
 * The pure parts of a replay (src/agent/replay-plan.ts): a step's acting prompt re-rendered from
 * the recorded rows is the prompt the session service rendered (checked on sessions recorded over
 * HTTP by a test-engine server, which records its prompts unfitted, in every memory mode); what is
 * planned for the same and for another tokenizer; the recorded answer in another tokenizer; the summary's
 * agreement, means and the order of the calls that differ most.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { planCall, recordedSampling, renderedPrompt, scoredTokenIds, summarize, type VersionText } from '../../src/agent/replay-plan.js';
import type { ReplayStepView } from '../../src/agent/replay-schemas.js';
import { CHAT_FORMAT } from '../../src/agent/prompt.js';
import { callSeed } from '../../src/model/sampling.js';
import { EOS } from '../../src/model/tokenizer.js';
import { BYTE_TOKENIZER, GameTokenizer } from '../../src/model/tokenizers.js';
import { gameVocabulary } from '../../src/envs/vocab.js';
import { MEMORY_MODES } from '../../src/domain.js';
import { startTestServer, type TestServer } from '../helpers/index.js';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s?.close();
});

/** Three attempts of two acting steps each (the first with candidates), failed, failed, then a success. */
async function play(memory: string): Promise<string> {
  const id = (await s.call('POST', '/v1/sessions', { taskId: 't', instructions: 'Open the right door.', memory, maxAttempts: 3, sampling: { seed: 4 } })).body.id as string;
  for (let a = 0; a < 3; a++) {
    const post = async (step: number, b: Record<string, unknown>) =>
      expect((await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: a, step, observation: `room ${a}.${step}`, ...b })).status).toBe(200);
    await post(0, { availableActions: ['door 1', 'door 2'] });
    await post(1, {});
    await post(2, { done: true, success: a === 2 });
  }
  return id;
}

const byteText: VersionText = { version: 'test', remote: false, format: CHAT_FORMAT, tokenizer: BYTE_TOKENIZER, tokenKey: JSON.stringify(BYTE_TOKENIZER.spec) };

describe('the rendered prompt of a recorded step', () => {
  it.each(MEMORY_MODES)('is the prompt the step was served with (memory %s)', async (memory) => {
    const id = await play(memory);
    const session = (await s.app.repos.hot.session(id))!;
    const rows = await s.app.repos.replays.actionRows(id);
    const reflections = await s.app.repos.replays.reflections(id);
    const traj = (await s.call('GET', `/v1/sessions/${id}/trajectory?limit=1000`)).body.steps.filter((x: any) => x.kind === 'action');
    let checked = 0;
    rows.forEach((row, index) => {
      if (row.output === null) return;
      const p = renderedPrompt({ session, rows, reflections, index }, CHAT_FORMAT);
      expect(p.head + p.steps.join('') + p.tail).toBe(traj[index].prompt);
      checked++;
    });
    expect(checked).toBe(6);
  });

  it("plans the recorded token ids and the recorded call's sampling for the same tokenizer, the text prompt for another", async () => {
    const id = await play('reflection_only');
    const session = (await s.app.repos.hot.session(id))!;
    const rows = await s.app.repos.replays.actionRows(id);
    const c = { session, rows, reflections: new Map<number, string>(), index: 0 };
    const opts = { decoding: 'sampled' as const, logprobs: true, replayId: 'rpl_x' };
    const same = planCall(c, byteText, byteText, opts);
    expect(same.kind).toBe('local');
    if (same.kind !== 'local') return;
    expect(same.req.promptTokenIds).toEqual(rows[0]!.promptTokenIds);
    expect(same.req.sampling).toEqual({ ...(session.sampling as object), seed: callSeed(4, 0, 0, 'act') });
    expect(recordedSampling(session, rows[0]!)).toEqual(same.req.sampling);
    expect(same.req.candidates).toEqual(['door 1', 'door 2']);
    expect(same.req.score!.tokenIds).toEqual(rows[0]!.outputTokenIds);
    const tok = new GameTokenizer(gameVocabulary());
    const game: VersionText = { version: 'g', remote: false, format: CHAT_FORMAT, tokenizer: tok, tokenKey: JSON.stringify(tok.spec) };
    const other = planCall(c, game, byteText, { ...opts, decoding: 'greedy' });
    if (other.kind !== 'local') throw new Error(other.kind);
    expect(other.req.promptTokenIds).toBeUndefined();
    expect(other.req.sampling).toEqual({ temperature: 0, topP: 1, topK: 0 });
    expect(other.req.score!.tokenIds).toEqual(tok.encodeCandidate(rows[0]!.output!));
    expect(planCall(c, byteText, byteText, { ...opts, logprobs: false })).not.toHaveProperty('req.score');
  });
});

describe('the recorded answer in another tokenizer', () => {
  const tok = new GameTokenizer(gameVocabulary());
  const game: VersionText = { version: 'g', remote: false, format: CHAT_FORMAT, tokenizer: tok, tokenKey: 'game' };
  const row = (output: string, outputTokenIds: number[] | null, extra: Record<string, unknown> = {}) =>
    ({ output, outputTokenIds, availableActions: null, engineRecord: null, turn: null, ...extra }) as never;

  it('ends with EOS only when the recorded answer did', () => {
    expect(scoredTokenIds(row('go', [103, 111, EOS]), game, byteText)).toEqual([...tok.encode('go'), EOS]);
    expect(scoredTokenIds(row('go', [103, 111]), game, byteText)).toEqual(tok.encode('go')); // cut by the length cap
    expect(scoredTokenIds(row('go', [103, 111]), byteText, byteText)).toEqual([103, 111]); // same tokenizer: as recorded
    // a remote answer (its own token ids) ended unless its turn says 'length'
    expect(scoredTokenIds(row('go', [5, 6], { engineRecord: {} }), game, null)).toEqual([...tok.encode('go'), EOS]);
    expect(scoredTokenIds(row('go', null, { turn: { finishReason: 'length' } }), game, null)).toEqual(tok.encode('go'));
  });
});

describe('the summary', () => {
  const entry = (agrees: boolean | null, diff: number | null, recorded = -1): ReplayStepView => ({
    sessionId: 's', attempt: 0, step: 0, kind: 'step', observation: '',
    recorded: { modelVersion: 'a', action: 'x', tokens: 1, logprob: recorded, logprobs: [recorded] },
    replayed: agrees === null ? null : { action: agrees ? 'x' : 'y', agrees, promptFrom: 'recorded-tokens', droppedSteps: 0, logprob: diff === null ? null : recorded + diff, logprobs: diff === null ? [null] : [recorded + diff] },
    logprobDiff: diff,
    skipped: agrees === null ? 'tools' : null,
  });

  it('counts agreement over the replayed calls, averages the scored ones, and orders the calls that differ most', () => {
    const steps = [entry(true, 0), entry(false, -2), entry(null, null), entry(true, 0.5), entry(false, null), entry(false, 2, -3)];
    expect(summarize(steps)).toEqual({
      calls: 6, replayed: 5, skipped: 1, agreeing: 2, agreement: 0.4, scored: 4,
      meanLogprobDiff: 0.125, meanRecordedLogprob: -1.5, meanReplayedLogprob: -1.375, outsideSupport: 1,
      // largest |logprobDiff| first (the two of 2 in call order), then 0.5, then the disagreement without one; the
      // call with the same action and no difference is not listed
      mostDifferent: [1, 5, 3, 4],
    });
    expect(summarize([])).toMatchObject({ calls: 0, agreement: null, meanLogprobDiff: null, mostDifferent: [] });
  });
});
