/** Which forward errors count as a broken backend (the recovery itself is tested through the engine in test/policy/builtin-engine.test.ts). */
import { describe, expect, it } from 'vitest';
import { isBackendFault } from '../../../src/policy/builtin/recovery.js';

describe('isBackendFault', () => {
  it('recognises WebAssembly traps and aborts as backend faults', () => {
    expect(isBackendFault(new WebAssembly.RuntimeError('memory access out of bounds'))).toBe(true);
    expect(isBackendFault(new Error('Aborted(). Build with -sASSERTIONS for more info.'))).toBe(true);
    expect(isBackendFault(new Error('forwardCached: 70 positions exceed block_size 64'))).toBe(false);
  });
});
