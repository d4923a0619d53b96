/**
 * The compact trainer CLI (src/recipes/sft-base/sft-base.ts) as a child process: help, usage errors
 * (of the command line and of a --config file), and a tiny run whose checkpoint loads with its game
 * tokenizer and compact prompt format.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { checkpointText, loadCheckpoint } from '../../../src/model/checkpoint.js';
import { gameVocabulary } from '../../../src/envs/vocab.js';
import { root } from '../../helpers/cli.js';
import { withAvoid } from '../../../src/recipes/sft-base/sft-base.js';
import { disposeSoftBatch, makeSoftBatch, unlikelihoodLoss } from '../../../src/training/maths/soft-targets.js';
import type { CompactExample } from '../../../src/training/data/compact-sft.js';
import { tmpDir } from '../../helpers/index.js';

beforeAll(async () => { await tf.setBackend('cpu'); await tf.ready(); });

function runCli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/recipes/sft-base/sft-base.ts', ...args], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('withAvoid', () => {
  const x: CompactExample = { kind: 'action', ids: [1, 2], at: [1], targets: [[3]], namedMines: [5], invalid: [6, 7] };
  const y: CompactExample = { kind: 'action', ids: [1, 2, 3, 4], at: [1, 2, 3], targets: [[3], [4], [8]], invalidMoves: [[5], [], [6, 7]] };
  const z: CompactExample = { kind: 'action', ids: [1, 2], at: [1], targets: [[3]], invalid: [6], provableMines: [9, 11] };
  it('weights named mines and invalid answers by their own weights at their positions, leaving out a kind at weight 0', () => {
    expect(withAvoid([x], { memory: 2, invalid: 0.5, moves: 9, mines: 4 })[0]!.avoid).toEqual([[0, 5, 2], [0, 6, 0.5], [0, 7, 0.5]]);
    expect(withAvoid([x], { memory: 0, invalid: 1, moves: 0, mines: 0 })[0]!.avoid).toEqual([[0, 6, 1], [0, 7, 1]]);
    expect('avoid' in withAvoid([x], { memory: 0, invalid: 0, moves: 1, mines: 1 })[0]!).toBe(false);
    expect(withAvoid([y], { memory: 1, invalid: 1, moves: 3, mines: 1 })[0]!.avoid).toEqual([[0, 5, 3], [2, 6, 3], [2, 7, 3]]);
    expect('avoid' in withAvoid([y], { memory: 1, invalid: 1, moves: 0, mines: 1 })[0]!).toBe(false);
  });

  it('avoids the cells a board proves to be mines at the first position with weight w.mines, only when it is > 0', () => {
    const cases: Array<[{ memory: number; invalid: number; moves: number; mines: number }, Array<[number, number, number]> | undefined]> = [
      [{ memory: 0, invalid: 0, moves: 0, mines: 2 }, [[0, 9, 2], [0, 11, 2]]],
      [{ memory: 5, invalid: 0.5, moves: 5, mines: 2 }, [[0, 6, 0.5], [0, 9, 2], [0, 11, 2]]],
      [{ memory: 1, invalid: 0.5, moves: 1, mines: 0 }, [[0, 6, 0.5]]],
      [{ memory: 1, invalid: 0, moves: 1, mines: 0 }, undefined],
    ];
    for (const [w, avoid] of cases) expect(withAvoid([z], w)[0]!.avoid).toEqual(avoid);
    // examples without provable mines gain nothing from the weight
    expect(withAvoid([y], { memory: 0, invalid: 0, moves: 0, mines: 3 })[0]).toBe(y);
  });
});

describe('the dead-push unlikelihood term', () => {
  const d: CompactExample = { kind: 'action', ids: [1, 2, 3, 4], at: [1, 2, 3], targets: [[3], [4], [5]], invalidMoves: [[6], [], []], deadMoves: [[5, 7], [], [2]] };
  it('avoids the moves of a named dead push at their own positions with weight w.deadPushes, only when it is > 0', () => {
    expect(withAvoid([d], { memory: 1, invalid: 1, moves: 0, mines: 1, deadPushes: 2 })[0]!.avoid).toEqual([[0, 5, 2], [0, 7, 2], [2, 2, 2]]);
    expect(withAvoid([d], { memory: 1, invalid: 1, moves: 3, mines: 1, deadPushes: 2 })[0]!.avoid).toEqual([[0, 6, 3], [0, 5, 2], [0, 7, 2], [2, 2, 2]]);
    // off (0 or absent): the batch of before
    expect(withAvoid([d], { memory: 1, invalid: 1, moves: 3, mines: 1, deadPushes: 0 })).toEqual(withAvoid([d], { memory: 1, invalid: 1, moves: 3, mines: 1 }));
    expect(withAvoid([d], { memory: 1, invalid: 1, moves: 0, mines: 1 })[0]).toBe(d);
  });

  it('adds -L log(1 - P(move)) per avoided move, averaged over the trained positions', () => {
    const ex: CompactExample = { kind: 'action', ids: [1, 2, 3], at: [1, 2], targets: [[0], [1]], deadMoves: [[2, 3], []] };
    const sb = makeSoftBatch(withAvoid([ex], { memory: 0, invalid: 0, moves: 0, mines: 0, deadPushes: 2 }), 4, 8);
    try {
      // equal logits: P = 1/4 for each of the 4 tokens; the two avoided moves at the first of 2 positions
      const logits = tf.zeros([2, 4]) as tf.Tensor2D;
      const v = tf.tidy(() => unlikelihoodLoss(logits, sb.avoid!).dataSync()[0]!);
      expect(v).toBeCloseTo(-(2 * Math.log(3 / 4) + 2 * Math.log(3 / 4)) / 2, 6);
      logits.dispose();
    } finally {
      disposeSoftBatch(sb);
    }
    // without the term, no unlikelihood tensor at all
    const off = makeSoftBatch(withAvoid([ex], { memory: 0, invalid: 0, moves: 0, mines: 0 }), 4, 8);
    expect(off.avoid).toBeNull();
    disposeSoftBatch(off);
  });
});

describe('sft-compact CLI', () => {
  it('refuses a non-empty --out without --overwrite, before any work (one line, exit 2)', async () => {
    const out = tmpDir('lamer-sft-compact-full-');
    fs.writeFileSync(path.join(out, 'keep.txt'), 'x');
    const r = await runCli(['--out', out, '--steps', '1']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`model:sft-base: --out ${out} is not empty (give --overwrite to replace the checkpoint there, e.g. to rebuild models/base) (--help lists the options)\n`);
    expect(fs.readdirSync(out)).toEqual(['keep.txt']);
  });

  it('an --out that cannot be made a folder: one line with the file system\'s code, exit 2', async () => {
    const dir = tmpDir('lamer-sft-compact-file-');
    const file = path.join(dir, 'plain.txt');
    fs.writeFileSync(file, 'x');
    const r = await runCli(['--out', path.join(file, 'ckpt'), '--steps', '1']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`model:sft-base: --out ${file}/ckpt: cannot create it (ENOTDIR) (--help lists the options)\n`);
    expect(fs.readdirSync(dir)).toEqual(['plain.txt']);
  });

  it('--help prints the usage on stdout and exits 0', async () => {
    const r = await runCli(['--help']);
    expect(r.code).toBe(0);
    expect(r.stdout.startsWith('usage: npm run model:sft-base -- [options]\n')).toBe(true);
    for (const opt of ['--out', '--minutes', '--steps', '--layers', '--batch', '--lr', '--curriculum', '--dagger-from', '--eval-every', '--eval-tasks', '--seed', '--memory-at']) expect(r.stdout).toContain(opt);
    expect(r.stderr).toBe('');
  });

  it.each([
    [['--layers', '0'], "model:sft-base: --layers must be an integer in [1, 48], got '0' (--help lists the options)"],
    [['--block', '256'], "model:sft-base: --block must be an integer in [272, 4096], got '256' (--help lists the options)"],
    [['--lr', 'fast'], "model:sft-base: --lr must be a number in [0.000001, 1], got 'fast' (--help lists the options)"],
    [['--embd', '30', '--heads', '4'], 'model:sft-base: --embd (30) must be divisible by --heads (4) (--help lists the options)'],
    [['--memory-at', 'middle'], "model:sft-base: --memory-at must be head or tail, got 'middle' (--help lists the options)"],
    [['--from', 'models/base', '--memory-at', 'head', '--out', '/nonexistent-lamer/x'], 'model:sft-base: --from keeps the prompt format of its checkpoint; drop --memory-at (--help lists the options)'],
    [['--curriculum', 'minesweeper-6x6-3:0'], 'model:sft-base: --curriculum: weight of minesweeper-6x6-3 must be > 0 (--help lists the options)'],
  ])('%j exits 2 with one line', async (args, line) => {
    const r = await runCli(args);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`${line}\n`);
    expect(r.stdout).toBe('');
  });

  it('a value that starts with \'-\' given apart says to write --option=VALUE; written so, the range check refuses it', async () => {
    const [apart, joined] = await Promise.all([runCli(['--minutes', '-5']), runCli(['--minutes=-5'])]);
    expect(apart.code).toBe(2);
    expect(apart.stderr).toBe("model:sft-base: --minutes needs a value (one that starts with '-' must be written --minutes=VALUE) (--help lists the options)\n");
    expect(joined.code).toBe(2);
    expect(joined.stderr).toBe("model:sft-base: --minutes must be a number in [0.05, 10000], got '-5' (--help lists the options)\n");
    expect(apart.stdout + joined.stdout).toBe('');
  });

  it('refuses unknown options and unknown envs with one line', async () => {
    for (const args of [['--bogus'], ['--curriculum', 'chess-8x8:1']]) {
      const r = await runCli(args);
      expect(r.code).toBe(2);
      expect(r.stderr.split('\n')).toHaveLength(2);
      expect(r.stderr).toMatch(/^model:sft-base: .*(bogus|chess).* \(--help lists the options\)\n$/);
    }
  });

  it('a --config file\'s bad value is one line naming the file and the option, exit 2, before any work', async () => {
    const dir = tmpDir('lamer-sft-compact-config-');
    const file = path.join(dir, 'run.json');
    fs.writeFileSync(file, JSON.stringify({ seed: 21, 'memory-weight': 0 }));
    const out = path.join(dir, 'out');
    const r = await runCli(['--config', file, '--out', out]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`model:sft-base: --config ${file}: --memory-weight must be an integer in [1, 64], got '0' (--help lists the options)\n`);
    expect(fs.existsSync(out)).toBe(false);
  });

  it('refuses bad values of the data options with one line naming the option', async () => {
    const cases = [['--data-thread', 'yes'], ['--balance-reflections', '1'], ['--reflection-share', '1.5'], ['--memory-weight', '0'], ['--memory-weight', '2.5'], ['--memory-contrast', '2'], ['--memory-unlikelihood', '101'], ['--memory-unlikelihood', 'x'], ['--invalid-unlikelihood', '101'], ['--move-unlikelihood', 'y'], ['--mine-unlikelihood', '100.5'], ['--mine-unlikelihood', 'z'], ['--mine-unlikelihood', ''], ['--invalid-unlikelihood', ''], ['--seed', ' '], ['--ema', '1'], ['--ema', 'x']];
    const results = await Promise.all(cases.map(([opt, v]) => runCli([opt!, v!])));
    results.forEach((r, i) => {
      const [opt, v] = cases[i]!;
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(new RegExp(`^model:sft-base: ${opt} must be .*'${v!.replace('.', '\\.')}' \\(--help lists the options\\)\n$`));
    });
  }, 120_000);

  it('trains with the data thread, a reflection share, balanced reflections, a memory weight, memory contrasts and unlikelihood weights, and records them', async () => {
    const out = path.join(tmpDir('lamer-sft-compact-thread-'), 'base');
    const r = await runCli(['--steps', '3', '--eval-every', '100', '--eval-tasks', '1', '--layers', '1', '--embd', '32', '--heads', '2', '--batch', '4', '--block', '384', '--out', out, '--seed', '3',
      '--data-thread', 'on', '--reflection-share', '0.5', '--balance-reflections', 'on', '--memory-weight', '4', '--memory-contrast', '0.5', '--memory-unlikelihood', '5', '--invalid-unlikelihood', '2', '--move-unlikelihood', '3', '--mine-unlikelihood', '4']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/model:sft-base: done, 3 steps, \d+ examples, \d+ tokens/);
    const { model, metadata } = await loadCheckpoint(out);
    model.dispose();
    expect(metadata).toMatchObject({ meta: { steps: 3, options: { dataThread: true, reflectionShare: 0.5, balanceReflections: true, memoryWeight: 4, memoryContrast: 0.5, memoryUnlikelihood: 5, invalidUnlikelihood: 2, moveUnlikelihood: 3, mineUnlikelihood: 4 } } });
  }, 120_000);

  it('with --levers-from, starts the memory contrasts and unlikelihood terms at that fraction, and probes the memory at each point', async () => {
    const out = path.join(tmpDir('lamer-sft-compact-levers-'), 'base');
    const r = await runCli(['--steps', '4', '--eval-every', '1', '--eval-tasks', '1', '--layers', '1', '--embd', '32', '--heads', '2', '--batch', '4', '--block', '384', '--out', out, '--seed', '3',
      '--levers-from', '0.5', '--dagger-from', '0', '--memory-contrast', '1', '--memory-unlikelihood', '5', '--probe-boards', '3']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain('step 2: memory contrasts and unlikelihood terms start (--levers-from 0.5)');
    expect(r.stderr).toMatch(/eval @1: .* \| probe: reflection top-1 \d+%/);
    const curve = JSON.parse(fs.readFileSync(path.join(out, 'learning-curve.json'), 'utf8'));
    expect(curve.points.map((p: any) => [p.step, p.leversFrom])).toEqual([[1, null], [2, 2], [3, 2], [4, 2]]);
    for (const p of curve.points) {
      expect(Object.keys(p.memoryProbe).sort()).toEqual(['acting', 'memoryInPlay', 'reflection']);
      expect(p.memoryProbe.acting.boards).toBeLessThanOrEqual(3);
      expect(p.memoryProbe.reflection.prompts).toBeGreaterThan(0);
    }
  }, 120_000);

  it('with --ema, evaluates and saves the averaged weights at each point, and the last iterate beside them at the end', async () => {
    const out = path.join(tmpDir('lamer-sft-compact-ema-'), 'base');
    const r = await runCli(['--steps', '3', '--eval-every', '2', '--eval-tasks', '1', '--layers', '1', '--embd', '32', '--heads', '2', '--batch', '4', '--block', '384', '--out', out, '--seed', '2', '--ema', '0.9']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/eval @2 \(average\): /);
    expect(r.stderr).toMatch(/eval @3 \(last iterate\): /);
    expect(r.stderr).toContain(`the last iterate in ${path.join(out, 'last-iterate')}`);
    expect(fs.readdirSync(out).sort()).toEqual(['last-iterate', 'learning-curve.json', 'model.json', 'weights.bin']);
    const curve = JSON.parse(fs.readFileSync(path.join(out, 'learning-curve.json'), 'utf8'));
    expect(curve.points.map((p: any) => [p.step, p.weights, p.lastIterate === undefined])).toEqual([[2, 'average', true], [3, 'average', false]]);
    expect(curve.points[1].lastIterate.map((g: any) => g.env)).toEqual(['minesweeper-6x6-3', 'sokoban-6x6-2']);
    const averaged = await loadCheckpoint(out);
    const last = await loadCheckpoint(path.join(out, 'last-iterate'));
    try {
      expect(averaged.metadata).toMatchObject({ meta: { steps: 3, weights: 'average', options: { ema: 0.9 } } });
      expect(last.metadata).toMatchObject({ meta: { steps: 3, weights: 'last' } });
      // three updates at decays 2/11, 1/4, 4/13 leave the average between the start and the last iterate
      expect(fs.readFileSync(path.join(out, 'weights.bin')).equals(fs.readFileSync(path.join(out, 'last-iterate', 'weights.bin')))).toBe(false);
    } finally {
      averaged.model.dispose();
      last.model.dispose();
    }
  }, 120_000);

  it('trains a tiny model and writes a checkpoint with its game vocabulary, compact format and learning curve', async () => {
    const out = path.join(tmpDir('lamer-sft-compact-'), 'base');
    const r = await runCli(['--steps', '3', '--eval-every', '2', '--eval-tasks', '1', '--layers', '1', '--embd', '32', '--heads', '2', '--batch', '4', '--block', '384', '--out', out, '--seed', '2']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/model:sft-base: done, 3 steps, 12 examples, \d+ tokens/);
    expect(fs.readdirSync(out).sort()).toEqual(['learning-curve.json', 'model.json', 'weights.bin']);
    const curve = JSON.parse(fs.readFileSync(path.join(out, 'learning-curve.json'), 'utf8'));
    expect(curve.config).toEqual({ vocab_size: 381, block_size: 384, n_layer: 1, n_head: 2, n_embd: 32 });
    // evaluations at step 2 (every 2) and at the end
    expect(curve.points.map((p: any) => p.step)).toEqual([2, 3]);
    for (const p of curve.points) {
      expect(p.games.map((g: any) => g.env)).toEqual(['minesweeper-6x6-3', 'sokoban-6x6-2']);
      for (const g of p.games) {
        expect(g.tasks).toBe(1);
        for (const k of ['agreement', 'invalid', 'pass1', 'pass3']) expect(g[k] >= 0 && g[k] <= 1).toBe(true);
        // greedy retries without memory replay attempt 1, so the memory's effect is pass@3 - pass@1
        expect(g.memoryGain).toBe(g.pass3 - g.pass1);
        expect(g.repeatsEnding === null || (g.repeatsEnding >= 0 && g.repeatsEnding <= 1)).toBe(true);
      }
    }
    expect(curve.points[1].examples).toBe(12);
    const { model, metadata } = await loadCheckpoint(out);
    try {
      expect(metadata).toMatchObject({ version: 'base', config: curve.config, meta: { steps: 3, examples: 12 } });
      const text = checkpointText(metadata);
      expect(text.tokenizer.spec).toMatchObject({ type: 'game', vocabSize: 381, pieces: gameVocabulary() });
      expect(text.promptFormat).toEqual({ name: 'compact', envTags: ['minesweeper', 'sokoban'], historySteps: 0, memoryAt: 'tail' });
      expect(text.sampling).toEqual({ temperature: 0.7, topP: 0.8, topK: 20 });
    } finally {
      model.dispose();
    }
  }, 120_000);
});
