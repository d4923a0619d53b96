/**
 * The game-vocabulary tokenizer (src/model/tokenizers.ts GameTokenizer over src/envs/vocab.ts):
 * byte-fallback round trip for any text, exact ids of board and action text, longest match,
 * spec validation, and prompt fitting counted in game tokens. The byte tokenizer is checked too,
 * as the `Tokenizer` object the engine uses for byte checkpoints.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { BOS, EOS, PAD, SEP, VOCAB_SIZE, decode, encode, encodePrompt, fitPrompt } from '../../src/model/tokenizer.js';
import { BYTE_TOKENIZER, GameTokenizer, tokenizerFromSpec } from '../../src/model/tokenizers.js';
import { gameVocabulary } from '../../src/envs/vocab.js';
import { gridText } from '../../src/envs/grid.js';

const pieces = gameVocabulary();
const tok = new GameTokenizer(pieces);
/** Id of the `(r, c)` piece: the first 81 pieces are (0, 0)..(8, 8), row-major. */
const cell = (r: number, c: number) => 260 + 9 * r + c;
const id = (piece: string) => 260 + pieces.indexOf(piece);

describe('game vocabulary', () => {
  it('has one piece per cell action, move word, row label, header, tag, cue and memory word', () => {
    expect(pieces.length).toBe(121);
    expect(new Set(pieces).size).toBe(pieces.length);
    expect(tok.vocabSize).toBe(381);
    expect(pieces.slice(0, 2)).toEqual(['(0, 0)', '(0, 1)']);
    expect(pieces[80]).toBe('(8, 8)');
    expect(pieces.slice(81, 86)).toEqual(['up', 'down', 'left', 'right', ', ']);
    expect(tok.spec).toEqual({ type: 'game', vocabSize: 381, special: { bos: BOS, eos: EOS, sep: SEP, pad: PAD }, pieces });
  });
});

describe('GameTokenizer', () => {
  it('round-trips arbitrary text exactly as UTF-8 does (lone surrogates become U+FFFD)', () => {
    const wellFormed = (s: string) => (s as unknown as { toWellFormed(): string }).toWellFormed();
    fc.assert(fc.property(fc.string({ unit: 'grapheme' }), (s) => tok.decode(tok.encode(s)) === s), { numRuns: 300 });
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (s) => {
        const ids = tok.encode(s);
        // byte fallback and pieces only: never a special id, always inside the vocabulary
        return ids.every((x) => Number.isInteger(x) && ((x >= 0 && x < 256) || (x >= VOCAB_SIZE && x < tok.vocabSize)))
          && tok.decode(ids) === BYTE_TOKENIZER.decode(BYTE_TOKENIZER.encode(s))
          && tok.decode(ids) === wellFormed(s);
      }),
      { numRuns: 300 },
    );
  });

  it('round-trips text dense in pieces, splitting pieces across random text', () => {
    const text = fc.array(fc.oneof(fc.constantFrom(...pieces), fc.string({ unit: 'grapheme', maxLength: 4 }), fc.constantFrom('(', ')', ', ', '\n', ' ', '1', 'é')), { maxLength: 30 }).map((a) => a.join(''));
    fc.assert(
      fc.property(text, (s) => {
        const ids = tok.encode(s);
        return tok.decode(ids) === s && ids.length <= encode(s).length;
      }),
      { numRuns: 500 },
    );
  });

  it('encodes a board, an action and a reflection to these exact ids', () => {
    const board = gridText(['?1?', '*..', '??1'], 1);
    expect(board).toBe('  123\n1 ?1?\n2 *..\n3 ??1');
    // header piece, then per row: its label piece and one byte per cell
    expect(tok.encode(board)).toEqual([id('  123'), id('\n1 '), 63, 49, 63, id('\n2 '), 42, 46, 46, id('\n3 '), 63, 63, 49]);
    expect(id('  123')).toBe(355);
    expect(id('\n1 ')).toBe(347);
    expect(tok.encode('(2, 3)')).toEqual([281]);
    expect(cell(2, 3)).toBe(281);
    expect(tok.encode('up, left, down')).toEqual([341, 345, 343, 345, 342]);
    expect(tok.encode('(2, 3) was a mine.')).toEqual([281, 373]);
    expect(tok.encode('[minesweeper]\n> ')).toEqual([367, 369]);
    expect(tok.decode([BOS, 367, 369, 281, EOS, PAD])).toBe('[minesweeper]\n> (2, 3)');
    expect(tok.encodeCandidate('(1, 1)')).toEqual([cell(1, 1), EOS]);
  });

  it('takes the longest piece at each position, else one byte', () => {
    // '  1234' (4-column header) is one piece; '  123' is a prefix of it
    expect(tok.encode('  1234')).toEqual([id('  1234')]);
    expect(tok.encode('  123')).toEqual([id('  123')]);
    expect(tok.encode('  1239')).toEqual([id('  123'), 57]);
    expect(tok.encode('upup')).toEqual([341, 341]);
    expect(tok.encode('(9, 9)')).toEqual([40, 57, 345, 57, 41]); // no (9, 9) piece: bytes around ', '
    expect(tok.encode('')).toEqual([]);
    const small = new GameTokenizer(['ab', 'abc', 'bcd']);
    expect(small.encode('abcd')).toEqual([261, 100]); // greedy: 'abc' then 'd', not 'a' + 'bcd'
    expect(small.encode('abd')).toEqual([260, 100]);
    expect(small.encode('xbcd')).toEqual([120, 262]);
  });

  it('gives each token its bytes (none for special ids and ids beyond the vocabulary)', () => {
    expect([...tok.tokenBytes(65)]).toEqual([65]);
    expect([...tok.tokenBytes(281)]).toEqual([...Buffer.from('(2, 3)')]);
    for (const s of [BOS, EOS, SEP, PAD, tok.vocabSize, -1]) expect(tok.tokenBytes(s).length).toBe(0);
  });

  it('refuses empty, duplicate, single-byte and malformed pieces', () => {
    expect(() => new GameTokenizer([''])).toThrow(/piece 0 .* at least 2 UTF-8 bytes/);
    expect(() => new GameTokenizer(['ab', 'x'])).toThrow(/piece 1 \("x"\) must be at least 2 UTF-8 bytes/);
    expect(() => new GameTokenizer(['ab', 'cd', 'ab'])).toThrow(/piece 2 \("ab"\) is a duplicate/);
    expect(() => new GameTokenizer(['a\uD800'])).toThrow(/piece 0 is not well-formed text/);
    // a two-byte character alone is a valid piece
    expect(new GameTokenizer(['é']).encode('éé')).toEqual([260, 260]);
  });
});

