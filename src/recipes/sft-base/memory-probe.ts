/**
 * The memory probe of a compact checkpoint: three teacher-forced measures (one forward pass per
 * prompt, deterministic) of whether LaMer's memory can work with it, without playing sessions.
 * Used by `npm run experiment:base-memory-probe` (experiments/base-memory-probe.ts) and at each
 * learning-curve point of `npm run model:sft-base` (./sft-base.ts).
 *
 * 1. **Writes the mine's cell.** On N held-out MineSweeper 6x6/3 trials played by the solver with
 *    noise 0.4 (so attempts end on mines), each reflection prompt after a mine
 *    (src/training/data/compact-sft.ts, exactly as trained and served): the mean log-probability
 *    (nats) and top-1 rate of the reflection's first token, the mine's cell `(r, c)`, which is a copy
 *    of the last action in the prompt. Chance over the 36 cells is ln(1/36) = -3.58.
 * 2. **Acts on a memory line.** On N held-out boards (eval seeds from 0): the model's favourite
 *    first click c (argmax without memory), then the same prompt with the memory line
 *    `c was a mine.` (attempt 1): P(c) before and after, and the share of boards where c is still
 *    the argmax. A model that reads its memory moves P(c) to about 0. The boards split in two by
 *    the solver's P(mine) of c on the board shown (src/envs/solvers analyseMines): where c can be a
 *    mine (P > 0; the main figure) and where it cannot (a revealed number proves it safe, or c is
 *    revealed itself), where the memory line is impossible for any task with that board and so
 *    says little about reading memory; those boards are counted and reported apart.
 * 3. **Reads memory in play.** On probe 1's trials, every acting decision whose memory names mines
 *    (compactExamples' `namedMines`: the cells earlier reflections of the trial name, none of them
 *    among the solver's answers): the summed probability of the named cells at the answer position
 *    with the memory as served, and for the same decision rendered with no memory (attempt 0, no
 *    earlier attempts), and the share of decisions where a named cell is the argmax in each case;
 *    over all those decisions and over those where the memory changes the solver's answer
 *    (`memoryMatters`: a named mine is among the solver's equally safest cells without the memory,
 *    mostly a later attempt's first click). A model that reads its memory puts about 0 on the named
 *    cells with it; without it, about what a policy uniform over the solver's equally safest cells
 *    would (reported for scale: the mean share of the named cells among those cells), about
 *    1/(number of those cells) on the memoryMatters decisions and 0 on the others (there the board
 *    alone offers safer cells than the named one).
 *
 */
import * as tf from '@tensorflow/tfjs';
import { renderActPrompt, type PromptStep } from '../../agent/prompt.js';
import { mineSweeperChoices, noisyPolicy, playCompactTrial, type CompactTrial } from '../../envs/compact-data.js';
import { parseGridRows } from '../../envs/grid.js';
import { evalSeed, makeEnv } from '../../envs/index.js';
import type { MineSweeperEnv } from '../../envs/minesweeper.js';
import { analyseMines } from '../../envs/solvers/minesweeper-solver.js';
import type { GPT } from '../../model/gpt.js';
import type { CompactPromptFormat } from '../../model/prompt-format.js';
import type { GameTokenizer } from '../../model/tokenizers.js';
import { compactExamples, pieceToken } from '../../training/data/compact-sft.js';
import { positionLogits } from '../../training/maths/soft-targets.js';
import { ACTION_RESERVE, REFLECTION_RESERVE } from './play.js';

/** The env of the probes' trials and boards. */
export const PROBE_ENV = 'minesweeper-6x6-3';

/** Log-probabilities `[V]` of the next token after `ids`. */
function nextLogprobs(model: GPT, ids: number[]): number[] {
  return tf.tidy(() => {
    const idx = tf.tensor2d(Int32Array.from(ids), [1, ids.length], 'int32');
    return (tf.logSoftmax(positionLogits(model, idx, tf.tensor1d([ids.length - 1], 'int32'))).arraySync() as number[][])[0]!;
  });
}

const argmax = (xs: number[]): number => xs.reduce((best, x, i) => (x > xs[best]! ? i : best), 0);

/** Probe 2's figures over a set of boards (NaN where the set is empty). */
export interface ActingFigures {
  /** Boards in the set. */
  boards: number;
  /** Mean P(favourite) without memory, and with the memory line naming it a mine. */
  pBefore: number;
  pAfter: number;
  /** Share of the boards where the favourite is still the argmax with that memory line. */
  stillTop1: number;
}

