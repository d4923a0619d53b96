/** Prompt rendering (src/agent/prompt.ts): the acting prompt per memory mode and the reflection prompt. */
import { describe, expect, it } from 'vitest';
import { renderActPrompt, renderReflectionPrompt, HISTORY_STEPS } from '../../src/agent/prompt.js';

describe('renderActPrompt', () => {
  const base = { instructions: 'RULES', attempt: 0, previousAttempts: [], steps: [], observation: 'O0' };

  it('step 0 of attempt 0: instructions, then the observation and the cue (shown once)', () => {
    const p = renderActPrompt({ ...base, memory: 'reflection_only' });
    expect(p).toEqual({ head: 'RULES', steps: [], tail: '\nObservation:\nO0\nAction: ' });
  });

  it('later steps render each earlier step, oldest first', () => {
    const p = renderActPrompt({
      ...base,
      memory: 'reflection_only',
      steps: [
        { observation: 'O0', action: 'up' },
        { observation: 'O1', action: 'left' },
      ],
      observation: 'O2',
    });
    expect(p.head).toBe('RULES');
    expect(p.steps).toEqual(['\nObservation:\nO0\nAction: up', '\nObservation:\nO1\nAction: left']);
    expect(p.tail).toBe('\nObservation:\nO2\nAction: ');
  });

  const prev = [
    { steps: [{ observation: 'a', action: '1' }], finalObservation: 'lostA', success: false, reflection: 'R0' },
    {
      steps: Array.from({ length: 9 }, (_, i) => ({ observation: `b${i}`, action: String(i) })),
      finalObservation: 'lostB',
      success: false,
      reflection: 'x'.repeat(2500),
    },
  ];

  it('reflection_only lists every reflection, each cut to 2000 characters', () => {
    const p = renderActPrompt({ ...base, attempt: 2, memory: 'reflection_only', previousAttempts: prev });
    expect(p.head).toBe(`RULES\nReflections on earlier attempts:\nAttempt 0: R0\nAttempt 1: ${'x'.repeat(2000)}`);
  });

  it('cuts a reflection by characters (code points): 2000 emoji stay whole, the 2001st is left out', () => {
    const emoji = [{ steps: [], finalObservation: 'F', success: false, reflection: '😀'.repeat(2001) }];
    const p = renderActPrompt({ ...base, attempt: 1, memory: 'reflection_only', previousAttempts: emoji });
    expect(p.head).toBe(`RULES\nReflections on earlier attempts:\nAttempt 0: ${'😀'.repeat(2000)}`);
  });

  it('history_only shows the previous attempt\'s last 7 steps and no reflection', () => {
    const p = renderActPrompt({ ...base, attempt: 2, memory: 'history_only', previousAttempts: prev });
    const shown = Array.from({ length: HISTORY_STEPS }, (_, k) => k + 2)
      .map((i) => `\nObservation:\nb${i}\nAction: ${i}`)
      .join('');
    expect(p.head).toBe(`RULES\nPrevious attempt 1 (not completed), last 7 steps:${shown}\nFinal observation:\nlostB`);
  });

  it('history_and_reflection has both, history first', () => {
    const p = renderActPrompt({ ...base, attempt: 1, memory: 'history_and_reflection', previousAttempts: [prev[0]!] });
    expect(p.head).toBe(
      'RULES\nPrevious attempt 0 (not completed), last 1 steps:\nObservation:\na\nAction: 1\nFinal observation:\nlostA' +
        '\nReflections on earlier attempts:\nAttempt 0: R0',
    );
  });
});

describe('renderReflectionPrompt', () => {
  it('continues the acting prompt: same head, every step of the attempt, then says the task was not completed', () => {
    const steps = Array.from({ length: 10 }, (_, i) => ({ observation: `o${i}`, action: `a${i}` }));
    const prev = [{ steps: [], finalObservation: 'F', success: false, reflection: 'R0' }];
    const p = renderReflectionPrompt({ instructions: 'RULES', memory: 'reflection_only', attempt: 1, previousAttempts: prev, steps, finalObservation: 'END' });
    expect(p.head).toBe('RULES\nReflections on earlier attempts:\nAttempt 0: R0');
    expect(p.steps).toEqual(steps.map((s) => `\nObservation:\n${s.observation}\nAction: ${s.action}`));
    expect(p.tail).toBe(
      '\nObservation:\nEND\nAttempt 1 ended: the task was not completed.\nReflect on what went wrong and write a plan for the next attempt.\nReflection:',
    );
  });
});

describe('append-only layout', () => {
  const join = (p: { head: string; steps: string[]; tail: string }) => p.head + p.steps.join('') + p.tail;
  const prev = [{ steps: [{ observation: 'a', action: '1' }], finalObservation: 'lostA', success: false, reflection: 'R0' }];

  for (const memory of ['reflection_only', 'history_only', 'history_and_reflection'] as const) {
    it(`${memory}: prompt(k+1) = prompt(k) + action_k + tail(k+1); the reflection prompt extends the last one`, () => {
      const obs = ['  123\n1 ???', '  123\n1 1??', '  123\n1 11?', '  123\n1 11*'];
      const actions = ['(1, 1)', '(1, 2)', '(1, 3)'];
      const ctx = (k: number) => ({ instructions: 'RULES', memory, attempt: 1, previousAttempts: prev, steps: actions.slice(0, k).map((a, i) => ({ observation: obs[i]!, action: a })) });
      for (let k = 0; k + 1 < actions.length; k++) {
        const pk = renderActPrompt({ ...ctx(k), observation: obs[k]! });
        const pk1 = renderActPrompt({ ...ctx(k + 1), observation: obs[k + 1]! });
        expect(join(pk1)).toBe(join(pk) + actions[k] + pk1.tail);
        expect(pk1.head).toBe(pk.head);
      }
      const last = renderActPrompt({ ...ctx(2), observation: obs[2]! });
      const refl = renderReflectionPrompt({ ...ctx(3), finalObservation: obs[3]! });
      expect(join(refl)).toBe(join(last) + actions[2] + refl.tail);
      // the first observation appears once at step 0
      expect(join(renderActPrompt({ ...ctx(0), observation: obs[0]! })).split(obs[0]!)).toHaveLength(2);
    });
  }
});
