/**
 * `startServer(overrides)` (what the CLI, the tests and the client generators start): configuration from the environment with
 * `overrides` on top, database opened and migrated, engine created, routes registered, listening.
 * Returns the base URL (e.g. http://127.0.0.1:41234), the Fastify app and `close()` (stop
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
import { pino } from 'pino';
import { buildApp } from './app.js';
import { isLoopback, loadConfig, type Config } from './config.js';
import { openDatabase } from './db/index.js';
import { sqliteStore, type Store } from './db/store.js';
import { createEngine } from './policy/index.js';
import { acquireOwnerLock, OwnerLockError, type OwnerLock } from './owner-lock.js';

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
async function probePort(host: string, port: number): Promise<void> {
  if (port === 0) return;
  const probe = net.createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      probe.once('error', reject);
      probe.listen({ host, port, exclusive: true }, () => resolve());
    });
  } catch (err) {
    throw listenError(err, host, port);
  }
  await new Promise<void>((resolve) => probe.close(() => resolve()));
}

/** A listen error as a StartupError naming the variable to change; other errors unchanged. */
function listenError(err: unknown, host: string, port: number): unknown {
  const e = err as NodeJS.ErrnoException;
  if (e.code === 'EADDRINUSE') return new StartupError(`port ${port} on ${host} is already in use (LAMER_PORT, LAMER_HOST)`, { cause: err });
  if (e.code === 'EACCES') return new StartupError(`no permission to listen on port ${port} of ${host} (LAMER_PORT)`, { cause: err });
  if (e.code === 'EADDRNOTAVAIL') return new StartupError(`address ${host} is not available on this machine (LAMER_HOST)`, { cause: err });
  return err;
}

/**
 * Start a server: take the data directory's owner lock (src/owner-lock.ts), open the database,
 * check that the port is free, then load the engine (the slow part) and listen.
 * @throws StartupError when the data directory is unusable or owned by another server, or the
 *   port cannot be listened on; ConfigError for a bad LAMER_* value; engine errors as thrown.
 */
export async function startServer(overrides: Partial<Config> = {}): Promise<RunningServer> {
  const config: Config = { ...loadConfig(), ...overrides };
  let host = config.host;
  const forcedLoopback = config.apiKeys.length === 0 && !isLoopback(host);
  if (forcedLoopback) host = '127.0.0.1';
  let lock: OwnerLock;
  try {
    lock = acquireOwnerLock(config.dataDir);
  } catch (err) {
    if (err instanceof OwnerLockError) {
      throw new StartupError(
        `LAMER_DATA_DIR=${config.dataDir} is in use by another lamer server (pid ${err.ownerPid ?? 'unknown'}); stop it first, or use another directory`,
        { cause: err },
      );
    }
    throw dataDirError(config.dataDir, err);
  }
  let store: Store | undefined;
  let app: FastifyInstance | undefined;
  let engine: Awaited<ReturnType<typeof createEngine>> | undefined;
  try {
    try {
      store = sqliteStore(openDatabase(config.dataDir, { synchronous: process.env.LAMER_SQLITE_SYNC === 'full' ? 'full' : 'normal' }));
      // The database may open read-only without complaint; checkpoints are written here too.
      fs.accessSync(config.dataDir, fs.constants.W_OK);
    } catch (err) {
      throw dataDirError(config.dataDir, err);
    }
    await probePort(host, config.port);
    // The engine logs before the app exists (backend choice, model loaded): same level, same stream.
    engine = await createEngine(config, pino({ level: config.logLevel }).child({ component: 'engine' }));
    app = await buildApp({ ...config, host }, { store, engine });
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
      // buildApp closed what it had started; the engine (threads, backend) and database are ours.
      await Promise.resolve(engine?.dispose()).catch(() => {});
      await store?.close();
    }
    lock.release();
    throw err;
  }
  const running = app;
  const addr = running.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : config.port;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  const info = running.engine.info();
  running.log.info({ url, dataDir: config.dataDir, engine: info.engine, backend: info.backend, model: running.models.active().version }, 'lamer-server ready');
  let closed: Promise<void> | null = null;
  const close = () => {
    closed ??= running.drainAndClose().finally(() => lock.release());
    return closed;
  };
  return { url, app: running, close };
}
