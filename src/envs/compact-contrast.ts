/**
 * Memory contrast trials of the compact builtin policy: one-decision trials built around an answer
 * a model gives (the cell it would click, the moves it would play), the same board with a memory
 * line that names what that answer did, and its twin without the memory.
 *
 * Apart from src/envs/compact-data.ts because they play no env: each is assembled from one
 * observation and the solver's soft targets (src/envs/compact-targets.ts), where compact-data.ts
 * plays whole trials from `env.reset`. Pure and deterministic given the `rng`; no model, no HTTP.
 */
import { parseGridRows } from './grid.js';
import { makeEnv } from './index.js';
import { cellAction, parseCellAction } from './minesweeper.js';
import { analyseMines } from './solvers/minesweeper-solver.js';
import { solveSokoban } from './sokoban.js';
import { deadPushReflection, firstPush } from './sokoban-pushes.js';
import {
  invalidField, mineSweeperChoices, provableField, provenMines, revealedCells, sokobanChoices,
} from './compact-targets.js';
import type { Rng } from './rng.js';
import type { CompactAttempt, CompactStep, CompactTrial } from '../shared/compact-trial.js';

/**
 * A memory contrast decision: the MineSweeper `observation` seen again in a later attempt whose
 * memory says `cell` (an action `(r, c)`, 1-based) was a mine, as a one-decision trial (attempt 0
 * holds only that reflection; attempt 1 the decision, its target the solver's safest cells knowing
 * the mine, marked `memoryMatters`). Built for the cell a model would click, it trains reading the
 * memory exactly where the model's own probability mass sits.
 * @returns null when `cell` is not a hidden cell that can hold a mine on this board (a number
 *   proves it safe), so the memory would not be a fact of any task with this board.
 */
export function mineSweeperContrast(envName: string, seed: number, observation: string, mines: number, cell: string, rng: Rng): CompactTrial | null {
  const cells = parseGridRows(observation);
  const cols = cells[0]!.length;
  const at = parseCellAction(cell.trim());
  if (!at || at.row < 1 || at.col < 1 || at.row > cells.length || at.col > cols || cells[at.row - 1]![at.col - 1] !== '?') return null;
  const i = (at.row - 1) * cols + (at.col - 1);
  const bare = analyseMines(cells, mines);
  if (!(bare.probability[i]! > 0)) return null;
  const choices = mineSweeperChoices(observation, mines, new Set([i]));
  const target = choices[rng.int(choices.length)]!;
  const reflection = `${cellAction(at.row - 1, at.col - 1)} was a mine.`;
  return {
    env: 'minesweeper', envName, seed, instructions: makeEnv(envName).instructions,
    attempts: [
      { steps: [], finalObservation: observation, success: false, reflection },
      {
        steps: [{
          observation, action: target, choices: [choices], target, memoryMatters: true,
          ...invalidField(revealedCells(observation)), ...provableField(provenMines(cells, bare)),
        }],
        finalObservation: observation, success: false, reflection: null,
      },
    ],
  };
}

/**
 * A memory contrast pair: `mineSweeperContrast` for a `cell` that the solver counts among the
 * equally safest cells of `observation` when nothing is remembered, and its twin, the same board
 * in a first attempt (no memory), whose target set includes `cell`. Only the memory line tells the
 * two decisions apart, so a model lowers `cell` under the memory without lowering it on the bare
 * board only by reading the memory; a contrast whose cell is a poor click anyway (not among the
 * safest) can be learnt from the board alone and teaches nothing about the memory.
 * @returns null when `cell` cannot hold a mine (see `mineSweeperContrast`) or is not among the
 *   safest cells without memory.
 */
