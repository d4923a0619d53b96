/**
 * `npm run model:sft-chat` end to end on a tiny config (1 layer x 32, 4 sessions over two stages,
 * 2 steps; and one step on from an existing checkpoint), plus its pure pieces: the curriculum split and the fixed-steps sample drawing.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadCheckpoint } from '../../../src/model/checkpoint.js';
import { countParams, DEFAULT_CONFIG } from '../../../src/model/gpt.js';
import { writeInitCheckpoint } from '../../../src/model/scripts/init-base.js';
import { samplesForSteps, sessionsPerEnv } from '../../../src/recipes/sft-chat/sft-chat.js';
import { parseSftChatArgs } from '../../../src/recipes/sft-chat/options.js';
import { UsageError } from '../../../src/shared/usage-error.js';
import { root } from '../../helpers/cli.js';
import { tmpDir } from '../../helpers/index.js';

// the script's temp folders go to a folder of this file's own (TMPDIR), so that other processes' never count
const scriptTmp = tmpDir('lamer-sft-chat-tmpdir-');
const script = (args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'src/recipes/sft-chat/sft-chat.ts', ...args], {
  cwd: root, encoding: 'utf8', env: { ...process.env, TMPDIR: scriptTmp },
});
const sftTempDirs = () => fs.readdirSync(scriptTmp).filter((f) => f.startsWith('lamer-sft-chat-')).sort();

describe('model:sft-chat script', () => {
  it('trains a tiny config end to end: checkpoint, learning curve (json + svg) and the summary line', async () => {
    const out = path.join(tmpDir('lamer-sft-'), 'ckpt');
    const before = sftTempDirs();
    const r = script(['--out', out, '--layers', '1', '--embd', '32', '--heads', '2', '--block', '512', '--sessions', '4',
      '--curriculum', 'minesweeper:4x4/2,sokoban:5x5/1', '--steps', '2', '--minibatch', '4', '--log-every', '1', '--workers', '1']);
    expect(r.status, r.stderr).toBe(0);
    const summary = JSON.parse(r.stdout.trim().split('\n').at(-1)!);
    const config = { ...DEFAULT_CONFIG, n_layer: 1, n_embd: 32, n_head: 2, block_size: 512 };
    expect(summary).toMatchObject({ out, config, parameters: countParams(config), sessions: 4, steps: 2, workers: 1 });
    expect(summary.bytesOnDisk).toBe(fs.statSync(path.join(out, 'model.json')).size + fs.statSync(path.join(out, 'weights.bin')).size);
    // the stderr progress: one JSON line per step (stderr is not a TTY here)
    const progress = r.stderr.split('\n').filter((l) => l.startsWith('{"step"')).map((l) => JSON.parse(l));
    expect(progress.map((p) => [p.step, p.of])).toEqual([[1, 2], [2, 2]]);

    const { model, metadata } = await loadCheckpoint(out);
    expect(metadata.config).toEqual(config);
    expect(metadata.meta).toMatchObject({ source: 'sft', script: 'npm run model:sft-chat', curriculum: 'minesweeper:4x4/2,sokoban:5x5/1', lrSchedule: 'cosine' });
    // the defaults: random start positions; cosine decay, warm-up 5% of 2 steps = 0
    expect(metadata.meta.hyper).toMatchObject({ positionOffset: 'random', seed: 0, lrSchedule: 'cosine', warmupSteps: 0, minLrRatio: 0.1 });
    expect(metadata.meta.demos).toMatchObject({
      command: 'lamer demos --curriculum minesweeper:4x4/2,sokoban:5x5/1 --tasks 4 --seed 0 --fail-rate 0.5',
      sessionsPerEnv: { 'minesweeper-4x4-2': 2, 'sokoban-5x5-1': 2 },
      sessions: 4,
    });
    model.dispose();
    const curve = JSON.parse(fs.readFileSync(path.join(out, 'learning-curve.json'), 'utf8'));
    expect(curve.points.map((p: { step: number }) => p.step)).toEqual([1, 2]);
    expect(curve.points[1].tokens).toBe(summary.tokens);
    expect(curve.points[0].loss).toBe(summary.lossFirst);
    expect(fs.readFileSync(path.join(out, 'learning-curve.svg'), 'utf8')).toMatch(/^<svg [^>]*>.*SFT training loss.*<\/svg>\n$/s);
    expect(fs.readdirSync(out).sort()).toEqual(['learning-curve.json', 'learning-curve.svg', 'model.json', 'weights.bin']);
    expect(sftTempDirs().filter((d) => !before.includes(d))).toEqual([]); // its temp folder is gone
  });

  it('--from trains on from an existing checkpoint: its config, recorded as the parent with its weights\' sha256', async () => {
    const dir = tmpDir('lamer-sft-');
    const from = path.join(dir, 'start');
    const config = { ...DEFAULT_CONFIG, n_layer: 1, n_embd: 32, n_head: 2, block_size: 512 };
    await writeInitCheckpoint(from, config, 7);
    const startBytes = fs.readFileSync(path.join(from, 'weights.bin'));
    const startPoints = [{ step: 1, tokens: 500, seconds: 4, loss: 5, lr: 1e-3 }, { step: 2, tokens: 1000, seconds: 8, loss: 4, lr: 1e-4 }];
    fs.writeFileSync(path.join(from, 'learning-curve.json'), JSON.stringify({ points: startPoints }));
    // as if trained on the demonstrations of training seeds [90, 102)
    const json = JSON.parse(fs.readFileSync(path.join(from, 'model.json'), 'utf8'));
    json.userDefinedMetadata.lamer.meta = { ...json.userDefinedMetadata.lamer.meta, hyper: { seed: 90 }, demos: { sessions: 12 } };
    fs.writeFileSync(path.join(from, 'model.json'), JSON.stringify(json));
    const out = path.join(dir, 'next');
    const r = script(['--from', from, '--out', out, '--sessions', '2', '--curriculum', 'minesweeper:4x4/2', '--steps', '1', '--minibatch', '2', '--workers', '1', '--seed', '100']);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toContain(`"start":"${from}"`);
    expect(r.stderr).toContain(`warning: demonstration seeds [100, 102) overlap the [90, 102) that --from ${from} was trained on; give --seed 102 or more for new ones`);
    const { model, metadata } = await loadCheckpoint(out);
    model.dispose();
    expect(metadata.config).toEqual(config);
    expect(metadata.meta.parent).toEqual({ source: 'checkpoint', dir: from, weightsSha256: createHash('sha256').update(startBytes).digest('hex') });
    expect(metadata.meta.demos).toMatchObject({ command: 'lamer demos --curriculum minesweeper:4x4/2 --tasks 2 --seed 100 --fail-rate 0.5' });
    expect(fs.readFileSync(path.join(out, 'weights.bin')).equals(startBytes)).toBe(false); // one step moved the weights
    // the curve goes on from the start checkpoint's: its 2 steps, then this run's step as step 3
    const summary = JSON.parse(r.stdout.trim().split('\n').at(-1)!);
    const curve = JSON.parse(fs.readFileSync(path.join(out, 'learning-curve.json'), 'utf8'));
    expect(curve.continues).toEqual({ from, step: 2, tokens: 1000, seconds: 8 });
    expect(curve.points.slice(0, 2)).toEqual(startPoints);
    expect(curve.points.slice(2).map((p: { step: number; tokens: number }) => [p.step, p.tokens])).toEqual([[3, 1000 + summary.tokens]]);
    expect(summary.steps).toBe(1); // the summary counts this run only
    expect(fs.readFileSync(path.join(from, 'weights.bin')).equals(startBytes)).toBe(true); // the start is left as it was
  });

  it('refuses a non-empty --out with exit code 2 and leaves it as it was', () => {
    const out = tmpDir('lamer-sft-');
    fs.writeFileSync(path.join(out, 'keep.txt'), 'x');
    const r = script(['--out', out, '--steps', '1']);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('exists and is not an empty folder');
    expect(fs.readdirSync(out)).toEqual(['keep.txt']);
  });

  it('names itself model:sft-chat in a usage error and its usage line (model:sft-base is the compact trainer)', () => {
    const r = script(['--steps', 'abc']);
    expect(r.status).toBe(2);
    expect(r.stderr).toBe("model:sft-chat: --steps must be an integer >= 1 written in digits, got 'abc'\n");
    const help = script(['--help']);
    expect(help.status).toBe(0);
    expect(help.stdout.startsWith('usage: npm run model:sft-chat -- --out DIR [options]\n')).toBe(true);
  });

  it('with --epochs, a warm-up as long as the run is refused once the step count is known: exit 2, one line, nothing written', () => {
    const out = path.join(tmpDir('lamer-sft-'), 'ckpt');
    const r = script(['--out', out, '--curriculum', 'minesweeper:4x4/2', '--sessions', '2', '--minibatch', '4', '--epochs', '1', '--warmup-steps', '100', '--dry-run']);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/model:sft-chat: --warmup-steps \(100\) must be below the run's \d+ optimiser steps\n$/);
    expect(fs.existsSync(out)).toBe(false);
  });

  it('a curriculum that lamer demos refuses: exit code 2, nothing written, temp folder removed', () => {
    const out = path.join(tmpDir('lamer-sft-'), 'ckpt');
    const before = sftTempDirs();
    const r = script(['--out', out, '--curriculum', 'chess:8x8/2', '--sessions', '2', '--steps', '1']);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("curriculum item 'chess:8x8/2'");
    expect(r.stderr).toContain('model:sft-chat: lamer demos refused the curriculum options');
    expect(fs.existsSync(out)).toBe(false);
    expect(sftTempDirs().filter((d) => !before.includes(d))).toEqual([]);
  });
});

describe('parseSftChatArgs', () => {
  it('--from reads the config of its checkpoint', async () => {
    const from = path.join(tmpDir('lamer-sft-'), 'start');
    const config = { ...DEFAULT_CONFIG, n_layer: 1, n_embd: 32, n_head: 2, block_size: 256 };
    await writeInitCheckpoint(from, config, 1);
    expect(parseSftChatArgs(['--out', '/nonexistent/x', '--from', from])).toMatchObject({ from, config, fromCurve: [], fromDemoSeeds: null });
    expect(parseSftChatArgs(['--out', '/nonexistent/x'])!).toMatchObject({ from: null, fromCurve: [], fromDemoSeeds: null });
    // its curve and the seeds of its demonstrations (meta.hyper.seed + meta.demos.sessions)
    const points = [{ step: 1, tokens: 10, seconds: 1, loss: 3, lr: 1e-3 }];
    fs.writeFileSync(path.join(from, 'learning-curve.json'), JSON.stringify({ points }));
    const json = JSON.parse(fs.readFileSync(path.join(from, 'model.json'), 'utf8'));
    json.userDefinedMetadata.lamer.meta = { ...json.userDefinedMetadata.lamer.meta, hyper: { seed: 0 }, demos: { sessions: 6000 } };
    fs.writeFileSync(path.join(from, 'model.json'), JSON.stringify(json));
    expect(parseSftChatArgs(['--out', '/nonexistent/x', '--from', from])).toMatchObject({ fromCurve: points, fromDemoSeeds: [0, 6000] });
  });

  it('--from refuses, before any work, a checkpoint whose weights or learning curve do not fit', async () => {
    const from = path.join(tmpDir('lamer-sft-'), 'start');
    await writeInitCheckpoint(from, { ...DEFAULT_CONFIG, n_layer: 1, n_embd: 32, n_head: 2, block_size: 256 }, 1);
    const args = ['--out', '/nonexistent/x', '--from', from];
    const bytes = fs.statSync(path.join(from, 'weights.bin')).size;
    const curve = (text: string) => fs.writeFileSync(path.join(from, 'learning-curve.json'), text);
    const CURVE = new UsageError(`--from ${from}: learning-curve.json must have points {step, tokens, seconds, loss, lr} with steps 1, 2, ... in order (move it away to start a new curve)`);
    curve('notjson');
    expect(() => parseSftChatArgs(args)).toThrow(/learning-curve\.json is not JSON/);
    curve('{"points":"garbage"}');
    expect(() => parseSftChatArgs(args)).toThrow(CURVE);
    curve(JSON.stringify({ points: [{ step: 2, tokens: 1, seconds: 1, loss: 1, lr: 1 }] }));
    expect(() => parseSftChatArgs(args)).toThrow(CURVE);
    fs.rmSync(path.join(from, 'learning-curve.json'));
    fs.truncateSync(path.join(from, 'weights.bin'), 1000);
    expect(() => parseSftChatArgs(args)).toThrow(new UsageError(`--from ${from}: weights.bin has 1000 bytes, the config's ${bytes / 4} float32 parameters need ${bytes}`));
  });

  it('reads the config, the fixed step count and the defaults', () => {
    const o = parseSftChatArgs(['--out', '/nonexistent/x', '--layers', '3', '--embd', '96', '--heads', '3', '--steps', '7'])!;
    expect(o.config).toEqual({ ...DEFAULT_CONFIG, n_layer: 3, n_embd: 96, n_head: 3 });
    expect([o.steps, o.epochs, o.minibatch, o.lr, o.sessions, o.failRate]).toEqual([7, null, 16, 1e-3, 1200, 0.5]);
    expect(parseSftChatArgs(['--out', '/nonexistent/x', '--epochs', '2'])!).toMatchObject({ steps: null, epochs: 2 });
    expect(o.positionOffset).toBe('random');
    expect(parseSftChatArgs(['--out', '/nonexistent/x', '--position-offset', 'none'])!.positionOffset).toBe('none');
    expect([o.lrSchedule, o.warmupSteps, o.minLrRatio]).toEqual(['cosine', null, 0.1]);
    expect(parseSftChatArgs(['--out', '/nonexistent/x', '--steps', '50', '--warmup-steps', '5', '--min-lr-ratio', '0']))
      .toMatchObject({ lrSchedule: 'cosine', warmupSteps: 5, minLrRatio: 0 });
    expect(parseSftChatArgs(['--out', '/nonexistent/x', '--lr-schedule', 'constant'])!.lrSchedule).toBe('constant');
  });

  it('--config FILE gives options by name, which the command line overrides; the file\'s bad values name it', () => {
    const dir = tmpDir('lamer-sft-');
    const file = path.join(dir, 'run.json');
    fs.writeFileSync(file, JSON.stringify({ layers: 3, embd: 96, heads: 3, steps: 7, 'lr-schedule': 'constant', 'keep-demos': true }));
    const o = parseSftChatArgs(['--config', file, '--out', '/nonexistent/x', '--steps', '9'])!;
    expect(o).toMatchObject({ config: { ...DEFAULT_CONFIG, n_layer: 3, n_embd: 96, n_head: 3 }, steps: 9, lrSchedule: 'constant', keepDemos: true });
    fs.writeFileSync(file, JSON.stringify({ 'min-lr-ratio': 2 }));
    expect(() => parseSftChatArgs(['--config', file])).toThrow(new UsageError(`--config ${file}: --min-lr-ratio must be a number in [0, 1], got '2'`));
    // a shape option in the file counts as given: --from takes the config of its checkpoint
    fs.writeFileSync(file, JSON.stringify({ layers: 3 }));
    expect(() => parseSftChatArgs(['--config', file, '--from', dir])).toThrow(new UsageError('--from takes the model config of its checkpoint: drop --layers'));
  });

  it('rejects bad options with a message naming them', () => {
    expect(() => parseSftChatArgs(['--steps', '1', '--epochs', '1'])).toThrow(new UsageError('give --steps or --epochs, not both'));
    expect(() => parseSftChatArgs(['--out', '/nonexistent/x', '--embd', '30', '--heads', '4'])).toThrow(/n_embd \(30\) must be divisible by n_head \(4\)/);
    expect(() => parseSftChatArgs(['--out', '/nonexistent/x', '--steps', '0'])).toThrow(/--steps must be an integer >= 1 written in digits, got '0'/);
    expect(() => parseSftChatArgs(['--out', '/nonexistent/x', '--steps', '1e3'])).toThrow(UsageError);
    expect(() => parseSftChatArgs(['--out', '/nonexistent/x', '--steps', '1e3'])).toThrow("--steps must be an integer >= 1 written in digits, got '1e3'");
    expect(() => parseSftChatArgs(['--bogus'])).toThrow(UsageError);
    expect(() => parseSftChatArgs(['--out', '/nonexistent/x', '--position-offset', 'sometimes'])).toThrow(new UsageError("--position-offset must be random or none, got 'sometimes'"));
    expect(() => parseSftChatArgs(['--out', '/nonexistent/x', '--lr-schedule', 'linear'])).toThrow(new UsageError("--lr-schedule must be constant or cosine, got 'linear'"));
    expect(() => parseSftChatArgs(['--out', '/nonexistent/x', '--lr-schedule', 'constant', '--warmup-steps', '3'])).toThrow(new UsageError('--warmup-steps and --min-lr-ratio apply to --lr-schedule cosine only'));
    expect(() => parseSftChatArgs(['--out', '/nonexistent/x', '--steps', '10', '--warmup-steps', '10'])).toThrow(new UsageError('--warmup-steps (10) must be below --steps (10)'));
    expect(() => parseSftChatArgs(['--out', '/nonexistent/x', '--min-lr-ratio', '2'])).toThrow(/--min-lr-ratio must be a number in \[0, 1\], got '2'/);
    expect(() => parseSftChatArgs(['--out', '/nonexistent/x', '--seed', '999999999', '--sessions', '2'])).toThrow(new UsageError('--seed + --sessions must be at most 1000000000 (the training seeds [0, 1000000000); eval seeds are held out), got 1000000001'));
    const from = tmpDir('lamer-sft-');
    expect(() => parseSftChatArgs(['--out', '/nonexistent/x', '--from', from])).toThrow(new UsageError(`--from ${from}: no checkpoint there (model.json and weights.bin expected)`));
    expect(() => parseSftChatArgs(['--out', '/nonexistent/x', '--from', from, '--layers', '2', '--init-seed', '3'])).toThrow(new UsageError('--from takes the model config of its checkpoint: drop --layers, --init-seed'));
    fs.writeFileSync(path.join(from, 'model.json'), '{"format":"lamer-gpt"}');
    fs.writeFileSync(path.join(from, 'weights.bin'), '');
    expect(() => parseSftChatArgs(['--out', '/nonexistent/x', '--from', from])).toThrow(new UsageError(`--from ${from}: model.json has no userDefinedMetadata.lamer.config`));
    expect(() => parseSftChatArgs(['--out', from, '--from', from])).toThrow(new UsageError('--from and --out must be different folders'));
    expect(() => parseSftChatArgs(['--workers', '-1'])).toThrow(new UsageError("--workers needs a value (one that starts with '-' must be written --workers=VALUE)"));
  });
});

describe('sessionsPerEnv', () => {
  it('counts sessions per board from the task ids, in order of first appearance', () => {
    const ids = ['sokoban-6x6-2:seed=5', 'minesweeper-4x4-2:seed=0', 'sokoban-6x6-2:seed=6'];
    expect(sessionsPerEnv(ids.map((taskId) => ({ taskId })))).toEqual({ 'sokoban-6x6-2': 2, 'minesweeper-4x4-2': 1 });
  });
});

describe('samplesForSteps', () => {
  it('draws steps x minibatch samples as back-to-back permutations, each sample once per pass', () => {
    const xs = [0, 1, 2, 3, 4];
    const drawn = samplesForSteps(xs, 3, 4, 7);
    expect(drawn).toHaveLength(12);
    expect([...drawn.slice(0, 5)].sort()).toEqual(xs);
    expect([...drawn.slice(5, 10)].sort()).toEqual(xs);
    expect(samplesForSteps(xs, 3, 4, 7)).toEqual(drawn); // deterministic from the seed
    expect(samplesForSteps(xs, 3, 4, 8)).not.toEqual(drawn);
  });
});
