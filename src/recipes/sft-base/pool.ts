/**
 * The compact trainer's example pool (src/recipes/sft-base/sft-base.ts): demonstration trials played by the
 * solver (with noise) or, once DAgger runs, by the model itself, turned into training examples
 * (src/training/data/compact-sft.ts) under a random board symmetry. It runs in the trainer's thread
 * or in a data thread of its own (src/recipes/sft-base/data-thread.ts); both draw the same examples
 * for the same seed and weights.
 */
import type { GPT } from '../../model/gpt.js';
import type { CompactPromptFormat } from '../../model/prompt-format.js';
import type { Tokenizer } from '../../model/tokenizers.js';
import {
  mineSweeperContrast, mineSweeperContrastPair, noisyPolicy, sokobanContrastPair,
  playCompactTrial, randomAction, solverPolicy, symmetriesFor, symmetry, transformTrial, type CompactTrial, type Symmetry, type TrialPolicy,
} from '../../envs/compact-data.js';
import { parseEnvName, trainSeed } from '../../envs/index.js';
import { Rng } from '../../envs/rng.js';
import { ACTION_RESERVE, REFLECTION_RESERVE, modelPolicy } from './play.js';
import { compactExamples, failureOf, takeOneKind, type CompactExample, type CompactExampleOptions } from '../../training/data/compact-sft.js';

/** What the pool needs from the command line. */
export interface PoolOptions {
  /** Envs and their relative weights (`--curriculum`). */
  curriculum: Array<{ env: string; weight: number }>;
  /** The run's seed: training tasks and draws follow from it. */
  seed: number;
  /** Share of new trials the model plays once DAgger runs (`--dagger-share`). */
  daggerShare: number;
  /**
   * Reflection batches draw each example's failure class (src/training/data/compact-sft.ts
   * reflectionClass: a mine, turns ran out, a cornered box, a dead end) uniformly among the
   * classes in the pool, instead of in proportion to them (`--balance-reflections`).
   */
  balanceReflections: boolean;
  /**
   * Share of batches that are reflection batches (`--reflection-share`); null: the pool's own
   * share of reflection examples (a few percent). With a share, reflection examples are kept apart
   * in a ring of the newest `REFLECTION_RING` and drawn with reuse (a failed attempt yields one
   * reflection but a dozen decisions, so a larger share than the trials produce means training each
   * reflection several times).
   */
  reflectionShare: number | null;
  /**
   * Copies of each acting example whose step has `memoryMatters` (a mine the memory names would
   * otherwise be among the solver's safest cells) put in the pool (`--memory-weight`; 1: once).
   * The soft target gives such a cell no mass, but the gradient that pushes the model off it is
   * proportional to the probability the model gives it, so these rare examples are weighted up.
   */
  memoryWeight: number;
  /**
   * Once DAgger runs, the share of MineSweeper decisions of new trials that also give a memory
   * contrast example (`--memory-contrast`; 0: none): the same board in a later attempt whose memory
   * names the cell the model clicks there greedily as a mine (when that cell can hold one), the
   * target the solver's safest cells knowing it (src/envs/compact-contrast.ts mineSweeperContrast).
   */
  memoryContrast: number;
  /**
   * Share of batches drawn from a ring of the newest `MEMORY_RING` memory contrast examples
   * (`--memory-share`; null: none, contrasts go into the pool like other decisions), drawn with
   * reuse. Contrasts are a few percent of the decisions, and the unlikelihood term on a named cell
   * pushes in proportion to the probability the model gives it, so a batch share is what makes
   * reading the memory a large part of the gradient.
   */
  memoryShare?: number | null;
  /**
   * Contrasts only where the model's click is among the solver's safest cells of the bare board,
   * each with its no-memory twin (src/envs/compact-contrast.ts mineSweeperContrastPair), so that the
   * memory line alone separates the two targets (`--memory-pairs`).
   */
  memoryPairs?: boolean;
  /**
   * Sokoban reflections name the push that ended an attempt dead, later attempts' decisions record
   * the moves that would make a named push (src/envs/compact-data.ts `TrialOptions.pushReflections`),
   * and `memoryContrast` covers Sokoban decisions too (`sokobanContrastPair`: where the model's own
   * answer makes a dead push), always as pairs (`--push-reflections`). Absent: false.
   */
  pushReflections?: boolean;
  /**
   * With `pushReflections`: Sokoban decisions whose memory names dead pushes take the solver's
   * target for the game where those pushes are forbidden, and so does the with-memory side of a
   * Sokoban contrast pair (src/envs/compact-data.ts `TrialOptions.pushMemoryTargets`,
   * `sokobanContrastPair`; `--push-memory-targets`). Absent: false.
   */
  pushMemoryTargets?: boolean;
}

