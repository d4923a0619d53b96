/**
 * What a checkpoint says about how it reads text (src/model/checkpoint.ts): its tokenizer (byte or
 * a game vocabulary) and prompt format, saved with the weights and validated on load.
 */
import fs from 'node:fs';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkpointText, loadCheckpoint, readCheckpointMetadata, saveCheckpoint } from '../../src/model/checkpoint.js';
import { initModel } from '../../src/model/gpt.js';
import { BYTE_TOKENIZER, GameTokenizer } from '../../src/model/tokenizers.js';
import { CHAT_FORMAT, type CompactPromptFormat } from '../../src/model/prompt-format.js';
import { gameVocabulary } from '../../src/envs/vocab.js';
import { tmpDir } from '../helpers/index.js';

beforeAll(async () => { await tf.setBackend('cpu'); await tf.ready(); });

const tok = new GameTokenizer(gameVocabulary());
const format: CompactPromptFormat = { name: 'compact', envTags: ['minesweeper', 'sokoban'], historySteps: 0 };
const gameCfg = { vocab_size: tok.vocabSize, block_size: 32, n_layer: 1, n_head: 2, n_embd: 16 };
const byteCfg = { ...gameCfg, vocab_size: 260 };
const game = initModel(gameCfg, 5);
const bytes = initModel(byteCfg, 5);
afterAll(() => { game.dispose(); bytes.dispose(); });

const readJson = (dir: string) => JSON.parse(fs.readFileSync(path.join(dir, 'model.json'), 'utf8'));
const writeJson = (dir: string, j: unknown) => fs.writeFileSync(path.join(dir, 'model.json'), JSON.stringify(j));

