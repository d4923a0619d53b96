/** src/owner-lock.ts in one process: exclusive, names the owner, released for the next owner. */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { acquireOwnerLock, OwnerLockError, readOwnerPid } from '../src/owner-lock.js';
import { startServer, StartupError } from '../src/server.js';
import { tmpDir } from './helpers/index.js';

const tmp = () => tmpDir('lamer-lock-');

describe('owner lock', () => {
  it('is exclusive, names the owner pid, and is free again after release', () => {
    const dir = tmp();
    const lock = acquireOwnerLock(dir);
    expect(readOwnerPid(dir)).toBe(process.pid);
    let err: unknown;
    try {
      acquireOwnerLock(dir);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(OwnerLockError);
    expect((err as OwnerLockError).ownerPid).toBe(process.pid);
    expect((err as OwnerLockError).dataDir).toBe(dir);
    lock.release();
    lock.release(); // idempotent
    expect(fs.existsSync(path.join(dir, 'lamer.pid'))).toBe(false);
    expect(fs.readdirSync(dir).sort()).toEqual(['lamer.lock']);
    acquireOwnerLock(dir).release();
  });

  it('an unreadable pid file still refuses, naming the pid as unknown', () => {
    const dir = tmp();
    const lock = acquireOwnerLock(dir);
    fs.writeFileSync(path.join(dir, 'lamer.pid'), 'garbage');
    expect(() => acquireOwnerLock(dir)).toThrow(`${dir} is in use by another lamer server (pid unknown)`);
    lock.release();
  });

  it('a second in-process server on the same directory is a StartupError; after close a new one starts', async () => {
    const dir = tmp();
    const a = await startServer({ host: '127.0.0.1', port: 0, engine: 'test', logLevel: 'silent', apiKeys: [], dataDir: dir });
    await expect(startServer({ host: '127.0.0.1', port: 0, engine: 'test', logLevel: 'silent', apiKeys: [], dataDir: dir })).rejects.toThrow(
      new StartupError(`LAMER_DATA_DIR=${dir} is in use by another lamer server (pid ${process.pid}); stop it first, or use another directory`),
    );
    await a.close();
    const b = await startServer({ host: '127.0.0.1', port: 0, engine: 'test', logLevel: 'silent', apiKeys: [], dataDir: dir });
    expect((await fetch(`${b.url}/readyz`)).status).toBe(200);
    await b.close();
  });
});
