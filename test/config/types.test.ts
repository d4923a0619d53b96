/** The default size limits (src/config/types.ts `defaultLimits`), what an unset variable gives. */
import { describe, expect, it } from 'vitest';
import { defaultLimits } from '../../src/config/types.js';

describe('defaultLimits', () => {
  it('the documented defaults', () => {
    expect(defaultLimits.observationChars).toBe(65536);
    expect(defaultLimits.availableActions).toBe(512);
    expect(defaultLimits.actionChars).toBe(1024);
  });
  it('are consistent: the default step count within its cap, a batch body at least a single body', () => {
    expect(defaultLimits.defaultMaxSteps).toBeLessThanOrEqual(defaultLimits.maxStepsCap);
    expect(defaultLimits.batchBodyBytes).toBeGreaterThanOrEqual(defaultLimits.bodyBytes);
    for (const v of Object.values(defaultLimits)) expect(Number.isInteger(v) && v > 0).toBe(true);
  });
});
