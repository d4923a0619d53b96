import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { BOS, EOS, decode, encode, encodeCandidate, encodePrompt, VOCAB_SIZE } from '../../src/model/tokenizer.js';

describe('byte tokenizer', () => {
  it('round-trips arbitrary UTF-8 text', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), (s) => {
        const ids = encode(s);
        expect(ids.every((x) => Number.isInteger(x) && x >= 0 && x < 256)).toBe(true);
        expect(decode(ids)).toBe(s);
      }),
      { numRuns: 300 },
    );
    // lone surrogates are not UTF-8: TextEncoder writes U+FFFD for them, so compare to that
    const wellFormed = (s: string) => (s as unknown as { toWellFormed(): string }).toWellFormed();
    fc.assert(fc.property(fc.string({ unit: 'binary' }), (s) => decode(encode(s)) === wellFormed(s)), { numRuns: 300 });
  });

  it('encodes multi-byte characters as their UTF-8 bytes and skips specials on decode', () => {
    expect(encode('é€😀')).toEqual([0xc3, 0xa9, 0xe2, 0x82, 0xac, 0xf0, 0x9f, 0x98, 0x80]);
    expect(decode([BOS, 0x68, 0x69, EOS])).toBe('hi');
    expect(encodeCandidate('go')).toEqual([0x67, 0x6f, EOS]);
    expect(VOCAB_SIZE).toBe(260);
  });

  it('keeps the whole prompt when it fits', () => {
    const r = encodePrompt({ head: 'H', steps: ['a', 'bb'], tail: 'T' }, 100);
    expect(r.ids).toEqual([BOS, ...encode('Habb' + 'T')]);
    expect(r.droppedSteps).toBe(0);
    expect(r.headTruncatedBytes).toBe(0);
  });

  it('drops the oldest whole steps first, never head or tail, and reports how many', () => {
    const parts = { head: 'HEAD|', steps: ['s0-aaaa|', 's1-bbbb|', 's2-cccc|'], tail: '|TAIL>' };
    // 1 + 5 + 24 + 6 = 36 tokens in full.
    expect(encodePrompt(parts, 36).droppedSteps).toBe(0);
    const r = encodePrompt(parts, 35);
    expect(r.droppedSteps).toBe(1);
    expect(decode(r.ids)).toBe('HEAD|s1-bbbb|s2-cccc||TAIL>');
    const r2 = encodePrompt(parts, 20);
    expect(r2.droppedSteps).toBe(2);
    expect(decode(r2.ids)).toBe('HEAD|s2-cccc||TAIL>');
    const r3 = encodePrompt(parts, 12);
    expect(r3.droppedSteps).toBe(3);
    expect(decode(r3.ids)).toBe('HEAD||TAIL>');
    expect(r3.headTruncatedBytes).toBe(0);
  });

  it('drops at least minDroppedSteps steps when asked', () => {
    const parts = { head: 'H|', steps: ['a|', 'b|', 'c|'], tail: '>' };
    expect(decode(encodePrompt(parts, 100, { minDroppedSteps: 2 }).ids)).toBe('H|c|>');
    expect(encodePrompt(parts, 100, { minDroppedSteps: 9 }).droppedSteps).toBe(3);
    expect(encodePrompt(parts, 6, { minDroppedSteps: 1 }).droppedSteps).toBe(2);
  });

  it('cuts the head from the left only as a last resort', () => {
    const r = encodePrompt({ head: 'abcdefgh', steps: ['step'], tail: 'XY' }, 6);
    expect(r.droppedSteps).toBe(1);
    expect(r.headTruncatedBytes).toBe(5);
    expect(r.ids).toEqual([BOS, ...encode('fghXY')]);
    const r2 = encodePrompt({ head: 'abc', steps: [], tail: 'VWXYZ' }, 4);
    expect(r2.ids).toEqual([BOS, ...encode('XYZ')]);
    expect(r2.tailTruncatedBytes).toBe(2);
    expect(() => encodePrompt({ head: '', steps: [], tail: '' }, 1)).toThrow();
  });

  it('never exceeds the budget (property)', () => {
    fc.assert(
      fc.property(fc.string(), fc.array(fc.string()), fc.string(), fc.integer({ min: 2, max: 80 }), (head, steps, tail, max) => {
        const r = encodePrompt({ head, steps, tail }, max);
        expect(r.ids.length).toBeLessThanOrEqual(max);
        expect(r.ids[0]).toBe(BOS);
        if (r.headTruncatedBytes === 0 && r.tailTruncatedBytes === 0) {
          expect(decode(r.ids)).toBe(head + steps.slice(r.droppedSteps).join('') + tail);
        }
      }),
      { numRuns: 300 },
    );
  });
});