describe('tokenizerFromSpec', () => {
  it('rebuilds both tokenizers from their specs', () => {
    expect(tokenizerFromSpec(BYTE_TOKENIZER.spec)).toBe(BYTE_TOKENIZER);
    const t = tokenizerFromSpec(JSON.parse(JSON.stringify(tok.spec)));
    expect(t.vocabSize).toBe(381);
    expect(t.encode('(2, 3) was a mine.')).toEqual([281, 373]);
  });

  it('refuses unknown types, other special ids, wrong sizes and bad pieces', () => {
    const special = { bos: 256, eos: 257, sep: 258, pad: 259 };
    expect(() => tokenizerFromSpec(undefined)).toThrow(/special ids must be bos 256/);
    expect(() => tokenizerFromSpec({ type: 'byte', vocabSize: 260, special: { ...special, eos: 1 } })).toThrow(/special ids must be/);
    expect(() => tokenizerFromSpec({ type: 'bpe', vocabSize: 260, special })).toThrow(/unsupported tokenizer type "bpe"/);
    expect(() => tokenizerFromSpec({ type: 'byte', vocabSize: 300, special })).toThrow(/byte tokenizer vocabSize must be 260, got 300/);
    expect(() => tokenizerFromSpec({ type: 'game', vocabSize: 262, special, pieces: 'ab' })).toThrow(/pieces must be an array of strings/);
    expect(() => tokenizerFromSpec({ type: 'game', vocabSize: 262, special, pieces: ['ab', 3] })).toThrow(/pieces must be an array of strings/);
    expect(() => tokenizerFromSpec({ type: 'game', vocabSize: 263, special, pieces: ['ab', 'cd'] })).toThrow(/vocabSize 263 disagrees with 2 pieces \(262\)/);
    expect(() => tokenizerFromSpec({ type: 'game', vocabSize: 262, special, pieces: ['ab', 'ab'] })).toThrow(/duplicate/);
  });
});

