/**
 * The options of `npm run model:sft-base` (src/recipes/sft-base/options.ts): the committed run of
 * the shipped base's first stage (src/recipes/configs/base.json) against the options models/base
 * records of that stage, the lineage of models/base (each stage's weights and command against what
 * the checkpoint records), the checks that join options, the model shape's one source, and the
 * recipe's learning-rate schedule.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { BASE_SHAPE } from '../../../src/model/gpt.js';
import { parseSftBaseArgs, SFT_BASE_OPTIONS, USAGE } from '../../../src/recipes/sft-base/options.js';
import { learningRate } from '../../../src/recipes/sft-base/sft-base.js';
import { UsageError } from '../../../src/shared/usage-error.js';
import { root } from '../../helpers/cli.js';
import { tmpDir } from '../../helpers/index.js';

const BASE_CONFIG = path.join(root, 'src/recipes/configs/base.json');
const BASE_DIR = path.join(root, 'models/base');
const shipped = JSON.parse(fs.readFileSync(path.join(BASE_DIR, 'model.json'), 'utf8')).userDefinedMetadata.lamer;
const stages = shipped.meta.lineage.stages;
const newOut = () => path.join(tmpDir('lamer-sft-base-options-'), 'out');

describe('the committed run of the first stage of models/base (run H)', () => {
  it('gives every option models/base records of its first stage (its out folder aside), and the later options their defaults', () => {
    const out = newOut();
    const o = parseSftBaseArgs(['--config', BASE_CONFIG, '--out', out])!;
    expect(stages[0]).toMatchObject({ stage: 'H', from: null });
    expect(stages[0].command).toContain('--config src/recipes/configs/base.json');
    const { out: _recordedOut, ...recorded } = stages[0].meta.options;
    expect(o).toEqual({
      ...recorded, memoryPairs: false, memoryShare: null, mineUnlikelihood: 0, pushReflections: false, deadPushUnlikelihood: 0,
      pushMemoryTargets: false, leversFrom: 0, probeBoards: 0, out,
    });
    // the six options of its command line (models/base/README.md), and the stage is its last iterate
    expect(o).toMatchObject({ minutes: 110, dataThread: true, reflectionShare: 0.2, memoryWeight: 6, ema: 0.998, seed: 21 });
    expect(stages[0].meta.weights).toBe('last');
  });

  it('names every option of the table, so that a later default does not change the run', () => {
    const keys = Object.keys(JSON.parse(fs.readFileSync(BASE_CONFIG, 'utf8'))).filter((k) => k !== '$comment');
    const table = Object.keys(SFT_BASE_OPTIONS).map((k) => k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`));
    expect(table.filter((k) => !keys.includes(k))).toEqual(['steps', 'from', 'out', 'overwrite']);
  });

  it('is overridden by the command line: a short run of the same recipe', () => {
    const o = parseSftBaseArgs(['--config', BASE_CONFIG, '--out', newOut(), '--steps', '30', '--data-thread', 'off'])!;
    expect(o).toMatchObject({ steps: 30, dataThread: false, minutes: 110, seed: 21, ema: 0.998 });
  });

  it('names a whole run from scratch: --from beside it is refused', () => {
    expect(() => parseSftBaseArgs(['--config', BASE_CONFIG, '--out', newOut(), '--from', BASE_DIR])).toThrow(
      new UsageError('--from keeps the prompt format of its checkpoint; drop --memory-at'),
    );
  });
});

describe('the lineage of models/base', () => {
  it('chains each stage to the one before, ending at the weights and counters models/base holds', () => {
    const weights = createHash('sha256').update(fs.readFileSync(path.join(BASE_DIR, 'weights.bin'))).digest('hex');
    expect(stages.map((s: { stage: string }) => s.stage)).toEqual(['H', 'I1', 'I2', 'I3', 'I4', 'I5', 'I6', 'I7', 'I9']);
    for (let i = 1; i < stages.length; i++) expect(stages[i].from).toBe(stages[i - 1].stage);
    expect(stages.at(-1).weightsSha256).toBe(weights);
    // the start of the last stage, as its run recorded it, is the stage before
    expect(shipped.meta.parent.weightsSha256).toBe(stages.at(-2).weightsSha256);
    const steps = stages.slice(1).reduce((n: number, s: { steps: number }) => n + s.steps, stages[0].meta.steps);
    expect(steps).toBe(shipped.meta.steps);
    const curve = JSON.parse(fs.readFileSync(path.join(BASE_DIR, 'learning-curve.json'), 'utf8'));
    expect(curve.points.at(-1).step).toBe(shipped.meta.steps);
  });

  it('records the command of its last stage: parsed, it gives the options models/base records of its run', () => {
    const command: string = stages.at(-1).command;
    const argv = command.slice(command.indexOf(' -- ') + 4).split(/\s+/);
    const at = (flag: string) => argv.indexOf(flag) + 1;
    argv[at('--from')] = BASE_DIR; // the stage before's folder, here any compact checkpoint
    const out = newOut();
    argv[at('--out')] = out;
    const { out: _recordedOut, from: _recordedFrom, ...recorded } = shipped.meta.options;
    // options added after the stage ran take their defaults
    expect(parseSftBaseArgs(argv)).toEqual({
      ...recorded, pushReflections: false, deadPushUnlikelihood: 0, pushMemoryTargets: false, leversFrom: 0, probeBoards: 100,
      from: BASE_DIR, out,
    });
  });
});

describe('parseSftBaseArgs', () => {
  it('takes the model shape of the shipped base by default, from BASE_SHAPE, the shape models/base has', () => {
    const o = parseSftBaseArgs(['--out', newOut()])!;
    expect([o.layers, o.embd, o.heads, o.block]).toEqual([BASE_SHAPE.n_layer, BASE_SHAPE.n_embd, BASE_SHAPE.n_head, BASE_SHAPE.block_size]);
    expect(shipped.config).toEqual({ vocab_size: 381, ...BASE_SHAPE });
    expect(USAGE).toContain(`(default ${BASE_SHAPE.n_layer}; an integer in [1, 48])`);
  });

  it('turns push reflections on with the dead-push term, whose labels need them', () => {
    expect(parseSftBaseArgs(['--out', newOut()])).toMatchObject({ pushReflections: false, deadPushUnlikelihood: 0 });
    expect(parseSftBaseArgs(['--out', newOut(), '--push-reflections', 'on'])).toMatchObject({ pushReflections: true, deadPushUnlikelihood: 0 });
    expect(parseSftBaseArgs(['--out', newOut(), '--dead-push-unlikelihood', '2'])).toMatchObject({ pushReflections: true, deadPushUnlikelihood: 2 });
    // over the first stage's config, which names push reflections off
    expect(parseSftBaseArgs(['--config', BASE_CONFIG, '--out', newOut(), '--dead-push-unlikelihood', '2'])).toMatchObject({ pushReflections: true });
    expect(() => parseSftBaseArgs(['--dead-push-unlikelihood', '-1'])).toThrow(UsageError);
    expect(() => parseSftBaseArgs(['--push-reflections', 'yes'])).toThrow(new UsageError("--push-reflections must be on or off, got 'yes'"));
    expect(USAGE).toContain('--dead-push-unlikelihood L');
  });

  it('turns push reflections on with push-memory targets, which avoid the pushes those reflections name', () => {
    expect(parseSftBaseArgs(['--out', newOut()])).toMatchObject({ pushMemoryTargets: false });
    const off = parseSftBaseArgs(['--out', newOut(), '--push-memory-targets', 'off']);
    expect(off).toMatchObject({ pushMemoryTargets: false, pushReflections: false });
    const on = parseSftBaseArgs(['--out', newOut(), '--push-memory-targets', 'on']);
    expect(on).toMatchObject({ pushMemoryTargets: true, pushReflections: true });
    // over a config that names push reflections off
    const o = parseSftBaseArgs(['--config', BASE_CONFIG, '--out', newOut(), '--push-memory-targets', 'on'])!;
    expect(o).toMatchObject({ pushMemoryTargets: true, pushReflections: true, deadPushUnlikelihood: 0 });
    const bad = new UsageError("--push-memory-targets must be on or off, got '1'");
    expect(() => parseSftBaseArgs(['--push-memory-targets', '1'])).toThrow(bad);
    expect(() => parseSftBaseArgs(['--push-memory-targets'])).toThrow(UsageError);
    expect(USAGE).toMatch(/--push-memory-targets on\|off\s+a Sokoban decision whose memory names dead pushes/);
    expect(USAGE).toContain('turns --push-reflections on (default off)');
  });

  it('joins options: --embd a multiple of --heads, --from without shape options, --from apart from --out', () => {
    expect(() => parseSftBaseArgs(['--embd', '30', '--heads', '4'])).toThrow(new UsageError('--embd (30) must be divisible by --heads (4)'));
    expect(() => parseSftBaseArgs(['--from', BASE_DIR, '--layers', '2', '--block', '300', '--out', newOut()])).toThrow(
      new UsageError('--from takes the model shape from the checkpoint; drop --layers, --block'),
    );
    expect(() => parseSftBaseArgs(['--from', BASE_DIR, '--out', BASE_DIR])).toThrow(
      new UsageError('--from and --out must be different folders (the start checkpoint is read, the result written)'),
    );
    const empty = tmpDir('lamer-sft-base-options-');
    expect(() => parseSftBaseArgs(['--from', empty, '--out', newOut()])).toThrow(new UsageError(`--from ${empty}: no model.json there`));
  });

  it('creates --out only for a command line without other errors', () => {
    const out = newOut();
    expect(() => parseSftBaseArgs(['--out', out, '--lr', '2'])).toThrow(UsageError);
    expect(fs.existsSync(out)).toBe(false);
    expect(parseSftBaseArgs(['--out', out])!.out).toBe(out);
    expect(fs.readdirSync(out)).toEqual([]);
  });
});

describe('learningRate', () => {
  const peak = 0.002;
  it('warms up linearly over 200 steps, then decays by a cosine to 10% of the peak at step `total`', () => {
    expect(learningRate(peak, 0, 1000)).toBe(peak / 200);
    expect(learningRate(peak, 99, 1000)).toBe(peak / 2);
    expect(learningRate(peak, 199, 1000)).toBe(peak);
    expect(learningRate(peak, 200, 1000)).toBe(peak);
    expect(learningRate(peak, 1000, 1000)).toBeCloseTo(0.1 * peak, 15);
    // halfway through the decay: 10% + 90% / 2
    expect(learningRate(peak, 600, 1000)).toBeCloseTo(0.55 * peak, 15);
    for (const step of [250, 431, 777, 999]) {
      const p = (step - 200) / 800;
      expect(learningRate(peak, step, 1000)).toBeCloseTo(peak * (0.1 + 0.45 * (1 + Math.cos(Math.PI * p))), 15);
    }
  });
});
