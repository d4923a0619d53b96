/**
 * src/ensure-dir.ts: nested creation, an existing directory, a file in the way, a read-only parent,
 * and a file system that refuses a level (procfs as root: where `mkdir(..., { recursive: true })`
 * never returns, the helper fails at once). Each case runs the sync and the async variant.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DirectoryError, ensureDir, ensureDirSync } from '../src/ensure-dir.js';
import { tmpDir } from './helpers/index.js';

const VARIANTS = [
  ['ensureDirSync', async (dir: string) => ensureDirSync(dir)],
  ['ensureDir', ensureDir],
] as const;

/** The DirectoryError `fn` throws (fails the test when it returns). */
async function thrown(fn: () => Promise<void>): Promise<DirectoryError> {
  try {
    await fn();
  } catch (e) {
    expect(e).toBeInstanceOf(DirectoryError);
    return e as DirectoryError;
  }
  throw new Error('expected a DirectoryError');
}

describe.each(VARIANTS)('%s', (_name, ensure) => {
  it('creates every missing level of a nested path', async () => {
    const base = tmpDir('lamer-ensure-');
    const dir = path.join(base, 'a', 'b', 'c');
    await ensure(dir);
    expect(fs.statSync(dir).isDirectory()).toBe(true);
    expect(fs.readdirSync(base)).toEqual(['a']);
    expect(fs.readdirSync(path.join(base, 'a'))).toEqual(['b']);
  });

  it('resolves a relative path against the working directory', async () => {
    const base = tmpDir('lamer-ensure-');
    const rel = path.relative(process.cwd(), path.join(base, 'r', 's'));
    await ensure(rel);
    expect(fs.statSync(path.join(base, 'r', 's')).isDirectory()).toBe(true);
  });

  it('returns at once for an existing directory and leaves its contents alone', async () => {
    const dir = tmpDir('lamer-ensure-');
    fs.writeFileSync(path.join(dir, 'keep'), 'x');
    await ensure(dir);
    await ensure(dir + '/');
    expect(fs.readdirSync(dir)).toEqual(['keep']);
    expect(fs.readFileSync(path.join(dir, 'keep'), 'utf8')).toBe('x');
  });

  it('a file in the way: EEXIST at the directory itself, ENOTDIR at a parent; nothing created', async () => {
    const base = tmpDir('lamer-ensure-');
    const file = path.join(base, 'f');
    fs.writeFileSync(file, 'x');
    const itself = await thrown(() => ensure(file));
    expect(itself.message).toBe(`cannot create directory ${file}: EEXIST`);
    expect([itself.code, itself.dir, itself.path]).toEqual(['EEXIST', file, file]);
    const below = await thrown(() => ensure(path.join(file, 'a', 'b')));
    expect(below.message).toBe(`cannot create directory ${path.join(file, 'a', 'b')}: ENOTDIR at ${file}`);
    expect(below.code).toBe('ENOTDIR');
    expect(fs.readdirSync(base)).toEqual(['f']);
  });

  it.skipIf(process.getuid?.() === 0)('a parent without write permission: EACCES naming the level, nothing created', async () => {
    const base = tmpDir('lamer-ensure-');
    fs.chmodSync(base, 0o555);
    try {
      const err = await thrown(() => ensure(path.join(base, 'a', 'b')));
      expect(err.message).toBe(`cannot create directory ${path.join(base, 'a', 'b')}: EACCES at ${path.join(base, 'a')}`);
      expect(fs.readdirSync(base)).toEqual([]);
    } finally {
      fs.chmodSync(base, 0o755);
    }
  });

  // Root on Linux: mkdir /proc/x is ENOENT, which makes { recursive: true } retry forever.
  it.skipIf(process.platform !== 'linux' || process.getuid?.() !== 0 || !fs.existsSync('/proc/self'))(
    'procfs refusing a level (root on Linux): ENOENT at once, for the directory and below it',
    async () => {
      // a retry loop would never return: the test's own timeout catches it
      const err = await thrown(() => ensure('/proc/lamer-test-x'));
      expect(err.message).toBe('cannot create directory /proc/lamer-test-x: ENOENT');
      expect([err.code, err.path]).toEqual(['ENOENT', '/proc/lamer-test-x']);
      const deep = await thrown(() => ensure('/proc/lamer-test-x/a/b'));
      expect(deep.message).toBe('cannot create directory /proc/lamer-test-x/a/b: ENOENT at /proc/lamer-test-x');
      expect(fs.existsSync('/proc/lamer-test-x')).toBe(false);
    },
  );
});
