/**
 * The WebAssembly SIMD attention kernels (src/model/wasm-attention.ts) on a memory of their own:
 * the softmax against Math.exp over wide score ranges, and when the module is refused.
 */
import { describe, expect, it } from 'vitest';
import { wasmAttention } from '../../src/model/wasm-attention.js';

describe('wasmAttention', () => {
  it('is instantiated once per memory, and refused for a shared memory', () => {
    const memory = new WebAssembly.Memory({ initial: 1 });
    const k = wasmAttention(memory);
    expect(k).not.toBeNull();
    expect(wasmAttention(memory)).toBe(k);
    expect(wasmAttention(new WebAssembly.Memory({ initial: 1, maximum: 2, shared: true }))).toBeNull();
  });

  it('softmax gives each causal row exp(s - max) / sum within 1e-6, over scores from -1e4 to 90', () => {
    const memory = new WebAssembly.Memory({ initial: 1 });
    const k = wasmAttention(memory)!;
    const heap = new Float32Array(memory.buffer);
    const [n, c] = [5, 6];
    const row = (c + n + 3) & ~3; // rows of whole f32x4
    const scores = (j: number, t: number) => (t === 2 ? -1e4 : Math.sin(j * 7 + t) * 90 - j);
    for (let j = 0; j < n; j++) for (let t = 0; t < row; t++) heap[j * row + t] = t <= c + j ? scores(j, t) : 12345;
    k.softmax(0, n, c);
    for (let j = 0; j < n; j++) {
      const s = Array.from({ length: c + j + 1 }, (_, t) => Math.fround(scores(j, t)));
      const m = Math.max(...s);
      const z = s.reduce((a, x) => a + Math.exp(x - m), 0);
      s.forEach((x, t) => expect(Math.abs(heap[j * row + t] - Math.exp(x - m) / z)).toBeLessThan(1e-6));
    }
  });
});
