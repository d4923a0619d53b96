/** ModelRegistry: first-start registration, the base folder following the configuration, activation. */
import { describe, expect, it } from 'vitest';
import { ModelRegistry } from '../../src/agent/models.js';
import { openDatabase } from '../../src/db/index.js';
import { sqliteAsyncRepositories } from '../../src/db/async-repositories.js';
import { TestEngine } from '../../src/policy/test-engine.js';
import { tmpDir } from '../helpers/index.js';
import { saveCheckpoint } from '../../src/model/checkpoint.js';
import { initModel } from '../../src/model/gpt.js';
import { BYTE_TOKENIZER, GameTokenizer } from '../../src/model/tokenizers.js';
import { gameVocabulary } from '../../src/envs/vocab.js';

describe('ModelRegistry', () => {
  it('registers the initial version once and keeps its folder in line with the configuration', async () => {
    const dir = tmpDir();
    const d1 = openDatabase(dir);
    const r1 = new ModelRegistry(sqliteAsyncRepositories(d1).models, new TestEngine());
    await r1.init('base', '/old/models/base');
    expect(r1.active()).toMatchObject({ version: 'base', status: 'active', checkpointDir: '/old/models/base', parent: null });
    d1.close();
    const d2 = openDatabase(dir);
    const engine = new TestEngine();
    const r2 = new ModelRegistry(sqliteAsyncRepositories(d2).models, engine);
    await r2.init('base', '/new/models/base');
    expect((await r2.list()).map((m) => [m.version, m.status, m.checkpointDir])).toEqual([['base', 'active', '/new/models/base']]);
    expect(engine.isLoaded('base')).toBe(true);
    d2.close();
  });

  it('activation retires the previous version; an unknown one is 404', async () => {
    const d = openDatabase(tmpDir());
    const r = new ModelRegistry(sqliteAsyncRepositories(d).models, new TestEngine());
    await r.init('base', '/m/base');
    d.sqlite
      .prepare("INSERT INTO models (version, parent, job_id, checkpoint_dir, status, metrics, created_at) VALUES ('v1', 'base', 'job_1', '/m/v1', 'candidate', '{}', 1)")
      .run();
    expect((await r.activate('v1')).status).toBe('active');
    expect((await r.get('base'))!.status).toBe('retired');
    expect(r.active().version).toBe('v1');
    await expect(r.activate('nope')).rejects.toMatchObject({ name: 'DomainError', kind: 'not-found' });
    d.close();
  });

  it('reads each version\'s tokenizer and prompt format from its checkpoint (byte and chat otherwise)', async () => {
    const root = tmpDir();
    const tok = new GameTokenizer(gameVocabulary());
    const format = { name: 'compact' as const, envTags: ['minesweeper'], historySteps: 1 };
    const g = initModel({ vocab_size: tok.vocabSize, block_size: 16, n_layer: 1, n_head: 1, n_embd: 8 }, 1);
    await saveCheckpoint(g, `${root}/compact`, { version: 'base' }, { tokenizer: tok, promptFormat: format });
    g.dispose();
    const d = openDatabase(tmpDir());
    const r = new ModelRegistry(sqliteAsyncRepositories(d).models, new TestEngine());
    await r.init('base', `${root}/compact`);
    d.sqlite
      .prepare(`INSERT INTO models (version, parent, job_id, checkpoint_dir, status, metrics, created_at) VALUES ('v1', 'base', 'job_1', '${root}/missing', 'candidate', '{}', 1)`)
      .run();
    expect(await r.promptFormat('base')).toEqual(format);
    expect((await r.tokenizer('base')).spec).toEqual(tok.spec);
    // a folder that is not a checkpoint, and an unknown version: bytes and chat
    expect(await r.promptFormat('v1')).toEqual({ name: 'chat' });
    expect(await r.tokenizer('v1')).toBe(BYTE_TOKENIZER);
    expect(await r.tokenizer('nope')).toBe(BYTE_TOKENIZER);
    d.close();
  });
});

describe('ModelRegistry.registerCheckpoint', () => {
  it('registers a checkpoint folder as a candidate builtin version that activates like any other', async () => {
    const root = tmpDir();
    const g = initModel({ vocab_size: 260, block_size: 16, n_layer: 1, n_head: 1, n_embd: 8 }, 1);
    await saveCheckpoint(g, `${root}/v7`, { version: 'v7' });
    g.dispose();
    const d = openDatabase(tmpDir());
    const r = new ModelRegistry(sqliteAsyncRepositories(d).models, new TestEngine());
    await r.init('base', '/m/base');
    const row = await r.registerCheckpoint('v7', `${root}/v7`, { parent: 'base', metrics: { resumedFrom: 'out/checkpoint' } });
    expect(row).toMatchObject({ version: 'v7', parent: 'base', jobId: null, checkpointDir: `${root}/v7`, status: 'candidate', engine: 'builtin', metrics: { resumedFrom: 'out/checkpoint' } });
    expect((await r.activate('v7')).status).toBe('active');
    expect((await r.get('base'))!.status).toBe('retired');
    d.close();
  });

  it('refuses a taken name, an unknown parent and a folder without a checkpoint, registering nothing', async () => {
    const root = tmpDir();
    const g = initModel({ vocab_size: 260, block_size: 16, n_layer: 1, n_head: 1, n_embd: 8 }, 1);
    await saveCheckpoint(g, `${root}/ok`, { version: 'ok' });
    g.dispose();
    const d = openDatabase(tmpDir());
    const r = new ModelRegistry(sqliteAsyncRepositories(d).models, new TestEngine());
    await r.init('base', '/m/base');
    await expect(r.registerCheckpoint('base', `${root}/ok`)).rejects.toMatchObject({ kind: 'conflict', message: "model version 'base' already exists" });
    await expect(r.registerCheckpoint('v1', `${root}/ok`, { parent: 'nope' })).rejects.toMatchObject({ kind: 'validation' });
    await expect(r.registerCheckpoint('v1', `${root}/missing`)).rejects.toMatchObject({ kind: 'validation' });
    expect((await r.list()).map((m) => m.version)).toEqual(['base']);
    d.close();
  });
});
