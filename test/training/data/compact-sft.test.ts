/** SFT examples of the compact policy (src/training/data/compact-sft.ts) from a hand-made trial. */
import { describe, expect, it } from 'vitest';
import { compactExamples, failureOf, reflectionClass, takeOneKind, targetPath } from '../../../src/training/data/compact-sft.js';
import { Rng } from '../../../src/envs/rng.js';
import { BOS, EOS } from '../../../src/model/tokenizer.js';
import { BYTE_TOKENIZER, GameTokenizer } from '../../../src/model/tokenizers.js';
import { gameVocabulary } from '../../../src/envs/vocab.js';
import { gridText } from '../../../src/envs/grid.js';
import { provableMineCells, type CompactTrial } from '../../../src/envs/compact-data.js';
import type { CompactPromptFormat } from '../../../src/model/prompt-format.js';

const tok = new GameTokenizer(gameVocabulary());
const cell = (r: number, c: number) => 260 + 9 * r + c;
const TAG = 367; // [minesweeper]
const ACT = 369; // "\n> "
const REFLECT = 370; // "\n! "
const MEMORY = 371; // "\nm "
const WAS_A_MINE = 373; // " was a mine."
const format: CompactPromptFormat = { name: 'compact', envTags: ['minesweeper', 'sokoban'], historySteps: 0 };
const opts = { tokenizer: tok, format, blockSize: 128, actionReserve: 8, reflectionReserve: 32 };

const B0 = gridText(['??', '?1'], 1);
const BF = gridText(['?*', '?1'], 1);
const WON = gridText(['1*', '11'], 1);
// "\n  12" (no 2-column header piece: bytes) then the rows with their label pieces
const board0 = [10, 32, 32, 49, 50, 347, 63, 63, 348, 63, 49];
const boardF = [10, 32, 32, 49, 50, 347, 63, 42, 348, 63, 49];
const trial: CompactTrial = {
  env: 'minesweeper', envName: 'minesweeper-2x2-1', seed: 1, instructions: 'RULES',
  attempts: [
    { steps: [{ observation: B0, action: '(1, 2)', choices: [['(1, 2)', '(2, 1)']], target: '(2, 1)' }], finalObservation: BF, success: false, reflection: '(1, 2) was a mine.' },
    { steps: [{ observation: B0, action: '(2, 1)', choices: [['(2, 1)']], target: '(2, 1)' }], finalObservation: WON, success: true, reflection: null },
  ],
};

