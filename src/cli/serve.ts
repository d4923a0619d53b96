/**
 * `lamer serve`: run the HTTP server with configuration from LAMER_* environment variables
 * (README "Configuration"). Exits on SIGTERM/SIGINT after a graceful shutdown: stop accepting,
 * finish in-flight steps, close the database. Runnable directly: `tsx src/cli/serve.ts`.
 */
import { ApiProblem } from '../agent/problems.js';
import { ConfigError } from '../config.js';
import { EngineError } from '../policy/engine.js';
import { StartupError, startServer } from '../server.js';

export async function run(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log('usage: lamer serve\n\nConfiguration from environment variables (LAMER_HOST, LAMER_PORT, LAMER_DATA_DIR, LAMER_ENGINE, ...); see README.');
    return 0;
  }
  let server;
  try {
    server = await startServer();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`lamer serve: invalid configuration: ${err.message}`);
      return 2;
    }
    if (err instanceof StartupError) {
      console.error(`lamer serve: cannot start: ${err.message}`);
      return 1;
    }
    if (err instanceof ApiProblem || err instanceof EngineError) {
      console.error(`lamer serve: cannot start: ${err.message}\n(LAMER_ENGINE=test serves without a model)`);
      return 1;
    }
    throw err;
  }
  const s = server;
  await new Promise<void>((resolve) => {
    let closing = false;
    const shutdown = (signal: string) => {
      if (closing) return;
      closing = true;
      s.app.log.info({ signal }, 'shutting down: finishing in-flight requests');
      s.close().then(
        () => {
          s.app.log.info('shut down');
          resolve();
        },
        (err: unknown) => {
          s.app.log.error({ err }, 'error during shutdown');
          resolve();
        },
      );
    };
    process.once('SIGTERM', () => shutdown('SIGTERM'));
    process.once('SIGINT', () => shutdown('SIGINT'));
  });
  return 0;
}

// Run when executed directly (tsx src/cli/serve.ts), not when imported by src/cli/index.ts.
if (process.argv[1] && /serve\.[tj]s$/.test(process.argv[1])) {
  run(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      console.error(err instanceof Error ? (err.stack ?? err.message) : err);
      process.exitCode = 1;
    },
  );
}
