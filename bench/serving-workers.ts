/**
 * Serving throughput by worker count (LAMER_SERVE_WORKERS): act steps/s of the builtin engine at a
 * given concurrency with batching on (window 2 ms, max 32 rows), for 1 worker (the in-process
 * engine, what LAMER_SERVE_WORKERS=1 runs) and N > 1 (src/policy/serving-pool.ts), measured back
 * to back on the same checkpoint and workload. Used by bench/model.ts; also runs alone:
 *   npx tsx bench/serving-workers.ts [--backend wasm] [--workers 1,2] [--concurrency 32] [--steps 8]
 * Workload: `concurrency` sessions play `steps` steps each of a MineSweeper-like prompt (~330-byte
 * head, ~80-byte observation per step, 8-token free-form actions), so per-session KV caches are
 * exercised. The same workload runs once untimed first (other session ids, released), so that a
 * fresh worker thread's JavaScript and WebAssembly code is optimised (V8 tiers wasm up from its
 * baseline compiler while it runs) as the long-running engine thread's is; steps/s = timed steps /
 * wall seconds. CPU ms per
 * step = CPU time of the whole process (every thread: `process.cpuUsage`) over the timed steps per
 * step, which a shared machine's load does not swamp the way it swamps the wall-clock ratio: equal
 * CPU per step for 1 and N workers means the pool costs nothing extra, and its wall-clock gain is
 * bounded by the idle cores.
 */
import type { BackendPreference } from '../src/model/backend.js';
import { createBuiltinEngineInstance } from '../src/policy/builtin-engine.js';
import type { PolicyEngine } from '../src/policy/engine.js';
import { createServingPool } from '../src/policy/serving-pool.js';
import { backendFlag, flag, isMain, printWithLoad, ratio2over1, withBenchCheckpoint, workersFlag } from './cli.js';

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

/** The workload's prompt head: a MineSweeper task and one reflection (~330 bytes); bench/model.ts plays it too. */
export const HEAD =
  'You are playing MineSweeper on a 6x6 board with 3 mines. Reveal every safe cell without revealing a mine. ' +
  'Each turn, answer with the cell to reveal as (row, col), 1-based. Numbers count adjacent mines; ? is hidden.\n' +
  'Reflection from attempt 0: I revealed a corner first and hit a mine; start from the centre next time.\n';
/** The workload's observation at turn `i` (~80 bytes). */
export const board = (i: number) => `Turn ${i}. Board:\n? ? 1 . . ?\n? ? 1 . . ?\n1 1 1 . . ?\n. . . . 1 ?\n. . . . 1 ?\n? ? ? ? ? ?\n`;

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

export interface ServingBenchResult {
  /** Act steps per wall-clock second, by worker count (keys: the counts as strings). */
  stepsPerSec: Record<string, number>;
  /** CPU milliseconds of the process (all threads) per act step, by worker count. */
  cpuMsPerStep: Record<string, number>;
}

/** Act steps/s and CPU ms per step by worker count, measured back to back. */
export async function servingStepsPerSecByWorkers(o: ServingBenchOptions): Promise<ServingBenchResult> {
  const concurrency = o.concurrency ?? 32;
  const steps = o.steps ?? 8;
  const opts = { backend: o.backend, batchWindowMs: 2, maxBatchSize: 32, limits: { maxActionTokens: 8 } };
  const out: ServingBenchResult = { stepsPerSec: {}, cpuMsPerStep: {} };
  for (const w of o.workers) {
    const engine: PolicyEngine = w <= 1 ? await createBuiltinEngineInstance(opts) : await createServingPool({ ...opts, workers: w });
    try {
      await engine.load('bench', o.checkpointDir);
      await playAll(engine, 'warm', concurrency, steps);
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      const n = await playAll(engine, 's', concurrency, steps);
      out.stepsPerSec[String(w)] = n / ((performance.now() - t0) / 1000);
      const cpu = process.cpuUsage(c0);
      out.cpuMsPerStep[String(w)] = (cpu.user + cpu.system) / 1000 / n;
    } finally {
      await engine.dispose();
    }
  }
  return out;
}

if (isMain(import.meta.url)) {
  await withBenchCheckpoint((dir) =>
    printWithLoad(async () => {
      const r = await servingStepsPerSecByWorkers({
        backend: backendFlag('wasm'), checkpointDir: dir, workers: workersFlag(),
        concurrency: Number(flag('--concurrency') ?? 32), steps: Number(flag('--steps') ?? 8),
      });
      return { stepsPerSecondByWorkers: r.stepsPerSec, cpuMsPerStepByWorkers: r.cpuMsPerStep, ratio2over1: ratio2over1(r.stepsPerSec) };
    }),
  );
}
