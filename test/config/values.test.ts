/**
 * One environment variable read as a checked value (src/config/values.ts): integers, numbers and
 * one-of-a-list, their defaults, and the ConfigError naming the variable, the value and what is expected.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, int, num, oneOf, parseTrainWorkers } from '../../src/config/values.js';

describe('int', () => {
  it('the default when unset or empty; digits (space around ignored) in [min, max]', () => {
    expect(int({}, 'X', 7, 1, 10)).toBe(7);
    expect(int({ X: '' }, 'X', 7, 1, 10)).toBe(7);
    expect(int({ X: ' 10 ' }, 'X', 7, 1, 10)).toBe(10);
    expect(int({ X: '1' }, 'X', 7, 1, 10)).toBe(1);
  });
  it('rejects non-integers (the value quoted) and values out of range, naming the variable', () => {
    expect(() => int({ X: '12.5' }, 'X', 7, 1, 100)).toThrow('X="12.5": expected an integer in [1, 100]');
    expect(() => int({ X: '-5' }, 'X', 7, 1, 100)).toThrow('X="-5": expected an integer in [1, 100]');
    expect(() => int({ X: 'abc' }, 'X', 7, 0, 65535)).toThrow(ConfigError);
    expect(() => int({ X: '0' }, 'X', 7, 1, 256)).toThrow('X=0: expected an integer in [1, 256]');
    expect(() => int({ X: '101' }, 'X', 7, 1, 100)).toThrow('X=101: expected an integer in [1, 100]');
  });
});

describe('num', () => {
  it('the default when unset or blank; a finite number in [min, max]', () => {
    expect(num({}, 'F', 0.5, 0, 1)).toBe(0.5);
    expect(num({ F: ' ' }, 'F', 0.5, 0, 1)).toBe(0.5);
    expect(num({ F: '0.25' }, 'F', 0.5, 0, 1)).toBe(0.25);
  });
  it.each(['abc', '1.5', '-0.1', 'Infinity', 'NaN'])('F=%j is rejected', (raw) => {
    expect(() => num({ F: raw }, 'F', 0.5, 0, 1)).toThrow(ConfigError);
    expect(() => num({ F: raw }, 'F', 0.5, 0, 1)).toThrow(`F=${JSON.stringify(raw)}: expected a number in [0, 1]`);
  });
});

describe('oneOf', () => {
  it('the default when unset or empty; one of the allowed values, exactly', () => {
    const allowed = ['server', 'trainer', 'both'] as const;
    expect(oneOf({}, 'R', 'both', allowed)).toBe('both');
    expect(oneOf({ R: '' }, 'R', 'both', allowed)).toBe('both');
    expect(oneOf({ R: 'trainer' }, 'R', 'both', allowed)).toBe('trainer');
    expect(() => oneOf({ R: 'Trainer' }, 'R', 'both', allowed)).toThrow('R="Trainer": expected one of server, trainer, both');
    expect(() => oneOf({ R: 'worker' }, 'R', 'both', allowed)).toThrow(ConfigError);
  });
});

describe('parseTrainWorkers', () => {
  it('LAMER_TRAIN_WORKERS: 0 (every core) unless set, an integer in [0, 256]', () => {
    expect(parseTrainWorkers({})).toBe(0);
    expect(parseTrainWorkers({ LAMER_TRAIN_WORKERS: '4' })).toBe(4);
    expect(() => parseTrainWorkers({ LAMER_TRAIN_WORKERS: '257' })).toThrow('LAMER_TRAIN_WORKERS=257: expected an integer in [0, 256]');
  });
});

describe('ConfigError', () => {
  it('is an Error named ConfigError', () => {
    const e = new ConfigError('X=1: bad');
    expect(e).toBeInstanceOf(Error);
    expect(e.name).toBe('ConfigError');
    expect(e.message).toBe('X=1: bad');
  });
});
