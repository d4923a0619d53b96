/**
 * `startServer(overrides)` (what the CLI, the tests and the client generators start): configuration from the environment with
 * `overrides` on top, database opened and migrated, engine created, routes registered, listening.
 * Returns the base URL (e.g. http://127.0.0.1:41234), the health listener's (`healthUrl`, with
 * LAMER_HEALTH_PORT: src/plugins/app/health-port.ts), the Fastify app and `close()` (stop
 * accepting, finish in-flight steps, dispose the engine, close the database, release the data
 * directory). One server per data directory: a second one (in any process) is refused.
 *
 * With no API keys configured the server listens on loopback only (127.0.0.1), whatever host was
 * asked for, and logs a warning saying so; it then answers only requests whose `Host` is a
 * loopback name or one of LAMER_ALLOWED_HOSTS (src/plugins/app/host-check.ts).
 */
import fs from 'node:fs';
import net from 'node:net';
import type { FastifyInstance } from 'fastify';
import { pino, type Logger } from 'pino';
import { buildApp } from './app.js';
import { ConfigError, loadConfig, type Config } from './config.js';
import { isLoopback } from './config/access.js';
import { openDatabase } from './db/index.js';
import { sqliteStore, type Store } from './db/store.js';
import { openPgDatabase } from './db/pg/connection.js';
import { PgStartupError } from './db/pg/errors.js';
import { pgStore } from './db/pg/store.js';
import { ensureDirSync } from './ensure-dir.js';
import { createEngine } from './policy/index.js';
import { acquireOwnerLock, OwnerLockError, type OwnerLock } from './owner-lock.js';
import { HealthListenError } from './plugins/app/health-port.js';

/**
 * The server cannot start for a reason outside the code (data directory unusable, port taken); the
 * message names the variable to change. `lamer serve` prints it as one line and exits 1.
 */
export class StartupError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StartupError';
  }
}

/** The data directory cannot be created or its database opened: a StartupError naming LAMER_DATA_DIR. */
function dataDirError(dataDir: string, err: unknown): StartupError {
  const e = err as NodeJS.ErrnoException & { code?: string };
  const why =
    e.code === 'EEXIST' || e.code === 'ENOTDIR'
      ? 'a file is in the way (it must be a directory)'
      : e.code === 'EACCES' || e.code === 'EPERM' || e.code === 'EROFS' || e.code === 'SQLITE_READONLY' || e.code === 'SQLITE_CANTOPEN'
        ? 'no permission to write there'
        : (e.message ?? String(err));
  return new StartupError(`LAMER_DATA_DIR=${dataDir} cannot be used: ${why} (${e.code ?? 'error'})`, { cause: err });
}

export interface RunningServer {
  url: string;
  /** The health listener's base URL (LAMER_HEALTH_PORT, src/plugins/app/health-port.ts); absent when not configured. */
  healthUrl?: string;
  app: FastifyInstance;
  /**
   * Graceful shutdown (src/plugins/app/shutdown.ts): new requests answered 503 `shutting-down`,
   * in-flight ones finished, no connection reset; then the engine and the database closed and
   * the data directory's owner lock released. Calling it again returns the same promise.
   */
  close(): Promise<void>;
}

/**
 * Fail early, before the model is loaded, when `host:port` cannot be listened on: a probe socket
 * is bound and closed again (port 0 needs no probe).
 * @throws StartupError naming LAMER_PORT / LAMER_HOST.
 */
async function probePort(host: string, port: number, variable = 'LAMER_PORT'): Promise<void> {
  if (port === 0) return;
  const probe = net.createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      probe.once('error', reject);
      probe.listen({ host, port, exclusive: true }, () => resolve());
    });
  } catch (err) {
    throw listenError(err, host, port, variable);
  }
  await new Promise<void>((resolve) => probe.close(() => resolve()));
}

/**
 * A listen error as a StartupError naming the variable to change (`variable`: LAMER_PORT, or
 * LAMER_HEALTH_PORT for the health listener); other errors unchanged.
 */
