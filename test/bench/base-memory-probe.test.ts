/**
 * bench/base-memory-probe.ts on a tiny random compact model: both probes count what they should and
 * give probabilities; an untrained model is near chance on the copy and indifferent to memory.
 * Its command line (`npm run bench:base-memory`), run as a child process: every bad option is one
 * line on stderr naming it, exit code 2, nothing on stdout and no figures written.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { probe, tableRow } from '../../bench/base-memory-probe.js';
import { root } from '../helpers/cli.js';
import { tmpDir, writeTinyGptCheckpoint } from '../helpers/index.js';
import { initModel } from '../../src/model/gpt.js';
import { GameTokenizer } from '../../src/model/tokenizers.js';
import { GAME_ENV_TAGS, gameVocabulary } from '../../src/envs/vocab.js';

beforeAll(async () => { await tf.setBackend('cpu'); await tf.ready(); });

describe('base memory probe', () => {
  it('measures the copy of the mine cell and the effect of a memory line', () => {
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
    } finally {
      model.dispose();
    }
  }, 120_000);
});

describe('base memory probe table', () => {
  it('prints each figure, and - for one with nothing to measure', () => {
    expect(tableRow({ model: 'm', reflection: { prompts: 3, meanLogprob: -0.0194, top1: 1 }, acting: { boards: 2, pBefore: 0.2041, pAfter: 0.2, stillTop1: 0.705 } }))
      .toBe('| m | 3 | -0.019 | 100.0 | 2 | 0.204 | 0.200 | 70.5 |');
    expect(tableRow({ model: 'm', reflection: { prompts: 0, meanLogprob: NaN, top1: NaN }, acting: { boards: 0, pBefore: NaN, pAfter: NaN, stillTop1: NaN } }))
      .toBe('| m | 0 | - | - | 0 | - | - | - |');
  });
});

describe('bench:base-memory command line', () => {
  // Each run starts node with tsx and loads tfjs: a few seconds on a busy machine.
  const run = (args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'bench/base-memory-probe.ts', ...args], { cwd: root, encoding: 'utf8' });
  const expectUsageError = (args: string[], line: string) => {
    const r = run(args);
    expect(r.stderr).toBe(`bench:base-memory: ${line}\n`);
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
    expect(r.stderr).toMatch(new RegExp(`^bench:base-memory: --model ${noWeights}: ENOENT[^\n]*weights\\.bin'\n$`));
    expect(existsSync(out)).toBe(false);
  }, 120_000);

  it('bad --boards, --out, unknown options and positionals: one line naming the option, exit 2', () => {
    const dir = tmpDir('lamer-memory-probe-cli-');
    for (const v of ['0', '1e3', '100001']) {
      expectUsageError([`--boards=${v}`, '--out', path.join(dir, 'f.json')], `--boards must be an integer in [1, 100000], got '${v}'`);
    }
    expectUsageError(['--boards', '-1'], "--boards needs a value (one that starts with '-' must be written --boards=VALUE)");
    expectUsageError(['--out', dir], `--out '${dir}' must be a file path, not a folder`);
    expect(run(['--nope']).stderr).toMatch(/^bench:base-memory: Unknown option '--nope'[^\n]*\n$/);
    expect(run(['models/base']).status).toBe(2);
    const help = run(['--help']);
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^usage: npm run bench:base-memory -- \[options\]\n/);
  }, 120_000);
});