/** Reflection examples kept for `reflectionShare` batches: the newest ones. */
export const REFLECTION_RING = 1024;

/** Memory examples kept for `memoryShare` batches: the newest ones. */
export const MEMORY_RING = 2048;

/** The decisions of a trial whose target avoids the pushes their memory names (`CompactStep.pushMemoryTarget`). */
const countPushMemoryTargets = (t: CompactTrial): number =>
  t.attempts.reduce((n, a) => n + a.steps.filter((s) => s.pushMemoryTarget).length, 0);

/** The examples' seed stream of a run: the same in the trainer's thread and in a data thread. */
export const poolRng = (seed: number): Rng => new Rng(seed * 7919 + 17);

/**
 * A pool of training examples kept at `size`: each new trial draws an env from the curriculum and
 * a training seed, is played by the solver (noise 0, 0.1 or 0.3) or, once DAgger runs, with
 * probability `daggerShare` by the model itself (greedy, a little noise), and is mapped by a random
 * board symmetry; the solver labels every decision whoever played it.
 */
export class ExamplePool {
  readonly items: CompactExample[] = [];
  /** With `reflectionShare`: the newest reflection examples, oldest first. */
  readonly reflections: CompactExample[] = [];
  trials = 0;
  daggerTrials = 0;
  /** With `memoryShare`: the newest memory contrast examples (twins included), oldest first. */
  readonly memory: CompactExample[] = [];
  /** Memory contrast examples made (`memoryContrast`). */
  contrasts = 0;
  /** Sokoban acting examples with `deadMoves` labels made (trials and contrasts; before `memoryWeight` copies). */
  deadPushExamples = 0;
  /** Sokoban decisions whose target avoids the pushes their memory names, changed by it (`pushMemoryTargets`; trials and contrasts). */
  pushMemoryTargets = 0;
  private readonly totalWeight: number;

  constructor(
    private readonly o: PoolOptions, private readonly model: GPT, private readonly tok: Tokenizer,
    private readonly format: CompactPromptFormat, private readonly rng: Rng, private readonly size = 4096,
  ) {
    this.totalWeight = o.curriculum.reduce((sum, c) => sum + c.weight, 0);
  }

  private pickEnv(): string {
    let r = this.rng.next() * this.totalWeight;
    for (const c of this.o.curriculum) if ((r -= c.weight) < 0) return c.env;
    return this.o.curriculum[this.o.curriculum.length - 1]!.env;
  }

  /**
   * Plays trials until the pool is full again; DAgger trials when `daggerOn`; memory contrasts
   * (`memoryContrast`, made from DAgger trials) only when `memoryOn` too (`--levers-from`).
   */
  refill(daggerOn: boolean, memoryOn = true): void {
    const exOpts = { tokenizer: this.tok, format: this.format, blockSize: this.model.config.block_size, actionReserve: ACTION_RESERVE, reflectionReserve: REFLECTION_RESERVE };
    // one policy (and memo) per refill: the weights change between refills
    const mp = daggerOn ? modelPolicy(this.model, this.tok, this.format, (e) => e) : null;
    while (this.items.length < this.size) {
      const envName = this.pickEnv();
      const seed = trainSeed(this.o.seed * 1_000_000, this.trials++);
      const byModel = daggerOn && this.rng.next() < this.o.daggerShare;
      const noise = [0, 0.1, 0.3][this.rng.int(3)]!;
      let policy: TrialPolicy = noise === 0 ? solverPolicy : noisyPolicy(noise);
      if (byModel && mp) {
        policy = (c) => (c.rng.next() < noise / 3 ? randomAction(c.env, c.observation, c.rng) : mp(c));
        this.daggerTrials++;
      }
      const trial: CompactTrial = playCompactTrial({
        envName, seed, maxAttempts: 3, policy, rngSeed: seed ^ 0x5bd1e995, ...(this.o.pushReflections ? { pushReflections: true } : {}),
        ...(this.o.pushMemoryTargets ? { pushMemoryTargets: true } : {}),
      });
      this.pushMemoryTargets += countPushMemoryTargets(trial);
      const { params } = parseEnvName(envName) as { params: { rows: number; cols: number; mines?: number } };
      const syms = symmetriesFor(params.rows, params.cols);
      const sym = symmetry(syms[this.rng.int(syms.length)]!);
      for (const ex of compactExamples(transformTrial(trial, sym), exOpts)) {
        if (ex.kind === 'reflection' && this.o.reflectionShare !== null) this.reflections.push(ex);
        else for (let k = ex.memoryMatters ? this.o.memoryWeight : 1; k > 0; k--) this.items.push(ex);
        if (ex.deadMoves) this.deadPushExamples++;
      }
      if (mp && memoryOn && trial.env === 'minesweeper' && this.o.memoryContrast > 0) this.addContrasts(trial, params.mines!, mp, sym, exOpts);
      if (mp && memoryOn && trial.env === 'sokoban' && this.o.memoryContrast > 0 && this.o.pushReflections) {
        this.addSokobanContrasts(trial, mp, sym, exOpts);
      }
    }
    if (this.reflections.length > REFLECTION_RING) this.reflections.splice(0, this.reflections.length - REFLECTION_RING);
    if (this.memory.length > MEMORY_RING) this.memory.splice(0, this.memory.length - MEMORY_RING);
  }

