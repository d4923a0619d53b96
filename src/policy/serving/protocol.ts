/**
 * The messages between the serving pool (src/policy/serving-pool.ts) and its worker threads
 * (src/policy/serving-worker.ts): what a worker starts with, the requests it answers, what it
 * reports, and errors as they cross the thread boundary. Everything here is plain data, since
 * only structured-cloneable values cross threads.
 */
import type { BatcherStats } from '../../model/batcher.js';
import type { BuiltinEngineOptions } from '../builtin-engine.js';
import {
  EngineError, EngineLimitError, type ActRequest, type CompleteRequest, type EngineHealth, type ReflectRequest, type ReplayRequest,
  type ScoreRequest,
} from '../engine.js';

/** Engine options a worker gets (plain data: functions do not cross threads). */
export type WorkerEngineOptions = Pick<
  BuiltinEngineOptions,
  'backend' | 'batchWindowMs' | 'maxBatchSize' | 'forwardSectionTokens' | 'forwardSectionMs' | 'maxLoadedVersions' | 'maxCachedSessions' | 'limits' | 'maxCandidateTokens' | 'maxScoredTokens'
>;

/** `workerData` of a serving worker. */
export interface ServingWorkerData {
  options: WorkerEngineOptions;
  /** Period of the worker's state check between calls, ms. */
  statePeriodMs: number;
  /** Enables the `poison` and `crash` requests (tests only). */
  testHooks: boolean;
}

/** What a worker reports about itself with every reply and on change. */
export interface WorkerState {
  /** Versions loaded in the worker, LRU order (oldest first). */
  loaded: string[];
  health: EngineHealth;
  /** Requests queued in the worker's batchers. */
  queued: number;
}

/** An error as it crosses the thread boundary. */
export interface WireError {
  name: string;
  message: string;
  /** `EngineLimitError.field`. */
  field?: string;
}

/** Per-worker figures for tests and benchmarks. */
export interface ServingWorkerStats {
  /** Tensors held by the worker's tfjs engine. */
  numTensors: number;
  /** Batching counters per loaded version. */
  batchers: Record<string, BatcherStats>;
  /** Sessions holding a KV cache in the worker. */
  cachedSessions: number;
}

/**
 * A request to a worker, without its id. `order`: the pool's version recency (oldest first),
 * applied by the worker before the call (`BuiltinEngine.touchVersions`) so that its LRU evicts
 * what the in-process engine would.
 */
export type WorkerOp =
  | { op: 'act'; req: ActRequest; order: string[] }
  | { op: 'reflect'; req: ReflectRequest; order: string[] }
  | { op: 'score'; req: ScoreRequest; order: string[] }
  | { op: 'complete'; req: CompleteRequest; order: string[] }
  | { op: 'replay'; req: ReplayRequest; order: string[] }
  | { op: 'load'; version: string; dir: string; order: string[] }
  | { op: 'release'; sessionId: string }
  | { op: 'observe' }
  | { op: 'stats' }
  | { op: 'poison'; on: boolean }
  | { op: 'crash'; code: number }
  | { op: 'dispose' };

/** A request to a worker; its `reply` carries the same `id`. */
export type ToWorker = WorkerOp & { id: number };

/** A message from a worker: its start, a reply, a state change, a forward pass, a log line, a fatal fault. */
export type FromWorker =
  | { type: 'ready'; backend: string; state: WorkerState }
  | { type: 'ready'; error: WireError }
  | { type: 'reply'; id: number; ok: true; value: unknown; state: WorkerState }
  | { type: 'reply'; id: number; ok: false; error: WireError; state: WorkerState }
  | { type: 'state'; state: WorkerState }
  | { type: 'forward'; rows: number; ms: number }
  | { type: 'log'; level: 'info' | 'warn' | 'error'; obj: object; msg?: string }
  | { type: 'fatal'; message: string };

/**
 * Rebuilds an error thrown in a worker as the same class with the same message: `EngineLimitError`
 * (with its `field`, `body` when absent), `EngineError`, `TypeError` / `RangeError` /
 * `SyntaxError`, else an `Error` carrying the original `name`.
 */
export function fromWire(e: WireError): Error {
  if (e.name === 'EngineLimitError') return new EngineLimitError(e.field ?? 'body', e.message);
  if (e.name === 'EngineError') return new EngineError(e.message);
  const Ctor = ({ TypeError, RangeError, SyntaxError } as Record<string, ErrorConstructor>)[e.name] ?? Error;
  const err = new Ctor(e.message);
  if (err.name !== e.name) err.name = e.name;
  return err;
}
