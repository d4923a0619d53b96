/**
 * The `compact` prompt layout (src/agent/prompt.ts renderCompactAct / renderCompactReflection),
 * chosen by renderActPrompt / renderReflectionPrompt from the version's format.
 */
import { describe, expect, it } from 'vitest';
import {
  COMPACT_REFLECTION_CHARS, renderActPrompt, renderCompactAct, renderReflectionPrompt, type ActContext, type CompactPromptFormat, type PromptAttempt,
} from '../../src/agent/prompt.js';

const format: CompactPromptFormat = { name: 'compact', envTags: ['minesweeper', 'sokoban'], historySteps: 0 };
const failed = (reflection: string | null, actions: string[] = ['(1, 1)']): PromptAttempt => ({
  steps: actions.map((a, i) => ({ observation: `B${i}`, action: a })), finalObservation: 'BF', success: false, reflection,
});
const ctx: ActContext = {
  instructions: 'You play MineSweeper. Answer (row, col).',
  memory: 'reflection_only',
  attempt: 2,
  previousAttempts: [failed('(2, 3) was a mine.'), failed('  (1, 1)\n was   a mine. ')],
  steps: [{ observation: 'B0', action: '(4, 4)' }, { observation: 'B1', action: '(5, 5)' }],
  observation: '  123\n1 ?1?\n2 ...\n3 ??1',
  env: 'minesweeper',
  format,
};