describe('checkpoint tokenizer and prompt format', () => {
  it('round-trips a game tokenizer and a compact format with the weights', async () => {
    const dir = tmpDir();
    await saveCheckpoint(game, dir, { version: 'base', note: 'x' }, { tokenizer: tok, promptFormat: format });
    const lamer = readJson(dir).userDefinedMetadata.lamer;
    expect(lamer.tokenizer).toEqual(tok.spec);
    expect(lamer.promptFormat).toEqual(format);
    const { model, metadata } = await loadCheckpoint(dir);
    try {
      expect(metadata).toMatchObject({ version: 'base', config: gameCfg, promptFormat: format, meta: { note: 'x' } });
      const text = checkpointText(metadata);
      expect(text.promptFormat).toEqual(format);
      expect(text.tokenizer.vocabSize).toBe(381);
      expect(text.tokenizer.encode('[minesweeper]\n> (2, 3)')).toEqual(tok.encode('[minesweeper]\n> (2, 3)'));
      expect(model.config.vocab_size).toBe(381);
      const same = tf.tidy(() => tf.max(tf.abs(tf.sub(model.params.get('wte')!, game.params.get('wte')!))).dataSync()[0]);
      expect(same).toBe(0);
    } finally {
      model.dispose();
    }
  });

  it('round-trips a default sampling, and writes none when there is none', async () => {
    const dir = tmpDir();
    const sampling = { temperature: 0.7, topP: 0.8, topK: 20 };
    await saveCheckpoint(game, dir, { version: 'base' }, { tokenizer: tok, promptFormat: format, sampling });
    expect(readJson(dir).userDefinedMetadata.lamer.sampling).toEqual(sampling);
    const md = await readCheckpointMetadata(dir);
    expect(checkpointText(md).sampling).toEqual(sampling);
    // a training job saves its new version with checkpointText of its start: the sampling goes on
    const dir2 = tmpDir();
    await saveCheckpoint(game, dir2, { version: 'v1' }, checkpointText(md));
    expect(readJson(dir2).userDefinedMetadata.lamer.sampling).toEqual(sampling);
    const dir3 = tmpDir();
    await saveCheckpoint(game, dir3, { version: 'v1' }, { tokenizer: tok, sampling: null });
    expect('sampling' in readJson(dir3).userDefinedMetadata.lamer).toBe(false);
    await expect(saveCheckpoint(game, tmpDir(), { version: 'v' }, { tokenizer: tok, sampling: { temperature: 1, topP: 2, topK: 0 } })).rejects.toThrow(/sampling\.topP/);
  });

  it('writes byte checkpoints as before: byte tokenizer, no promptFormat (chat)', async () => {
    const dir = tmpDir();
    await saveCheckpoint(bytes, dir, { version: 'v1' });
    const lamer = readJson(dir).userDefinedMetadata.lamer;
    expect(lamer.tokenizer).toEqual({ type: 'byte', vocabSize: 260, special: { bos: 256, eos: 257, sep: 258, pad: 259 } });
    expect('promptFormat' in lamer).toBe(false);
    // an explicit chat format is not written either
    const dir2 = tmpDir();
    await saveCheckpoint(bytes, dir2, { version: 'v1' }, { promptFormat: CHAT_FORMAT });
    expect('promptFormat' in readJson(dir2).userDefinedMetadata.lamer).toBe(false);
    const md = await readCheckpointMetadata(dir);
    expect(checkpointText(md)).toEqual({ tokenizer: BYTE_TOKENIZER, promptFormat: CHAT_FORMAT, sampling: null });
    expect('sampling' in md).toBe(false);
    const { model } = await loadCheckpoint(dir);
    model.dispose();
  });

  it('loads an older byte checkpoint whose metadata has no promptFormat key at all', async () => {
    const dir = tmpDir();
    await saveCheckpoint(bytes, dir, { version: 'old' });
    const j = readJson(dir);
    j.userDefinedMetadata.lamer = { config: j.userDefinedMetadata.lamer.config, tokenizer: j.userDefinedMetadata.lamer.tokenizer, version: 'old', meta: {} };
    writeJson(dir, j);
    const { model, metadata } = await loadCheckpoint(dir);
    model.dispose();
    expect(metadata.promptFormat).toBeUndefined();
    expect(checkpointText(metadata).promptFormat).toEqual(CHAT_FORMAT);
  });

  it('refuses to save a tokenizer whose size differs from the model\'s vocabulary', async () => {
    const dir = tmpDir();
    await expect(saveCheckpoint(bytes, dir, { version: 'v' }, { tokenizer: tok })).rejects.toThrow(/tokenizer has 381 ids, model vocab_size is 260/);
    await expect(saveCheckpoint(game, dir, { version: 'v' })).rejects.toThrow(/tokenizer has 260 ids, model vocab_size is 381/);
    expect(fs.existsSync(path.join(dir, 'model.json'))).toBe(false);
  });

  it('refuses on load a vocabulary that disagrees with config.vocab_size, a bad tokenizer or format', async () => {
    const dir = tmpDir();
    await saveCheckpoint(game, dir, { version: 'base' }, { tokenizer: tok, promptFormat: format });
    const good = readJson(dir);
    const edit = (f: (lamer: any) => void) => {
      const j = structuredClone(good);
      f(j.userDefinedMetadata.lamer);
      writeJson(dir, j);
    };
    edit((l) => { l.tokenizer = new GameTokenizer(gameVocabulary().slice(0, 100)).spec; });
    await expect(loadCheckpoint(dir)).rejects.toThrow(/tokenizer has 360 ids but config.vocab_size is 381/);
    edit((l) => { l.tokenizer = BYTE_TOKENIZER.spec; });
    await expect(readCheckpointMetadata(dir)).rejects.toThrow(/tokenizer has 260 ids but config.vocab_size is 381/);
    edit((l) => { l.tokenizer.vocabSize = 380; });
    await expect(readCheckpointMetadata(dir)).rejects.toThrow(/vocabSize 380 disagrees with 121 pieces/);
    edit((l) => { l.tokenizer.pieces[3] = l.tokenizer.pieces[2]; });
    await expect(readCheckpointMetadata(dir)).rejects.toThrow(new RegExp(`^${dir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: tokenizer piece 3 .* is a duplicate`));
    edit((l) => { l.tokenizer.type = 'sentencepiece'; });
    await expect(readCheckpointMetadata(dir)).rejects.toThrow(/unsupported tokenizer type "sentencepiece"/);
    edit((l) => { l.promptFormat = { name: 'compact', envTags: ['minesweeper'], historySteps: 100 }; });
    await expect(readCheckpointMetadata(dir)).rejects.toThrow(/promptFormat.historySteps must be an integer 0..64, got 100/);
    edit((l) => { l.promptFormat = { name: 'verbose' }; });
    await expect(readCheckpointMetadata(dir)).rejects.toThrow(/promptFormat.name must be one of chat, compact/);
    for (const [sampling, msg] of [
      [{ temperature: -1, topP: 1, topK: 0 }, /sampling\.temperature must be a number in \[0, 10\], got -1/],
      [{ temperature: 1, topP: 0, topK: 0 }, /sampling\.topP must be a number in \(0, 1\], got 0/],
      [{ temperature: 1, topP: 1, topK: 2.5 }, /sampling\.topK must be an integer in \[0, 1000000\], got 2.5/],
      [{ temperature: '1', topP: 1, topK: 0 }, /sampling\.temperature must be a number/],
      [[0.7, 0.8, 20], /sampling must be an object/],
    ] as const) {
      edit((l) => { l.sampling = sampling; });
      await expect(readCheckpointMetadata(dir)).rejects.toThrow(msg);
    }
    writeJson(dir, good);
    const { model } = await loadCheckpoint(dir);
    model.dispose();
  });
});
