/**
 * Sizes and recorded forms of prompts and generations: token counts checked against the limits
 * before any model work, the prompt text as the engine saw it, and the token arrays as stored.
 */
import type { Generation, PromptParts } from '../policy/engine.js';

/** Candidate tokens of `actions` for the builtin byte-level model: each one's UTF-8 bytes + EOS. */
export function candidateTokenCount(actions: readonly string[]): number {
  let n = 0;
  for (const a of actions) n += Buffer.byteLength(a, 'utf8') + 1;
  return n;
}

/** Tokens (UTF-8 bytes) of a rendered prompt before fitting: head + every step + tail. */
export function promptTokenCount(p: PromptParts): number {
  let n = Buffer.byteLength(p.head, 'utf8') + Buffer.byteLength(p.tail, 'utf8');
  for (const s of p.steps) n += Buffer.byteLength(s, 'utf8');
  return n;
}

/** A generation's token array as stored: null when a remote engine did not return it (record.available). */
export function recorded(g: Generation, k: 'promptTokenIds' | 'outputTokenIds' | 'logprobs'): number[] | null {
  return g.record && !g.record.available[k] ? null : g[k];
}

/** The prompt text the engine used: the earliest `droppedSteps` steps removed (contract of PromptParts). */
export function promptAsSeen(p: PromptParts, droppedSteps: number): string {
  return p.head + p.steps.slice(Math.max(0, droppedSteps)).join('') + p.tail;
}
