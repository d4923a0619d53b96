/**
 * What `/readyz` reports, computed in one place for the API's route (src/routes/ops.ts) and the
 * health listener's snapshots (./health-port.ts): database open, storage writable, the active
 * model version loaded and, for a remote active version, its server answering a cached probe;
 * plus the engine and tfjs backend names.
 */
import type { FastifyInstance } from 'fastify';

/** The body of `/readyz` (the `Ready` schema of src/routes/ops.ts). */
export interface ReadinessBody {
  /** 'ready' or 'not-ready'. */
  status: 'ready' | 'not-ready';
  database: boolean;
  /** 'ok', or why the last write failed: 'full', 'io', 'readonly', 'corrupt', 'unknown'. */
  storage: string;
  model: {
    version: string;
    loaded: boolean;
    /** A remote active version: whether its server answered the (cached) probe, why not, and when (ISO time). */
    remote?: { reachable: boolean; detail?: string; checkedAt: string };
  };
  engine: string;
  backend: string;
}

/**
 * The readiness of `app` now. SQLite: after a failed write (disk full, I/O error) a small probe
 * write (at most once a second, never waiting for a lock) finds out whether writes succeed again;
 * PostgreSQL: a `select 1` with a short timeout (src/db/store.ts). A remote active version is
 * ready only while its server answers (cached probe, short timeout).
 * @returns `ready` (all of the above hold) and the body `/readyz` answers.
 */
export async function readinessReport(app: FastifyInstance): Promise<{ ready: boolean; body: ReadinessBody }> {
  const { database, storage } = await app.store.readiness();
  const version = app.models.active().version;
  const loaded = app.engine.isLoaded(version);
  const info = app.engine.info();
  const probe = loaded ? ((await app.engine.probe?.(version)) ?? null) : null;
  const remote = probe
    ? { reachable: probe.reachable, ...(probe.detail ? { detail: probe.detail } : {}), checkedAt: new Date(probe.checkedAt).toISOString() }
    : null;
  const ready = database && storage === 'ok' && loaded && (probe === null || probe.reachable);
  const body: ReadinessBody = {
    status: ready ? 'ready' : 'not-ready', database, storage, model: { version, loaded, ...(remote ? { remote } : {}) },
    engine: info.engine, backend: info.backend,
  };
  return { ready, body };
}
