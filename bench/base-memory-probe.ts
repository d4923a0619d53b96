/**
 * `npm run bench:base-memory -- [--model DIR]... [--boards N] [--out FILE]`: two probes of a
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
 *    the argmax. A model that reads its memory moves P(c) to about 0.
 *
 * Prints a table; writes the figures as JSON (default bench/results/base-memory-probe.json).
 * Exit code 2 for bad options: one line on stderr naming the option, checked before any work (a
 * --model folder without a compact checkpoint's model.json among them), except a --model folder's
 * weight files, read when its turn comes; 1 for a failure later.
 */
import { parseArgs } from 'node:util';
import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { renderActPrompt } from '../src/agent/prompt.js';
import { noisyPolicy, playCompactTrial } from '../src/envs/compact-data.js';
import { evalSeed, makeEnv } from '../src/envs/index.js';
import { gameVocabulary } from '../src/envs/vocab.js';
import { initBackend } from '../src/model/backend.js';
import { checkpointText, loadCheckpoint, readCheckpointMetadata } from '../src/model/checkpoint.js';
import type { GPT } from '../src/model/gpt.js';
import type { CompactPromptFormat } from '../src/model/prompt-format.js';
import { GameTokenizer } from '../src/model/tokenizers.js';
import { compactExamples } from '../src/training/data/compact-sft.js';
import { positionLogits } from '../src/training/maths/soft-targets.js';
import { ACTION_RESERVE, REFLECTION_RESERVE } from '../src/cli/sft-compact-play.js';
import { parseArgsMessage } from '../src/cli/args.js';

const ENV = 'minesweeper-6x6-3';

/** Log-probabilities `[V]` of the next token after `ids`. */
function nextLogprobs(model: GPT, ids: number[]): number[] {
  return tf.tidy(() => {
    const idx = tf.tensor2d(Int32Array.from(ids), [1, ids.length], 'int32');
    return (tf.logSoftmax(positionLogits(model, idx, tf.tensor1d([ids.length - 1], 'int32'))).arraySync() as number[][])[0]!;
  });
}

const argmax = (xs: number[]): number => xs.reduce((best, x, i) => (x > xs[best]! ? i : best), 0);

export interface MemoryProbe {
  model: string;
  reflection: { prompts: number; meanLogprob: number; top1: number };
  acting: { boards: number; pBefore: number; pAfter: number; stillTop1: number };
}

/** Both probes of one checkpoint (see the module comment). */
export function probe(model: GPT, format: CompactPromptFormat, tok: GameTokenizer, boards: number, name: string): MemoryProbe {
  const exOpts = { tokenizer: tok, format, blockSize: model.config.block_size, actionReserve: ACTION_RESERVE, reflectionReserve: REFLECTION_RESERVE };
  let prompts = 0, lpSum = 0, top1 = 0;
  for (let i = 0; i < boards; i++) {
    const seed = evalSeed(0, i);
    const trial = playCompactTrial({ envName: ENV, seed, maxAttempts: 3, policy: noisyPolicy(0.4), rngSeed: seed ^ 0x2545f491 });
    for (const e of compactExamples(trial, exOpts)) {
      if (e.kind !== 'reflection' || e.failure !== 'C was a mine.') continue;
      const lp = nextLogprobs(model, e.ids.slice(0, e.at[0]! + 1));
      const want = e.targets[0]![0]!;
      prompts++;
      lpSum += lp[want]!;
      if (argmax(lp) === want) top1++;
    }
  }
  let n = 0, before = 0, after = 0, still = 0;
  for (let i = 0; i < boards; i++) {
    const obs = makeEnv(ENV).reset(evalSeed(0, i)).observation;
    const act = (attempt: number, reflection: string | null) => tok.fitPrompt(renderActPrompt({
      instructions: 'minesweeper', memory: 'reflection_only', attempt, steps: [], observation: obs, env: 'minesweeper', format,
      previousAttempts: reflection === null ? [] : [{ steps: [], finalObservation: '', success: false, reflection }],
    }), model.config.block_size, ACTION_RESERVE).ids;
    const lp0 = nextLogprobs(model, act(0, null));
    const fav = argmax(lp0);
    const cell = tok.decode([fav]);
    if (!/^\(\d+, \d+\)$/.test(cell)) continue; // the favourite is not a cell: nothing to name
    const lp1 = nextLogprobs(model, act(1, `${cell} was a mine.`));
    n++;
    before += Math.exp(lp0[fav]!);
    after += Math.exp(lp1[fav]!);
    if (argmax(lp1) === fav) still++;
  }
  return {
    model: name,
    reflection: { prompts, meanLogprob: prompts ? lpSum / prompts : NaN, top1: prompts ? top1 / prompts : NaN },
    acting: { boards: n, pBefore: n ? before / n : NaN, pAfter: n ? after / n : NaN, stillTop1: n ? still / n : NaN },
  };
}

