/**
 * Demonstration trials of the compact policy (src/envs/compact-data.ts): solver soft targets,
 * factual reflections, failures on purpose and the board symmetries.
 */
import { describe, expect, it } from 'vitest';
import {
  mineSweeperChoices, mineSweeperCompactReflection, mineSweeperContrast, mineSweeperContrastPair, noisyPolicy, playCompactTrial,
  provableMineCells, randomAction, revealedCells, sokobanChoices, sokobanCompactReflection, sokobanContrastPair,
  solverPolicy, symmetriesFor, symmetry, transformTrial, type CompactTrial,
} from '../../src/envs/compact-data.js';
import { parseDeadPush, sokobanFatalPush } from '../../src/envs/sokoban-pushes.js';
import { gridText, parseGridRows } from '../../src/envs/grid.js';
import { Rng } from '../../src/envs/rng.js';
import { applyMove, parseMoves, parseSokoban, renderSokoban, solveSokoban } from '../../src/envs/sokoban.js';
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

describe('mineSweeperChoices', () => {
  it('is exactly the hidden cells of lowest mine probability', () => {
    // every '1' in column 2 sees (2, 3); one mine: it is there, (1, 3) and (3, 3) are safe
    expect(mineSweeperChoices(ms(['.1?', '.1?', '.1?']), 1, new Set())).toEqual(['(1, 3)', '(3, 3)']);
    // no information: every hidden cell equally likely
    expect(mineSweeperChoices(ms(['1?', '??']), 1, new Set())).toEqual(['(1, 2)', '(2, 1)', '(2, 2)']);
    // the '1' at (1, 2) sees (1, 1) and (2, 1) but not (1, 3): P = 1/2, 1/2, 0
    expect(mineSweeperChoices(ms(['?1.', '?1.']), 1, new Set())).toEqual(['(1, 1)', '(2, 1)']);
  });

  it('excludes cells that memory names as mines and counts them as mines', () => {
    // knowing (1, 2) (index 1) is the mine leaves the others certainly safe
    expect(mineSweeperChoices(ms(['1?', '??']), 1, new Set([1]))).toEqual(['(2, 1)', '(2, 2)']);
    expect(mineSweeperChoices(ms(['.1?', '.1?', '.1?']), 1, new Set([5]))).toEqual(['(1, 3)', '(3, 3)']);
    expect(() => mineSweeperChoices(ms(['1?']), 1, new Set([1]))).toThrow(/no hidden cell/);
  });
});

describe('revealedCells', () => {
  it('is every cell that is not hidden, in reading order', () => {
    expect(revealedCells(ms(['.1?', '?1?', '??*']))).toEqual(['(1, 1)', '(1, 2)', '(2, 2)', '(3, 3)']);
    expect(revealedCells(ms(['??', '??']))).toEqual([]);
  });
});

describe('provableMineCells', () => {
  it('is exactly the hidden cells the revealed numbers prove to be mines, in reading order', () => {
    const cases: Array<[string[], number, string[]]> = [
      // every '1' in column 2 sees (2, 3), and the middle one sees all three: (2, 3) is the mine
      [['.1?', '.1?', '.1?'], 1, ['(2, 3)']],
      // 1-2-1 under three hidden cells: the outer two are mines, the middle one is safe
      [['???', '121', '...'], 2, ['(1, 1)', '(1, 3)']],
      // a 1 that sees a single hidden cell; two 1s that see the same two
      [['?1.', '11.'], 1, ['(1, 1)']],
      [['1?', '1?'], 1, []],
      // the same as the first on its side, and with the known mine shown: only hidden cells count
      [['...', '111', '?*?'], 1, []],
      [['...', '111', '???'], 1, ['(3, 2)']],
      // nothing proved: a 1 that sees two hidden cells, a fresh board
      [['?1.', '?1.'], 1, []],
      [['??', '??'], 1, []],
    ];
    for (const [rows, mines, proved] of cases) expect(provableMineCells(ms(rows), mines), rows.join('/')).toEqual(proved);
  });
});

