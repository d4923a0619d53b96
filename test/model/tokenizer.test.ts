import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  BOS, EOS, PAD, SEP, UTF8_START, completeUtf8Prefix, decode, encode, encodeCandidate, encodePrompt, utf8Allowed, utf8Next, utf8Support, VOCAB_SIZE,
} from '../../src/model/tokenizer.js';

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
    expect(r2.truncatedChars).toBe(5); // abc of the head, VW of the tail
    expect(r.truncatedChars).toBe(5);
    expect(r.text).toBe('fghXY');
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

  it('cuts on character boundaries: a character split by the budget is dropped whole', () => {
    // 'é' is 2 bytes, '€' 3, '😀' 4; room for 5 head bytes lands inside '€'
    const r = encodePrompt({ head: 'aé€😀', steps: ['s'], tail: '>' }, 7);
    expect(r.droppedSteps).toBe(1);
    expect(r.text).toBe('😀>');
    expect(decode(r.ids)).toBe(r.text);
    expect(r.headTruncatedBytes).toBe(6);
    expect(r.truncatedChars).toBe(3);
    const t = encodePrompt({ head: 'h', steps: [], tail: 'x€y' }, 4); // 2 tail bytes fit: '€' is cut
    expect(t.text).toBe('y');
    expect(t.truncatedChars).toBe(3);
  });

  it('the recorded text is exactly decode(ids), and the cut is counted, for long histories (property)', () => {
    const text = fc.string({ unit: fc.constantFrom('binary', 'grapheme', 'grapheme-composite') as never, maxLength: 120 });
    fc.assert(
      fc.property(text, fc.array(text, { maxLength: 30 }), text, fc.integer({ min: 2, max: 400 }), fc.nat(5), (head, steps, tail, max, minDrop) => {
        const r = encodePrompt({ head, steps, tail }, max, { minDroppedSteps: minDrop });
        expect(r.ids.length).toBeLessThanOrEqual(max);
        expect(decode(r.ids)).toBe(r.text);
        // shown text + what was cut = the prompt with the dropped steps left out (as TextEncoder sees it)
        const wf = (s: string) => (s as unknown as { toWellFormed(): string }).toWellFormed();
        const full = [...wf(head)].concat([...wf(steps.slice(r.droppedSteps).join(''))], [...wf(tail)]);
        if (r.truncatedChars === 0) expect(r.text).toBe(full.join(''));
        else {
          expect(r.droppedSteps).toBe(steps.length);
          const headChars = [...wf(head)];
          const tailChars = [...wf(tail)];
          const cutHead = Math.min(r.truncatedChars, headChars.length);
          expect(r.text).toBe(headChars.slice(cutHead).join('') + tailChars.slice(r.truncatedChars - cutHead).join(''));
        }
      }),
      { numRuns: 400 },
    );
  });

  it('UTF-8 guard: inside a character only its valid continuation bytes may follow', () => {
    expect(utf8Allowed(UTF8_START)).toContain(0x41);
    expect(utf8Allowed(UTF8_START)).toContain(EOS);
    // BOS, SEP and PAD are never sampled, whatever the vocabulary (a game vocabulary adds ids from 260)
    for (const V of [VOCAB_SIZE, 381]) {
      for (const special of [BOS, SEP, PAD]) expect(utf8Allowed(UTF8_START, V)).not.toContain(special);
      expect(utf8Allowed(UTF8_START, V)).toContain(EOS);
    }
    expect(utf8Allowed(UTF8_START, 381).slice(-121)).toEqual(Array.from({ length: 121 }, (_, i) => 260 + i));
    for (const bad of [0x80, 0xbf, 0xc0, 0xc1, 0xf5, 0xff]) expect(utf8Allowed(UTF8_START)).not.toContain(bad);
    const afterE0 = utf8Next(UTF8_START, 0xe0);
    expect(utf8Allowed(afterE0)).toEqual(Array.from({ length: 0x20 }, (_, i) => 0xa0 + i)); // no overlong forms
    expect(utf8Allowed(utf8Next(UTF8_START, 0xed)).at(-1)).toBe(0x9f); // no surrogates
    expect(utf8Allowed(utf8Next(UTF8_START, 0xf4)).at(-1)).toBe(0x8f); // nothing above U+10FFFF
    expect(utf8Allowed(afterE0)).not.toContain(EOS);
    expect(utf8Support([0x68, 0xc3, 0xa9]).map((a) => a.length)).toEqual([utf8Allowed(UTF8_START).length, utf8Allowed(UTF8_START).length, 64]);
    expect(completeUtf8Prefix([0x68, 0xe2, 0x82])).toBe(1);
    expect(completeUtf8Prefix([0x68, 0xe2, 0x82, 0xac, EOS])).toBe(5);
  });

  it('any token sequence drawn from utf8Allowed decodes without replacement characters (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.nat(), { maxLength: 200 }), (picks) => {
        let s = UTF8_START;
        const out: number[] = [];
        for (const p of picks) {
          const a = utf8Allowed(s);
          const t = a[p % a.length]!;
          out.push(t);
          s = utf8Next(s, t);
        }
        const done = out.slice(0, completeUtf8Prefix(out));
        const bytes = Uint8Array.from(done.filter((t) => t < 256));
        expect(() => new TextDecoder('utf-8', { fatal: true }).decode(bytes)).not.toThrow();
        expect(decode(done)).not.toContain('\uFFFD');
      }),
      { numRuns: 300 },
    );
  });
});
