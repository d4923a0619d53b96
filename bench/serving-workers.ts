/**
 * Serving throughput by worker count (LAMER_SERVE_WORKERS): act steps/s of the builtin engine at a
 * given concurrency with batching on (window 2 ms, max 32 rows), for 1 worker (the in-process
 * engine, what LAMER_SERVE_WORKERS=1 runs) and N > 1 (src/policy/serving-pool.ts), measured back
 * to back on the same checkpoint and workload. Used by bench/model.ts; also runs alone:
 *   npx tsx bench/serving-workers.ts [--backend wasm] [--workers 1,2] [--concurrency 32] [--steps 8]
 * Workload: `concurrency` sessions play `steps` steps each of a MineSweeper-like prompt (~330-byte
 * head, ~80-byte observation per step, 8-token free-form actions), so per-session KV caches are
 * exercised. One warm-up step per session (other session ids, released) runs before the clock
 * starts, so each worker's wasm kernels are warm; steps/s = timed steps / wall seconds.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { BackendPreference } from '../src/model/backend.js';
import { saveCheckpoint } from '../src/model/checkpoint.js';
import { DEFAULT_CONFIG, initModel } from '../src/model/gpt.js';
import { createBuiltinEngineInstance } from '../src/policy/builtin-engine.js';
import type { PolicyEngine } from '../src/policy/engine.js';
import { createServingPool } from '../src/policy/serving-pool.js';

export interface ServingBenchOptions {
  backend: BackendPreference;
  /** Checkpoint folder to serve. */
  checkpointDir: string;
  workers: readonly number[];
  /** Sessions playing at once (default 32). */
  concurrency?: number;
  /** Timed steps per session (default 8). */
  steps?: number;
}

const HEAD =
  'You are playing MineSweeper on a 6x6 board with 3 mines. Reveal every safe cell without revealing a mine. ' +
  'Each turn, answer with the cell to reveal as (row, col), 1-based. Numbers count adjacent mines; ? is hidden.\n' +
  'Reflection from attempt 0: I revealed a corner first and hit a mine; start from the centre next time.\n';
const board = (i: number) => `Turn ${i}. Board:\n? ? 1 . . ?\n? ? 1 . . ?\n1 1 1 . . ?\n. . . . 1 ?\n. . . . 1 ?\n? ? ? ? ? ?\n`;

/** Plays `concurrency` sessions of `steps` act steps; returns the number of steps. */
async function playAll(engine: PolicyEngine, prefix: string, concurrency: number, steps: number): Promise<number> {
  let n = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, s) => {
      const sid = `${prefix}${s}`;
      const history: string[] = [];
      for (let i = 0; i < steps; i++) {
        const g = await engine.act({
          sessionId: sid, modelVersion: 'bench', prompt: { head: HEAD, steps: history, tail: board(i) + 'Action: ' },
          sampling: { temperature: 1, topP: 1, topK: 0, seed: s * 1000 + i },
        });
        history.push(board(i) + `Action: ${g.output}\n`);
        n++;
      }
      engine.release(sid);
    }),
  );
  return n;
}

/** @returns act steps/s by worker count (keys: the counts as strings). */
export async function servingStepsPerSecByWorkers(o: ServingBenchOptions): Promise<Record<string, number>> {
  const concurrency = o.concurrency ?? 32;
  const steps = o.steps ?? 8;
  const opts = { backend: o.backend, batchWindowMs: 2, maxBatchSize: 32, limits: { maxActionTokens: 8 } };
  const out: Record<string, number> = {};
  for (const w of o.workers) {
    const engine: PolicyEngine = w <= 1 ? await createBuiltinEngineInstance(opts) : await createServingPool({ ...opts, workers: w });
    try {
      await engine.load('bench', o.checkpointDir);
      await playAll(engine, 'warm', concurrency, 1);
      const t0 = performance.now();
      const n = await playAll(engine, 's', concurrency, steps);
      out[String(w)] = n / ((performance.now() - t0) / 1000);
    } finally {
      await engine.dispose();
    }
  }
  return out;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const args = process.argv.slice(2);
  const flag = (name: string) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : undefined; };
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lamer-bench-ckpt-'));
  const model = initModel(DEFAULT_CONFIG, 1337);
  await saveCheckpoint(model, dir, { version: 'bench' });
  model.dispose();
  const before = os.loadavg();
  const r = await servingStepsPerSecByWorkers({
    backend: (flag('--backend') ?? 'wasm') as BackendPreference, checkpointDir: dir,
    workers: (flag('--workers') ?? '1,2').split(',').map(Number),
    concurrency: Number(flag('--concurrency') ?? 32), steps: Number(flag('--steps') ?? 8),
  });
  console.log(JSON.stringify({ stepsPerSecondByWorkers: r, ratio2over1: r['2'] && r['1'] ? r['2'] / r['1'] : null, loadavgBefore: before, loadavgAfter: os.loadavg() }));
  await rm(dir, { recursive: true, force: true });
}
