/**
 * Demonstration trials of the compact policy (src/envs/compact-data.ts): factual reflections,
 * played trials and their labels, failures on purpose, and the Sokoban dead-push memory in trials,
 * targets and contrast pairs. The soft targets of one decision, the MineSweeper contrasts and the
 * board symmetries have their own files beside this one (compact-targets, compact-contrast,
 * compact-symmetry).
 */
import { describe, expect, it } from 'vitest';
import {
  mineSweeperChoices, mineSweeperCompactReflection, noisyPolicy, playCompactTrial, provableMineCells, randomAction,
  sokobanChoices, sokobanCompactReflection, sokobanContrastPair, solverPolicy, symmetry, transformTrial, type CompactTrial,
} from '../../src/envs/compact-data.js';
import { parseDeadPush, sokobanFatalPush } from '../../src/envs/sokoban-pushes.js';
import { gridText, parseGridRows } from '../../src/envs/grid.js';
import { Rng } from '../../src/envs/rng.js';
import { applyMove, parseMoves, parseSokoban, solveSokoban } from '../../src/envs/sokoban.js';
import { parseCellAction } from '../../src/envs/minesweeper.js';
import { makeEnv } from '../../src/envs/index.js';
import { gameVocabulary } from '../../src/envs/vocab.js';
import { GameTokenizer } from '../../src/model/tokenizers.js';
import { solveSokobanAvoiding } from '../../src/envs/solvers/sokoban-solver.js';
import { namedDeadPushes, type SokobanPush } from '../../src/envs/sokoban-pushes.js';
import { compactExamples } from '../../src/training/data/compact-sft.js';
import { GAME_ENV_TAGS } from '../../src/envs/vocab.js';
import { createHash } from 'node:crypto';

const ms = (rows: string[]) => gridText(rows, 1);
const sk = (rows: string[]) => gridText(rows, 0);

describe('compact reflections', () => {
  const final = ms(['??*', '?1?']);
  it('name the mine clicked, else say the turns ran out', () => {
    expect(mineSweeperCompactReflection('(1, 3)', final, true)).toBe('(1, 3) was a mine.');
    expect(mineSweeperCompactReflection('I click ( 1 ,3 )', final, true)).toBe('(1, 3) was a mine.');
    // an action that does not parse: the '*' on the final board names it
    expect(mineSweeperCompactReflection('boom', final, true)).toBe('(1, 3) was a mine.');
    expect(mineSweeperCompactReflection('(1, 1)', ms(['.?', '??']), false)).toBe('turns ran out.');
  });

  it('name a cornered box by its cell, or a dead end, or the turn cap', () => {
    expect(sokobanCompactReflection(sk(['#####', '#X_P#', '#O__#', '#####']))).toBe('box (1, 1) stuck in a corner.');
    // two boxes side by side against the top wall: stuck, neither in a corner
    expect(sokobanCompactReflection(sk(['######', '#_XX_#', '#_OOP#', '######']))).toBe('boxes stuck. dead end.');
    expect(sokobanCompactReflection(sk(['######', '#PX_O#', '######']))).toBe('turns ran out.');
  });

  it('name the fatal push when one is given, in the dead-push form', () => {
    // the box pushed up from (2, 2) against the top wall: dead, not cornered
    const after = sk(['######', '#_X__#', '#_P__#', '#__O_#', '#____#', '######']);
    expect(sokobanCompactReflection(after, { row: 2, col: 2, move: 'up' })).toBe('box (2, 2) up dead end.');
    // a push into a corner is named by the push; without it, by the cornered box
    const cornerAfter = sk(['#####', '#XP_#', '#O__#', '#####']);
    expect(sokobanCompactReflection(cornerAfter, { row: 1, col: 2, move: 'left' })).toBe('box (1, 2) left dead end.');
    expect(sokobanCompactReflection(cornerAfter)).toBe('box (1, 1) stuck in a corner.');
  });

  it('follow every mine clicked in played trials, and later targets avoid the mines named', () => {
    let mines = 0;
    for (let seed = 0; seed < 30; seed++) {
      const t = playCompactTrial({ envName: 'minesweeper-4x4-2', seed, maxAttempts: 3, policy: noisyPolicy(0.7), rngSeed: seed + 100 });
      const named = new Set<string>();
      t.attempts.forEach((a, n) => {
        for (const s of a.steps) if (n > 0) for (const c of s.choices![0]!) expect(named.has(c)).toBe(false);
        const last = a.steps[a.steps.length - 1]!;
        const hit = !a.success && a.finalObservation.includes('*');
        if (n === t.attempts.length - 1) expect(a.reflection).toBeNull();
        else {
          expect(a.success).toBe(false);
          if (hit) {
            mines++;
            expect(a.reflection).toBe(`${last.action} was a mine.`);
            const cell = parseCellAction(last.action)!;
            expect(parseGridRows(a.finalObservation)[cell.row - 1]![cell.col - 1]).toBe('*');
            named.add(last.action);
          } else expect(a.reflection).toBe('turns ran out.');
        }
      });
    }
    expect(mines).toBeGreaterThan(5);
  });
});