describe('mineSweeperContrast', () => {
  it('is the board again in a later attempt whose memory names the cell a mine, the target knowing it', () => {
    const board = ms(['.1?', '.1?', '.1?']);
    const t = mineSweeperContrast('minesweeper-3x3-1', 4, board, 1, '(2, 3)', new Rng(1))!;
    expect(t.attempts).toHaveLength(2);
    expect(t.attempts[0]).toMatchObject({ steps: [], success: false, reflection: '(2, 3) was a mine.' });
    const [step] = t.attempts[1]!.steps;
    expect(t.attempts[1]!.reflection).toBeNull();
    expect(step).toMatchObject({
      observation: board, choices: [['(1, 3)', '(3, 3)']], memoryMatters: true, invalid: ['(1, 1)', '(1, 2)', '(2, 1)', '(2, 2)', '(3, 1)', '(3, 2)'],
      provableMines: ['(2, 3)'],
    });
    expect(['(1, 3)', '(3, 3)']).toContain(step!.target);
    // on a fresh board every other cell is as safe
    const fresh = ms(['??', '??']);
    expect(mineSweeperContrast('minesweeper-2x2-1', 4, fresh, 1, '(1, 1)', new Rng(1))!.attempts[1]!.steps[0]!.choices).toEqual([['(1, 2)', '(2, 1)', '(2, 2)']]);
  });

  it('is null for a cell that cannot be a mine there: open, off the board, proved safe, or not a cell', () => {
    const board = ms(['?1.', '?1.']);
    for (const cell of ['(1, 2)', '(1, 3)', '(3, 1)', '(0, 1)', 'up', '']) expect(mineSweeperContrast('minesweeper-2x3-1', 4, board, 1, cell, new Rng(1))).toBeNull();
    expect(mineSweeperContrast('minesweeper-2x3-1', 4, board, 1, '(2, 1)', new Rng(1))).not.toBeNull();
  });
});

describe('mineSweeperContrastPair', () => {
  it('is the contrast and the same board with no memory, whose targets keep the cell', () => {
    const fresh = ms(['??', '??']);
    const pair = mineSweeperContrastPair('minesweeper-2x2-1', 4, fresh, 1, '(1, 1)', new Rng(1))!;
    expect(pair.withMemory.attempts[0]!.reflection).toBe('(1, 1) was a mine.');
    expect(pair.withMemory.attempts[1]!.steps[0]!.choices).toEqual([['(1, 2)', '(2, 1)', '(2, 2)']]);
    expect(pair.twin.attempts).toHaveLength(1);
    const [step] = pair.twin.attempts[0]!.steps;
    expect(step).toMatchObject({ observation: fresh, choices: [['(1, 1)', '(1, 2)', '(2, 1)', '(2, 2)']] });
    expect(step!.memoryMatters).toBeUndefined();
    // a fresh board proves no mine
    expect(step!.provableMines).toBeUndefined();
    // the 1s around (1, 1) see no other hidden cell: it is a mine with the memory and without it
    const proving = mineSweeperContrastPair('minesweeper-2x4-2', 4, ms(['?11?', '111?']), 2, '(1, 4)', new Rng(1))!;
    expect(proving.twin.attempts[0]!.steps[0]).toMatchObject({ choices: [['(1, 4)', '(2, 4)']], provableMines: ['(1, 1)'] });
    expect(proving.withMemory.attempts[1]!.steps[0]).toMatchObject({ choices: [['(2, 4)']], provableMines: ['(1, 1)'] });
    expect(pair.twin.attempts[0]!.reflection).toBeNull();
    // the answer is read as the env reads it: its last cell
    expect(mineSweeperContrastPair('minesweeper-2x2-1', 4, fresh, 1, '(2, 2)(1, 1)', new Rng(1))!.withMemory.attempts[0]!.reflection).toBe('(1, 1) was a mine.');
  });

  it('is null where the cell is not among the safest cells of the bare board, or cannot be a mine', () => {
    // one mine, next to all three 1s: (2, 3) is the mine, (1, 3) and (3, 3) are safe
    const board = ms(['.1?', '.1?', '.1?']);
    expect(mineSweeperContrastPair('minesweeper-3x3-1', 4, board, 1, '(2, 3)', new Rng(1))).toBeNull();
    expect(mineSweeperContrastPair('minesweeper-3x3-1', 4, board, 1, '(1, 3)', new Rng(1))).toBeNull();
    expect(mineSweeperContrastPair('minesweeper-3x3-1', 4, board, 1, 'up', new Rng(1))).toBeNull();
  });
});

