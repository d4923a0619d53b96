/**
 * The health listener (LAMER_HEALTH_PORT; docs/performance.md "Health checks under a burst"):
 * `/healthz` and `/readyz` also answered on their own port by a worker thread
 * (./health-worker.ts), so that a gateway's health check gets its answer in milliseconds while the
 * server's event loop is busy (a burst of connections waiting to be accepted, a forward section,
 * a garbage collection), yet still fails when the loop is stuck.
 *
 * What this thread does for it: writes a heartbeat into shared memory every {@link BEAT_MS} ms
 * (from an unref'd timer, so it runs only when the event loop runs its timers), computes the
 * `/readyz` snapshot (src/plugins/app/readiness.ts) every {@link REFRESH_MS} ms and posts it to the
 * thread, marks the phase running once the API listens and draining when the shutdown begins
 * (src/plugins/app/shutdown.ts `onShutdownBegin`), and terminates the thread on close. The thread
 * answers 503 once the heartbeat is older than LAMER_HEALTH_STALL_SECONDS.
 *
 * Decorates `app.healthPort`: the port the thread listens on, or null when not configured.
 * @throws HealthListenError when the thread cannot listen (port taken, no permission, address
 *   missing); the thread is stopped first.
 */
import type { Worker } from 'node:worker_threads';
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import type { HealthPortConfig } from '../../config.js';
import { spawnEntry } from '../../shared/worker-channel.js';
import {
  HealthPhase, healthState, writeBeat, writePhase, type HealthWorkerData, type HealthWorkerMessage, type ReadinessMessage,
} from './health-state.js';
import { readinessReport } from './readiness.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The health listener's port (LAMER_HEALTH_PORT, the bound one when it was 0); null when not configured. */
    healthPort: number | null;
  }
}

/** Heartbeat interval, ms: the stall threshold's resolution. */
export const BEAT_MS = 100;
/** Interval between two readiness snapshots, ms: how stale the health listener's `/readyz` may be. */
export const REFRESH_MS = 1000;

/** The health listener's thread could not listen: `code` is the listen error's (EADDRINUSE, EACCES, EADDRNOTAVAIL, ...). */
export class HealthListenError extends Error {
  constructor(
    readonly code: string,
    readonly host: string,
    readonly port: number,
    message: string,
  ) {
    super(message);
    this.name = 'HealthListenError';
  }
}

/** Options of the plugin: the configuration (null: nothing started), the address, the `Retry-After` of its 503 `shutting-down`. */
export interface HealthPortOptions {
  health: HealthPortConfig | null;
  host: string;
  retryAfterSeconds: number;
}

/** Starts the thread and resolves with its port once it listens. @throws HealthListenError (the thread stopped). */
async function startThread(data: HealthWorkerData & { readiness: ReadinessMessage }): Promise<{ worker: Worker; port: number }> {
  // Not unref'd: the app's onClose hook terminates it (and a failed start, below), so a process
  // that closed its server exits, and one that did not stays visibly alive.
  const worker = spawnEntry('./health-worker', import.meta.url, { ...data });
  try {
    const port = await new Promise<number>((resolve, reject) => {
      worker.on('message', (m: HealthWorkerMessage) => {
        if (m.type === 'listening') resolve(m.port);
        else reject(new HealthListenError(m.code, data.host, data.port, m.message));
      });
      worker.once('error', reject);
      worker.once('exit', (code) => reject(new Error(`the health listener's thread exited (code ${code}) before it listened`)));
    });
    return { worker, port };
  } catch (err) {
    await worker.terminate().catch(() => undefined);
    throw err;
  }
}

export default fp(
  async function healthPort(app: FastifyInstance, opts: HealthPortOptions) {
    if (!opts.health) {
      app.decorate('healthPort', null);
      return;
    }
    const state = healthState();
    writeBeat(state);
    writePhase(state, HealthPhase.starting);
    const snapshot = async (): Promise<ReadinessMessage> => {
      const { ready, body } = await readinessReport(app);
      return { type: 'readiness', ready, body: JSON.stringify(body) };
    };
    const data: HealthWorkerData = {
      host: opts.host, port: opts.health.port, stallMs: opts.health.stallSeconds * 1000, retryAfterSeconds: opts.retryAfterSeconds,
      buffer: state.buffer,
    };
    const { worker, port } = await startThread({ ...data, readiness: await snapshot() });
    app.decorate('healthPort', port);
    let closed = false;
    worker.on('error', (err) => {
      app.log.error({ err, healthPort: port }, "the health listener's thread failed; health checks on its port go unanswered");
    });
    worker.on('exit', (code) => {
      if (!closed) app.log.error({ code, healthPort: port }, "the health listener's thread exited; health checks on its port go unanswered");
    });

    const beat = setInterval(() => writeBeat(state), BEAT_MS);
    beat.unref();
    let refreshing = false;
    /** Posts a new snapshot to the thread; one at a time (the store's readiness may wait on the database). */
    const refresh = () => {
      if (refreshing || closed) return;
      refreshing = true;
      snapshot()
        .then((m) => {
          if (!closed) worker.postMessage(m);
        })
        .catch((err: unknown) => {
          // the store may close under a snapshot during the shutdown: nothing to report then
          if (!closed) app.log.warn({ err }, 'readiness snapshot for the health listener failed');
        })
        .finally(() => (refreshing = false));
    };
    const refresher = setInterval(refresh, REFRESH_MS);
    refresher.unref();

    app.addHook('onListen', async () => {
      writePhase(state, HealthPhase.running);
      refresh();
    });
    app.onShutdownBegin(() => writePhase(state, HealthPhase.draining));
    app.addHook('onClose', async () => {
      closed = true;
      clearInterval(beat);
      clearInterval(refresher);
      writePhase(state, HealthPhase.draining);
      await worker.terminate().catch(() => undefined);
    });
    const where = { healthPort: port, host: opts.host, stallSeconds: opts.health.stallSeconds };
    app.log.info(where, 'health listener started (/healthz, /readyz on its own port)');
  },
  { name: 'health-port', dependencies: ['shutdown', 'db', 'engine'] },
);