  /** `memoryContrast` examples of a played MineSweeper trial, mapped by the trial's symmetry. */
  private addContrasts(trial: CompactTrial, mines: number, mp: TrialPolicy, sym: Symmetry, exOpts: CompactExampleOptions): void {
    const into = this.o.memoryShare != null ? this.memory : this.items;
    const add = (t: CompactTrial) => {
      for (const ex of compactExamples(transformTrial(t, sym), { ...exOpts, reflections: false })) into.push(ex);
    };
    for (const a of trial.attempts) for (const [t, s] of a.steps.entries()) {
      if (this.rng.next() >= this.o.memoryContrast) continue;
      const cell = mp({ env: 'minesweeper', observation: s.observation, attempt: 0, step: t, memory: [], choices: null, target: null, rng: this.rng });
      if (this.o.memoryPairs) {
        const pair = mineSweeperContrastPair(trial.envName, trial.seed, s.observation, mines, cell, this.rng);
        if (!pair) continue;
        this.contrasts++;
        add(pair.withMemory);
        add(pair.twin);
        continue;
      }
      const contrast = mineSweeperContrast(trial.envName, trial.seed, s.observation, mines, cell, this.rng);
      if (!contrast) continue;
      this.contrasts++;
      add(contrast);
    }
  }

  /**
   * `memoryContrast` pairs of a played Sokoban trial (`sokobanContrastPair`), mapped by the trial's
   * symmetry: at each drawn decision, the model's answer on the bare board (a first attempt).
   */
  private addSokobanContrasts(trial: CompactTrial, mp: TrialPolicy, sym: Symmetry, exOpts: CompactExampleOptions): void {
    const into = this.o.memoryShare != null ? this.memory : this.items;
    for (const a of trial.attempts) for (const [t, s] of a.steps.entries()) {
      if (this.rng.next() >= this.o.memoryContrast) continue;
      const bare = { env: 'sokoban' as const, observation: s.observation, attempt: 0, step: t, memory: [], choices: null, target: null };
      const answer = mp({ ...bare, rng: this.rng });
      const pair = sokobanContrastPair(trial.envName, trial.seed, s.observation, answer, this.rng, this.o.pushMemoryTargets === true);
      if (!pair) continue;
      this.contrasts++;
      this.pushMemoryTargets += countPushMemoryTargets(pair.withMemory);
      for (const t2 of [pair.withMemory, pair.twin]) {
        for (const ex of compactExamples(transformTrial(t2, sym), { ...exOpts, reflections: false })) {
          into.push(ex);
          if (ex.deadMoves) this.deadPushExamples++;
        }
      }
    }
  }

  /**
   * `n` examples of one kind: without `reflectionShare`, drawn without replacement (`takeOneKind`);
   * with it, a reflection batch with probability `reflectionShare` (n distinct examples of the ring,
   * left in it: `takeOneKind` on a copy), else acting examples drawn without replacement.
   */
  take(n: number): CompactExample[] {
    const stratum = this.o.balanceReflections ? failureOf : undefined;
    const memoryBatch = this.o.memoryShare != null && this.memory.length > 0 && this.rng.next() < this.o.memoryShare;
    if (memoryBatch) return takeOneKind([...this.memory], n, this.rng);
    if (this.o.reflectionShare === null) return takeOneKind(this.items, n, this.rng, stratum);
    if (this.rng.next() < this.o.reflectionShare && this.reflections.length > 0) return takeOneKind([...this.reflections], n, this.rng, stratum);
    return takeOneKind(this.items, n, this.rng);
  }
}
