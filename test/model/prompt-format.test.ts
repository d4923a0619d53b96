/** Prompt formats of model versions (src/model/prompt-format.ts parsePromptFormat). */
import { describe, expect, it } from 'vitest';
import { CHAT_FORMAT, parsePromptFormat } from '../../src/model/prompt-format.js';

describe('parsePromptFormat', () => {
  it('reads chat (also when absent) and compact with its fields', () => {
    expect(parsePromptFormat(undefined)).toBe(CHAT_FORMAT);
    expect(parsePromptFormat(null)).toBe(CHAT_FORMAT);
    expect(parsePromptFormat({ name: 'chat', envTags: 'ignored' })).toEqual({ name: 'chat' });
    expect(parsePromptFormat({ name: 'compact', envTags: ['minesweeper', 'sokoban'], historySteps: 0 }))
      .toEqual({ name: 'compact', envTags: ['minesweeper', 'sokoban'], historySteps: 0 });
    expect(parsePromptFormat({ name: 'compact', envTags: [], historySteps: 64, instructions: true, extra: 1 }))
      .toEqual({ name: 'compact', envTags: [], historySteps: 64, instructions: true });
    expect(parsePromptFormat({ name: 'compact', envTags: ['a.b:c-d_1'], historySteps: 3, instructions: false }))
      .toEqual({ name: 'compact', envTags: ['a.b:c-d_1'], historySteps: 3, instructions: false });
    expect(parsePromptFormat({ name: 'compact', envTags: [], historySteps: 0, memoryAt: 'tail' }))
      .toEqual({ name: 'compact', envTags: [], historySteps: 0, memoryAt: 'tail' });
    expect(parsePromptFormat({ name: 'compact', envTags: [], historySteps: 0, memoryAt: 'head' }))
      .toEqual({ name: 'compact', envTags: [], historySteps: 0, memoryAt: 'head' });
  });

  it('does not share the caller\'s envTags array', () => {
    const tags = ['minesweeper'];
    const f = parsePromptFormat({ name: 'compact', envTags: tags, historySteps: 0 });
    tags.push('x');
    expect(f).toEqual({ name: 'compact', envTags: ['minesweeper'], historySteps: 0 });
  });

  it.each([
    ['a string', 'compact', /promptFormat\.name must be one of chat, compact, got undefined/],
    ['an unknown name', { name: 'bpe' }, /promptFormat\.name must be one of chat, compact, got "bpe"/],
    ['no name', {}, /promptFormat\.name must be one of/],
    ['envTags missing', { name: 'compact', historySteps: 0 }, /promptFormat\.envTags must be an array of env labels/],
    ['envTags not strings', { name: 'compact', envTags: [1], historySteps: 0 }, /promptFormat\.envTags/],
    ['an empty env tag', { name: 'compact', envTags: [''], historySteps: 0 }, /promptFormat\.envTags/],
    ['an env tag with a space', { name: 'compact', envTags: ['mine sweeper'], historySteps: 0 }, /promptFormat\.envTags/],
    ['an env tag of 65 chars', { name: 'compact', envTags: ['a'.repeat(65)], historySteps: 0 }, /promptFormat\.envTags/],
    ['historySteps missing', { name: 'compact', envTags: [] }, /promptFormat\.historySteps must be an integer 0\.\.64, got undefined/],
    ['historySteps negative', { name: 'compact', envTags: [], historySteps: -1 }, /historySteps must be an integer 0\.\.64, got -1/],
    ['historySteps fractional', { name: 'compact', envTags: [], historySteps: 1.5 }, /historySteps must be an integer 0\.\.64, got 1\.5/],
    ['historySteps 65', { name: 'compact', envTags: [], historySteps: 65 }, /got 65/],
    ['historySteps a string', { name: 'compact', envTags: [], historySteps: '2' }, /got "2"/],
    ['memoryAt elsewhere', { name: 'compact', envTags: [], historySteps: 0, memoryAt: 'middle' }, /promptFormat\.memoryAt must be 'head' or 'tail', got "middle"/],
    ['memoryAt null', { name: 'compact', envTags: [], historySteps: 0, memoryAt: null }, /promptFormat\.memoryAt must be 'head' or 'tail', got null/],
    ['instructions not a boolean', { name: 'compact', envTags: [], historySteps: 0, instructions: 'yes' }, /promptFormat\.instructions must be a boolean/],
  ])('refuses %s', (_, raw, msg) => {
    expect(() => parsePromptFormat(raw)).toThrow(msg);
  });
});