describe('sokobanChoices', () => {
  it('gives every move that starts a shortest solution, along one drawn optimal path', () => {
    const obs = sk(['#####', '#P__#', '#_X_#', '#__O#', '#####']);
    // push right then down, or down then right: 5 moves either way
    expect(solveSokoban(parseSokoban(obs))!.length).toBe(5);
    for (let seed = 0; seed < 8; seed++) {
      const c = sokobanChoices(obs, new Rng(seed))!;
      expect(c.choices[0]).toEqual(['down', 'right']);
      expect(c.choices[1]).toEqual([', ']);
      expect(c.choices[3]).toEqual([', ']);
      expect(c.choices.length).toBe(5);
      // each set is exactly the moves that lower the distance by one from the state the target reached
      let s = parseSokoban(obs);
      const picked = parseMoves(c.target);
      expect(picked.length).toBe(3);
      picked.forEach((m, j) => {
        const d = solveSokoban(s)!.length;
        const good = (['up', 'down', 'left', 'right'] as const).filter((x) => {
          const o = applyMove(s, x);
          return o.moved && solveSokoban(o.state)?.length === d - 1;
        });
        expect(c.choices[2 * j]).toEqual(good);
        expect(good).toContain(m);
        // and the invalid ones are exactly the moves that do not move from there
        expect(c.invalid[2 * j]).toEqual((['up', 'down', 'left', 'right'] as const).filter((x) => !applyMove(s, x).moved));
        if (j > 0) expect(c.invalid[2 * j - 1]).toEqual([]);
        s = applyMove(s, m).state;
      });
    }
    expect(sokobanChoices(obs, new Rng(1))!.target).toMatch(/^(down, right, up|right, down, left)$/);
  });

  it('stops at the solution and gives null for a solved or dead position', () => {
    // a corridor: up, down and left bump into walls at both moves
    expect(sokobanChoices(sk(['######', '#PX_O#', '######']), new Rng(0))).toEqual({
      choices: [['right'], [', '], ['right']], target: 'right, right', invalid: [['up', 'down', 'left'], [], ['up', 'down']], deadMoves: [[], [], []],
      pushMemoryTarget: false,
    });
    expect(sokobanChoices(sk(['#####', '#P*_#', '#####']), new Rng(0))).toBeNull();
    expect(sokobanChoices(sk(['#####', '#X_P#', '#O__#', '#####']), new Rng(0))).toBeNull();
  });
});

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

