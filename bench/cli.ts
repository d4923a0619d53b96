/**
 * The command-line preamble shared by the benchmark scripts that also run alone
 * (bench/serving-workers.ts, bench/training-workers.ts; bench/model.ts reads its flags here too):
 * whether a module is the script being run, `--name value` flags, and the benchmark checkpoint, a
 * fresh DEFAULT_CONFIG model (src/model/gpt.ts) with seed 1337 saved as version `bench`.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { BackendPreference } from '../src/model/backend.js';
import { saveCheckpoint } from '../src/model/checkpoint.js';
import { DEFAULT_CONFIG, initModel, type GPT } from '../src/model/gpt.js';

/** Seed of the benchmark model's initial weights. */
export const BENCH_SEED = 1337;

/** Whether the module whose `import.meta.url` is `moduleUrl` is the script node was started with. */
export function isMain(moduleUrl: string): boolean {
  return moduleUrl === pathToFileURL(process.argv[1] ?? '').href;
}

/** The value after `name` in `args` (`--steps 4` gives '4'), or undefined when `name` is absent. */
export function flag(name: string, args: readonly string[] = process.argv.slice(2)): string | undefined {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
}

/**
 * The tfjs backend from `--backend` (auto, tensorflow, webgpu, wasm or cpu), else `fallback`. Not
 * checked: initBackend (src/model/backend.ts) takes another name as cpu.
 */
export function backendFlag(fallback: BackendPreference, args: readonly string[] = process.argv.slice(2)): BackendPreference {
  return (flag('--backend', args) ?? fallback) as BackendPreference;
}

/** Worker counts from `--workers` (comma-separated, e.g. `1,2`; default `1,2`). */
export function workersFlag(args: readonly string[] = process.argv.slice(2)): number[] {
  return (flag('--workers', args) ?? '1,2').split(',').map(Number);
}

/** Saves `model` as version `bench` in a new temporary folder; returns the folder (the caller removes it). */
export async function saveBenchCheckpoint(model: GPT): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lamer-bench-ckpt-'));
  await saveCheckpoint(model, dir, { version: 'bench' });
  return dir;
}

/**
 * Runs `fn` on a fresh benchmark checkpoint (DEFAULT_CONFIG, seed `BENCH_SEED`, version `bench`)
 * in a temporary folder, removed afterwards, and returns its result.
 */
export async function withBenchCheckpoint<T>(fn: (checkpointDir: string) => Promise<T>): Promise<T> {
  const model = initModel(DEFAULT_CONFIG, BENCH_SEED);
  const dir = await saveBenchCheckpoint(model);
  model.dispose();
  try {
    return await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** `byWorkers['2'] / byWorkers['1']`, or null when either is missing or 0. */
export function ratio2over1(byWorkers: Record<string, number>): number | null {
  return byWorkers['2'] && byWorkers['1'] ? byWorkers['2'] / byWorkers['1'] : null;
}

/**
 * Prints `measure()`'s figures as one JSON line with the 1-minute, 5-minute and 15-minute load
 * averages before and after (`loadavgBefore`, `loadavgAfter`): on a shared machine they say how
 * much other work ran.
 */
export async function printWithLoad(measure: () => Promise<object>): Promise<void> {
  const before = os.loadavg();
  const figures = await measure();
  console.log(JSON.stringify({ ...figures, loadavgBefore: before, loadavgAfter: os.loadavg() }));
}
