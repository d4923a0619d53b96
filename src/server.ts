/**
 * `startServer(overrides)` (shared contract 1): configuration from the environment with
 * `overrides` on top, database opened and migrated, engine created, routes registered, listening.
 * Returns the base URL (e.g. http://127.0.0.1:41234), the Fastify app and `close()` (stop
 * accepting, finish in-flight steps, dispose the engine, close the database).
 *
 * With no API keys configured the server listens on loopback only (127.0.0.1), whatever host was
 * asked for, and logs a warning saying so.
 */
import fs from 'node:fs';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { buildApp } from './app.js';
import { isLoopback, loadConfig, type Config } from './config.js';
import { openDatabase } from './db/index.js';
import { createEngine } from './policy/index.js';

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
  close(): Promise<void>;
}

export async function startServer(overrides: Partial<Config> = {}): Promise<RunningServer> {
  const config: Config = { ...loadConfig(), ...overrides };
  let host = config.host;
  const forcedLoopback = config.apiKeys.length === 0 && !isLoopback(host);
  if (forcedLoopback) host = '127.0.0.1';
  let database: ReturnType<typeof openDatabase>;
  try {
    database = openDatabase(config.dataDir, { synchronous: process.env.LAMER_SQLITE_SYNC === 'full' ? 'full' : 'normal' });
    // The database may open read-only without complaint; checkpoints are written here too.
    fs.accessSync(config.dataDir, fs.constants.W_OK);
  } catch (err) {
    throw dataDirError(config.dataDir, err);
  }
  let app: FastifyInstance;
  try {
    // The engine logs before the app exists (backend choice, model loaded): same level, same stream.
    const engine = await createEngine(config, pino({ level: config.logLevel }).child({ component: 'engine' }));
    app = await buildApp({ ...config, host }, { database, engine });
  } catch (err) {
    database.close();
    throw err;
  }
  if (config.apiKeys.length === 0) {
    app.log.warn(
      forcedLoopback
        ? `no API keys configured (LAMER_API_KEYS): listening on loopback only (127.0.0.1), not on ${config.host}`
        : 'no API keys configured (LAMER_API_KEYS): listening on loopback only, every request is tenant "default" with admin rights',
    );
  }
  try {
    await app.listen({ host, port: config.port });
  } catch (err) {
    await app.close();
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'EADDRINUSE') throw new StartupError(`port ${config.port} on ${host} is already in use (LAMER_PORT, LAMER_HOST)`, { cause: err });
    if (e.code === 'EACCES') throw new StartupError(`no permission to listen on port ${config.port} of ${host} (LAMER_PORT)`, { cause: err });
    if (e.code === 'EADDRNOTAVAIL') throw new StartupError(`address ${host} is not available on this machine (LAMER_HOST)`, { cause: err });
    throw err;
  }
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : config.port;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  const info = app.engine.info();
  app.log.info({ url, dataDir: config.dataDir, engine: info.engine, backend: info.backend, model: app.models.active().version }, 'lamer-server ready');
  return { url, app, close: () => closeGracefully(app) };
}

/** Longest wait for in-flight requests at shutdown before connections are cut, ms. */
const SHUTDOWN_GRACE_MS = 10_000;
/** At shutdown, time given to read requests whose bytes arrived but were not read yet, ms. */
const SHUTDOWN_READ_MS = 100;

/**
 * Answer new requests 503 `shutting-down` and read what is pending (SHUTDOWN_READ_MS), stop
 * accepting, let in-flight requests finish (their steps commit), then close the engine and
 * the database (onClose hooks). Keep-alive connections that go idle during the wait are closed as
 * they do (Node closes only those idle at the moment `close()` starts); after
 * SHUTDOWN_GRACE_MS every connection is cut.
 */
async function closeGracefully(app: FastifyInstance): Promise<void> {
  // New requests get 503 `shutting-down`. Requests whose bytes are already in the socket buffers
  // (the event loop may have been busy in a forward pass) are read and answered during a few
  // event-loop turns, before idle-looking connections are closed (which would reset them).
  app.beginShutdown();
  for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
  await new Promise((r) => setTimeout(r, SHUTDOWN_READ_MS));
  const idle = setInterval(() => app.server.closeIdleConnections(), 50);
  const hard = setTimeout(() => app.server.closeAllConnections(), SHUTDOWN_GRACE_MS);
  idle.unref();
  hard.unref();
  try {
    await app.close();
  } finally {
    clearInterval(idle);
    clearTimeout(hard);
  }
}
