/**
 * The options of `npm run model:sft-base` (./sft-base.ts), the recipe of the shipped base: one
 * table (`SFT_BASE_OPTIONS`: name, kind, default, range and help of each option, src/recipes/options.ts),
 * from which the usage text, the parsing, the checks and `--config FILE` come; then the checks that
 * join options (`parseSftBaseArgs`). The first stage of models/base is src/recipes/configs/base.json;
 * eight `--from` stages follow it (models/base/README.md, and `meta.lineage` in its model.json).
 */
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { ensureDirSync } from '../../ensure-dir.js';
import { makeEnv } from '../../envs/index.js';
import { BASE_SHAPE } from '../../model/gpt.js';
import { DEFAULT_LIMITS } from '../../model/sampling.js';
import { UsageError } from '../../shared/usage-error.js';
import { opt, parseTable, usageText, type ArgsOf } from '../options.js';

/** The npm script that runs ./sft-base.ts (package.json), the prefix of its messages. */
export const COMMAND = 'model:sft-base';

/**
 * Smallest context the builtin engine loads with its default generation caps
 * (src/policy/builtin-engine.ts: the larger cap + 16): a smaller model could not be served.
 */
const MIN_BLOCK = Math.max(DEFAULT_LIMITS.maxActionTokens, DEFAULT_LIMITS.maxReflectionTokens) + 16;

/** One item of the curriculum: an env name with its board parameters (src/envs) and its weight. */
export interface CurriculumItem { env: string; weight: number }

/** `--curriculum` `env:weight,...` (weight 1 when absent). @throws UsageError for an unknown env or a weight <= 0. */
function parseCurriculum(text: string): CurriculumItem[] {
  return text.split(',').map((item) => {
    const [env, w] = item.split(':');
    try {
      makeEnv(env ?? ''); // the name and its board parameters
    } catch (e) {
      throw new UsageError(`--curriculum: ${(e as Error).message}`);
    }
    const weight = w === undefined ? 1 : Number(w);
    if (!(weight > 0)) throw new UsageError(`--curriculum: weight of ${env} must be > 0`);
    return { env: env!, weight };
  });
}

/**
 * The options, in the order of the usage text and of `options` in a checkpoint's metadata. Each
 * entry's `help` is its docstring; the default and the range are the entry's own fields.
 */
