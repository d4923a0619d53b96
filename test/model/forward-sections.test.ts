/**
 * The batcher's forward sections (src/model/forward-sections.ts): a group's rows planned into
 * sections within the token bound, padded or packed, a long row split into near-equal parts; the
 * event-loop turns after a section; the bound a time target sets. Pure functions, no model; the
 * batcher running them is tested in test/model/batcher.test.ts.
 */
import { describe, expect, it } from 'vitest';
import {
  MAX_YIELD_TURNS, MIN_TIMED_SECTION_TOKENS, YIELD_TURN_MS, planSections, timedSectionBound, yieldTurnsAfter,
} from '../../src/model/forward-sections.js';

describe('planSections', () => {
  it('packs whole rows in order while rows x the longest stays within the bound', () => {
    expect(planSections([3, 3, 3, 3], 8)).toEqual([
      [{ row: 0, from: 0, to: 3 }, { row: 1, from: 0, to: 3 }],
      [{ row: 2, from: 0, to: 3 }, { row: 3, from: 0, to: 3 }],
    ]);
    // a longer row raises the padded width of the section it joins
    expect(planSections([1, 1, 4, 1], 8).map((s) => s.map((p) => p.row))).toEqual([[0, 1], [2, 3]]);
    expect(planSections([1, 1, 1], 100)).toEqual([[{ row: 0, from: 0, to: 1 }, { row: 1, from: 0, to: 1 }, { row: 2, from: 0, to: 1 }]]);
  });

  it('splits a row longer than the bound into near-equal parts that run alone, in order', () => {
    expect(planSections([2, 10, 2], 4)).toEqual([
      [{ row: 0, from: 0, to: 2 }],
      [{ row: 1, from: 0, to: 3 }],
      [{ row: 1, from: 3, to: 6 }],
      [{ row: 1, from: 6, to: 10 }],
      [{ row: 2, from: 0, to: 2 }],
    ]);
    expect(planSections([5], 1)).toHaveLength(5);
  });

  it('every section stays within the bound and covers every token once (property)', () => {
    for (let seed = 1; seed < 200; seed++) {
      const lens = Array.from({ length: 1 + (seed % 9) }, (_, i) => 1 + ((seed * 7 + i * 13) % 40));
      const bound = 1 + ((seed * 5) % 50);
      const sections = planSections(lens, bound);
      const covered = lens.map(() => 0);
      for (const s of sections) {
        expect(s.length * Math.max(...s.map((p) => p.to - p.from))).toBeLessThanOrEqual(bound);
        for (const p of s) {
          expect(p.from).toBe(covered[p.row]);
          covered[p.row] = p.to;
        }
      }
      expect(covered).toEqual(lens);
    }
  });

  it('with packed rows, counts a section as the sum of its rows\' tokens (property: within the bound, every token once)', () => {
    expect(planSections([3, 3, 3, 3], 8, true).map((s) => s.map((p) => p.row))).toEqual([[0, 1], [2, 3]]);
    // a long row no longer widens the others: 1 + 1 + 4 + 1 tokens fit a bound of 8
    expect(planSections([1, 1, 4, 1], 8, true).map((s) => s.map((p) => p.row))).toEqual([[0, 1, 2, 3]]);
    expect(planSections([2, 10, 2], 4, true)).toEqual(planSections([2, 10, 2], 4));
    for (let seed = 1; seed < 200; seed++) {
      const lens = Array.from({ length: 1 + (seed % 9) }, (_, i) => 1 + ((seed * 7 + i * 13) % 40));
      const bound = 1 + ((seed * 5) % 50);
      const covered = lens.map(() => 0);
      for (const s of planSections(lens, bound, true)) {
        expect(s.reduce((n, p) => n + p.to - p.from, 0)).toBeLessThanOrEqual(bound);
        for (const p of s) {
          expect(p.from).toBe(covered[p.row]);
          covered[p.row] = p.to;
        }
      }
      expect(covered).toEqual(lens);
    }
  });

  it('refuses a bound below 1 and a row without tokens', () => {
    expect(() => planSections([3], 0)).toThrow('maxTokens must be >= 1, got 0');
    expect(() => planSections([3, 0], 4)).toThrow('row 1 has 0 new tokens; a row needs at least one');
  });
});

describe('turns and bounds between sections', () => {
  it('gives the event loop one turn after a short section and more after a long one, up to a cap', () => {
    expect(yieldTurnsAfter(0)).toBe(1);
    expect(yieldTurnsAfter(YIELD_TURN_MS - 0.1)).toBe(1);
    expect(yieldTurnsAfter(3 * YIELD_TURN_MS)).toBe(4);
    expect(yieldTurnsAfter(1e9)).toBe(MAX_YIELD_TURNS);
  });

  it('a time target bounds a section by the running cost per token, between a floor and the token bound', () => {
    expect(timedSectionBound(null, 40, 512)).toBe(512); // nothing timed yet
    expect(timedSectionBound(0.5, 0, 512)).toBe(512); // no target
    expect(timedSectionBound(0.25, 40, 512)).toBe(160);
    expect(timedSectionBound(0.01, 40, 512)).toBe(512);
    expect(timedSectionBound(10, 40, 512)).toBe(MIN_TIMED_SECTION_TOKENS);
    expect(timedSectionBound(10, 40, 16)).toBe(16); // the floor never exceeds the token bound
  });
});