function listenError(err: unknown, host: string, port: number, variable = 'LAMER_PORT'): unknown {
  const e = err as NodeJS.ErrnoException;
  if (e.code === 'EADDRINUSE') {
    return new StartupError(`port ${port} on ${host} is already in use (${variable}, LAMER_HOST)`, { cause: err });
  }
  if (e.code === 'EACCES') return new StartupError(`no permission to listen on port ${port} of ${host} (${variable})`, { cause: err });
  if (e.code === 'EADDRNOTAVAIL') return new StartupError(`address ${host} is not available on this machine (LAMER_HOST)`, { cause: err });
  return err;
}

/**
 * The data directory, created if needed and writable (checkpoints and demonstrations are written there).
 * @throws StartupError naming LAMER_DATA_DIR.
 */
function usableDataDir(dataDir: string): void {
  try {
    ensureDirSync(dataDir);
    fs.accessSync(dataDir, fs.constants.W_OK);
  } catch (err) {
    throw dataDirError(dataDir, err);
  }
}

/**
 * Take the SQLite data directory's owner lock (src/owner-lock.ts), creating the directory if needed.
 * @throws StartupError naming LAMER_DATA_DIR: owned by another server (with its pid), or unusable.
 */
function ownDataDir(dataDir: string): OwnerLock {
  try {
    return acquireOwnerLock(dataDir);
  } catch (err) {
    if (err instanceof OwnerLockError) {
      throw new StartupError(
        `LAMER_DATA_DIR=${dataDir} is in use by another lamer server (pid ${err.ownerPid ?? 'unknown'}); stop it first, or use another directory`,
        { cause: err },
      );
    }
    throw dataDirError(dataDir, err);
  }
}

/**
 * Open the configured store. With LAMER_DATABASE_URL: PostgreSQL, its pending migrations applied
 * under the migration lock (src/db/pg/connection.ts); the data directory then holds files only
 * (checkpoints, demonstrations, datasets), which every replica shares, and takes no owner lock.
 * Else SQLite in the data directory, whose owner lock the caller holds (ownDataDir).
 * @throws StartupError, one line: the database unreachable, refusing the login, missing, or with a
 *   schema newer than this build (naming LAMER_DATABASE_URL's host:port, never its password); the
 *   data directory unusable.
 */
async function openStore(config: Config, log: Logger): Promise<Store> {
  const pgConfig = config.postgres;
  if (pgConfig) {
    usableDataDir(config.dataDir);
    try {
      const { url, pollMs: _poll, ...pool } = pgConfig;
      const conn = await openPgDatabase(url, {
        ...pool,
        onError: (err) => log.warn({ err: err.message }, 'an idle database connection was lost; the pool opens another'),
      });
      log.info({ database: conn.target.where, migrated: conn.migrated }, 'PostgreSQL store open');
      return pgStore(conn, url);
    } catch (err) {
      if (err instanceof PgStartupError) throw new StartupError(`LAMER_DATABASE_URL: ${err.message}`, { cause: err });
      throw err;
    }
  }
  let store: Store | undefined;
  try {
    store = sqliteStore(openDatabase(config.dataDir, { synchronous: config.sqliteSync }));
    // The database may open read-only without complaint; checkpoints are written here too.
    fs.accessSync(config.dataDir, fs.constants.W_OK);
    return store;
  } catch (err) {
    await store?.close();
    throw dataDirError(config.dataDir, err);
  }
}

/**
 * Start a server: take the data directory's owner lock (SQLite only), check that the port (and the
 * health listener's, LAMER_HEALTH_PORT) is free, open the store (PostgreSQL, or SQLite), then load
 * the engine (the slow part), start the health listener's thread when configured (it listens
 * before the API does; its port is `healthUrl`), and listen.
 * The port is checked before the store is opened, so a start on a busy port creates no database
 * and applies no migration (only the owner lock's empty `lamer.lock` is left, as after any stop).
 * @throws StartupError when the data directory is owned or unusable, the store cannot be opened
 *   (see openStore), or the port or the health port cannot be listened on (the message names
 *   LAMER_PORT or LAMER_HEALTH_PORT); ConfigError for a bad LAMER_* value, or a health port equal
 *   to the API's port once the overrides are applied;
 *   engine errors as thrown.
 */