describe('playCompactTrial', () => {
  it('marks exactly the MineSweeper steps where a mine the memory names would be among the safest cells without it', () => {
    let marked = 0, unmarked = 0;
    for (let seed = 0; seed < 40; seed++) {
      const t = playCompactTrial({ envName: 'minesweeper-4x4-2', seed, maxAttempts: 3, policy: noisyPolicy(0.7), rngSeed: seed + 100 });
      const known = new Set<number>();
      t.attempts.forEach((a) => {
        for (const s of a.steps) {
          const without = mineSweeperChoices(s.observation, 2, new Set());
          const expected = [...known].some((i) => without.includes(`(${Math.floor(i / 4) + 1}, ${(i % 4) + 1})`));
          expect(s.memoryMatters === true).toBe(expected);
          if (expected) marked++;
          else if (known.size > 0) unmarked++;
        }
        // symmetries keep the mark on the same steps
        if (a.reflection?.endsWith('was a mine.')) {
          const c = parseCellAction(a.reflection)!;
          known.add((c.row - 1) * 4 + (c.col - 1));
        }
      });
      const m = transformTrial(t, symmetry(seed % 8));
      m.attempts.forEach((a, n) => a.steps.forEach((s, j) => expect(s.memoryMatters).toBe(t.attempts[n]!.steps[j]!.memoryMatters)));
    }
    // the first click after a named mine always counts (every cell is equally safe on a fresh board)
    expect(marked).toBeGreaterThan(5);
    expect(unmarked).toBeGreaterThan(0);
  });

  it('is deterministic, and the solver alone plays its own targets', () => {
    const o = { envName: 'minesweeper-5x5-3', seed: 7, maxAttempts: 3, rngSeed: 9 };
    expect(playCompactTrial({ ...o, policy: noisyPolicy(0.3) })).toEqual(playCompactTrial({ ...o, policy: noisyPolicy(0.3) }));
    const t = playCompactTrial({ ...o, policy: solverPolicy });
    expect(t).toMatchObject({ env: 'minesweeper', envName: 'minesweeper-5x5-3', seed: 7 });
    for (const a of t.attempts) for (const s of a.steps) {
      expect(s.action).toBe(s.target);
      expect(s.choices![0]).toContain(s.target);
    }
  });

  it('records on each MineSweeper step the cells its board proves to be mines, each a mine of the env\'s board', () => {
    let proved = 0;
    for (let seed = 0; seed < 8; seed++) {
      const t = playCompactTrial({ envName: 'minesweeper-5x5-3', seed, maxAttempts: 3, policy: noisyPolicy(0.3), rngSeed: seed });
      for (const a of t.attempts) a.steps.forEach((s, j) => {
        expect(s.provableMines ?? []).toEqual(provableMineCells(s.observation, 3));
        for (const cell of s.provableMines ?? []) {
          expect(s.choices![0]).not.toContain(cell);
          // replay the attempt to this step, then click the cell: the game ends on a mine
          const env = makeEnv('minesweeper-5x5-3');
          env.reset(seed);
          for (const p of a.steps.slice(0, j)) env.step(p.action);
          expect(env.step(cell)).toMatchObject({ done: true, success: false, invalidAction: false });
          proved++;
        }
      });
    }
    expect(proved).toBeGreaterThan(0);
    const sokoban = playCompactTrial({ envName: 'sokoban-5x5-1', seed: 3, maxAttempts: 2, policy: noisyPolicy(0.3), rngSeed: 1 });
    expect(sokoban.attempts.flatMap((a) => a.steps).some((s) => 'provableMines' in s)).toBe(false);
  });

  it('flags exactly the steps whose answer the env called an invalid action', () => {
    for (const [envName, seed] of [['minesweeper-5x5-3', 2], ['sokoban-5x5-1', 3]] as const) {
      // a policy that repeats its first answer: MineSweeper clicks a revealed cell, Sokoban walks into a wall
      let first: string | null = null;
      const t = playCompactTrial({ envName, seed, maxAttempts: 1, maxSteps: 6, rngSeed: 1, policy: (c) => (first ??= c.target ?? 'up') });
      const env = makeEnv(envName);
      env.reset(seed);
      let flagged = 0;
      for (const s of t.attempts[0]!.steps) {
        const r = env.step(s.action);
        expect(s.invalidAction === true).toBe(r.invalidAction === true);
        if (r.invalidAction) flagged++;
      }
      expect(flagged).toBeGreaterThan(0);
    }
  });

  it('records Sokoban targets whose pieces follow their choices', () => {
    const t = playCompactTrial({ envName: 'sokoban-5x5-1', seed: 3, maxAttempts: 3, policy: noisyPolicy(0.5), rngSeed: 4 });
    for (const a of t.attempts) for (const s of a.steps) {
      if (s.choices === null) continue;
      expect(s.target!.split(', ').join(', ')).toBe(s.target);
      parseMoves(s.target!).forEach((m, j) => expect(s.choices![2 * j]).toContain(m));
    }
    expect(randomAction('sokoban', '', new Rng(1))).toMatch(/^(up|down|left|right), (up|down|left|right), (up|down|left|right)$/);
  });
});