describe('compactExamples', () => {
  it('trains each decision\'s served prompt on the solver\'s set, then EOS; each reflection one-hot', () => {
    const ex = compactExamples(trial, opts);
    expect(ex.map((e) => e.kind)).toEqual(['action', 'reflection', 'action']);
    const [a0, r0, a1] = ex;
    expect(a0).toEqual({
      kind: 'action',
      ids: [BOS, TAG, ...board0, ACT, cell(2, 1)],
      at: [13, 14],
      targets: [[cell(1, 2), cell(2, 1)], [EOS]],
    });
    // the reflection prompt: the acting head, the last step with the action played, the final board, the cue
    const reflPrompt = [BOS, TAG, ...board0, ACT, cell(1, 2), ...boardF, REFLECT];
    expect(r0).toEqual({
      kind: 'reflection',
      ids: [...reflPrompt, cell(1, 2), WAS_A_MINE],
      at: [reflPrompt.length - 1, reflPrompt.length, reflPrompt.length + 1],
      targets: [[cell(1, 2)], [WAS_A_MINE], [EOS]],
      failure: 'C was a mine.',
    });
    // the next attempt reads the reflection as a memory line
    const prompt1 = [BOS, TAG, MEMORY, cell(1, 2), WAS_A_MINE, ...board0, ACT];
    // and the mine it names is avoided at the answer's first position
    expect(a1).toEqual({ kind: 'action', ids: [...prompt1, cell(2, 1)], at: [prompt1.length - 1, prompt1.length], targets: [[cell(2, 1)], [EOS]], namedMines: [cell(1, 2)] });
    expect(tok.decode(a1!.ids)).toBe(`[minesweeper]\nm (1, 2) was a mine.\n${B0}\n> (2, 1)`);
  });

  it('avoids only cells that a reflection names as a mine, and only in later attempts', () => {
    const ranOut: CompactTrial = { ...trial, attempts: [{ ...trial.attempts[0]!, reflection: 'turns ran out.' }, trial.attempts[1]!] };
    expect(compactExamples(ranOut, opts).some((e) => 'namedMines' in e)).toBe(false);
    // two mines named over two failed attempts: both avoided in the third
    const A = (reflection: string | null): CompactTrial['attempts'][number] => ({ steps: [{ observation: B0, action: '(2, 1)', choices: [['(2, 1)']], target: '(2, 1)' }], finalObservation: BF, success: false, reflection });
    const three: CompactTrial = { ...trial, attempts: [A('(1, 2) was a mine.'), A('(1, 1) was a mine.'), A(null)] };
    expect(compactExamples(three, opts).filter((e) => e.kind === 'action').map((e) => e.namedMines)).toEqual([undefined, [cell(1, 2)], [cell(1, 2), cell(1, 1)]]);
  });

  it('gives a Sokoban step\'s invalid moves as tokens of each answer position', () => {
    const obs = gridText(['#####', '#P_O#', '#####'], 0);
    const t: CompactTrial = {
      env: 'sokoban', envName: 'sokoban-3x5-0', seed: 1, instructions: 'RULES',
      attempts: [{ steps: [{ observation: obs, action: 'right', choices: [['right'], [', '], ['right']], target: 'right, right', invalidMoves: [['up', 'left'], [], ['down']] }], finalObservation: obs, success: false, reflection: null }],
    };
    const [ex] = compactExamples(t, opts);
    expect(ex!.invalidMoves).toEqual([tok.encode('up').concat(tok.encode('left')), [], tok.encode('down')]);
    expect(ex!.invalidMoves!.flat().every((v) => v >= 260)).toBe(true);
  });

  it('gives a Sokoban step\'s dead-push moves as tokens of each answer position, less that position\'s targets', () => {
    const obs = gridText(['#####', '#P_O#', '#####'], 0);
    const step = { observation: obs, action: 'right', choices: [['right'], [', '], ['right']], target: 'right, right' };
    const t = (deadMoves?: string[][]): CompactTrial => ({
      env: 'sokoban', envName: 'sokoban-3x5-0', seed: 1, instructions: 'RULES',
      attempts: [{ steps: [{ ...step, ...(deadMoves ? { deadMoves } : {}) }], finalObservation: obs, success: false, reflection: null }],
    });
    expect(compactExamples(t([['up', 'right'], [], ['down']]), opts)[0]!.deadMoves).toEqual([tok.encode('up'), [], tok.encode('down')]);
    // nothing left once the targets are removed: no field, the example of a step without labels
    expect(compactExamples(t([['right'], [], []]), opts)[0]).toEqual(compactExamples(t(), opts)[0]);
    expect('deadMoves' in compactExamples(t(), opts)[0]!).toBe(false);
  });

  it('gives a step\'s invalid answers as tokens of the first position', () => {
    const t: CompactTrial = { ...trial, attempts: [{ ...trial.attempts[1]!, steps: [{ ...trial.attempts[1]!.steps[0]!, invalid: ['(2, 2)'] }] }] };
    expect(compactExamples(t, opts)[0]).toMatchObject({ kind: 'action', invalid: [cell(2, 2)] });
    expect('invalid' in compactExamples(trial, opts)[0]!).toBe(false);
  });

  it('gives the cells a board proves to be mines as tokens of the first position, less the target set', () => {
    // 1-2-1 under three hidden cells, two mines: (1, 1) and (1, 3) are mines, (1, 2) is safe
    const board = gridText(['???', '121', '...'], 1);
    const proved = provableMineCells(board, 2);
    expect(proved).toEqual(['(1, 1)', '(1, 3)']);
    const step = (choices: string[], provableMines?: string[]): CompactTrial => ({
      env: 'minesweeper', envName: 'minesweeper-3x3-2', seed: 1, instructions: 'RULES',
      attempts: [{
        steps: [{
          observation: board, action: choices[0]!, choices: [choices], target: choices[0]!,
          ...(provableMines ? { provableMines } : {}),
        }],
        finalObservation: board, success: false, reflection: null,
      }],
    });
    const cases: Array<[string[], string[] | undefined, number[] | undefined]> = [
      [['(1, 2)'], proved, [cell(1, 1), cell(1, 3)]],
      // a cell in the target set is never avoided
      [['(1, 2)', '(1, 3)'], proved, [cell(1, 1)]],
      [['(1, 1)', '(1, 3)'], proved, undefined],
      [['(1, 2)'], undefined, undefined],
    ];
    for (const [choices, provableMines, ids] of cases) {
      const [ex] = compactExamples(step(choices, provableMines), opts);
      expect(ex!.kind).toBe('action');
      expect(ex!.provableMines).toEqual(ids);
      expect('provableMines' in ex!).toBe(ids !== undefined);
    }
  });

  it('renders as the server does for the same format and tokenizer, and skips reflections on request', () => {
    expect(compactExamples(trial, { ...opts, reflections: false }).map((e) => e.kind)).toEqual(['action', 'action']);
    // a step without a target (an unsolvable Sokoban position) is shown but not trained
    const noTarget: CompactTrial = { ...trial, attempts: [{ ...trial.attempts[0]!, steps: [{ ...trial.attempts[0]!.steps[0]!, choices: null, target: null }] }] };
    expect(compactExamples(noTarget, opts).map((e) => e.kind)).toEqual(['reflection']);
    // an env the format does not name gets its instructions (bytes)
    const other = compactExamples({ ...trial, env: 'minesweeper' }, { ...opts, format: { ...format, envTags: ['sokoban'] } });
    expect(tok.decode(other[0]!.ids).startsWith('RULES\n')).toBe(true);
  });

  it('fits prompts to blockSize - reserve as the engine does', () => {
    const long: CompactTrial = { ...trial, instructions: 'x'.repeat(200), attempts: [trial.attempts[1]!] };
    const ex = compactExamples(long, { ...opts, format: { ...format, envTags: [] }, blockSize: 64, actionReserve: 8 });
    // the prompt is cut to 56 tokens; the answer follows it
    expect(ex[0]!.ids.length).toBe(57);
    expect(ex[0]!.at).toEqual([55, 56]);
  });
});

