import { describe, expect, it } from 'vitest';
import type { SessionRow } from '../../src/db/schema.js';
import type { Generation } from '../../src/policy/engine.js';
import { DomainError } from '../../src/agent/errors.js';
import { admitStep, planStep, stepTransition, type StepGenerations } from '../../src/agent/step-transition.js';

const row = (over: Partial<SessionRow> = {}): SessionRow => ({
  id: 'ses_1',
  tenant: 'default',
  taskId: 't',
  env: null,
  mode: 'train',
  status: 'active',
  instructions: 'go',
  maxAttempts: 2,
  maxSteps: 3,
  memory: 'reflection_only',
  memoryPlacement: 'system',
  sampling: { temperature: 1, topP: 1, topK: 0 },
  modelVersion: 'v0',
  metadata: {},
  nextAttempt: 0,
  nextStep: 1,
  attempts: [{ attempt: 0, status: 'running', steps: 1, return: 0.5, success: false, endReason: null }],
  createdAt: 0,
  updatedAt: 0,
  ...over,
});

const gen = (output: string, over: Partial<Generation> = {}): Generation => ({
  output,
  promptTokenIds: [1, 2],
  outputTokenIds: [3],
  logprobs: [-0.25],
  droppedSteps: 0,
  modelVersion: 'v0',
  ...over,
});

const none: StepGenerations = { act: null, actPrompt: null, refl: null, reflPrompt: null, reflectionText: null };