export function mineSweeperContrastPair(
  envName: string, seed: number, observation: string, mines: number, cell: string, rng: Rng,
): { withMemory: CompactTrial; twin: CompactTrial } | null {
  const bare = mineSweeperChoices(observation, mines, new Set());
  const at = parseCellAction(cell.trim());
  // the cell as the env reads the answer (its last `(r, c)`)
  if (!at || !bare.includes(cellAction(at.row - 1, at.col - 1))) return null;
  const withMemory = mineSweeperContrast(envName, seed, observation, mines, cell, rng);
  if (!withMemory) return null;
  const target = bare[rng.int(bare.length)]!;
  // the same board proves the same mines, whatever the memory says
  const { provableMines } = withMemory.attempts[1]!.steps[0]!;
  const twin: CompactTrial = {
    env: 'minesweeper', envName, seed, instructions: withMemory.instructions,
    attempts: [{
      steps: [{
        observation, action: target, choices: [bare], target,
        ...invalidField(revealedCells(observation)), ...(provableMines ? { provableMines: [...provableMines] } : {}),
      }],
      finalObservation: observation, success: false, reflection: null,
    }],
  };
  return { withMemory, twin };
}

/**
 * A Sokoban memory contrast pair: where an `answer` (the moves a model plays from `observation` in a
 * first attempt, at most 3 as the env reads them) makes a push that leaves the puzzle with no
 * solution, `withMemory` is the same board in a later attempt whose memory names that push
 * (`deadPushReflection`), its target the solver's (`sokobanChoices`) with the moves that would
 * make the named push recorded (`deadMoves`; marked `memoryMatters` when the push is one move
 * away, at the first position); `twin` is the same board in a first attempt, the plain solver's
 * target without them. The solver never gives a dead push, so by default the pair's targets agree
 * and only the memory line and its unlikelihood labels separate the two: trained where the model's
 * own answer goes, as `mineSweeperContrastPair` is. With `pushMemoryTargets`, the with-memory
 * target is the one that avoids the named push from this state on (`sokobanChoices` with
 * `avoidNamed`), marked `memoryMatters` and `pushMemoryTarget` where it differs from the twin's
 * plain one, so that the memory line is what separates the two targets.
 * @returns null when the answer makes no dead push, the board has no solution, or the memory
 *   changes nothing: the named push is made at no position of the with-memory target path (the
 *   answer leaves the solver's path before it) and the target does not avoid it.
 */
export function sokobanContrastPair(
  envName: string, seed: number, observation: string, answer: string, rng: Rng, pushMemoryTargets = false,
): { withMemory: CompactTrial; twin: CompactTrial } | null {
  const push = firstPush(observation, answer, (after) => solveSokoban(after) === null);
  if (!push) return null;
  const plain = sokobanChoices(observation, rng, [push]);
  if (!plain) return null;
  const avoiding = pushMemoryTargets ? sokobanChoices(observation, rng, [push], true) : null;
  const c = avoiding?.pushMemoryTarget ? avoiding : plain;
  if (!c.pushMemoryTarget && !c.deadMoves.some((m) => m.length > 0)) return null;
  const instructions = makeEnv(envName).instructions;
  const step = (memory: boolean): CompactStep => {
    const { choices, target, invalid, deadMoves, pushMemoryTarget } = memory ? c : plain;
    return {
      observation, action: target, choices, target,
      ...(memory && (deadMoves[0]!.length > 0 || pushMemoryTarget) ? { memoryMatters: true } : {}),
      ...(memory && pushMemoryTarget ? { pushMemoryTarget: true } : {}),
      ...(invalid.some((m) => m.length > 0) ? { invalidMoves: invalid } : {}),
      ...(memory && deadMoves.some((m) => m.length > 0) ? { deadMoves } : {}),
    };
  };
  const attempt = (memory: boolean): CompactAttempt => ({
    steps: [step(memory)], finalObservation: observation, success: false, reflection: null,
  });
  return {
    withMemory: {
      env: 'sokoban', envName, seed, instructions,
      attempts: [{ steps: [], finalObservation: observation, success: false, reflection: deadPushReflection(push) }, attempt(true)],
    },
    twin: { env: 'sokoban', envName, seed, instructions, attempts: [attempt(false)] },
  };
}