describe('targetPath', () => {
  it('splits a Sokoban answer into its pieces and sets', () => {
    const up = 341, down = 342, right = 344, comma = 345;
    expect(targetPath(tok, [['down', 'right'], [', '], ['right']], 'right, right')).toEqual({ path: [right, comma, right], sets: [[down, right], [comma], [right]] });
    expect(targetPath(tok, [['up', 'up']], 'up')).toEqual({ path: [up], sets: [[up]] });
  });

  it('refuses an answer that does not follow its choices, and pieces of several tokens', () => {
    expect(() => targetPath(tok, [['up']], 'down')).toThrow(/"down" does not follow its choices/);
    expect(() => targetPath(tok, [['up']], 'up, up')).toThrow(/has text beyond its choices/);
    expect(() => targetPath(tok, [['(9, 9)']], '(9, 9)')).toThrow(/target piece "\(9, 9\)" is 5 tokens; soft targets need one-token pieces/);
    expect(() => targetPath(BYTE_TOKENIZER, [['up']], 'up')).toThrow(/is 2 tokens/);
  });
});

describe('takeOneKind', () => {
  const pool = (acts: number, refls: number) => [
    ...Array.from({ length: acts }, (_, i) => ({ kind: 'action', id: `a${i}` })),
    ...Array.from({ length: refls }, (_, i) => ({ kind: 'reflection', id: `r${i}` })),
  ];

  it('removes n examples of one kind, without repeats, leaving the rest in the pool', () => {
    const rng = new Rng(3);
    for (let trial = 0; trial < 50; trial++) {
      const p = pool(40, 20);
      const got = takeOneKind(p, 8, rng);
      expect(got).toHaveLength(8);
      expect(new Set(got.map((x) => x.kind)).size).toBe(1);
      expect(new Set(got.map((x) => x.id)).size).toBe(8);
      expect(p).toHaveLength(52);
      for (const x of got) expect(p).not.toContain(x);
    }
  });

  it('draws a batch\'s kind with its share of the pool (1 in 4 reflection batches here)', () => {
    const rng = new Rng(7);
    let refl = 0;
    for (let t = 0; t < 2000; t++) if (takeOneKind(pool(30, 10), 4, rng)[0]!.kind === 'reflection') refl++;
    // binomial(2000, 0.25): mean 500, sd 19.4
    expect(Math.abs(refl - 500)).toBeLessThan(80);
  });

  it('gives fewer when the kind runs out, and nothing for an empty pool or n < 1', () => {
    const p = [{ kind: 'reflection', id: 'r' }, { kind: 'action', id: 'a0' }, { kind: 'action', id: 'a1' }];
    const rng = { int: (k: number) => (k === 3 ? 0 : 0) };
    expect(takeOneKind(p, 5, rng).map((x) => x.id)).toEqual(['r']);
    expect(takeOneKind(p, 5, rng).map((x) => x.id).sort()).toEqual(['a0', 'a1']);
    expect(takeOneKind([], 5, rng)).toEqual([]);
    expect(takeOneKind([{ kind: 'action' }], 0, rng)).toEqual([]);
  });

  it('with a stratum, draws each example of a stratified batch from a uniformly drawn stratum', () => {
    // 90 'mine' and 10 'turns' reflections: balanced, a batch of 10 holds about 5 of each
    const refl = (n: number, failure: string) => Array.from({ length: n }, (_, i) => ({ kind: 'reflection', failure, id: `${failure}${i}` }));
    const rng = new Rng(11);
    let turns = 0, drawn = 0;
    for (let t = 0; t < 200; t++) {
      const p = [...refl(90, 'mine'), ...refl(10, 'turns')];
      const got = takeOneKind(p, 10, rng, failureOf);
      expect(new Set(got.map((x) => x.id)).size).toBe(got.length);
      expect(p).toHaveLength(100 - got.length);
      for (const x of got) expect(p).not.toContain(x);
      turns += got.filter((x) => x.failure === 'turns').length;
      drawn += got.length;
    }
    // each draw picks 'turns' with probability 1/2 while both strata have examples left (10 each time here)
    expect(turns / drawn).toBeGreaterThan(0.4);
    expect(turns / drawn).toBeLessThan(0.6);
  });

  it('with a stratum, leaves unstratified batches (acting examples) as without one, and runs a stratum dry', () => {
    const p = [{ kind: 'action', id: 'a0' }, { kind: 'reflection', failure: 'x', id: 'r0' }, { kind: 'reflection', failure: 'y', id: 'r1' }];
    const first = { int: () => 0 }; // always the first candidate
    expect(takeOneKind(p, 4, first, failureOf).map((x) => x.id)).toEqual(['a0']);
    // both reflections, then nothing left: fewer than n
    expect(takeOneKind(p, 4, first, failureOf).map((x) => x.id).sort()).toEqual(['r0', 'r1']);
    expect(p).toEqual([]);
  });
});

describe('reflectionClass', () => {
  it.each([
    ['(2, 3) was a mine.', 'C was a mine.'],
    ['turns ran out.', 'turns ran out.'],
    ['box (1, 4) stuck in a corner.', 'box C stuck in a corner.'],
    ['boxes stuck. dead end.', 'boxes stuck. dead end.'],
    // one class for every dead push, whatever its cell and direction
    ['box (2, 3) right dead end.', 'box C M dead end.'],
    ['box (0, 1) up dead end.', 'box C M dead end.'],
  ])('%s -> %s', (text, cls) => expect(reflectionClass(text)).toBe(cls));

  it('labels the reflection examples of a trial, and failureOf reads it (null for acting examples)', () => {
    expect(failureOf({ kind: 'reflection', failure: 'C was a mine.' })).toBe('C was a mine.');
    expect(failureOf({ kind: 'action', failure: 'C was a mine.' })).toBeNull();
  });
});