const USAGE = `usage: npm run bench:base-memory -- [options]

  --model DIR   a compact checkpoint folder (model.json + weights); repeat for several
                (default models/base)
  --boards N    held-out trials and boards per probe, an integer in [1, 100000] (default 200)
  --out FILE    the figures as JSON (default bench/results/base-memory-probe.json; a missing folder is created)
  -h, --help    print this text and exit

Exit code: 0; 2 for bad options (one line on stderr naming the option); 1 for a failure later.`;

/** A bad command line: one line on stderr (as the lamer CLIs, src/cli/args.ts), exit code 2. */
function fail(msg: string): never {
  process.stderr.write(`bench:base-memory: ${msg.replace(/\s*\n\s*/g, ' ')}\n`);
  process.exit(2);
}

/** Header lines of the printed table (markdown). */
export const TABLE_HEAD = '| model | mine reflections: prompts | first token (the cell): mean logprob (chance -3.58) | top-1 (%) | boards | P(favourite) without memory | with memory naming it a mine | still top-1 (%) |\n|---|---|---|---|---|---|---|---|';

/**
 * One model's row of the printed table; a figure with nothing to measure (NaN: no attempt ended on
 * a mine, or no board's favourite is a cell, among few --boards) prints '-'.
 */
export function tableRow(r: MemoryProbe): string {
  const fix = (x: number, d: number) => (Number.isFinite(x) ? x.toFixed(d) : '-');
  const pct = (x: number) => fix(100 * x, 1);
  return `| ${r.model} | ${r.reflection.prompts} | ${fix(r.reflection.meanLogprob, 3)} | ${pct(r.reflection.top1)} | ${r.acting.boards} | ${fix(r.acting.pBefore, 3)} | ${fix(r.acting.pAfter, 3)} | ${pct(r.acting.stillTop1)} |`;
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
  // digits only: Number() alone would take '', ' 5', '0x10' and '1e3'
  const boards = values.boards === undefined ? 200 : /^\d+$/.test(values.boards) ? Number(values.boards) : NaN;
  if (!Number.isInteger(boards) || boards < 1 || boards > 100_000) fail(`--boards must be an integer in [1, 100000], got '${values.boards}'`);
  const models = values.model ?? ['models/base'];
  for (const dir of models) {
    if (!existsSync(path.join(dir, 'model.json'))) fail(`--model ${dir}: no model.json there`);
    const metadata = await readCheckpointMetadata(dir).catch((e: Error) => fail(`--model ${dir}: ${e.message}`));
    const format = checkpointText(metadata).promptFormat.name;
    if (format !== 'compact') fail(`--model ${dir}: not a compact checkpoint (prompt format ${format})`);
  }
  const out = values.out ?? 'bench/results/base-memory-probe.json';
  if (out === '' || (existsSync(out) && statSync(out).isDirectory())) fail(`--out '${out}' must be a file path, not a folder`);
  try {
    mkdirSync(path.dirname(out), { recursive: true });
  } catch (e) {
    fail(`--out ${out}: cannot create its folder (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
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
  writeFileSync(out, JSON.stringify({ env: ENV, boards, measuredAt: new Date().toISOString(), rows }, null, 1) + '\n');
  console.log(`written: ${out}`);
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('base-memory-probe.ts')) {
  main().catch((e) => {
    process.stderr.write(`bench:base-memory: ${(e as Error).stack ?? e}\n`);
    process.exit(1);
  });
}