describe('Sokoban dead-push memory in trials and targets', () => {
  // one box on (2, 2), its target on (3, 3); the player below the box. Pushing the box up puts it
  // on row 1, against the top wall, away from the target's row: a dead end, not a corner.
  const before = sk(['######', '#____#', '#_X__#', '#_PO_#', '#____#', '######']);
  const after = sk(['######', '#_X__#', '#_P__#', '#__O_#', '#____#', '######']);
  const upDead = { row: 2, col: 2, move: 'up' as const };

  it('map under every board symmetry to the push that the mapped trial makes', () => {
    const t: CompactTrial = {
      env: 'sokoban', envName: 'sokoban-6x6-1', seed: 0, instructions: 'I',
      attempts: [{ steps: [{ observation: before, action: 'up', choices: null, target: null }], finalObservation: after, success: false, reflection: 'box (2, 2) up dead end.' }],
    };
    const seen = new Set<string>();
    for (let k = 0; k < 8; k++) {
      const a = transformTrial(t, symmetry(k)).attempts[0]!;
      const s = a.steps[0]!;
      expect(parseDeadPush(a.reflection!)).toEqual(sokobanFatalPush(s.observation, s.action, a.finalObservation));
      seen.add(a.reflection!);
    }
    // transpose: (2, 2) stays, up becomes left; flipping columns: (2, 3), up stays
    expect(transformTrial(t, symmetry(4)).attempts[0]!.reflection).toBe('box (2, 2) left dead end.');
    expect(transformTrial(t, symmetry(1)).attempts[0]!.reflection).toBe('box (2, 3) up dead end.');
    expect(seen.size).toBe(8);
  });

  it('label the moves that would make a named push into a dead state, at each position of the target path', () => {
    // the shortest solution: left, up, right (the push), ...; only the first move could push up
    const c = sokobanChoices(before, new Rng(0), [upDead])!;
    expect(c.target).toBe('left, up, right');
    expect(c.deadMoves).toEqual([['up'], [], [], [], []]);
    // the draws do not depend on the memory
    expect(sokobanChoices(before, new Rng(0))).toEqual({ ...c, deadMoves: [[], [], [], [], []] });
    // a named push that does not kill the puzzle here is not labelled (pushing right solves it)
    const right = sk(['######', '#____#', '#PX__#', '#__O_#', '#____#', '######']);
    expect(sokobanChoices(right, new Rng(0), [{ row: 2, col: 2, move: 'right' }])!.deadMoves.flat()).toEqual([]);
    // a named push of another box cell or direction is not labelled
    expect(sokobanChoices(before, new Rng(0), [{ row: 2, col: 3, move: 'up' }, { row: 2, col: 2, move: 'down' }])!.deadMoves.flat()).toEqual([]);
    // the labelled moves are never among the choices
    expect(c.choices[0]).not.toContain('up');
  });

  it('played trials: push reflections and their labels in later attempts; off, the trials of before', () => {
    const golden = () => {
      const out: CompactTrial[] = [];
      for (const [envName, seed] of [['sokoban-6x6-2', 11], ['sokoban-5x5-1', 3], ['sokoban-6x6-1', 7], ['minesweeper-5x5-3', 2]] as const) {
        for (let r = 0; r < 4; r++) out.push(playCompactTrial({ envName, seed: seed + r, maxAttempts: 3, policy: noisyPolicy(0.9), rngSeed: r }));
      }
      return out;
    };
    // the sha256 of these trials as the code made them before push reflections existed
    expect(createHash('sha256').update(JSON.stringify(golden())).digest('hex')).toBe('f441ea1ff4e6c2e6a3de547b291865c8bc21d84d5d3a47175ce519729353041b');
    let labelled = 0;
    let pushes = 0;
    for (const [envName, seed] of [['sokoban-6x6-2', 11], ['sokoban-5x5-1', 3], ['sokoban-6x6-1', 7]] as const) for (let r = 0; r < 4; r++) {
      const t = playCompactTrial({ envName, seed: seed + r, maxAttempts: 3, policy: noisyPolicy(0.9), rngSeed: r, pushReflections: true });
      const named: Array<NonNullable<ReturnType<typeof parseDeadPush>>> = [];
      for (const a of t.attempts) {
        for (const s of a.steps) {
          expect(s.memoryMatters === true).toBe((s.deadMoves?.[0]?.length ?? 0) > 0);
          if (!s.deadMoves) continue;
          labelled++;
          expect(s.deadMoves).toHaveLength(s.choices!.length);
          // each labelled move at the first position makes a named push into a dead state
          for (const mv of s.deadMoves[0]!) {
            const st = parseSokoban(s.observation);
            const o = applyMove(st, mv as never);
            expect(named.some((p) => o.push!.from === p.row * st.cols + p.col && p.move === mv)).toBe(true);
            expect(solveSokoban(o.state)).toBeNull();
          }
        }
        if (a.reflection === null) continue;
        const last = a.steps[a.steps.length - 1]!;
        const p = parseDeadPush(a.reflection);
        if (p) {
          pushes++;
          expect(sokobanFatalPush(last.observation, last.action, a.finalObservation)).toEqual(p);
          named.push(p);
        } else expect(a.reflection).toBe('turns ran out.');
      }
    }
    expect(pushes).toBeGreaterThan(5);
    expect(labelled).toBeGreaterThan(5);
  });

  it('contrast pairs: where an answer makes a dead push, the same board with a memory line naming it', () => {
    const pair = sokobanContrastPair('sokoban-6x6-1', 5, before, 'up, up', new Rng(0))!;
    expect(pair.withMemory.attempts[0]!.reflection).toBe('box (2, 2) up dead end.');
    const m = pair.withMemory.attempts[1]!.steps[0]!;
    expect(m).toMatchObject({ observation: before, memoryMatters: true, deadMoves: [['up'], [], [], [], []], target: 'left, up, right' });
    const twin = pair.twin.attempts[0]!.steps[0]!;
    expect(pair.twin.attempts).toHaveLength(1);
    expect(twin.target).toBe(m.target);
    expect('deadMoves' in twin || 'memoryMatters' in twin).toBe(false);
    // a dead push (the box pushed left, against the left wall) from a state the target path does
    // not reach: nothing to label
    expect(sokobanFatalPush(before, 'right, up, left', sk(['######', '#____#', '#XP__#', '#__O_#', '#____#', '######']))).toEqual({ row: 2, col: 2, move: 'left' });
    expect(sokobanContrastPair('sokoban-6x6-1', 5, before, 'right, up, left', new Rng(0))).toBeNull();
    // answers without a dead push
    expect(sokobanContrastPair('sokoban-6x6-1', 5, before, 'left, up, right', new Rng(0))).toBeNull();
    expect(sokobanContrastPair('sokoban-6x6-1', 5, before, 'down, down', new Rng(0))).toBeNull();
  });
});