describe('board symmetries', () => {
  const trials: CompactTrial[] = [];
  for (let seed = 0; seed < 6; seed++) {
    trials.push(playCompactTrial({ envName: 'minesweeper-4x4-2', seed, maxAttempts: 3, policy: noisyPolicy(0.5), rngSeed: seed }));
    trials.push(playCompactTrial({ envName: 'sokoban-5x5-1', seed, maxAttempts: 2, policy: noisyPolicy(0.3), rngSeed: seed }));
  }
  const symbols = (obs: string) => parseGridRows(obs).flat().sort().join('');
  const at = (obs: string, action: string, base: number) => {
    const c = parseCellAction(action)!;
    return parseGridRows(obs)[c.row - base]![c.col - base];
  };

  it('keep every board\'s symbols, and the cells actions and targets name', () => {
    for (const t of trials) for (let k = 0; k < 8; k++) {
      const m = transformTrial(t, symmetry(k));
      expect(m.attempts.length).toBe(t.attempts.length);
      t.attempts.forEach((a, n) => {
        const b = m.attempts[n]!;
        expect(symbols(b.finalObservation)).toBe(symbols(a.finalObservation));
        expect(b.reflection === null).toBe(a.reflection === null);
        a.steps.forEach((s, i) => {
          const u = b.steps[i]!;
          expect(symbols(u.observation)).toBe(symbols(s.observation));
          if (t.env === 'minesweeper') {
            expect(at(u.observation, u.action, 1)).toBe(at(s.observation, s.action, 1));
            s.choices![0]!.forEach((c, j) => expect(at(u.observation, u.choices![0]![j]!, 1)).toBe(at(s.observation, c, 1)));
          }
        });
      });
    }
  });

  it('map a MineSweeper trial to one whose targets, invalid cells and provable mines are those of the mapped boards', () => {
    for (const t of trials.filter((x) => x.env === 'minesweeper')) for (let k = 0; k < 8; k++) {
      const m = transformTrial(t, symmetry(k));
      const known = new Set<number>();
      m.attempts.forEach((a) => {
        for (const s of a.steps) {
          expect([...s.choices![0]!].sort()).toEqual([...mineSweeperChoices(s.observation, 2, known)].sort());
          expect([...(s.invalid ?? [])].sort()).toEqual(revealedCells(s.observation).sort());
          expect([...(s.provableMines ?? [])].sort()).toEqual(provableMineCells(s.observation, 2).sort());
        }
        if (a.reflection?.endsWith('was a mine.')) {
          const c = parseCellAction(a.reflection)!;
          expect(parseGridRows(a.finalObservation)[c.row - 1]![c.col - 1]).toBe('*');
          known.add((c.row - 1) * 4 + (c.col - 1));
        }
      });
    }
  });

  it('map a Sokoban trial to one whose mapped moves replay on the mapped boards', () => {
    // the env applies a turn's moves until the puzzle is solved or dead: some prefix of the mapped
    // moves must lead from the mapped board to the mapped next board
    const reaches = (obs: string, action: string, next: string) => {
      let s = parseSokoban(obs);
      if (renderSokoban(s) === next) return true;
      for (const mv of parseMoves(action)) {
        s = applyMove(s, mv).state;
        if (renderSokoban(s) === next) return true;
      }
      return false;
    };
    let moved = 0;
    for (const t of trials.filter((x) => x.env === 'sokoban')) for (let k = 0; k < 8; k++) {
      const m = transformTrial(t, symmetry(k));
      for (const a of m.attempts) a.steps.forEach((s, i) => {
        const next = a.steps[i + 1]?.observation ?? a.finalObservation;
        expect(reaches(s.observation, s.action, next)).toBe(true);
        if (next !== s.observation) moved++;
        // the mapped invalid moves still do not move, along the mapped target's path
        if (s.invalidMoves) {
          let st = parseSokoban(s.observation);
          const path = parseMoves(s.target!);
          s.invalidMoves.forEach((set, j) => {
            if (j % 2 === 1) return expect(set).toEqual([]);
            for (const mv of set) expect(applyMove(st, mv as never).moved).toBe(false);
            st = applyMove(st, path[j / 2]!).state;
          });
        }
        // the mapped target is still optimal on the mapped board
        if (s.choices) {
          const d = solveSokoban(parseSokoban(s.observation))!.length;
          const first = parseMoves(s.target!)[0]!;
          expect(solveSokoban(applyMove(parseSokoban(s.observation), first).state)!.length).toBe(d - 1);
        }
        if (a.reflection?.startsWith('box ')) {
          const c = parseCellAction(a.reflection)!;
          expect('X*'.includes(parseGridRows(a.finalObservation)[c.row]![c.col]!)).toBe(true);
        }
      });
    }
    expect(moved).toBeGreaterThan(20);
  });

  it('are 8 distinct maps of a square board; the involutions undo themselves', () => {
    const t: CompactTrial = {
      env: 'minesweeper', envName: 'minesweeper-3x3-1', seed: 0, instructions: 'I',
      attempts: [{ steps: [{ observation: ms(['12?', '???', '???']), action: '(1, 3)', choices: [['(1, 3)', '(2, 1)']], target: '(2, 1)' }], finalObservation: ms(['12*', '???', '???']), success: false, reflection: '(1, 3) was a mine.' }],
    };
    const boards = Array.from({ length: 8 }, (_, k) => transformTrial(t, symmetry(k)).attempts[0]!.steps[0]!.observation);
    expect(new Set(boards).size).toBe(8);
    expect(boards[0]).toBe(t.attempts[0]!.steps[0]!.observation);
    // transpose: row 1 becomes column 1
    const tr = transformTrial(t, symmetry(4));
    expect(tr.attempts[0]).toEqual({
      steps: [{ observation: ms(['1??', '2??', '???']), action: '(3, 1)', choices: [['(3, 1)', '(1, 2)']], target: '(1, 2)' }],
      finalObservation: ms(['1??', '2??', '*??']), success: false, reflection: '(3, 1) was a mine.',
    });
    for (const k of [0, 1, 2, 3, 4, 7]) expect(transformTrial(transformTrial(t, symmetry(k)), symmetry(k))).toEqual(t);
    // the rotations (5, 6) are each other's inverse
    expect(transformTrial(transformTrial(t, symmetry(5)), symmetry(6))).toEqual(t);
    for (const tt of trials) for (const k of [1, 2, 3, 4, 7]) expect(transformTrial(transformTrial(tt, symmetry(k)), symmetry(k))).toEqual(tt);
  });

  it('map move words, and refuse a transpose of a non-square board', () => {
    const t: CompactTrial = {
      env: 'sokoban', envName: 'sokoban-3x5-1', seed: 0, instructions: 'I',
      attempts: [{ steps: [{ observation: sk(['#####', '#PX_O', '#####']), action: 'right, up', choices: [['right'], [', '], ['up']], target: 'right, up' }], finalObservation: sk(['#####', '#_PXO', '#####']), success: false, reflection: 'turns ran out.' }],
    };
    const flip = transformTrial(t, symmetry(1)).attempts[0]!.steps[0]!;
    expect(flip).toEqual({ observation: sk(['#####', 'O_XP#', '#####']), action: 'left, up', choices: [['left'], [', '], ['up']], target: 'left, up' });
    expect(transformTrial(t, symmetry(2)).attempts[0]!.steps[0]!.action).toBe('right, down');
    expect(() => transformTrial(t, symmetry(4))).toThrow(/transpose needs a square board, got 3x5/);
    expect(symmetriesFor(3, 5)).toEqual([0, 1, 2, 3]);
    expect(symmetriesFor(6, 6)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
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
