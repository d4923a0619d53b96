/**
 * `npm run experiment:base-memory-probe -- [--model DIR]... [--boards N] [--out FILE]`: three probes of a
 * compact base checkpoint that say whether LaMer's memory can work with it, without playing
 * sessions (teacher-forced, one forward pass per prompt, deterministic):
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
 * Prints two tables (probes 1 and 2, one row per model; probe 3, two rows per model: every decision
 * whose memory names mines, and those where the memory changes the solver's answer) and writes the
 * figures as JSON (default experiments/results/base-memory-probe.json): per model `reflection` (probe 1),
 * `acting` (probe 2: its top-level figures over every board whose favourite is a cell, as before
 * the split, and the split in `canBeMine` and `provablySafe`) and `memoryInPlay` (probe 3: top
 * level every decision whose memory names mines, `memoryMatters` the subset). A figure with nothing
 * to measure is null in the JSON, '-' in the tables.
 * Exit code 2 for bad options: one line on stderr naming the option, checked before any work (a
 * --model folder without a compact checkpoint's model.json among them), except a --model folder's
 * weight files, read when its turn comes; 1 for a failure later.
 */
import { parseArgs } from 'node:util';
import { existsSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { gameVocabulary } from '../src/envs/vocab.js';
import { initBackend } from '../src/model/backend.js';
import { checkpointText, loadCheckpoint, readCheckpointMetadata } from '../src/model/checkpoint.js';
import { GameTokenizer } from '../src/model/tokenizers.js';
import { checkOutFile, intOpt, orFail, parseArgsMessage } from '../src/cli/args.js';
import { ensureDirSync } from '../src/ensure-dir.js';
import { PROBE_ENV, probe, type InPlayFigures, type MemoryProbe } from '../src/recipes/sft-base/memory-probe.js';

export { probe, type ActingFigures, type InPlayFigures, type MemoryProbe } from '../src/recipes/sft-base/memory-probe.js';

const USAGE = `usage: npm run experiment:base-memory-probe -- [options]

  --model DIR   a compact checkpoint folder (model.json + weights); repeat for several
                (default models/base)
  --boards N    held-out trials (probes 1 and 3) and boards (probe 2), an integer in
                [1, 100000] (default 200)
  --out FILE    the figures as JSON (default experiments/results/base-memory-probe.json; a missing
                folder is created)
  -h, --help    print this text and exit

Exit code: 0; 2 for bad options (one line on stderr naming the option); 1 for a failure later.`;

/** A bad command line: one line on stderr (as the lamer CLIs, src/cli/args.ts), exit code 2. */
function fail(msg: string): never {
  process.stderr.write(`experiment:base-memory-probe: ${msg.replace(/\s*\n\s*/g, ' ')}\n`);
  process.exit(2);
}

/**
 * Header lines of the first printed table (markdown): probes 1 and 2. Probe 2's figures are over the
 * boards where the favourite can be a mine; the boards where it is provably safe are only counted
 * (their figures are in the JSON, `acting.provablySafe`).
 */
export const TABLE_HEAD =
  '| model | mine reflections: prompts | first token (the cell): mean logprob (chance -3.58) | top-1 (%) ' +
  '| boards, favourite can be a mine | P(favourite) without memory | with memory naming it a mine | still top-1 (%) | boards left out, favourite provably safe |\n' +
  '|---|---|---|---|---|---|---|---|---|';

/** Header lines of the second printed table (markdown): probe 3, two rows per model. */
export const IN_PLAY_HEAD =
  '| model | reads memory in play: decisions | P(named cells) with memory | without memory | a named cell top-1 with memory (%) | without memory (%) | memory-blind solver: P(named cells) |\n' +
  '|---|---|---|---|---|---|---|';

const fix = (x: number, d: number) => (Number.isFinite(x) ? x.toFixed(d) : '-');
const pct = (x: number) => fix(100 * x, 1);

/**
 * One model's row of the first table; a figure with nothing to measure (NaN: no attempt ended on a
 * mine, or no board's favourite is a cell that can be a mine, among few --boards) prints '-'.
 */
export function tableRow(r: MemoryProbe): string {
  const m = r.acting.canBeMine;
  return `| ${r.model} | ${r.reflection.prompts} | ${fix(r.reflection.meanLogprob, 3)} | ${pct(r.reflection.top1)} ` +
    `| ${m.boards} | ${fix(m.pBefore, 3)} | ${fix(m.pAfter, 3)} | ${pct(m.stillTop1)} | ${r.acting.provablySafe.boards} |`;
}

/**
 * One model's rows of the second table: every decision whose memory names mines, then those where
 * the memory changes the solver's answer; a figure with nothing to measure prints '-'.
 */
export function inPlayRows(r: MemoryProbe): string[] {
  const row = (label: string, p: InPlayFigures) =>
    `| ${r.model}, ${label} | ${p.decisions} | ${fix(p.pNamedWithMemory, 4)} | ${fix(p.pNamedWithoutMemory, 4)} ` +
    `| ${pct(p.argmaxNamedWithMemory)} | ${pct(p.argmaxNamedWithoutMemory)} | ${fix(p.blindSolverShare, 4)} |`;
  return [row('memory names mines', r.memoryInPlay), row('memory changes the answer', r.memoryInPlay.memoryMatters)];
}

interface Options { models: string[]; boards: number; out: string }

/**
 * Parses and checks the command line before any work: every --model must hold a compact
 * checkpoint's model.json (metadata only, weights are read later), --boards an integer in range,
 * --out a file path whose folder can be created. Exits 2 with one line otherwise, 0 after --help.
 */
async function parseOptions(argv: string[]): Promise<Options> {
  let values: { model?: string[]; boards?: string; out?: string; help?: boolean };
  try {
    ({ values } = parseArgs({
      args: argv, strict: true, allowPositionals: false,
      options: { model: { type: 'string', multiple: true }, boards: { type: 'string' }, out: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
    }));
  } catch (e) {
    fail(parseArgsMessage(e));
  }
  if (values.help) {
    process.stdout.write(USAGE + '\n');
    process.exit(0);
  }
  // digits only (intOpt): Number() alone would take '', '0x10' and '1e3'
  const boards = orFail(() => intOpt('boards', values.boards, 200, 1, 100_000), fail);
  const models = values.model ?? ['models/base'];
  for (const dir of models) {
    if (!existsSync(path.join(dir, 'model.json'))) fail(`--model ${dir}: no model.json there`);
    const metadata = await readCheckpointMetadata(dir).catch((e: Error) => fail(`--model ${dir}: ${e.message}`));
    const format = checkpointText(metadata).promptFormat.name;
    if (format !== 'compact') fail(`--model ${dir}: not a compact checkpoint (prompt format ${format})`);
  }
  const out = values.out ?? 'experiments/results/base-memory-probe.json';
  if (out === '' || (existsSync(out) && statSync(out).isDirectory())) fail(`--out '${out}' must be a file path, not a folder`);
  // its folder is made when the figures are written; checked now without making it
  orFail(() => checkOutFile('out', out), fail);
  return { models, boards, out };
}

async function main(): Promise<void> {
  const { models, boards, out } = await parseOptions(process.argv.slice(2));
  await initBackend('wasm');
  const tok = new GameTokenizer(gameVocabulary());
  const rows: MemoryProbe[] = [];
  for (const dir of models) {
    // the weights are read only now: a folder whose weight files are missing or bad still ends in one line
    const { model, metadata } = await loadCheckpoint(dir).catch((e: Error) => fail(`--model ${dir}: ${e.message}`));
    try {
      const format = checkpointText(metadata).promptFormat;
      if (format.name !== 'compact') throw new Error(`${dir}: not a compact checkpoint`); // checked in parseOptions
      rows.push(probe(model, format, tok, boards, dir));
    } finally {
      model.dispose();
    }
  }
  console.log(TABLE_HEAD);
  for (const r of rows) console.log(tableRow(r));
  console.log('\n' + IN_PLAY_HEAD);
  for (const r of rows) for (const line of inPlayRows(r)) console.log(line);
  ensureDirSync(path.dirname(out));
  writeFileSync(out, JSON.stringify({ env: PROBE_ENV, boards, measuredAt: new Date().toISOString(), rows }, null, 1) + '\n');
  console.log(`written: ${out}`);
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('base-memory-probe.ts')) {
  main().catch((e) => {
    process.stderr.write(`experiment:base-memory-probe: ${(e as Error).stack ?? e}\n`);
    process.exit(1);
  });
}