describe('Sokoban push-memory targets', () => {
  // one box on (3, 3), its target two cells right: the plain solution pushes it right twice
  const open = sk(['#######', '#_____#', '#_____#', '#_PX_O#', '#_____#', '#_____#', '#######']);
  const rightAt33: SokobanPush = { row: 3, col: 3, move: 'right' };
  const MOVE_WORDS = ['up', 'down', 'left', 'right'] as const;
  const makes = (s: ReturnType<typeof parseSokoban>, m: string, named: readonly SokobanPush[]) => {
    const o = applyMove(s, m as never);
    return o.push !== null && named.some((p) => p.row * s.cols + p.col === o.push!.from && p.move === m);
  };
  /**
   * Along the moves of `target` from `observation`: at each, the moves that start a shortest solution
   * that never makes a `named` push (the plain solver's with none), from `solveSokobanAvoiding`.
   */
  const setsAlong = (observation: string, target: string, named: readonly SokobanPush[]): string[][] => {
    let s = parseSokoban(observation);
    return parseMoves(target).map((m) => {
      const d = solveSokobanAvoiding(s, named)!.length;
      const set = MOVE_WORDS.filter((x) => {
        const o = applyMove(s, x);
        return o.moved && !makes(s, x, named) && solveSokobanAvoiding(o.state, named)?.length === d - 1;
      });
      s = applyMove(s, m).state;
      return set;
    });
  };
  const moveSets = (choices: string[][]) => choices.filter((_, k) => k % 2 === 0);

  it('follow the shortest solution that never makes a named push, and say where that changes the target', () => {
    const plain = sokobanChoices(open, new Rng(0), [rightAt33])!;
    expect(plain).toMatchObject({ target: 'right, right', pushMemoryTarget: false });
    for (let seed = 0; seed < 6; seed++) {
      const c = sokobanChoices(open, new Rng(seed), [rightAt33], true)!;
      expect(c.pushMemoryTarget).toBe(true);
      expect(moveSets(c.choices)).toEqual(setsAlong(open, c.target, [rightAt33]));
      expect(moveSets(c.choices)).not.toEqual(setsAlong(open, c.target, []));
      expect(c.choices[0]).not.toContain('right');
      let s = parseSokoban(open);
      for (const m of parseMoves(c.target)) {
        expect(makes(s, m, [rightAt33])).toBe(false);
        s = applyMove(s, m).state;
      }
    }
    // where the named push is on no shortest solution, or every solution needs it: the plain target, draw for draw
    for (const [obs, named] of [
      [open, [{ row: 3, col: 3, move: 'down' }]],
      [sk(['#######', '#_____#', '#_PX_O#', '#_____#', '#######']), [{ row: 2, col: 3, move: 'right' }]],
    ] as const) {
      for (let seed = 0; seed < 4; seed++) {
        expect(sokobanChoices(obs, new Rng(seed), named, true)).toEqual(sokobanChoices(obs, new Rng(seed), named));
      }
    }
  });

  it('contrast pairs: the with-memory side avoids the named push, the twin keeps the plain target', () => {
    // sokoban-6x6-2 seed 60: 'left, down, right' pushes the box on (2, 3) onto the target (2, 4) beside
    // the box on (3, 4): both frozen against the wall. The plain solution makes that push later, once
    // the box on (3, 4) has gone down to its target.
    const board = sk(['######', '#__P_#', '#__XO#', '#___X#', '##__O#', '######']);
    const answer = 'left, down, right';
    expect(sokobanContrastPair('sokoban-6x6-2', 60, board, answer, new Rng(0))).toBeNull();
    const pair = sokobanContrastPair('sokoban-6x6-2', 60, board, answer, new Rng(0), true)!;
    expect(pair.withMemory.attempts[0]!.reflection).toBe('box (2, 3) right dead end.');
    const m = pair.withMemory.attempts[1]!.steps[0]!;
    const twin = pair.twin.attempts[0]!.steps[0]!;
    const named = [{ row: 2, col: 3, move: 'right' as const }];
    expect(m).toMatchObject({ memoryMatters: true, pushMemoryTarget: true });
    expect(moveSets(m.choices!)).toEqual(setsAlong(board, m.target!, named));
    expect(twin.target).toBe('right, down, down');
    expect(moveSets(twin.choices!)).toEqual(setsAlong(board, twin.target!, []));
    expect('memoryMatters' in twin || 'pushMemoryTarget' in twin || 'deadMoves' in twin).toBe(false);
    // where the memory does not change the target, the pair of before, draw for draw
    const before = sk(['######', '#____#', '#_X__#', '#_PO_#', '#____#', '######']);
    expect(sokobanContrastPair('sokoban-6x6-1', 5, before, 'up, up', new Rng(0), true))
      .toEqual(sokobanContrastPair('sokoban-6x6-1', 5, before, 'up, up', new Rng(0)));
  });

  it('played trials: later decisions take the avoiding target, and their compact examples train it as memory decisions', () => {
    // a trial (found by search) whose first attempt dies by a push that the plain solution makes later
    const o = { envName: 'sokoban-6x6-2', seed: 2, maxAttempts: 3, policy: noisyPolicy(0.5), rngSeed: 0, pushReflections: true };
    const t = playCompactTrial({ ...o, pushMemoryTargets: true });
    expect(t.attempts[0]).toEqual(playCompactTrial(o).attempts[0]);
    const memory: string[] = [];
    const marked: number[] = [];
    let k = 0;
    for (const a of t.attempts) {
      const named = namedDeadPushes(memory);
      for (const s of a.steps) {
        if (!s.choices) continue;
        const avoiding = named.length > 0 && solveSokobanAvoiding(parseSokoban(s.observation), named) !== null;
        const sets = moveSets(s.choices);
        if (s.pushMemoryTarget) {
          marked.push(k);
          expect(s.memoryMatters).toBe(true);
          expect(sets).toEqual(setsAlong(s.observation, s.target!, named));
          expect(sets).not.toEqual(setsAlong(s.observation, s.target!, []));
        } else {
          expect(sets).toEqual(setsAlong(s.observation, s.target!, []));
          if (avoiding) expect(sets).toEqual(setsAlong(s.observation, s.target!, named));
        }
        k++;
      }
      if (a.reflection !== null) memory.push(a.reflection);
    }
    expect(marked.length).toBeGreaterThan(0);
    // the mark goes with the step under a board symmetry
    const mapped = transformTrial(t, symmetry(5)).attempts.flatMap((a) => a.steps).filter((s) => s.choices);
    expect(mapped.flatMap((s, i) => (s.pushMemoryTarget ? [i] : []))).toEqual(marked);
    const tok = new GameTokenizer(gameVocabulary());
    const format = { name: 'compact' as const, envTags: [...GAME_ENV_TAGS], historySteps: 0, memoryAt: 'tail' as const };
    const acting = compactExamples(t, { tokenizer: tok, format, blockSize: 384, actionReserve: 24, reflectionReserve: 48 })
      .filter((x) => x.kind === 'action');
    const steps = t.attempts.flatMap((a) => a.steps).filter((s) => s.choices);
    expect(acting).toHaveLength(steps.length);
    for (const i of marked) {
      expect(acting[i]!.memoryMatters).toBe(true);
      expect(acting[i]!.targets.slice(0, -1)).toEqual(steps[i]!.choices!.map((set) => set.map((p) => tok.encode(p)[0])));
      expect(tok.decode(acting[i]!.ids)).toMatch(/\nm box \(\d, \d\) (up|down|left|right) dead end\./);
    }
  });
});
