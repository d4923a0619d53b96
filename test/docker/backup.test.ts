/**
 * docker/backup.mjs: an online backup of a WAL-mode database that another connection keeps
 * open and writing is a consistent, complete copy (rows still in the WAL included).
 */
import { execFile } from 'node:child_process';
import { rmSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { tmpDir } from '../helpers/index.js';

const run = promisify(execFile);
const SCRIPT = join(import.meta.dirname, '..', '..', 'docker', 'backup.mjs');

describe('docker/backup.mjs', () => {
  it('copies a live WAL database, uncheckpointed rows included, and refuses to overwrite', async () => {
    const dir = tmpDir('lamer-backup-');
    try {
      const live = new Database(join(dir, 'lamer.db'));
      live.pragma('journal_mode = WAL');
      live.pragma('wal_autocheckpoint = 0'); // keep every row in the -wal file
      live.exec('CREATE TABLE steps (id INTEGER PRIMARY KEY, reward REAL)');
      const insert = live.prepare('INSERT INTO steps (reward) VALUES (?)');
      live.transaction(() => {
        for (let i = 0; i < 500; i++) insert.run(i * 0.5);
      })();
      expect(existsSync(join(dir, 'lamer.db-wal'))).toBe(true);
      const dest = join(dir, 'out', 'copy.db');
      const { stdout } = await run(process.execPath, [SCRIPT, dest], { env: { ...process.env, LAMER_DATA_DIR: dir } });
      const info = JSON.parse(stdout) as { file: string; bytes: number; pages: number };
      expect(info.file).toBe(dest);
      expect(info.pages).toBeGreaterThan(0);
      insert.run(1000); // the live database goes on being written
      const copy = new Database(dest, { readonly: true });
      expect(copy.prepare('SELECT count(*) AS n, sum(reward) AS s FROM steps').get()).toEqual({ n: 500, s: 62375 });
      copy.close();
      live.close();
      const again = await run(process.execPath, [SCRIPT, dest, '--db', join(dir, 'lamer.db')]).then(
        () => null,
        (e: { code: number; stderr: string }) => e,
      );
      expect(again?.code).toBe(1);
      expect(again?.stderr).toContain('exists; not overwriting');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
