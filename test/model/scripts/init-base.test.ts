import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { readCheckpointMetadata } from '../../../src/model/checkpoint.js';
import { countParams, DEFAULT_CONFIG } from '../../../src/model/gpt.js';
import { configFromOptions, writeInitCheckpoint } from '../../../src/model/scripts/init-base.js';
import { root } from '../../helpers/cli.js';
import { tmpDir } from '../../helpers/index.js';

describe('configFromOptions', () => {
  it('replaces the fields named by --layers/--embd/--heads/--block, keeps the rest', () => {
    expect(configFromOptions({})).toEqual(DEFAULT_CONFIG);
    expect(configFromOptions({ layers: '4', embd: '192', heads: '6', block: '768' })).toEqual({ ...DEFAULT_CONFIG, n_layer: 4, n_embd: 192, n_head: 6, block_size: 768 });
  });
  it('rejects a value that is not a positive integer, and n_embd not divisible by n_head', () => {
    expect(() => configFromOptions({ layers: '0' })).toThrow(new RangeError("--layers must be a positive integer written in digits, got '0'"));
    expect(() => configFromOptions({ embd: '1e2' })).toThrow(RangeError);
    expect(() => configFromOptions({ heads: '3' })).toThrow(/n_embd \(128\) must be divisible by n_head \(3\)/);
  });
});

describe('writeInitCheckpoint', () => {
  it('writes the same bytes for the same config and seed, other bytes for another seed, ', async () => {
    const cfg = { ...DEFAULT_CONFIG, n_layer: 1, n_embd: 16, n_head: 2, block_size: 32 };
    const dir = tmpDir('lamer-init-');
    expect(await writeInitCheckpoint(path.join(dir, 'a'), cfg, 7)).toBe(countParams(cfg));
    await writeInitCheckpoint(path.join(dir, 'b'), cfg, 7);
    await writeInitCheckpoint(path.join(dir, 'c'), cfg, 8);
    const bytes = (d: string) => fs.readFileSync(path.join(dir, d, 'weights.bin'));
    expect(bytes('a').equals(bytes('b'))).toBe(true);
    expect(bytes('a').equals(bytes('c'))).toBe(false);
    expect(bytes('a').length).toBe(4 * countParams(cfg));
    const meta = await readCheckpointMetadata(path.join(dir, 'a'));
    expect(meta).toMatchObject({ config: cfg, version: 'base', meta: { source: 'random-init', seed: 7 } });
  });
});

describe('npm run model:init command line', () => {
  // node with tsx as a child process, as npm runs it
  const run = (args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'src/model/scripts/init-base.ts', ...args], { cwd: root, encoding: 'utf8' });

  it('a value that starts with \'-\' and an unknown option: one line, exit 2, nothing written', () => {
    const out = path.join(tmpDir('lamer-init-cli-'), 'ckpt');
    const apart = run([out, '--layers', '-2']);
    expect(apart.status).toBe(2);
    expect(apart.stderr).toBe("model:init: --layers needs a value (one that starts with '-' must be written --layers=VALUE)\n");
    const joined = run([out, '--layers=-2']);
    expect(joined.status).toBe(2);
    expect(joined.stderr).toBe("model:init: --layers must be a positive integer written in digits, got '-2'\n");
    const unknown = run([out, '--bogus']);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toMatch(/^model:init: Unknown option '--bogus'[^\n]*\n$/);
    expect(fs.existsSync(out)).toBe(false);
  }, 60_000);
});
