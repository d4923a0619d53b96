/**
 * The promotion gate's rules (src/shared/promotion-gate.ts), shared by the job API, the job runner
 * and LAMER_TRAIN_GATE_*: the field at fault and why, defaults, the full env name, and whether
 * training task ids fall among the gate's tasks.
 */
import { describe, expect, it } from 'vitest';
import { canonicalEnvName, taskSeedOf } from '../../src/shared/env-names.js';
import { gateOverlap, gateProblem, metricK, resolveGate } from '../../src/shared/promotion-gate.js';

describe('gateProblem', () => {
  it.each([
    [{ env: 'chess', tasks: 1 }, 'env', /unknown env 'chess'/],
    [{ env: 'minesweeper-3x3-9', tasks: 1 }, 'env', /at most rows\*cols-2 = 7 mines/],
    [{ env: 'sokoban-4x4-1', tasks: 1 }, 'env', /rows and cols must be in 5..10/],
    [{ env: 'minesweeper', tasks: 0 }, 'tasks', /\[1, 10000\]/],
    [{ env: 'minesweeper', tasks: 1.5 }, 'tasks', /integer/],
    [{ env: 'minesweeper', tasks: 1, attempts: 0 }, 'attempts', /\[1, 10\]/],
    [{ env: 'minesweeper', tasks: 1, seedStart: 999_999_999 }, 'seedStart', /held-out seed/],
    [{ env: 'minesweeper', tasks: 2, seedStart: 2 ** 32 - 1 }, 'seedStart', /runs past the last seed/],
    [{ env: 'minesweeper', tasks: 1, metric: 'pass@0' }, 'metric', /pass@k/],
    [{ env: 'minesweeper', tasks: 1, attempts: 2, metric: 'pass@3' }, 'metric', /pass@3 needs at least 3 attempts; the gate plays 2/],
    [{ env: 'minesweeper', tasks: 1, margin: -1.5 }, 'margin', /\[-1, 1\]/],
    [{ env: 'minesweeper', tasks: 1, margin: Number.NaN }, 'margin', /\[-1, 1\]/],
    [{ env: 'minesweeper', tasks: 1, decision: 'median' as never }, 'decision', /mean, lower-bound/],
    [{ env: 'minesweeper', tasks: 1, concurrency: 65 }, 'concurrency', /\[1, 64\]/],
    [{ env: 'minesweeper', tasks: 1, sampling: { temperature: 11, topP: 1, topK: 0 } }, 'sampling', /temperature/],
  ])('%j: %s', (gate, field, message) => {
    const p = gateProblem(gate);
    expect(p?.field).toBe(field);
    expect(p?.message).toMatch(message);
    expect(() => resolveGate(gate)).toThrow(RangeError);
  });

  it('accepts the bounds: 10,000 tasks ending at the last seed, margins -1 and 1', () => {
    expect(gateProblem({ env: 'sokoban-6x6-2-m5-10', tasks: 10_000, seedStart: 2 ** 32 - 10_000, margin: 1 })).toBeNull();
    expect(gateProblem({ env: 'minesweeper', tasks: 1, margin: -1, attempts: 10, metric: 'pass@10' })).toBeNull();
  });
});

describe('resolveGate', () => {
  it('fills the defaults and names the env in full', () => {
    expect(resolveGate({ env: 'minesweeper', tasks: 16 })).toEqual({
      env: 'minesweeper-6x6-3', tasks: 16, attempts: 3, seedStart: 1_000_000_000, metric: 'pass@3', margin: 0, decision: 'mean', concurrency: 4,
      availableActions: true, sampling: { temperature: 0.7, topP: 0.8, topK: 20 },
    });
    expect(resolveGate({ env: 'sokoban', tasks: 1, attempts: 1 })).toMatchObject({ env: 'sokoban-6x6-2', metric: 'pass@1' });
    expect(metricK('pass@12')).toBe(12);
    expect(metricK('pass@')).toBeNull();
  });
});

describe('gateOverlap', () => {
  const spec = resolveGate({ env: 'minesweeper', tasks: 10, seedStart: 1_000_000_100 });
  it('finds a training task of the same env with a seed in the range, and nothing else', () => {
    expect(gateOverlap(spec, ['minesweeper-6x6-3:seed=1000000099', 'sokoban-6x6-2:seed=1000000100', 'doors:seed=1000000105', 'free text'])).toBeNull();
    expect(gateOverlap(spec, ['minesweeper-6x6-3:seed=5', 'minesweeper-6x6-3:seed=1000000109'])).toBe('minesweeper-6x6-3:seed=1000000109');
    expect(gateOverlap(spec, ['minesweeper-6x6-3:seed=1000000110'])).toBeNull();
  });
  it('reads task ids and full env names as the envs write them', () => {
    expect(taskSeedOf('minesweeper-6x6-3:seed=42')).toEqual({ envName: 'minesweeper-6x6-3', seed: 42 });
    expect(taskSeedOf('minesweeper-6x6-3:seed=4294967296')).toBeNull();
    expect(taskSeedOf('T')).toBeNull();
    expect(canonicalEnvName('sokoban-6x6-2-m5-21')).toBe('sokoban-6x6-2');
  });
});
