/**
 * The builtin engine under hostile and unlucky conditions: bounded model work per call (limits
 * checked before any forward, candidate scoring in chunks), prompts recorded exactly as the model
 * saw them, sampled text always valid UTF-8, and recovery from a backend fault (the tfjs backend is
 * re-initialised and the loaded versions reloaded), or `failed` when that is impossible.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import * as tf from '@tensorflow/tfjs';
import { cp, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { initModel } from '../../src/model/gpt.js';
import { saveCheckpoint } from '../../src/model/checkpoint.js';
import { decode } from '../../src/model/tokenizer.js';
import type { CachedRow } from '../../src/model/gpt-cached.js';
import { createBuiltinEngineInstance, type BuiltinEngine } from '../../src/policy/builtin-engine.js';
import { EngineError, EngineLimitError, type PromptParts } from '../../src/policy/engine.js';
import { TINY } from '../model/setup.js';

const LIMITS = { maxActionTokens: 8, maxReflectionTokens: 16 };
let dir: string;
let engine: BuiltinEngine;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'lamer-beng-'));
  const m = initModel(TINY, 7);
  await saveCheckpoint(m, dir, { version: 'v1' });
  m.dispose();
  engine = await createBuiltinEngineInstance({ backend: 'wasm', batchWindowMs: 0, limits: LIMITS, maxCandidateTokens: 100 });
  await engine.load('v1', dir);
});
afterAll(async () => {
  await engine.dispose();
  await rm(dir, { recursive: true, force: true });
});

const S = (seed: number, temperature = 1) => ({ temperature, topP: 1, topK: 0, seed });
const small: PromptParts = { head: 'Task. ', steps: ['a;', 'b;'], tail: '> ' };

describe('bounded model work', () => {
  it('a candidate longer than half the context, or too many candidate tokens, is an EngineLimitError before any forward', async () => {
    const forwards = engine.stats().v1!.forwards;
    // TINY: block_size 64, so candidates of at most 32 tokens (31 bytes + EOS)
    const long = await engine.act({ sessionId: 'l1', modelVersion: 'v1', prompt: small, availableActions: ['ok', 'x'.repeat(32)], sampling: S(1) }).catch((e) => e);
    expect(long).toBeInstanceOf(EngineLimitError);
    expect(long.field).toBe('body/availableActions/1');
    expect(long.message).toBe('is 33 tokens (its tokens + EOS); model version v1 takes candidates of at most 32 tokens (half its context of 64)');
    // 4 x (24 + 1) = 100 tokens is the cap; one byte more is refused
    const fits = Array.from({ length: 4 }, (_, i) => `${i}`.padEnd(24, 'y'));
    expect((await engine.act({ sessionId: 'l2', modelVersion: 'v1', prompt: small, availableActions: fits, sampling: S(1) })).choiceIndex).toBeGreaterThanOrEqual(0);
    const over = await engine.score({ modelVersion: 'v1', prompt: small, candidates: [...fits.slice(0, 3), fits[3] + 'z'] }).catch((e) => e);
    expect(over).toBeInstanceOf(EngineLimitError);
    expect(over.message).toBe('total 101 tokens (each action\'s tokens + EOS); at most 100 per call (LAMER_MAX_CANDIDATE_TOKENS)');
    expect(engine.stats().v1!.forwards).toBeGreaterThan(forwards); // only the accepted call ran
    const after = engine.stats().v1!.forwards;
    await engine.act({ sessionId: 'l3', modelVersion: 'v1', prompt: small, availableActions: ['ok', 'x'.repeat(40)], sampling: S(1) }).catch(() => {});
    expect(engine.stats().v1!.forwards).toBe(after);
    for (const s of ['l1', 'l2', 'l3']) engine.release(s);
  });

  it('scoring every candidate has its own, smaller cap; act (a walk down the candidates\' trie) takes more', async () => {
    const e = await createBuiltinEngineInstance({ backend: 'wasm', batchWindowMs: 0, limits: LIMITS, maxCandidateTokens: 100, maxScoredTokens: 60 });
    await e.load('v1', dir);
    const cands = Array.from({ length: 3 }, (_, i) => `${i}`.padEnd(24, 'y')); // 75 tokens
    const over = await e.score({ modelVersion: 'v1', prompt: small, candidates: cands }).catch((err) => err);
    expect(over).toBeInstanceOf(EngineLimitError);
    expect(over.message).toBe('total 75 tokens (each action\'s tokens + EOS); at most 60 per call (when every candidate is scored)');
    expect((await e.act({ sessionId: 's', modelVersion: 'v1', prompt: small, availableActions: cands, sampling: S(2) })).choiceIndex).toBeGreaterThanOrEqual(0);
    await e.dispose();
  });

  it('scores many candidates in chunks that each stay within the padded-token bound, with the same scores as one by one', async () => {
    const e = await createBuiltinEngineInstance({ backend: 'wasm', batchWindowMs: 0, limits: LIMITS, maxCandidateTokens: 1 << 20 });
    const rows: number[] = [];
    await e.load('v1', dir);
    e.setObserver({ forward: (n) => rows.push(n) });
    const cands = Array.from({ length: 150 }, (_, i) => `c${i}`.padEnd(5 + (i % 20), '-'));
    const all = await e.score({ modelVersion: 'v1', prompt: small, candidates: cands });
    // one prefill, then chunks of at most 2048 padded tokens (longest row 24 tokens -> <= 85 rows)
    expect(rows.length).toBeGreaterThan(2);
    expect(Math.max(...rows.slice(1))).toBeLessThanOrEqual(Math.floor(2048 / 23));
    for (const i of [0, 37, 149]) {
      const [one] = await e.score({ modelVersion: 'v1', prompt: small, candidates: [cands[i]!] });
      expect(all[i]).toBeCloseTo(one!, 3);
    }
    await e.dispose();
  });
});

describe('what is recorded is what the model saw', () => {
  it('promptText is decode(promptTokenIds) and the cut is counted, for long random histories (property)', async () => {
    const text = fc.string({ unit: fc.constantFrom('binary', 'grapheme') as never, maxLength: 40 });
    await fc.assert(
      fc.asyncProperty(text, fc.array(text, { maxLength: 12 }), text, fc.nat(1000), async (head, steps, tail, seed) => {
        const g = await engine.act({ sessionId: 'p', modelVersion: 'v1', prompt: { head, steps, tail }, sampling: S(seed) });
        expect(g.promptText).toBe(decode(g.promptTokenIds));
        expect(g.promptTokenIds.length).toBeLessThanOrEqual(TINY.block_size - LIMITS.maxActionTokens);
        if ((g.promptTruncatedChars ?? 0) > 0) expect(g.droppedSteps).toBe(steps.length);
        else {
          const wf = (s: string) => (s as unknown as { toWellFormed(): string }).toWellFormed();
          expect(g.promptText).toBe(wf(head + steps.slice(g.droppedSteps).join('') + tail));
        }
      }),
      { numRuns: 40 },
    );
    engine.release('p');
  });

  it('a head longer than the context is cut at a character boundary and counted', async () => {
    const head = 'Règles: ' + '€'.repeat(40); // 3-byte characters: the cut would fall inside one
    const g = await engine.act({ sessionId: 'h', modelVersion: 'v1', prompt: { head, steps: ['s1;'], tail: '\nAction:' }, sampling: S(3) });
    engine.release('h');
    expect(g.droppedSteps).toBe(1);
    expect(g.promptText).toBe(decode(g.promptTokenIds));
    expect(g.promptText!.endsWith('€\nAction:')).toBe(true);
    expect(g.promptText!.startsWith('€')).toBe(true);
    const shownHead = [...g.promptText!].length - '\nAction:'.length;
    expect(g.promptTruncatedChars).toBe([...head].length - shownHead);
  });

  it('sampled actions and reflections are always valid UTF-8, also at high temperature (property)', async () => {
    const fatal = new TextDecoder('utf-8', { fatal: true });
    await fc.assert(
      fc.asyncProperty(fc.nat(1 << 30), fc.constantFrom(1, 3, 10), fc.boolean(), async (seed, temperature, reflect) => {
        const req = { sessionId: 'u', modelVersion: 'v1', prompt: small, sampling: S(seed, temperature) };
        const g = reflect ? await engine.reflect(req) : await engine.act(req);
        const bytes = Uint8Array.from(g.outputTokenIds.filter((t) => t < 256));
        expect(() => fatal.decode(bytes)).not.toThrow();
        expect(g.output).not.toContain('\uFFFD');
        expect(g.logprobs.length).toBe(g.outputTokenIds.length);
      }),
      { numRuns: 60 },
    );
    engine.release('u');
  });
});

describe('backend faults', () => {
  it('a fault inside a forward re-initialises the backend and reloads the versions: the next step of another session succeeds', async () => {
    const before = await engine.act({ sessionId: 'f0', modelVersion: 'v1', prompt: small, sampling: S(5, 0) });
    engine.release('f0');
    // a poisoned backend: every forward fails until the backend has been re-initialised
    let poisoned = false;
    const logs: string[] = [];
    const e = await createBuiltinEngineInstance({
      backend: 'wasm', batchWindowMs: 0, limits: LIMITS,
      logger: { info: (_o, m) => logs.push(`info ${m}`), warn: (_o, m) => logs.push(`warn ${m}`) },
      beforeForward: (_rows: CachedRow[]) => {
        if (poisoned) throw new WebAssembly.RuntimeError('memory access out of bounds');
      },
    });
    await e.load('v1', dir);
    const tensorsBefore = tf.memory().numTensors;
    poisoned = true;
    const failed = await e.act({ sessionId: 'f1', modelVersion: 'v1', prompt: { head: 'Task', steps: [], tail: '> ' }, sampling: S(1) }).catch((err) => err);
    expect(failed).toBeInstanceOf(EngineError);
    expect(failed.message).toBe('model backend fault; the engine re-initialises its backend, retry the request');
    expect(e.health().state).toBe('recovering');
    expect(e.isLoaded('v1')).toBe(false); // readiness is false while it recovers
    poisoned = false; // the new backend instance is healthy
    const next = await e.act({ sessionId: 'f2', modelVersion: 'v1', prompt: small, sampling: S(5, 0) });
    expect(next.outputTokenIds).toEqual(before.outputTokenIds); // the reloaded weights are the same
    expect(e.health()).toEqual({ state: 'ok', recoveries: 1 });
    expect(e.isLoaded('v1')).toBe(true);
    expect(logs).toContain('warn model backend fault: re-initialising the tfjs backend and reloading the loaded versions');
    expect(logs).toContain('info model backend recovered');
    // the same (failed) request retried now succeeds
    const retry = await e.act({ sessionId: 'f1', modelVersion: 'v1', prompt: { head: 'Task', steps: [], tail: '> ' }, sampling: S(1) });
    expect(retry.outputTokenIds.length).toBeGreaterThan(0);
    e.release('f1');
    e.release('f2');
    expect(tf.memory().numTensors).toBeLessThanOrEqual(tensorsBefore);
    await e.dispose();
  });

  it('when the versions cannot be reloaded after a fault, the engine is failed for good and says so', async () => {
    const dir2 = await mkdtemp(path.join(os.tmpdir(), 'lamer-beng2-'));
    await cp(dir, dir2, { recursive: true });
    let fault = false;
    const fatal: Error[] = [];
    const e = await createBuiltinEngineInstance({
      backend: 'wasm', batchWindowMs: 0, limits: LIMITS, onFatal: (err) => fatal.push(err),
      beforeForward: () => {
        if (fault) throw new WebAssembly.RuntimeError('memory access out of bounds');
      },
    });
    await e.load('v2', dir2);
    await rm(dir2, { recursive: true, force: true }); // its folder is gone: it cannot be reloaded
    fault = true;
    await expect(e.act({ sessionId: 'g1', modelVersion: 'v2', prompt: small, sampling: S(1) })).rejects.toBeInstanceOf(EngineError);
    fault = false;
    const later = await e.act({ sessionId: 'g2', modelVersion: 'v2', prompt: small, sampling: S(1) }).catch((err) => err);
    expect(later).toBeInstanceOf(EngineError);
    // clients get the state; the fault and the reload error (with the folder) go to the log and health
    expect(later.message).toBe('the model backend failed and could not be re-initialised; an operator must check the server log');
    expect(e.health().state).toBe('failed');
    expect(e.health().detail).toMatch(/^memory access out of bounds; re-initialising failed: model version 'v2' cannot be loaded/);
    expect(e.isLoaded('v2')).toBe(false);
    expect(fatal).toHaveLength(1);
    await e.dispose();
  });
});
