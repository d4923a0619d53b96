/**
 * ModelsRepo keeps rows read by version in memory: every write through it (insert, a new folder
 * or remote configuration, activation) is seen by the next read, a version inserted by other
 * means is seen at once, and a caller changing a returned row does not change what the next read
 * returns. Real SQLite file.
 */
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/index.js';
import { ModelsRepo } from '../../src/db/models-repo.js';
import { tmpDir } from '../helpers/index.js';

const row = (version: string, status: 'active' | 'candidate' = 'candidate') => ({
  version, parent: null, jobId: null, checkpointDir: `/m/${version}`, status, metrics: {}, createdAt: 1,
});

describe('ModelsRepo row cache', () => {
  it('sees every write made through any ModelsRepo of the connection', () => {
    const d = openDatabase(tmpDir());
    try {
      const a = new ModelsRepo(d.db);
      const b = new ModelsRepo(d.db);
      a.insert(row('base', 'active'));
      expect(a.get('base')!.checkpointDir).toBe('/m/base');
      b.setCheckpointDir('base', '/moved/base');
      expect(a.get('base')!.checkpointDir).toBe('/moved/base');
      b.setEngineConfig('base', { baseUrl: 'http://127.0.0.1:1' });
      expect(a.get('base')!.engineConfig).toEqual({ baseUrl: 'http://127.0.0.1:1' });
      // a version missing, then inserted by other means, is seen at once
      expect(a.get('v1')).toBeUndefined();
      d.sqlite.prepare("INSERT INTO models (version, parent, job_id, checkpoint_dir, status, metrics, created_at) VALUES ('v1', 'base', 'job_1', '/m/v1', 'candidate', '{}', 2)").run();
      expect(a.get('v1')!.status).toBe('candidate');
      b.activate('v1');
      expect([a.get('base')!.status, a.get('v1')!.status]).toEqual(['retired', 'active']);
    } finally {
      d.close();
    }
  });

  it('returns copies: changing a returned row changes nothing that is read next', () => {
    const d = openDatabase(tmpDir());
    try {
      const repo = new ModelsRepo(d.db);
      repo.insert(row('base', 'active'));
      const got = repo.get('base')!;
      got.checkpointDir = '/elsewhere';
      got.status = 'retired';
      expect(repo.get('base')).toMatchObject({ checkpointDir: '/m/base', status: 'active' });
    } finally {
      d.close();
    }
  });

  it('a write that fails leaves no stale row behind', () => {
    const d = openDatabase(tmpDir());
    try {
      const repo = new ModelsRepo(d.db);
      repo.insert(row('base', 'active'));
      expect(repo.get('base')!.checkpointDir).toBe('/m/base');
      expect(() => repo.insert({ ...row('base'), checkpointDir: '/dup' })).toThrow();
      expect(repo.get('base')!.checkpointDir).toBe('/m/base');
    } finally {
      d.close();
    }
  });
});