export const SFT_BASE_OPTIONS = {
  minutes: opt.number({
    meta: 'M', default: 95, range: [0.05, 10_000], help: 'training wall-clock budget in minutes, evaluations excluded',
  }),
  steps: opt.int({ default: null, range: [1, 10_000_000], help: 'stop after N optimiser steps instead of --minutes' }),
  layers: opt.int({ default: BASE_SHAPE.n_layer, range: [1, 48], help: 'transformer blocks of the model' }),
  embd: opt.int({ default: BASE_SHAPE.n_embd, range: [16, 1024], help: 'width of the model (a multiple of --heads)' }),
  heads: opt.int({ default: BASE_SHAPE.n_head, range: [1, 64], help: 'attention heads per block' }),
  block: opt.int({
    default: BASE_SHAPE.block_size, range: [MIN_BLOCK, 4096],
    help: `context of the model in tokens; at least ${MIN_BLOCK}, the smallest context the server loads with its default generation caps`,
  }),
  batch: opt.int({ default: 32, range: [1, 4096], help: 'sequences per step' }),
  lr: opt.number({ default: 0.002, range: [1e-6, 1], help: 'peak learning rate, linear warm-up 200 steps then cosine to 10%' }),
  curriculum: opt.text({
    meta: 'LIST', parse: parseCurriculum, help: 'env:weight,... the boards of the trials and their weights',
    default: 'minesweeper-4x4-2:1,minesweeper-5x5-3:1,minesweeper-6x6-3:4,sokoban-5x5-1:1,sokoban-6x6-1:1,sokoban-6x6-2:3',
  }),
  daggerFrom: opt.number({ meta: 'F', default: 0.2, range: [0, 1], help: 'fraction of the budget after which DAgger rounds start' }),
  daggerShare: opt.number({ meta: 'F', default: 0.4, range: [0, 1], help: 'share of new trials played by the model once DAgger runs' }),
  leversFrom: opt.number({
    meta: 'F', default: 0, range: [0, 1], defaultText: '0: from the first step',
    help: 'fraction of the budget after which the memory contrasts (--memory-contrast, --memory-share) and the unlikelihood terms '
      + '(--memory-, --invalid-, --move-, --mine-, --dead-push-unlikelihood) start, so that a run from scratch builds play first '
      + 'and adds them later in the same run',
  }),
  evalEvery: opt.int({ default: 1500, range: [1, 1_000_000], help: 'steps between held-out evaluations' }),
  evalTasks: opt.int({ default: 32, range: [1, 100_000], help: 'held-out tasks per game per evaluation' }),
  probeBoards: opt.int({
    default: 100, range: [0, 100_000], defaultText: '100; 0: off',
    help: 'held-out boards of the memory probe (./memory-probe.ts: writes the mine, acts on a memory line, reads memory in play) '
      + 'at each learning-curve point, beside the greedy memory minus independent retries (memory-gain)',
  }),
  seed: opt.int({ default: 1, range: [0, 2 ** 31 - 1], help: 'initialisation and data seed' }),
  memoryAt: opt.choice({
    meta: 'WHERE', default: 'tail', choices: ['head', 'tail'],
    help: 'where the compact prompt puts the memory lines: tail (after the board, so the board keeps its positions in every '
      + 'attempt) or head (after the env tag, the layout of checkpoints made before the option); --from keeps the checkpoint\'s',
  }),
  dataThread: opt.onOff({
    default: false,
    help: 'play and label trials in a thread of their own, beside the optimiser step (DAgger then plays with the weights of one '
      + 'step earlier)',
  }),
  balanceReflections: opt.onOff({
    default: false,
    help: 'reflection batches draw each failure class (a mine, turns ran out, a cornered box, a dead end) equally often instead of '
      + 'as often as the trials produce it',
  }),
  reflectionShare: opt.number({
    meta: 'F', default: null, range: [0, 1], defaultText: 'the examples\' own share, a few percent',
    help: 'share of steps that train reflections, each reflection then trained about F / (its share of the examples) times',
  }),
  memoryWeight: opt.int({
    meta: 'K', default: 1, range: [1, 64],
    help: 'copies of each MineSweeper decision where the memory changes the solver\'s target (a mine it names would otherwise be '
      + 'among the safest cells)',
  }),
  memoryContrast: opt.number({
    meta: 'F', default: 0, range: [0, 1],
    help: 'once DAgger runs, share of MineSweeper decisions that also train the same board in a later attempt whose memory names '
      + 'the cell the model clicks there as a mine (where it can be one), the target the solver\'s cells knowing it',
  }),
  memoryPairs: opt.onOff({
    default: false,
    help: 'contrasts only where the model\'s click is among the solver\'s safest cells of the bare board, each with that board\'s '
      + 'no-memory decision beside it, so that only the memory line separates the two targets',
  }),
  memoryShare: opt.number({
    meta: 'F', default: null, range: [0, 1],
    defaultText: 'none: they are drawn as often as the trials make them, a few percent of the decisions',
    help: 'share of steps that train memory contrasts (--memory-contrast), drawn with reuse from the newest 2048',
  }),
  memoryUnlikelihood: opt.number({
    meta: 'L', default: 0, range: [0, 100],
    help: 'weight of an unlikelihood term on the cells that a MineSweeper memory names as mines, at every decision after such a '
      + 'reflection: -L log(1 - P(cell)) (its logit is then pushed down L + 1 times as hard as by the soft target alone)',
  }),
  invalidUnlikelihood: opt.number({
    meta: 'L', default: 0, range: [0, 100],
    help: 'the same term on MineSweeper\'s revealed cells, which the game refuses as invalid clicks',
  }),
  moveUnlikelihood: opt.number({
    meta: 'L', default: 0, range: [0, 100],
    help: 'the same term on Sokoban moves that would not move at each move of the answer (into a wall or an unpushable box: the '
      + 'game\'s invalid no-op), from the state the solver\'s earlier moves of that answer reach',
  }),
  mineUnlikelihood: opt.number({
    meta: 'L', default: 0, range: [0, 100],
    help: 'the same term on the MineSweeper cells that the board itself proves to be mines (the solver\'s mine probability 1 '
      + 'from the revealed numbers and the mine count, without memory), at every decision',
  }),
  pushReflections: opt.onOff({
    default: false, defaultText: 'off; --dead-push-unlikelihood above 0 or --push-memory-targets on turns it on',
    help: 'Sokoban reflections name the push that ended the attempt dead (`box (2, 3) right dead end.`: the box on (2, 3) '
      + 'pushed right) instead of a cornered box or "boxes stuck. dead end."; the decisions of later attempts record the moves '
      + 'that would make a push their memory names (counted as memory decisions for --memory-weight), and with --memory-contrast '
      + 'Sokoban decisions where the model\'s own answer makes a dead push also train with a memory line naming it',
  }),
  deadPushUnlikelihood: opt.number({
    meta: 'L', default: 0, range: [0, 100],
    help: 'the same term on the Sokoban moves that would make a push that the memory names as a dead end (--push-reflections), '
      + 'at each move of the answer, from the state the solver\'s earlier moves of that answer reach',
  }),
  pushMemoryTargets: opt.onOff({
    default: false,
    help: 'a Sokoban decision whose memory names dead pushes takes the solver\'s target for the game where those pushes are '
      + 'forbidden (the shortest solution that never makes them; the plain target where none does), counted as a memory '
      + 'decision where that changes the target, and with --memory-contrast the with-memory side of a Sokoban pair takes it '
      + 'too (the twin keeps the plain one); turns --push-reflections on',
  }),
  ema: opt.number({
    meta: 'D', default: 0, range: [0, 0.99999], defaultText: '0: off',
    help: 'keep an exponential moving average of the weights with decay D (about 1 / (1 - D) steps; e.g. 0.998) and evaluate and '
      + 'save it at every point in place of the last iterate, which then goes to <out>/last-iterate at the end, measured at the '
      + 'last point too',
  }),
  from: opt.text({
    meta: 'DIR', default: null,
    help: 'go on training the compact checkpoint in DIR (its shape, tokenizer and prompt format; a fresh optimiser and schedule; '
      + 'its learning curve goes on); give a --seed other than its run\'s so that new tasks are drawn',
  }),
  out: opt.text({ meta: 'DIR', default: 'models/base', help: 'checkpoint folder, new or empty' }),
  overwrite: opt.flag({ help: 'replace the checkpoint in a non-empty --out (to rebuild models/base)' }),
};

