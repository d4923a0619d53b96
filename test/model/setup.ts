/** Shared setup of the model tests: the wasm backend (the production CPU path) and tiny configs. */
import { initBackend } from '../../src/model/backend.js';
import type { GPTConfig } from '../../src/model/gpt.js';
import { VOCAB_SIZE } from '../../src/model/tokenizer.js';

export async function useWasm(): Promise<string> {
  return initBackend('wasm');
}

/** A tiny model config for fast tests: 2 layers, 32 wide, 4 heads, 64-token context. */
export const TINY: GPTConfig = { vocab_size: VOCAB_SIZE, block_size: 64, n_layer: 2, n_head: 4, n_embd: 32 };
