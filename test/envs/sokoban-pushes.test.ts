/**
 * Sokoban pushes as the memory names them (src/envs/sokoban-pushes.ts): the dead-push reflection
 * and its parser, the push that ended an attempt, and the moves that would make a named push.
 */
import { describe, expect, it } from 'vitest';
import {
  deadPushMoves, deadPushReflection, firstPush, namedDeadPushes, parseDeadPush, sokobanFatalPush,
} from '../../src/envs/sokoban-pushes.js';
import { gridText } from '../../src/envs/grid.js';
import { parseSokoban, solveSokoban, SokobanEnv } from '../../src/envs/sokoban.js';
import { gameVocabulary } from '../../src/envs/vocab.js';
import { GameTokenizer } from '../../src/model/tokenizers.js';

const sk = (rows: string[]) => gridText(rows, 0);

// one box on (2, 2), its target on (3, 3); the player below the box. Pushing the box up puts it
// on row 1, against the top wall, away from the target's row: a dead end, not a corner.
const before = sk(['######', '#____#', '#_X__#', '#_PO_#', '#____#', '######']);
const after = sk(['######', '#_X__#', '#_P__#', '#__O_#', '#____#', '######']);
const upDead = { row: 2, col: 2, move: 'up' as const };

describe('sokobanFatalPush', () => {
  it('names the push that ended the attempt, found from the last observation and action', () => {
    expect(sokobanFatalPush(before, 'up', after)).toEqual(upDead);
    // the env stops at the fatal push: moves after it are not played, moves before it walk
    const fromTarget = sk(['######', '#____#', '#_X__#', '#__S_#', '#____#', '######']);
    expect(sokobanFatalPush(fromTarget, 'left, up, down', after)).toEqual(upDead);
    // the env agrees: its last dead push is the same one
    const env = new SokobanEnv({ rows: 6, cols: 6, boxes: 1 });
    env.setState(parseSokoban(fromTarget));
    const r = env.step('left, up, down');
    expect(r).toMatchObject({ done: true, success: false, observation: after });
    expect(env.lastDead).toMatchObject({ from: 2 * 6 + 2, box: 6 + 2, move: 'up', cornered: false });
    // no push of the action reaches the final board: not a dead ending of this action
    expect(sokobanFatalPush(before, 'left', after)).toBeNull();
    expect(sokobanFatalPush(before, 'no moves', before)).toBeNull();
    // a push into a corner is named the same way
    const cornerBefore = sk(['#####', '#_XP#', '#O__#', '#####']);
    const cornerAfter = sk(['#####', '#XP_#', '#O__#', '#####']);
    const push = sokobanFatalPush(cornerBefore, 'left', cornerAfter);
    expect(push).toEqual({ row: 1, col: 2, move: 'left' });
    expect(deadPushReflection(push!)).toBe('box (1, 2) left dead end.');
  });

  it('throws on an observation that is not a Sokoban board', () => {
    expect(() => sokobanFatalPush('not a board', 'up', after)).toThrow();
  });
});

describe('firstPush', () => {
  it('is the first push of the action whose resulting state passes the test, else null', () => {
    const dead = (s: ReturnType<typeof parseSokoban>) => solveSokoban(s) === null;
    // walking left then up does not push; the third move pushes the box right (solvable), so no dead push
    expect(firstPush(before, 'left, up, right', dead)).toBeNull();
    expect(firstPush(before, 'left, up, right', () => true)).toEqual({ row: 2, col: 2, move: 'right' });
    expect(firstPush(before, 'up, up', dead)).toEqual(upDead);
    expect(firstPush(before, 'nonsense', () => true)).toBeNull();
  });
});

describe('dead-push reflections', () => {
  it('are words of the game vocabulary and parse back; other lines do not', () => {
    const tok = new GameTokenizer(gameVocabulary());
    const text = deadPushReflection(upDead);
    // `box `, the cell, a byte space, the move word, ` dead end.`
    expect(text).toBe('box (2, 2) up dead end.');
    expect(tok.encode(text).map((id) => tok.decode([id]))).toEqual(['box ', '(2, 2)', ' ', 'up', ' dead end.']);
    expect(parseDeadPush(text)).toEqual(upDead);
    expect(parseDeadPush(`  ${text} `)).toEqual(upDead);
    for (const other of ['box (2, 2) stuck in a corner.', 'boxes stuck. dead end.', 'turns ran out.', 'box (2, 2) north dead end.', 'box (2, 2) up dead end. and more', '']) {
      expect(parseDeadPush(other)).toBeNull();
    }
  });

  it('namedDeadPushes keeps the memory lines that parse, in order', () => {
    const memory = ['turns ran out.', 'box (2, 2) up dead end.', 'box (1, 3) left dead end.', 'box (2, 2) north dead end.'];
    expect(namedDeadPushes(memory)).toEqual([upDead, { row: 1, col: 3, move: 'left' }]);
    expect(namedDeadPushes([])).toEqual([]);
  });
});

describe('deadPushMoves', () => {
  const dead = (s: ReturnType<typeof parseSokoban>) => solveSokoban(s) === null;
  // the player on (3, 2), under the box on (2, 2): only `up` pushes it
  const s = parseSokoban(before);

  it('are the moves that make a named push into a dead state', () => {
    expect(deadPushMoves(s, [upDead], dead)).toEqual(['up']);
    expect(deadPushMoves(s, [], dead)).toEqual([]);
  });

  it('leave out named pushes of another cell or direction, and pushes that do not kill the puzzle', () => {
    expect(deadPushMoves(s, [{ row: 2, col: 3, move: 'up' }, { row: 2, col: 2, move: 'down' }], dead)).toEqual([]);
    expect(deadPushMoves(s, [upDead], () => false)).toEqual([]);
    const right = parseSokoban(sk(['######', '#____#', '#PX__#', '#__O_#', '#____#', '######']));
    expect(deadPushMoves(right, [{ row: 2, col: 2, move: 'right' }], dead)).toEqual([]);
  });
});
