/** Action extraction (src/policy/actions.ts): the first non-empty line, without an "Action:" label. */
import { describe, expect, it } from 'vitest';
import { extractAction } from '../../src/policy/actions.js';

describe('extractAction', () => {
  it.each([
    [' up\nbecause the box', 'up'],
    ['Action: (2, 3)', '(2, 3)'],
    ['\n\n  left  \n', 'left'],
    ['action:down', 'down'],
    ['', ''],
    ['\n \n', ''],
  ])('%j -> %j', (out, want) => {
    expect(extractAction(out)).toBe(want);
  });
});