/** The options of a run: the table's values, less `--overwrite` (used by the --out check). */
export type SftBaseOptions = Omit<ArgsOf<typeof SFT_BASE_OPTIONS>, 'overwrite'>;

/** The usage text (`--help`). */
export const USAGE = usageText(
  SFT_BASE_OPTIONS,
  `usage: npm run ${COMMAND} -- [options]`,
  'models/base: <out>/last-iterate of --config src/recipes/configs/base.json, then eight --from stages (models/base/README.md)',
);

/** The model-shape options, which --from takes from its checkpoint. */
const SHAPE_OPTIONS = ['layers', 'embd', 'heads', 'block'] as const;

/**
 * The --out folder, checked before any work: new or empty, or `--overwrite` given (the default,
 * models/base, holds the shipped checkpoint); it must be creatable, and is created.
 * @throws UsageError otherwise.
 */
function outDir(out: string, overwrite: boolean): string {
  if (existsSync(out)) {
    let entries: string[];
    try {
      entries = readdirSync(out);
    } catch (e) {
      throw new UsageError(`--out ${out}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message} (not a folder that can be read)`);
    }
    if (entries.length > 0 && !overwrite) {
      throw new UsageError(`--out ${out} is not empty (give --overwrite to replace the checkpoint there, e.g. to rebuild models/base)`);
    }
  }
  try {
    // level by level: a recursive mkdir can hang where the file system refuses a level (procfs for root)
    ensureDirSync(out);
  } catch (e) {
    throw new UsageError(`--out ${out}: cannot create it (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  return out;
}

/** The --from folder, checked: not the output folder, and no shape options beside it. @throws UsageError */
function checkFrom(from: string, out: string, shapeOptions: readonly string[]): void {
  if (path.resolve(from) === path.resolve(out)) {
    throw new UsageError('--from and --out must be different folders (the start checkpoint is read, the result written)');
  }
  if (shapeOptions.length > 0) {
    throw new UsageError(`--from takes the model shape from the checkpoint; drop --${shapeOptions.join(', --')}`);
  }
  if (!existsSync(path.join(from, 'model.json'))) throw new UsageError(`--from ${from}: no model.json there`);
}

/**
 * Parses the command line (with `--config FILE`): each option by its table entry, then the checks
 * that join options (--embd a multiple of --heads; --from without shape options or --memory-at;
 * --dead-push-unlikelihood above 0 and --push-memory-targets on turn --push-reflections on), and
 * last the --out folder, which it creates (only a command line without other errors should).
 * @returns the options, or null for --help.
 * @throws UsageError with a one-line message naming the option.
 */
export function parseSftBaseArgs(argv: string[]): SftBaseOptions | null {
  const parsed = parseTable(SFT_BASE_OPTIONS, argv);
  if (parsed === null) return null;
  const { args, given } = parsed;
  if (args.embd % args.heads !== 0) throw new UsageError(`--embd (${args.embd}) must be divisible by --heads (${args.heads})`);
  if (args.from !== null) {
    if (given.has('memoryAt')) throw new UsageError('--from keeps the prompt format of its checkpoint; drop --memory-at');
    checkFrom(args.from, args.out, SHAPE_OPTIONS.filter((k) => given.has(k)));
  }
  const { overwrite, ...options } = args;
  // the dead-push term and the push-memory targets need reflections that name the push
  const pushReflections = args.pushReflections || args.deadPushUnlikelihood > 0 || args.pushMemoryTargets;
  return { ...options, pushReflections, out: outDir(args.out, overwrite) };
}
