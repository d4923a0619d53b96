/** Samples as training tensors: next-token rows, output mask, old logprobs, left truncation. */
import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { disposeBatch, makeBatch } from '../../../src/training/data/batch.js';
import type { TrainingSample } from '../../../src/training/data/data.js';

beforeAll(async () => { await tf.setBackend('cpu'); });

const sample = (prompt: number[], output: number[], advantage = 0, oldLogprobs: number[] | null = null): TrainingSample =>
  ({ sessionId: 's', taskId: 't', attempt: 0, step: 0, kind: 'action', promptTokenIds: prompt, outputTokenIds: output, oldLogprobs, advantage, return: 0 });

describe('makeBatch', () => {
  it('shifts, masks output targets and right-pads', () => {
    const b = makeBatch([sample([1, 2, 3], [4, 5], 0.5, [-1, -2]), sample([6], [7], -1, [-3])], { blockSize: 10, padId: 0, vocabSize: 8 });
    expect(b.inputs.arraySync()).toEqual([[1, 2, 3, 4], [6, 0, 0, 0]]);
    expect(b.targets.arraySync()).toEqual([[2, 3, 4, 5], [7, 0, 0, 0]]);
    expect(b.mask.arraySync()).toEqual([[0, 0, 1, 1], [1, 0, 0, 0]]);
    expect(b.oldLogprobs.arraySync()).toEqual([[0, 0, -1, -2], [-3, 0, 0, 0]]);
    expect(Array.from(b.advantages.dataSync())).toEqual([0.5, -1]);
    expect(b.tokens).toBe(5);
    expect(b.padFrac).toBeCloseTo(3 / 8, 9);
    tf.dispose([b.inputs, b.targets, b.mask, b.oldLogprobs, b.advantages]);
  });
  it('cuts long sequences from the left to blockSize', () => {
    const b = makeBatch([sample([1, 2, 3], [4, 5])], { blockSize: 3, padId: 0, vocabSize: 8 });
    expect(b.inputs.arraySync()).toEqual([[2, 3, 4]]);
    expect(b.mask.arraySync()).toEqual([[0, 1, 1]]);
    tf.dispose([b.inputs, b.targets, b.mask, b.oldLogprobs, b.advantages]);
  });
  it('lossTargets: trains the given target at the position predicting each output token, nothing at -1', () => {
    // prompt [1, 2]; output [3, 4, 5, 6]: action 3, context 4 5 (EOS=7 trained where 4 follows), action 6
    const packed = { ...sample([1, 2], [3, 4, 5, 6]), lossTargets: [3, 7, -1, 6] };
    const b = makeBatch([packed, sample([1], [2])], { blockSize: 10, padId: 0, vocabSize: 8 });
    expect(b.inputs.arraySync()).toEqual([[1, 2, 3, 4, 5], [1, 0, 0, 0, 0]]);
    expect(b.targets.arraySync()).toEqual([[2, 3, 7, 5, 6], [2, 0, 0, 0, 0]]);
    expect(b.mask.arraySync()).toEqual([[0, 1, 1, 0, 1], [1, 0, 0, 0, 0]]);
    expect(b.trainedTokens).toBe(4);
    expect(b.tokens).toBe(6);
    tf.dispose([b.inputs, b.targets, b.mask, b.oldLogprobs, b.advantages, b.temperatures]);
    expect(() => makeBatch([{ ...packed, lossTargets: [3] }], { blockSize: 10, padId: 0, vocabSize: 8 })).toThrow(/lossTargets/);
    expect(() => makeBatch([{ ...packed, lossTargets: [3, 9, -1, 6] }], { blockSize: 10, padId: 0, vocabSize: 8 })).toThrow(/outside/);
  });
  it('per-token advantages (packed RL): [B, T], each output position its own, the others their sample\'s advantage', () => {
    const packed = { ...sample([1, 2], [3, 4, 5, 6], 0.5), lossTargets: [3, 7, -1, 6], advantages: [0.5, 0.5, 0, -2] };
    const b = makeBatch([packed, sample([1, 2, 3], [2], 1.5)], { blockSize: 10, padId: 0, vocabSize: 8 });
    expect(b.advantages.shape).toEqual([2, 5]);
    expect(b.advantages.arraySync()).toEqual([[0, 0.5, 0.5, 0, -2], [0, 0, 1.5, 0, 0]]);
    // left truncation keeps the last advantages, as it keeps the last logprobs
    const cut = makeBatch([packed], { blockSize: 3, padId: 0, vocabSize: 8 });
    expect(cut.advantages.arraySync()).toEqual([[0.5, 0, -2]]);
    expect(cut.mask.arraySync()).toEqual([[1, 0, 1]]);
    tf.dispose([b.inputs, b.targets, b.mask, b.oldLogprobs, b.advantages, b.temperatures, cut.inputs, cut.targets, cut.mask, cut.oldLogprobs, cut.advantages, cut.temperatures]);
    expect(() => makeBatch([{ ...packed, advantages: [1] }], { blockSize: 10, padId: 0, vocabSize: 8 })).toThrow(/advantages/);
  });
  it('position offsets: one int32 start position per row, null without; each row must fit the block from its offset', () => {
    const m = { blockSize: 6, padId: 0, vocabSize: 8 };
    const plain = makeBatch([sample([1, 2, 3], [4, 5]), sample([6], [7])], m);
    expect(plain.positionOffsets).toBeNull();
    // rows of 4 and 1 inputs: offsets up to 6 - 4 = 2 and 6 - 1 = 5
    const b = makeBatch([sample([1, 2, 3], [4, 5]), sample([6], [7])], m, undefined, undefined, [2, 5]);
    expect(b.positionOffsets!.dtype).toBe('int32');
    expect(Array.from(b.positionOffsets!.dataSync())).toEqual([2, 5]);
    expect(b.inputs.arraySync()).toEqual(plain.inputs.arraySync()); // the rows themselves are unchanged
    disposeBatch(plain);
    disposeBatch(b);
    expect(() => makeBatch([sample([1, 2, 3], [4, 5])], m, undefined, undefined, [3])).toThrow(/position offset 3 outside \[0, 2\]/);
    expect(() => makeBatch([sample([1], [2])], m, undefined, undefined, [-1])).toThrow(/position offset -1/);
    expect(() => makeBatch([sample([1], [2])], m, undefined, undefined, [0.5])).toThrow(/position offset 0.5/);
    expect(() => makeBatch([sample([1], [2])], m, undefined, undefined, [0, 1])).toThrow(/one offset per sample \(1\), got 2/);
    // a row cut from the left fills the block: offset 0 only
    const cut = makeBatch([sample([1, 2, 3, 4, 5], [6, 7, 1])], m, undefined, undefined, [0]);
    expect(cut.inputs.shape).toEqual([1, 6]);
    disposeBatch(cut);
    expect(() => makeBatch([sample([1, 2, 3, 4, 5], [6, 7, 1])], m, undefined, undefined, [1])).toThrow(/outside \[0, 0\]/);
  });
  it('rejects empty outputs and out-of-vocabulary ids', () => {
    expect(() => makeBatch([sample([1], [])], { blockSize: 3, padId: 0, vocabSize: 8 })).toThrow(/no output tokens/);
    expect(() => makeBatch([sample([1], [9])], { blockSize: 3, padId: 0, vocabSize: 8 })).toThrow(/outside/);
  });
});