export async function startServer(overrides: Partial<Config> = {}): Promise<RunningServer> {
  const config: Config = { ...loadConfig(), ...overrides };
  let host = config.host;
  const forcedLoopback = config.apiKeys.length === 0 && !isLoopback(host);
  if (forcedLoopback) host = '127.0.0.1';
  // The engine logs before the app exists (backend choice, model loaded): same level, same stream.
  const bootLog = pino({ level: config.logLevel });
  // The lock comes first, so that a second server on the directory is refused naming its owner
  // whatever else is wrong; it is cheap and creates no database.
  const lock = config.postgres ? null : ownDataDir(config.dataDir);
  let store: Store | undefined;
  let app: FastifyInstance | undefined;
  let engine: Awaited<ReturnType<typeof createEngine>> | undefined;
  try {
    if (config.health && config.health.port !== 0 && config.health.port === config.port) {
      // A configuration error like LAMER_HEALTH_PORT = LAMER_PORT (exit 2), here where an override
      // such as `--port` meets the health port.
      throw new ConfigError(`the health listener's port ${config.port} is the API's port: set LAMER_HEALTH_PORT to another port`);
    }
    await probePort(host, config.port);
    if (config.health) await probePort(host, config.health.port, 'LAMER_HEALTH_PORT');
    store = await openStore(config, bootLog);
    engine = await createEngine(config, bootLog.child({ component: 'engine' }));
    try {
      app = await buildApp({ ...config, host }, { store, engine });
    } catch (err) {
      if (!(err instanceof HealthListenError)) throw err;
      const mapped = listenError(err, host, err.port, 'LAMER_HEALTH_PORT');
      if (mapped instanceof StartupError) throw mapped;
      throw new StartupError(`the health listener cannot listen (LAMER_HEALTH_PORT): ${err.message}`, { cause: err });
    }
    if (config.apiKeys.length === 0) {
      app.log.warn(
        forcedLoopback
          ? `no API keys configured (LAMER_API_KEYS): listening on loopback only (127.0.0.1), not on ${config.host}`
          : 'no API keys configured (LAMER_API_KEYS): listening on loopback only, every request is tenant "default" with admin rights; ' +
            'only loopback Host names (localhost, 127.0.0.1, [::1]) and LAMER_ALLOWED_HOSTS are accepted',
      );
    }
    try {
      await app.listen({ host, port: config.port });
    } catch (err) {
      throw listenError(err, host, config.port);
    }
  } catch (err) {
    if (app) await app.close();
    else {
      // buildApp closed what it had started; the engine (threads, backend) and the store are ours.
      await Promise.resolve(engine?.dispose()).catch(() => {});
      await store?.close();
    }
    lock?.release();
    throw err;
  }
  const running = app;
  const addr = running.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : config.port;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  const info = running.engine.info();
  const where = { store: config.postgres ? 'postgres' : 'sqlite', role: config.role ?? 'both' };
  const healthUrl = running.healthPort === null ? undefined : `http://${host.includes(':') ? `[${host}]` : host}:${running.healthPort}`;
  const ready = { url, ...(healthUrl ? { healthUrl } : {}), dataDir: config.dataDir, ...where, engine: info.engine, backend: info.backend };
  running.log.info({ ...ready, model: running.models.active().version }, 'lamer-server ready');
  let closed: Promise<void> | null = null;
  const close = () => {
    closed ??= running.drainAndClose().finally(() => lock?.release());
    return closed;
  };
  return { url, ...(healthUrl ? { healthUrl } : {}), app: running, close };
}
