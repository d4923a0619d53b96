/**
 * experiments/base-memory-probe.ts on a tiny random compact model: the three probes count what they
 * should and give probabilities, probe 2's split adds up; an untrained model is far below chance on
 * the copy.
 * Its command line (`npm run experiment:base-memory-probe`), run as a child process: every bad option is one
 * line on stderr naming it, exit code 2, nothing on stdout and no figures written.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { IN_PLAY_HEAD, inPlayRows, probe, TABLE_HEAD, tableRow, type MemoryProbe } from '../../experiments/base-memory-probe.js';
import { root } from '../helpers/cli.js';
import { tmpDir, writeTinyGptCheckpoint } from '../helpers/index.js';
import { initModel } from '../../src/model/gpt.js';
import { GameTokenizer } from '../../src/model/tokenizers.js';
import { GAME_ENV_TAGS, gameVocabulary } from '../../src/envs/vocab.js';

beforeAll(async () => { await tf.setBackend('cpu'); await tf.ready(); });

describe('base memory probe', () => {
  it('measures the copy of the mine cell, the effect of a memory line and the memory read in play', () => {
    const tok = new GameTokenizer(gameVocabulary());
    const model = initModel({ vocab_size: tok.vocabSize, block_size: 384, n_layer: 1, n_head: 2, n_embd: 16 }, 7);
    try {
      const r = probe(model, { name: 'compact', envTags: [...GAME_ENV_TAGS], historySteps: 0, memoryAt: 'tail' }, tok, 6, 'tiny');
      expect(r.model).toBe('tiny');
      expect(r.reflection.prompts).toBeGreaterThan(0);
      // a random model spreads its mass over the whole vocabulary: far below even the 36-cell chance
      expect(r.reflection.meanLogprob).toBeLessThan(Math.log(1 / 36));
      expect(r.reflection.top1).toBeGreaterThanOrEqual(0);
      expect(r.reflection.top1).toBeLessThanOrEqual(1);
      // boards whose favourite token is a cell; the probabilities are of that token
      expect(r.acting.boards).toBeLessThanOrEqual(6);
      if (r.acting.boards > 0) {
        expect(r.acting.pBefore).toBeGreaterThan(0);
        expect(r.acting.pBefore).toBeLessThan(1);
        expect(r.acting.pAfter).toBeGreaterThan(0);
      }
      // the split: every such board is in exactly one part, each part's figures are probabilities
      // (NaN for an empty part), and the whole is their board-weighted mean
      const { canBeMine, provablySafe } = r.acting;
      expect(canBeMine.boards + provablySafe.boards).toBe(r.acting.boards);
      for (const part of [canBeMine, provablySafe]) {
        expect(Number.isInteger(part.boards)).toBe(true);
        for (const x of [part.pBefore, part.pAfter, part.stillTop1]) {
          if (part.boards === 0) expect(x).toBeNaN();
          else {
            expect(x).toBeGreaterThanOrEqual(0);
            expect(x).toBeLessThanOrEqual(1);
          }
        }
      }
      if (r.acting.boards > 0) {
        const weighted = (k: 'pBefore' | 'pAfter' | 'stillTop1') =>
          [canBeMine, provablySafe].reduce((sum, part) => sum + (part.boards ? part.boards * part[k] : 0), 0) / r.acting.boards;
        for (const k of ['pBefore', 'pAfter', 'stillTop1'] as const) expect(r.acting[k]).toBeCloseTo(weighted(k), 9);
      }
      // probe 3: decisions whose memory names mines exist on these noisy trials (6 trials, 3 attempts);
      // those where the memory changes the solver's answer are among them
      const all = r.memoryInPlay, matters = r.memoryInPlay.memoryMatters;
      expect(all.decisions).toBeGreaterThan(0);
      expect(matters.decisions).toBeLessThanOrEqual(all.decisions);
      for (const p of [all, matters]) {
        expect(Number.isInteger(p.decisions)).toBe(true);
        if (p.decisions === 0) {
          for (const x of Object.values(p).slice(1)) expect(x).toBeNaN();
          continue;
        }
        for (const x of [p.pNamedWithMemory, p.pNamedWithoutMemory]) {
          expect(x).toBeGreaterThan(0);
          expect(x).toBeLessThan(1);
        }
        for (const x of [p.argmaxNamedWithMemory, p.argmaxNamedWithoutMemory]) {
          expect(x).toBeGreaterThanOrEqual(0);
          expect(x).toBeLessThanOrEqual(1);
          expect(Math.abs(x * p.decisions - Math.round(x * p.decisions))).toBeLessThan(1e-9); // a count of decisions
        }
        expect(p.blindSolverShare).toBeGreaterThanOrEqual(0);
        expect(p.blindSolverShare).toBeLessThan(1);
      }
      // the memory-blind solver puts mass on a named cell exactly where the memory changes its answer
      if (matters.decisions > 0) expect(matters.blindSolverShare).toBeGreaterThan(0);
      expect(all.blindSolverShare * all.decisions).toBeCloseTo((matters.decisions ? matters.blindSolverShare * matters.decisions : 0), 9);
    } finally {
      model.dispose();
    }
  }, 120_000);
});

describe('base memory probe table', () => {
  const part = (boards: number, pBefore: number, pAfter: number, stillTop1: number) => ({ boards, pBefore, pAfter, stillTop1 });
  const none = part(0, NaN, NaN, NaN);
  const noPlay = { decisions: 0, pNamedWithMemory: NaN, pNamedWithoutMemory: NaN, argmaxNamedWithMemory: NaN, argmaxNamedWithoutMemory: NaN, blindSolverShare: NaN };
  const measured: MemoryProbe = {
    model: 'm', reflection: { prompts: 3, meanLogprob: -0.0194, top1: 1 },
    acting: { ...part(5, 0.2, 0.19, 0.6), canBeMine: part(2, 0.0741, 0.0704, 0.567), provablySafe: part(3, 0.345, 0.342, 0.667) },
    memoryInPlay: {
      decisions: 726, pNamedWithMemory: 0.04701, pNamedWithoutMemory: 0.04579, argmaxNamedWithMemory: 0.0207, argmaxNamedWithoutMemory: 0.0248, blindSolverShare: 0.0055,
      memoryMatters: { decisions: 91, pNamedWithMemory: 0.03941, pNamedWithoutMemory: 0.03979, argmaxNamedWithMemory: 0, argmaxNamedWithoutMemory: 0.011, blindSolverShare: 0.044 },
    },
  };
  const empty: MemoryProbe = {
    model: 'm', reflection: { prompts: 0, meanLogprob: NaN, top1: NaN },
    acting: { ...none, canBeMine: none, provablySafe: none }, memoryInPlay: { ...noPlay, memoryMatters: noPlay },
  };
  const cols = (line: string) => line.split('|').length - 2;

  it('prints each figure, and - for one with nothing to measure', () => {
    // probe 2's columns are the boards where the favourite can be a mine; the provably safe ones are counted last
    expect(tableRow(measured)).toBe('| m | 3 | -0.019 | 100.0 | 2 | 0.074 | 0.070 | 56.7 | 3 |');
    expect(tableRow(empty)).toBe('| m | 0 | - | - | 0 | - | - | - | 0 |');
    expect(inPlayRows(measured)).toEqual([
      '| m, memory names mines | 726 | 0.0470 | 0.0458 | 2.1 | 2.5 | 0.0055 |',
      '| m, memory changes the answer | 91 | 0.0394 | 0.0398 | 0.0 | 1.1 | 0.0440 |',
    ]);
    expect(inPlayRows(empty)).toEqual([
      '| m, memory names mines | 0 | - | - | - | - | - |',
      '| m, memory changes the answer | 0 | - | - | - | - | - |',
    ]);
  });

  it('has a header column per figure of a row', () => {
    for (const [head, row] of [[TABLE_HEAD, tableRow(measured)], [IN_PLAY_HEAD, inPlayRows(measured)[0]!]] as const) {
      const [names, rule] = head.split('\n');
      expect(cols(names!)).toBe(cols(row));
      expect(cols(rule!)).toBe(cols(row));
    }
  });
});

describe('experiment:base-memory-probe command line', () => {
  // Each run starts node with tsx and loads tfjs: a few seconds on a busy machine.
  const run = (args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'experiments/base-memory-probe.ts', ...args], { cwd: root, encoding: 'utf8' });
  const expectUsageError = (args: string[], line: string) => {
    const r = run(args);
    expect(r.stderr).toBe(`experiment:base-memory-probe: ${line}\n`);
    expect(r.status).toBe(2);
    expect(r.stdout).toBe('');
  };

  it('a --model folder without a compact checkpoint: one line naming it, exit 2, nothing written', async () => {
    const dir = tmpDir('lamer-memory-probe-cli-');
    const out = path.join(dir, 'figures.json');
    expectUsageError(['--model', '/nonexistent', '--out', out], '--model /nonexistent: no model.json there');
    // every --model is checked before the first is probed
    expectUsageError(['--model', 'models/base', '--model', '/nonexistent', '--out', out], '--model /nonexistent: no model.json there');
    const junk = path.join(dir, 'junk');
    mkdirSync(junk);
    writeFileSync(path.join(junk, 'model.json'), '{}');
    expectUsageError(['--model', junk, '--out', out], `--model ${junk}: ${junk}/model.json has no userDefinedMetadata.lamer.config`);
    const chat = await writeTinyGptCheckpoint(path.join(dir, 'chat'), 1);
    expectUsageError(['--model', chat, '--out', out], `--model ${chat}: not a compact checkpoint (prompt format chat)`);
    // a compact model.json without its weights: found when the weights are read
    const noWeights = path.join(dir, 'no-weights');
    mkdirSync(noWeights);
    copyFileSync(path.join(root, 'models', 'base', 'model.json'), path.join(noWeights, 'model.json'));
    const r = run(['--model', noWeights, '--out', out]);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(new RegExp(`^experiment:base-memory-probe: --model ${noWeights}: ENOENT[^\n]*weights\\.bin'\n$`));
    expect(existsSync(out)).toBe(false);
  }, 120_000);

  it('bad --boards, --out, unknown options and positionals: one line naming the option, exit 2', () => {
    const dir = tmpDir('lamer-memory-probe-cli-');
    for (const v of ['0', '1e3', '100001']) {
      expectUsageError([`--boards=${v}`, '--out', path.join(dir, 'f.json')], `--boards must be an integer in [1, 100000] written in digits, got '${v}'`);
    }
    expectUsageError(['--boards', '-1'], "--boards needs a value (one that starts with '-' must be written --boards=VALUE)");
    expectUsageError(['--out', dir], `--out '${dir}' must be a file path, not a folder`);
    // a file where its folder would go: the option, the path and why, before any model is read
    const file = path.join(dir, 'plain.txt');
    writeFileSync(file, 'x');
    expectUsageError(['--out', path.join(file, 'x.json')], `--out ${file}/x.json: ${file} exists and is not a folder`);
    expect(readdirSync(dir)).toEqual(['plain.txt']);
    expect(run(['--nope']).stderr).toMatch(/^experiment:base-memory-probe: Unknown option '--nope'[^\n]*\n$/);
    expect(run(['models/base']).status).toBe(2);
    const help = run(['--help']);
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^usage: npm run experiment:base-memory-probe -- \[options\]\n/);
  }, 120_000);
});