export interface MemoryProbe {
  model: string;
  /** Probe 1: the first token of each reflection after a mine (the mine's cell). */
  reflection: { prompts: number; meanLogprob: number; top1: number };
  /**
   * Probe 2. The top-level figures are over every board whose favourite is a cell (as before the
   * split); `canBeMine` (the main figure) over those where the favourite can hold a mine, and
   * `provablySafe` over those where it cannot (a revealed number proves it safe, or it is revealed
   * itself), where the memory line is impossible for any task with that board.
   * `canBeMine.boards + provablySafe.boards = boards`.
   */
  acting: ActingFigures & { canBeMine: ActingFigures; provablySafe: ActingFigures };
  /**
   * Probe 3, over the acting decisions of probe 1's trials whose memory names mines (the top-level
   * figures), and over those of them where the memory changes the solver's answer (`memoryMatters`:
   * a named mine is among the solver's equally safest cells when the memory is left out).
   */
  memoryInPlay: InPlayFigures & { memoryMatters: InPlayFigures };
}

/** Probe 3's figures over a set of decisions (NaN where the set is empty). */
export interface InPlayFigures {
  decisions: number;
  /** Mean summed probability of the named cells at the answer position, with the memory as served and with none. */
  pNamedWithMemory: number;
  pNamedWithoutMemory: number;
  /** Share of the decisions where a named cell is the argmax, with the memory and with none. */
  argmaxNamedWithMemory: number;
  argmaxNamedWithoutMemory: number;
  /**
   * For scale: the mean share of the named cells among the solver's equally safest cells without
   * the memory, what a policy blind to the memory and uniform over those cells puts on them.
   */
  blindSolverShare: number;
}

/** Running sums of probe 3's figures over a set of decisions. */
class InPlaySums {
  private n = 0;
  private with = 0;
  private without = 0;
  private argWith = 0;
  private argWithout = 0;
  private blind = 0;
  add(pWith: number, pWithout: number, argWith: boolean, argWithout: boolean, blind: number): void {
    this.n++;
    this.with += pWith;
    this.without += pWithout;
    if (argWith) this.argWith++;
    if (argWithout) this.argWithout++;
    this.blind += blind;
  }
  figures(): InPlayFigures {
    const n = this.n, mean = (x: number) => (n ? x / n : NaN);
    return {
      decisions: n, pNamedWithMemory: mean(this.with), pNamedWithoutMemory: mean(this.without),
      argmaxNamedWithMemory: mean(this.argWith), argmaxNamedWithoutMemory: mean(this.argWithout), blindSolverShare: mean(this.blind),
    };
  }
}

/** Running sums of probe 2's figures over a set of boards. */
class ActingSums {
  private n = 0;
  private before = 0;
  private after = 0;
  private still = 0;
  add(pBefore: number, pAfter: number, still: boolean): void {
    this.n++;
    this.before += pBefore;
    this.after += pAfter;
    if (still) this.still++;
  }
  figures(): ActingFigures {
    const n = this.n;
    return { boards: n, pBefore: n ? this.before / n : NaN, pAfter: n ? this.after / n : NaN, stillTop1: n ? this.still / n : NaN };
  }
}

/**
 * The context of each acting decision of `trial`, in the order `compactExamples` emits its acting
 * examples (a step with choices and a target): its attempt, the observation and the attempt's
 * steps before it.
 */
function actingContexts(trial: CompactTrial): { attempt: number; observation: string; steps: PromptStep[] }[] {
  const out: { attempt: number; observation: string; steps: PromptStep[] }[] = [];
  trial.attempts.forEach((a, n) => {
    const done: PromptStep[] = [];
    for (const s of a.steps) {
      if (s.choices && s.target !== null) out.push({ attempt: n, observation: s.observation, steps: [...done] });
      done.push({ observation: s.observation, action: s.action });
    }
  });
  return out;
}

