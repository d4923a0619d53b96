/**
 * Backend choice: `webgpu` is optional and fails soft. On a machine without the optional packages
 * (`webgpu`, `@tensorflow/tfjs-backend-webgpu`) or without a GPU adapter, `initBackend('webgpu')`
 * logs exactly one line about webgpu and selects wasm without throwing.
 */
import * as tf from '@tensorflow/tfjs';
import { describe, expect, it } from 'vitest';
import { activeMatmul, chooseMatmul, chosenBackend, initBackend, type BackendLogger } from '../../src/model/backend.js';
import { loadConfig } from '../../src/config.js';

describe('initBackend webgpu', () => {
  it('falls back to wasm with one log line and no throw when webgpu is unavailable', async () => {
    const lines: Array<{ level: string; o: object; msg?: string }> = [];
    const logger: BackendLogger = {
      info: (o, msg) => lines.push({ level: 'info', o, msg }),
      warn: (o, msg) => lines.push({ level: 'warn', o, msg }),
    };
    const name = await initBackend('webgpu', logger);
    expect(name).toBe('wasm');
    expect(chosenBackend()).toBe('wasm');
    expect(tf.getBackend()).toBe('wasm');
    const webgpuLines = lines.filter((l) => (l.msg ?? '').includes('webgpu'));
    expect(webgpuLines).toHaveLength(1);
    expect(webgpuLines[0]!.msg).toMatch(/^tfjs webgpu backend unavailable .*; trying wasm$/);
    expect(typeof (webgpuLines[0]!.o as { reason?: unknown }).reason).toBe('string');
    // the others are the matmul choice (src/model/blas.ts) and the usual selection line; nothing was logged as a warning
    expect(lines.filter((l) => l.level === 'warn')).toHaveLength(0);
    expect(lines.map((l) => l.msg)).toEqual([webgpuLines[0]!.msg, expect.stringMatching(/^matmul: (OpenBLAS|the wasm kernel)/), 'tfjs backend selected']);
    // and the wasm backend computes
    const y = tf.matMul(tf.tensor2d([[1, 2]]), tf.tensor2d([[3], [4]]));
    expect(Array.from(y.dataSync())).toEqual([11]);
    y.dispose();
  });

  it('LAMER_MATMUL=blas without the addon is an error naming the reason (initBackend lets it through instead of moving on to cpu)', () => {
    const before = activeMatmul();
    expect(() => chooseMatmul(undefined, 'blas', () => ({ addon: null, reason: 'not built here' }))).toThrow(
      'LAMER_MATMUL=blas but the OpenBLAS addon did not load: not built here',
    );
    expect(activeMatmul()).toBe(before);
  });

  it('LAMER_TFJS_BACKEND accepts webgpu', () => {
    expect(loadConfig({ LAMER_TFJS_BACKEND: 'webgpu' }).tfjsBackend).toBe('webgpu');
  });
});

describe('the cpu backend banner', () => {
  it('is not printed by a process that loads this server\'s tfjs setup and computes on cpu', async () => {
    const { spawnSync } = await import('node:child_process');
    const { root } = await import('../helpers/cli.js');
    const script = [
      "const tf = await import('@tensorflow/tfjs');",
      "const { initBackend } = await import('./src/model/backend.ts');",
      "await initBackend('cpu');",
      'const x = tf.tensor1d([1, 2, 3]);',
      "console.log('sum', tf.sum(x).dataSync()[0], tf.getBackend());",
    ].join('\n');
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: root, encoding: 'utf8' });
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('sum 6 cpu');
    expect(r.stdout + r.stderr).not.toContain('install our node backend');
  });
});
