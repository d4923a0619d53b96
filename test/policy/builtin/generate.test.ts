/** Stop strings over output tokens (src/policy/builtin/generate.ts firstStop), bytes and game pieces. */
import { describe, expect, it } from 'vitest';
import { firstStop } from '../../../src/policy/builtin/generate.js';
import { EOS } from '../../../src/model/tokenizer.js';
import { BYTE_TOKENIZER, GameTokenizer } from '../../../src/model/tokenizers.js';
import { gameVocabulary } from '../../../src/envs/vocab.js';

const tok = new GameTokenizer(gameVocabulary());

describe('firstStop', () => {
  it('finds a stop in byte tokens (default and byte tokenizer alike)', () => {
    const out = [...Buffer.from('go\nnow')];
    expect(firstStop(out, ['\n'])).toBe(2);
    expect(firstStop(out, ['\n'], BYTE_TOKENIZER)).toBe(2);
    expect(firstStop(out, ['xyz', 'now'])).toBe(3);
    expect(firstStop(out, [])).toBe(-1);
    expect(firstStop(out, [''])).toBe(-1);
  });

  it('reads game pieces as their bytes; a stop starting inside a piece stops at that piece', () => {
    const out = tok.encode('up, left');
    expect(out).toEqual([341, 345, 343]);
    expect(firstStop(out, [', '], tok)).toBe(1);
    expect(firstStop(out, ['left'], tok)).toBe(2);
    expect(firstStop(out, ['p,'], tok)).toBe(0);
    expect(firstStop(out, ['ef'], tok)).toBe(2);
    // a stop spanning two pieces starts in the first
    expect(firstStop(out, ['up, l'], tok)).toBe(0);
    expect(firstStop(out, ['down'], tok)).toBe(-1);
    // without the tokenizer, pieces are not bytes: the scan ends at them
    expect(firstStop(out, [', '])).toBe(-1);
  });

  it('ends the scan at a special token', () => {
    expect(firstStop([341, EOS, 345], [', '], tok)).toBe(-1);
    expect(firstStop([...Buffer.from('a'), EOS, ...Buffer.from('b')], ['b'])).toBe(-1);
  });
});