describe('admitStep', () => {
  it('answers an identical retry from the stored answer and refuses another body at a recorded position', () => {
    const stored = { requestHash: 'h', answer: '{"action":"x"}' };
    expect(admitStep(row(), stored, { attempt: 0, step: 0, observation: 'o' }, 'h')).toEqual({ replay: { action: 'x' } });
    expect(() => admitStep(row(), stored, { attempt: 0, step: 0, observation: 'o' }, 'other')).toThrow(
      expect.objectContaining({ kind: 'step-conflict', message: 'attempt 0 step 0 was already recorded with a different body' }),
    );
  });

  it('refuses a step of an ended session, out of order (with expected), and success without done', () => {
    expect(() => admitStep(row({ status: 'completed' }), undefined, { attempt: 0, step: 1, observation: 'o' }, 'h')).toThrow(
      expect.objectContaining({ kind: 'session-not-active', message: "session 'ses_1' is completed" }),
    );
    let err: unknown;
    try {
      admitStep(row(), undefined, { attempt: 0, step: 2, observation: 'o' }, 'h');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(DomainError);
    expect(err).toMatchObject({ kind: 'step-out-of-order', details: { expected: { attempt: 0, step: 1 } } });
    expect(() => admitStep(row(), undefined, { attempt: 0, step: 1, observation: 'o', success: true }, 'h')).toThrow(
      expect.objectContaining({ kind: 'validation', details: { errors: [{ field: 'body/success', message: 'may be true only with done: true' }] } }),
    );
    expect(admitStep(row(), undefined, { attempt: 0, step: 1, observation: 'o' }, 'h')).toBeNull();
  });

  it('refuses a non-zero reward at step 0 (no action was taken yet); 0 or absent is admitted', () => {
    const fresh = row({ nextStep: 0, attempts: [] });
    expect(() => admitStep(fresh, undefined, { attempt: 0, step: 0, observation: 'o', reward: -2 }, 'h')).toThrow(
      expect.objectContaining({ kind: 'validation', details: { errors: [{ field: 'body/reward', message: 'must be 0 or absent at step 0 (no action was taken yet)' }] } }),
    );
    expect(admitStep(fresh, undefined, { attempt: 0, step: 0, observation: 'o', reward: 0 }, 'h')).toBeNull();
    expect(admitStep(fresh, undefined, { attempt: 0, step: 0, observation: 'o' }, 'h')).toBeNull();
  });
});

describe('planStep', () => {
  it('ends at done or maxSteps, reflects only after a failure with attempts left, bounds candidate tokens', () => {
    expect(planStep(row(), { attempt: 0, step: 1, observation: 'o' }, 0)).toEqual({ ends: false, success: false, reflects: false });
    expect(planStep(row(), { attempt: 0, step: 3, observation: 'o' }, 0)).toEqual({ ends: true, success: false, reflects: true });
    expect(planStep(row(), { attempt: 1, step: 1, observation: 'o', done: true }, 0)).toEqual({ ends: true, success: false, reflects: false });
    expect(planStep(row(), { attempt: 0, step: 1, observation: 'o', done: true, success: true }, 0)).toEqual({ ends: true, success: true, reflects: false });
    // 'ab' + EOS and 'c' + EOS: 5 tokens
    expect(() => planStep(row(), { attempt: 0, step: 1, observation: 'o', availableActions: ['ab', 'c'] }, 4)).toThrow(
      expect.objectContaining({ kind: 'validation', message: 'body/availableActions total 5 tokens (UTF-8 bytes + 1 per action); at most 4 per step (LAMER_MAX_CANDIDATE_TOKENS)' }),
    );
    expect(planStep(row(), { attempt: 0, step: 1, observation: 'o', availableActions: ['ab', 'c'] }, 5).ends).toBe(false);
  });
});

describe('stepTransition', () => {
  it('an acting step: the action record and the next position; the session stays active', () => {
    const input = { attempt: 0, step: 1, observation: 'o1', reward: 0.25 };
    const r = stepTransition(row(), input, 'h', { ends: false, success: false, reflects: false }, { ...none, act: gen('Action: left'), actPrompt: 'P' }, 7);
    expect(r.status).toBe('active');
    expect(r.answer).toEqual({
      sessionId: 'ses_1', attempt: 0, step: 1, action: 'left', output: 'Action: left', modelVersion: 'v0',
      attemptResult: null, reflection: null, session: { status: 'active', next: { attempt: 0, step: 2 } },
    });
    expect(r.commit.rows).toHaveLength(1);
    expect(r.commit.rows[0]).toMatchObject({ kind: 'action', prompt: 'P', action: 'left', reward: 0.25, promptTokenIds: [1, 2], requestHash: 'h', createdAt: 7 });
    expect(r.commit.rows[0]!.answer).toBe(JSON.stringify(r.answer));
    expect(r.commit.reflection).toBeNull();
    expect(r.commit.session).toEqual({
      id: 'ses_1', status: 'active', nextAttempt: 0, nextStep: 2, updatedAt: 7,
      attempts: [{ attempt: 0, status: 'running', steps: 2, return: 0.75, success: false, endReason: null }],
    });
  });

  it('a failed attempt with attempts left: attempt result, reflection record, next attempt; the row is not mutated', () => {
    const before = row();
    const input = { attempt: 0, step: 1, observation: 'lost', reward: -1, done: true };
    const gens = { ...none, refl: gen('I should go right.'), reflPrompt: 'R', reflectionText: 'I should go right.' };
    const r = stepTransition(before, input, 'h', { ends: true, success: false, reflects: true }, gens, 9);
    expect(r.answer.attemptResult).toEqual({ attempt: 0, success: false, return: -0.5, steps: 2, endReason: 'done' });
    expect(r.answer.reflection).toEqual({ attempt: 0, text: 'I should go right.' });
    expect(r.answer.session).toEqual({ status: 'active', next: { attempt: 1, step: 0 } });
    expect(r.commit.rows.map((x) => [x.kind, x.action, x.done, x.prompt, x.answer === null])).toEqual([
      ['action', null, true, null, false],
      ['reflection', null, true, 'R', true],
    ]);
    expect(r.commit.reflection).toEqual({ sessionId: 'ses_1', attempt: 0, text: 'I should go right.', updatedAt: 9 });
    expect(r.commit.session.attempts[0]).toEqual({ attempt: 0, status: 'failed', steps: 2, return: -0.5, success: false, endReason: 'done' });
    expect(before.attempts[0]).toEqual({ attempt: 0, status: 'running', steps: 1, return: 0.5, success: false, endReason: null });
  });

  it('the last attempt ending at maxSteps completes the session', () => {
    const r = stepTransition(row({ nextAttempt: 1, nextStep: 3, attempts: [
      { attempt: 0, status: 'failed', steps: 2, return: 0, success: false, endReason: 'done' },
      { attempt: 1, status: 'running', steps: 3, return: 0, success: false, endReason: null },
    ] }), { attempt: 1, step: 3, observation: 'o' }, 'h', { ends: true, success: false, reflects: false }, none, 1);
    expect(r.status).toBe('completed');
    expect(r.answer.session).toEqual({ status: 'completed', next: null });
    expect(r.answer.attemptResult).toEqual({ attempt: 1, success: false, return: 0, steps: 4, endReason: 'max_steps' });
    expect(r.commit.session).toMatchObject({ status: 'completed', nextAttempt: 1, nextStep: 3 });
  });
});
