/**
 * Reading one environment variable as a checked value: an integer, a number or one of a list, in
 * the configuration's bounds, each with its default for unset or empty; and `ConfigError`, what a
 * bad value throws, its message naming the variable, the value and what is expected.
 * `parseTrainWorkers` is the one parser of LAMER_TRAIN_WORKERS (the server's configuration and every
 * training job read it with it). `matmulFromEnv` and `blasThreadsFromEnv` are likewise the one
 * parsers of LAMER_MATMUL and LAMER_BLAS_THREADS (the server's config checks them at start;
 * src/model/backend.ts and src/model/blas.ts read them in every process and worker thread).
 */
import { MATMUL_KINDS, type MatmulKind } from '../domain.js';

/** A bad configuration value; the message names the variable, the value and what is expected. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/** An integer variable: digits only, in [min, max]; `def` when unset or empty. @throws ConfigError otherwise. */
export function int(env: Record<string, string | undefined>, name: string, def: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return def;
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(`${name}=${JSON.stringify(raw)}: expected an integer in [${min}, ${max}]`);
  const v = Number(raw.trim());
  if (v < min || v > max) throw new ConfigError(`${name}=${raw}: expected an integer in [${min}, ${max}]`);
  return v;
}

/**
 * LAMER_TRAIN_WORKERS, its one parser (the server's config and every training job read it with
 * this): data-parallel training threads per job, an integer in [0, 256]; unset or '' is 0, every
 * core on wasm/cpu (src/training/run/job.ts resolveTrainWorkers).
 * @throws ConfigError for any other value.
 */
export function parseTrainWorkers(env: Record<string, string | undefined>): number {
  return int(env, 'LAMER_TRAIN_WORKERS', 0, 0, 256);
}

/** A variable that must be one of `allowed`; `def` when unset or empty. @throws ConfigError otherwise. */
export function oneOf<T extends string>(env: Record<string, string | undefined>, name: string, def: T, allowed: readonly T[]): T {
  const raw = env[name];
  if (raw === undefined || raw === '') return def;
  if (!(allowed as readonly string[]).includes(raw)) {
    throw new ConfigError(`${name}=${JSON.stringify(raw)}: expected one of ${allowed.join(', ')}`);
  }
  return raw as T;
}

/** A number variable (a fraction such as a margin): finite, in [min, max]. */
export function num(env: Record<string, string | undefined>, name: string, def: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return def;
  const v = Number(raw.trim());
  if (!Number.isFinite(v) || v < min || v > max) {
    throw new ConfigError(`${name}=${JSON.stringify(raw)}: expected a number in [${min}, ${max}]`);
  }
  return v;
}

/**
 * LAMER_MATMUL, the wasm backend's matmul (src/model/blas.ts): `auto` when unset or empty.
 * @throws ConfigError for any other value than auto, blas, wasm.
 */
export function matmulFromEnv(env: Record<string, string | undefined> = process.env): MatmulKind {
  return oneOf(env, 'LAMER_MATMUL', 'auto', MATMUL_KINDS);
}

/** LAMER_BLAS_THREADS, OpenBLAS threads per product: 1 when unset or empty. @throws ConfigError unless an integer in [1, 64]. */
export function blasThreadsFromEnv(env: Record<string, string | undefined> = process.env): number {
  return int(env, 'LAMER_BLAS_THREADS', 1, 1, 64);
}
