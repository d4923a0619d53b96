/**
 * The memory the server's thread and the health listener's thread share (./health-port.ts,
 * ./health-worker.ts), and the messages between them. Imports nothing, so that the worker thread
 * loads nothing else.
 *
 * Layout of the SharedArrayBuffer ({@link HEALTH_STATE_BYTES} bytes):
 * - bytes 0-7, BigInt64: the heartbeat, `process.hrtime.bigint()` (ns) when the server's thread
 *   last wrote it. That clock is monotonic and the same in every thread of the process, so the
 *   worker's `process.hrtime.bigint()` minus it is how long the server's event loop has not run
 *   its timers;
 * - bytes 8-11, Int32: the phase ({@link HealthPhase}): starting (no readiness known yet), running,
 *   draining (the graceful shutdown has begun).
 * Every access goes through Atomics.
 */

/** Size of the shared buffer, bytes. */
export const HEALTH_STATE_BYTES = 16;

/** Where the server is in its life, as the health listener sees it. */
export const HealthPhase = { starting: 0, running: 1, draining: 2 } as const;
export type HealthPhase = (typeof HealthPhase)[keyof typeof HealthPhase];

/** Typed views of one shared buffer. */
export interface HealthState {
  buffer: SharedArrayBuffer;
  beat: BigInt64Array;
  phase: Int32Array;
}

/** Views over `buffer` (a new one when none is given), laid out as the module comment says. */
export function healthState(buffer = new SharedArrayBuffer(HEALTH_STATE_BYTES)): HealthState {
  return { buffer, beat: new BigInt64Array(buffer, 0, 1), phase: new Int32Array(buffer, 8, 1) };
}

/** Writes the heartbeat: now, on the process's monotonic clock. */
export function writeBeat(s: HealthState): void {
  Atomics.store(s.beat, 0, process.hrtime.bigint());
}

/** How long ago the heartbeat was written, ms. */
export function beatAgeMs(s: HealthState): number {
  return Number(process.hrtime.bigint() - Atomics.load(s.beat, 0)) / 1e6;
}

export function writePhase(s: HealthState, phase: HealthPhase): void {
  Atomics.store(s.phase, 0, phase);
}

export function readPhase(s: HealthState): HealthPhase {
  return Atomics.load(s.phase, 0) as HealthPhase;
}

/** What the worker thread is started with (`workerData`). */
export interface HealthWorkerData {
  /** Address and port to listen on (port 0: any free port). */
  host: string;
  port: number;
  /** Heartbeat age from which `/healthz` and `/readyz` answer 503, ms. */
  stallMs: number;
  /** `Retry-After` of the 503 `shutting-down` answers while draining, seconds. */
  retryAfterSeconds: number;
  /** The shared buffer ({@link healthState}). */
  buffer: SharedArrayBuffer;
}

/** Server thread -> worker: the latest readiness (the `/readyz` body and whether it is ready). */
export interface ReadinessMessage {
  type: 'readiness';
  ready: boolean;
  /** The `/readyz` body as JSON text (src/plugins/app/readiness.ts ReadinessBody). */
  body: string;
}

/** Worker -> server thread: listening on `port`, or why it cannot (`code`: EADDRINUSE, EACCES, ...). */
export type HealthWorkerMessage = { type: 'listening'; port: number } | { type: 'listen-error'; code: string; message: string };