describe('prompt fitting in game tokens', () => {
  const parts = { head: '[minesweeper]', steps: ['\n> (1, 1)', '\n> (2, 2)', '\n> (3, 3)'], tail: '\n> ' };

  it('keeps everything when it fits, counting pieces as one token', () => {
    const r = tok.encodePrompt(parts, 9);
    expect(r.ids).toEqual([BOS, 367, 369, cell(1, 1), 369, cell(2, 2), 369, cell(3, 3), 369]);
    expect(r).toMatchObject({ text: '[minesweeper]\n> (1, 1)\n> (2, 2)\n> (3, 3)\n> ', droppedSteps: 0, headTruncatedBytes: 0, tailTruncatedBytes: 0, truncatedChars: 0 });
  });

  it('drops whole steps from the front by token count', () => {
    // 1 + 1 + 1 fixed, 2 per step: 8 tokens hold 2 steps, 4 hold none
    expect(tok.encodePrompt(parts, 8)).toMatchObject({ ids: [BOS, 367, 369, cell(2, 2), 369, cell(3, 3), 369], droppedSteps: 1 });
    expect(tok.encodePrompt(parts, 6)).toMatchObject({ ids: [BOS, 367, 369, cell(3, 3), 369], droppedSteps: 2 });
    expect(tok.encodePrompt(parts, 4)).toMatchObject({ ids: [BOS, 367, 369], droppedSteps: 3, truncatedChars: 0 });
    expect(tok.encodePrompt(parts, 9, { minDroppedSteps: 2 }).droppedSteps).toBe(2);
    // the byte tokenizer would need 39 bytes + BOS for the same prompt
    expect(encodePrompt(parts, 9).droppedSteps).toBe(3);
  });

  it('cuts head, then tail, from the left by whole tokens and counts the characters cut', () => {
    const p = { head: 'abc(1, 1)', steps: ['x'], tail: '\n> ' };
    const h = tok.encodePrompt(p, 4);
    expect(h.ids).toEqual([BOS, 99, cell(1, 1), 369]);
    expect(h).toMatchObject({ text: 'c(1, 1)\n> ', droppedSteps: 1, headTruncatedBytes: 2, tailTruncatedBytes: 0, truncatedChars: 2 });
    const t = tok.encodePrompt({ head: 'abc', steps: [], tail: 'xy\n> ' }, 3);
    expect(t.ids).toEqual([BOS, 121, 369]);
    expect(t).toMatchObject({ text: 'y\n> ', headTruncatedBytes: 3, tailTruncatedBytes: 1, truncatedChars: 4 });
    expect(() => tok.encodePrompt(p, 1)).toThrow(/maxPromptTokens must be an integer >= 2, got 1/);
  });

  it('cuts on character boundaries: a byte-fallback character at the cut goes whole', () => {
    // 'é' is two fallback bytes; keeping 2 head tokens would start inside it
    const r = tok.encodePrompt({ head: 'é(1, 1)', steps: [], tail: '\n> ' }, 4);
    expect(r.text).toBe('(1, 1)\n> ');
    expect(r.ids).toEqual([BOS, cell(1, 1), 369]);
    expect(r).toMatchObject({ headTruncatedBytes: 2, truncatedChars: 1 });
    const t = tok.encodePrompt({ head: '', steps: [], tail: 'a€\n> ' }, 3);
    expect(t.text).toBe('\n> ');
    expect(t).toMatchObject({ tailTruncatedBytes: 4, truncatedChars: 2 });
  });

  it('always fits, records decode(ids), never leaves half a character, and counts what it cut (property)', () => {
    const text = fc.array(fc.oneof(fc.constantFrom(...pieces), fc.string({ unit: 'grapheme', maxLength: 3 })), { maxLength: 8 }).map((a) => a.join(''));
    fc.assert(
      fc.property(text, fc.array(text, { maxLength: 5 }), text, fc.integer({ min: 2, max: 40 }), (head, steps, tail, max) => {
        const r = tok.encodePrompt({ head, steps, tail }, max);
        const kept = steps.slice(r.droppedSteps).join('');
        const full = [...(head + kept + tail)].length;
        return r.ids.length <= max && r.ids[0] === BOS && r.text === tok.decode(r.ids) && (!r.text.includes('\uFFFD') || (head + kept + tail).includes('\uFFFD'))
          && (head + kept + tail).endsWith(r.text) && [...r.text].length === full - r.truncatedChars;
      }),
      { numRuns: 400 },
    );
  });

  it('fits with hysteresis like the byte fitPrompt: a new overflow frees a quarter of the context', () => {
    const steps = Array.from({ length: 10 }, (_, i) => `\n> (${i % 9}, 1)`);
    const p = { head: '[minesweeper]', steps, tail: '\n> ' };
    // block 16, reserve 2: budget 14 holds 5 steps (3 + 10); the slack budget 10 holds 3
    const r = tok.fitPrompt(p, 16, 2);
    expect(r.droppedSteps).toBe(7);
    expect(r.ids.length).toBe(9);
    // the next step keeps the dropped prefix stable
    const next = tok.fitPrompt({ ...p, steps: [...steps, '\n> (1, 2)'] }, 16, 2, { head: p.head, steps: 10, dropped: 7 });
    expect(next.droppedSteps).toBe(7);
    expect(next.ids.length).toBe(11);
  });
});

describe('byte tokenizer as a Tokenizer', () => {
  it('is the module functions, unchanged', () => {
    const p = { head: 'Hé', steps: ['ab', 'cd'], tail: 'T' };
    expect(BYTE_TOKENIZER.vocabSize).toBe(260);
    expect(BYTE_TOKENIZER.encode('é(1, 1)')).toEqual(encode('é(1, 1)'));
    expect(BYTE_TOKENIZER.decode([BOS, 104, 105, EOS])).toBe(decode([BOS, 104, 105, EOS]));
    expect(BYTE_TOKENIZER.encodePrompt(p, 6)).toEqual(encodePrompt(p, 6));
    expect(BYTE_TOKENIZER.fitPrompt(p, 8, 2)).toEqual(fitPrompt(p, 8, 2));
    expect(BYTE_TOKENIZER.encodeCandidate('go')).toEqual([103, 111, EOS]);
    expect([...BYTE_TOKENIZER.tokenBytes(200)]).toEqual([200]);
    expect(BYTE_TOKENIZER.tokenBytes(EOS).length).toBe(0);
  });
});