/** The three probes of one checkpoint (see the module comment). */
export function probe(model: GPT, format: CompactPromptFormat, tok: GameTokenizer, boards: number, name: string): MemoryProbe {
  const exOpts = {
    tokenizer: tok, format, blockSize: model.config.block_size, actionReserve: ACTION_RESERVE, reflectionReserve: REFLECTION_RESERVE,
  };
  const mines = (makeEnv(PROBE_ENV) as MineSweeperEnv).params.mines;
  let prompts = 0, lpSum = 0, top1 = 0;
  const inPlay = new InPlaySums(), inPlayMatters = new InPlaySums();
  for (let i = 0; i < boards; i++) {
    const seed = evalSeed(0, i);
    const trial = playCompactTrial({ envName: PROBE_ENV, seed, maxAttempts: 3, policy: noisyPolicy(0.4), rngSeed: seed ^ 0x2545f491 });
    const examples = compactExamples(trial, exOpts);
    const contexts = actingContexts(trial);
    const acting = examples.filter((e) => e.kind === 'action');
    if (acting.length !== contexts.length) {
      throw new Error(`trial ${seed}: ${acting.length} acting examples for ${contexts.length} decisions`);
    }
    for (const e of examples) {
      if (e.kind !== 'reflection' || e.failure !== 'C was a mine.') continue;
      const lp = nextLogprobs(model, e.ids.slice(0, e.at[0]! + 1));
      const want = e.targets[0]![0]!;
      prompts++;
      lpSum += lp[want]!;
      if (argmax(lp) === want) top1++;
    }
    acting.forEach((e, k) => {
      if (!e.namedMines) return;
      const named = e.namedMines;
      const ctx = contexts[k]!;
      // with the memory as served: the example's prompt, up to the answer position
      const lpWith = nextLogprobs(model, e.ids.slice(0, e.at[0]! + 1));
      // the same decision with no memory: attempt 0, no earlier attempts
      const lpWithout = nextLogprobs(model, tok.fitPrompt(renderActPrompt({
        instructions: trial.instructions, memory: 'reflection_only', attempt: 0, previousAttempts: [],
        steps: ctx.steps, observation: ctx.observation, env: trial.env, format,
      }), model.config.block_size, ACTION_RESERVE).ids);
      const mass = (lp: number[]) => named.reduce((sum, v) => sum + Math.exp(lp[v]!), 0);
      const safest = mineSweeperChoices(ctx.observation, mines, new Set()).map((c) => pieceToken(tok, c));
      const blind = safest.filter((v) => named.includes(v)).length / safest.length;
      for (const sums of e.memoryMatters ? [inPlay, inPlayMatters] : [inPlay]) {
        sums.add(mass(lpWith), mass(lpWithout), named.includes(argmax(lpWith)), named.includes(argmax(lpWithout)), blind);
      }
    });
  }
  const all = new ActingSums(), canBeMine = new ActingSums(), provablySafe = new ActingSums();
  for (let i = 0; i < boards; i++) {
    const obs = makeEnv(PROBE_ENV).reset(evalSeed(0, i)).observation;
    const act = (attempt: number, reflection: string | null) => tok.fitPrompt(renderActPrompt({
      instructions: 'minesweeper', memory: 'reflection_only', attempt, steps: [], observation: obs, env: 'minesweeper', format,
      previousAttempts: reflection === null ? [] : [{ steps: [], finalObservation: '', success: false, reflection }],
    }), model.config.block_size, ACTION_RESERVE).ids;
    const lp0 = nextLogprobs(model, act(0, null));
    const fav = argmax(lp0);
    const cell = tok.decode([fav]);
    const at = /^\((\d+), (\d+)\)$/.exec(cell);
    if (!at) continue; // the favourite is not a cell: nothing to name
    const lp1 = nextLogprobs(model, act(1, `${cell} was a mine.`));
    const before = Math.exp(lp0[fav]!), after = Math.exp(lp1[fav]!), still = argmax(lp1) === fav;
    all.add(before, after, still);
    // P(mine) of the cell on this board: NaN for a revealed cell, 0 where a number proves it safe
    const cells = parseGridRows(obs);
    const r = Number(at[1]) - 1, c = Number(at[2]) - 1;
    const pMine = r < cells.length && c < cells[0]!.length ? analyseMines(cells, mines).probability[r * cells[0]!.length + c]! : NaN;
    (pMine > 0 ? canBeMine : provablySafe).add(before, after, still);
  }
  return {
    model: name,
    reflection: { prompts, meanLogprob: prompts ? lpSum / prompts : NaN, top1: prompts ? top1 / prompts : NaN },
    acting: { ...all.figures(), canBeMine: canBeMine.figures(), provablySafe: provablySafe.figures() },
    memoryInPlay: { ...inPlay.figures(), memoryMatters: inPlayMatters.figures() },
  };
}