describe('compact acting prompt', () => {
  it('is the env tag, one memory line per reflection (whitespace collapsed), the board and the cue', () => {
    const p = renderActPrompt(ctx);
    expect(p).toEqual({ head: '[minesweeper]\nm (2, 3) was a mine.\nm (1, 1) was a mine.', steps: [], tail: '\n  123\n1 ?1?\n2 ...\n3 ??1\n> ' });
    expect(p.head + p.steps.join('') + p.tail).toBe('[minesweeper]\nm (2, 3) was a mine.\nm (1, 1) was a mine.\n  123\n1 ?1?\n2 ...\n3 ??1\n> ');
  });

  it('has no memory lines on the first attempt, and none for attempts without a reflection', () => {
    expect(renderActPrompt({ ...ctx, attempt: 0, previousAttempts: [] }).head).toBe('[minesweeper]');
    expect(renderActPrompt({ ...ctx, previousAttempts: [failed(null), failed('x')] }).head).toBe('[minesweeper]\nm x');
  });

  it('cuts each memory line to COMPACT_REFLECTION_CHARS characters', () => {
    const long = 'é'.repeat(COMPACT_REFLECTION_CHARS + 10);
    expect(renderActPrompt({ ...ctx, previousAttempts: [failed(long)] }).head).toBe(`[minesweeper]\nm ${'é'.repeat(COMPACT_REFLECTION_CHARS)}`);
  });

  it('gives an env it does not know (or none) the instructions, as a chat prompt would', () => {
    expect(renderActPrompt({ ...ctx, env: 'blackjack' }).head).toBe('You play MineSweeper. Answer (row, col).\nm (2, 3) was a mine.\nm (1, 1) was a mine.');
    expect(renderActPrompt({ ...ctx, env: null }).head.startsWith('You play MineSweeper.')).toBe(true);
    expect(renderActPrompt({ ...ctx, env: undefined }).head.startsWith('You play MineSweeper.')).toBe(true);
    // a tag is matched exactly, not by prefix or case: a sized name is another label
    expect(renderActPrompt({ ...ctx, env: 'MineSweeper' }).head.startsWith('You play')).toBe(true);
    expect(renderActPrompt({ ...ctx, env: 'minesweeper-6x6-3' }).head.startsWith('You play')).toBe(true);
    expect(renderActPrompt({ ...ctx, format: { ...format, instructions: true } }).head.startsWith('You play')).toBe(true);
  });

  it('shows the last historySteps steps of the attempt', () => {
    expect(renderActPrompt({ ...ctx, format: { ...format, historySteps: 1 } }).steps).toEqual(['\nB1\n> (5, 5)']);
    expect(renderActPrompt({ ...ctx, format: { ...format, historySteps: 5 } }).steps).toEqual(['\nB0\n> (4, 4)', '\nB1\n> (5, 5)']);
    expect(renderCompactAct({ ...format, historySteps: 2 }, { ...ctx, steps: [] }).steps).toEqual([]);
  });

  it('adds the previous attempt\'s last actions with a history memory mode', () => {
    const prev = [failed('(2, 3) was a mine.', ['(1, 1)', '(2, 2)']), failed('r2', Array.from({ length: 9 }, (_, i) => `a${i}`))];
    expect(renderActPrompt({ ...ctx, memory: 'history_only', previousAttempts: prev }).head).toBe('[minesweeper]\nh a2 a3 a4 a5 a6 a7 a8');
    expect(renderActPrompt({ ...ctx, memory: 'history_and_reflection', previousAttempts: prev }).head).toBe('[minesweeper]\nh a2 a3 a4 a5 a6 a7 a8\nm (2, 3) was a mine.\nm r2');
  });

  it('puts the memory lines between the board and the cue with memoryAt tail, so the board keeps its place', () => {
    const tail = { ...format, memoryAt: 'tail' as const };
    const p = renderActPrompt({ ...ctx, format: tail });
    expect(p).toEqual({ head: '[minesweeper]', steps: [], tail: '\n  123\n1 ?1?\n2 ...\n3 ??1\nm (2, 3) was a mine.\nm (1, 1) was a mine.\n> ' });
    const first = renderActPrompt({ ...ctx, attempt: 0, previousAttempts: [], format: tail });
    expect(first).toEqual({ head: '[minesweeper]', steps: [], tail: '\n  123\n1 ?1?\n2 ...\n3 ??1\n> ' });
    // the text before the board is the same with and without memory
    expect((p.head + p.tail).indexOf('  123')).toBe((first.head + first.tail).indexOf('  123'));
    // memoryAt head is the default layout
    expect(renderActPrompt({ ...ctx, format: { ...format, memoryAt: 'head' } })).toEqual(renderActPrompt(ctx));
    const hist = renderActPrompt({ ...ctx, memory: 'history_and_reflection', previousAttempts: [failed('r1', ['(1, 1)', '(2, 2)'])], format: tail });
    expect(hist.head).toBe('[minesweeper]');
    expect(hist.tail).toBe('\n  123\n1 ?1?\n2 ...\n3 ??1\nh (1, 1) (2, 2)\nm r1\n> ');
  });

  it('leaves the chat layout unchanged without a format or with chat', () => {
    const chat = renderActPrompt({ ...ctx, format: undefined });
    expect(chat.head.startsWith('You play MineSweeper.')).toBe(true);
    expect(chat.tail).toBe('\nObservation:\n  123\n1 ?1?\n2 ...\n3 ??1\nAction: ');
    expect(renderActPrompt({ ...ctx, format: { name: 'chat' } })).toEqual(chat);
  });
});

describe('compact reflection prompt', () => {
  const refl = {
    instructions: ctx.instructions, memory: 'reflection_only' as const, attempt: 1, previousAttempts: [failed('(2, 3) was a mine.')],
    steps: [{ observation: 'B0', action: '(1, 1)' }, { observation: 'B1', action: '(3, 1)' }], finalObservation: 'BF', env: 'minesweeper', format,
  };

  it('is the acting head, the last step, the final board and the reflection cue', () => {
    const p = renderReflectionPrompt(refl);
    expect(p).toEqual({ head: '[minesweeper]\nm (2, 3) was a mine.', steps: ['\nB1\n> (3, 1)'], tail: '\nBF\n! ' });
  });

  it('puts the memory after the final board with memoryAt tail', () => {
    const p = renderReflectionPrompt({ ...refl, format: { ...format, memoryAt: 'tail' } });
    expect(p).toEqual({ head: '[minesweeper]', steps: ['\nB1\n> (3, 1)'], tail: '\nBF\nm (2, 3) was a mine.\n! ' });
  });

  it('names an unknown env by its instructions and has no step for an attempt without steps', () => {
    const p = renderReflectionPrompt({ ...refl, env: 'maze', steps: [], previousAttempts: [] });
    expect(p).toEqual({ head: ctx.instructions, steps: [], tail: '\nBF\n! ' });
  });
});
