/**
 * `lamer serve [--port N] [--host ADDR] [--data-dir DIR]`: run the HTTP server with configuration
 * from LAMER_* environment variables (docs/deploy.md "7. Configuration"); the flags override LAMER_PORT,
 * LAMER_HOST and LAMER_DATA_DIR. Runnable directly: `tsx src/cli/serve.ts`.
 *
 * Signals: SIGTERM and SIGINT start the graceful shutdown (src/plugins/app/shutdown.ts: new
 * requests 503 `shutting-down`, in-flight steps finished, database checkpointed and closed), then
 * the process exits 0. A repeated SIGTERM/SIGINT during the shutdown (npm forwards Ctrl-C to the
 * server, which also receives it from the terminal) is logged and ignored: the shutdown goes on,
 * bounded by its grace period; SIGKILL stops at once. A signal during start-up (before the server
 * listens) exits at once with 128 + the signal number; nothing has been served yet.
 */
import { constants } from 'node:os';
import { DomainError } from '../agent/errors.js';
import { ConfigError, type Config } from '../config.js';
import { EngineError } from '../policy/engine.js';
import { StartupError, startServer, type RunningServer } from '../server.js';
import { intOpt, parseCommand, usageError, UsageError } from './args.js';

const HELP = `usage: lamer serve [options]

Configuration from environment variables (LAMER_HOST, LAMER_PORT, LAMER_DATA_DIR, LAMER_ENGINE,
...; see README); these options override them:

  --port N          TCP port (LAMER_PORT; 0: any free port)
  --host ADDR       address to bind (LAMER_HOST)
  --data-dir DIR    data directory (LAMER_DATA_DIR)

Stops gracefully on SIGTERM / SIGINT (Ctrl-C).`;

const SIGNALS = ['SIGTERM', 'SIGINT'] as const;

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommand('serve', argv, { port: { type: 'string' }, host: { type: 'string' }, 'data-dir': { type: 'string' } }, HELP);
  if ('code' in parsed) return parsed.code;
  const overrides: Partial<Config> = {};
  try {
    const v = parsed.values;
    if (v.port !== undefined) overrides.port = intOpt('port', v.port, undefined, 0, 65535);
    if (v.host !== undefined) {
      if (v.host.trim() === '') throw new UsageError('--host must not be empty');
      overrides.host = v.host;
    }
    if (v['data-dir'] !== undefined) {
      if (v['data-dir'].trim() === '') throw new UsageError('--data-dir must not be empty');
      overrides.dataDir = (await import('node:path')).resolve(v['data-dir']);
    }
  } catch (e) {
    return usageError('serve', e);
  }

  // Handlers from the start: node as PID 1 (a container) ignores signals it has no handler for.
  let server: RunningServer | null = null;
  let stopping: Promise<void> | null = null;
  let onStopped: () => void = () => {};
  const stopped = new Promise<void>((r) => (onStopped = r));
  const onSignal = (signal: (typeof SIGNALS)[number]) => {
    if (!server) {
      console.error(`lamer serve: ${signal} during start-up; exiting`);
      process.exit(128 + constants.signals[signal]);
    }
    const s = server;
    if (stopping) {
      s.app.log.info({ signal }, 'already shutting down; signal ignored (SIGKILL stops at once)');
      return;
    }
    s.app.log.info({ signal }, 'shutting down: finishing in-flight requests');
    stopping = s.close().then(
      () => s.app.log.info('shut down'),
      (err: unknown) => s.app.log.error({ err }, 'error during shutdown'),
    );
    stopping.then(onStopped, onStopped);
  };
  for (const sig of SIGNALS) process.on(sig, onSignal);

  try {
    server = await startServer(overrides);
  } catch (err) {
    for (const sig of SIGNALS) process.off(sig, onSignal);
    if (err instanceof ConfigError) {
      console.error(`lamer serve: invalid configuration: ${err.message}`);
      return 2;
    }
    if (err instanceof StartupError) {
      console.error(`lamer serve: cannot start: ${err.message}`);
      return 1;
    }
    if (err instanceof DomainError || err instanceof EngineError) {
      console.error(`lamer serve: cannot start: ${withCauses(err)}\n(LAMER_ENGINE=test serves without a model)`);
      return 1;
    }
    throw err;
  }
  await stopped;
  // Exit now rather than when the event loop drains: Node restores the default signal action
  // while it tears down, so a signal landing in a slow teardown would end the process as killed
  // (exit 143/130) after a clean shutdown. The log lines are written synchronously (pino), and
  // nothing else is left to do. Until then the handlers stay: a late signal is ignored, not fatal.
  process.exit(0);
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

/**
 * An error's message followed by its causes' messages (`cause: ...`, one line each; a cause whose
 * message an earlier line already holds is left out): a model that cannot be loaded says so to
 * clients without its folder, while the operator starting the server sees the folder and the
 * loader's error.
 */
export function withCauses(err: Error): string {
  const lines = [err.message];
  let c: unknown = err.cause;
  for (let depth = 0; c instanceof Error && depth < 8; depth++, c = c.cause) {
    const m = c.message;
    if (!lines.some((l) => l.includes(m))) lines.push(`cause: ${m}`);
  }
  return lines.join('\n');
}
