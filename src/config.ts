/**
 * Server configuration from environment variables (docs/deploy.md "7. Configuration" table).
 *
 * `loadConfig(env)` reads `LAMER_*` variables, applies defaults and validates every value; a bad
 * value throws a `ConfigError` whose message names the variable, the value and what is expected.
 * Sizes are in bytes or characters as named; durations in milliseconds.
 * The shapes and the default size limits are ./config/types.ts, the one-variable readers and
 * ConfigError ./config/values.ts, the access settings (API keys, trusted proxies, allowed hosts)
 * ./config/access.ts; this module re-exports the shapes, the defaults and ConfigError, which most
 * of the server imports from here.
 */
import path from 'node:path';
import { Cron } from 'croner';
import {
  REMOTE_DEFAULTS, REMOTE_INTEGER_SETTINGS, REMOTE_SETTINGS, remoteUrlFault, remoteVersionConfig, type RemoteVersionConfig,
} from './shared/remote-version.js';
import {
  GATE_DECISIONS, MAX_GATE_ATTEMPTS, MAX_GATE_CONCURRENCY, MAX_GATE_TASKS, gateProblem, resolveGate, type GateSpec,
} from './shared/promotion-gate.js';
import { EVAL_SEED_START, SEED_END } from './shared/env-names.js';
import { REMOTE_KINDS, RL_ALGORITHMS, SERVER_ENGINES, SERVER_ROLES, TFJS_BACKENDS } from './domain.js';
import { parseAllowedHosts, parseApiKeys, parseTrustProxy } from './config/access.js';
import {
  defaultLimits, type Config, type HealthPortConfig, type HttpTimeouts, type Limits, type PostgresConfig, type TrainingConfig,
} from './config/types.js';
import { blasThreadsFromEnv, ConfigError, int, matmulFromEnv, num, oneOf, parseTrainWorkers } from './config/values.js';

export type {
  ApiKey, Config, DatabaseConfig, EngineKind, HealthPortConfig, HttpTimeouts, Limits, LogLevel, PostgresConfig, ProtectionConfig,
  ScheduledAlgorithm, TfjsBackend, TrainingConfig,
} from './config/types.js';
export { defaultLimits } from './config/types.js';
export { ConfigError } from './config/values.js';

const repoRoot = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');

/**
 * Build the configuration from environment variables.
 * @throws ConfigError naming the variable for any invalid value.
 */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const apiKeys = parseApiKeys(env.LAMER_API_KEYS);
  const defaultHost = '127.0.0.1';
  const host = env.LAMER_HOST && env.LAMER_HOST !== '' ? env.LAMER_HOST : defaultHost;
  const limits: Limits = {
    bodyBytes: int(env, 'LAMER_BODY_LIMIT_BYTES', defaultLimits.bodyBytes, 1024, 1 << 30),
    batchBodyBytes: int(env, 'LAMER_BATCH_BODY_LIMIT_BYTES', defaultLimits.batchBodyBytes, 1024, 1 << 30),
    observationChars: int(env, 'LAMER_MAX_OBSERVATION_CHARS', defaultLimits.observationChars, 1, 1 << 26),
    instructionsChars: int(env, 'LAMER_MAX_INSTRUCTIONS_CHARS', defaultLimits.instructionsChars, 1, 1 << 26),
    availableActions: int(env, 'LAMER_MAX_AVAILABLE_ACTIONS', defaultLimits.availableActions, 1, 1 << 20),
    actionChars: int(env, 'LAMER_MAX_ACTION_CHARS', defaultLimits.actionChars, 1, 1 << 20),
    batchItems: int(env, 'LAMER_MAX_BATCH_ITEMS', defaultLimits.batchItems, 1, 100_000),
    maxAttempts: int(env, 'LAMER_MAX_ATTEMPTS', defaultLimits.maxAttempts, 1, 1000),
    maxStepsCap: int(env, 'LAMER_MAX_STEPS_CAP', defaultLimits.maxStepsCap, 1, 1_000_000),
    defaultMaxSteps: int(env, 'LAMER_DEFAULT_MAX_STEPS', defaultLimits.defaultMaxSteps, 1, 1_000_000),
    reflectionChars: int(env, 'LAMER_MAX_REFLECTION_CHARS', defaultLimits.reflectionChars, 1, 1 << 20),
    candidateTokens: int(env, 'LAMER_MAX_CANDIDATE_TOKENS', defaultLimits.candidateTokens, 2, 1 << 24),
    promptTokens: int(env, 'LAMER_MAX_PROMPT_TOKENS', defaultLimits.promptTokens, 1024, 1 << 28),
    jsonDepth: int(env, 'LAMER_MAX_JSON_DEPTH', defaultLimits.jsonDepth, 4, 1000),
    infoBytes: int(env, 'LAMER_MAX_INFO_BYTES', defaultLimits.infoBytes, 2, 1 << 30),
    metadataBytes: int(env, 'LAMER_MAX_METADATA_BYTES', defaultLimits.metadataBytes, 2, 1 << 30),
    trajectoryPageBytes: int(env, 'LAMER_TRAJECTORY_PAGE_BYTES', defaultLimits.trajectoryPageBytes, 1024, 1 << 30),
    maxReplaySteps: int(env, 'LAMER_MAX_REPLAY_STEPS', defaultLimits.maxReplaySteps, 1, 100_000),
  };
  if (limits.defaultMaxSteps > limits.maxStepsCap) {
    throw new ConfigError(`LAMER_DEFAULT_MAX_STEPS=${limits.defaultMaxSteps} exceeds LAMER_MAX_STEPS_CAP=${limits.maxStepsCap}`);
  }
  const port = int(env, 'LAMER_PORT', 8080, 0, 65535);
  return {
    host,
    port,
    dataDir: path.resolve(env.LAMER_DATA_DIR && env.LAMER_DATA_DIR !== '' ? env.LAMER_DATA_DIR : 'data'),
    engine: oneOf(env, 'LAMER_ENGINE', 'builtin', SERVER_ENGINES),
    openai: remoteEngine(env),
    tfjsBackend: oneOf(env, 'LAMER_TFJS_BACKEND', 'auto', TFJS_BACKENDS),
    matmul: matmulFromEnv(env),
    sqliteSync: oneOf(env, 'LAMER_SQLITE_SYNC', 'normal', ['normal', 'full'] as const),
    blasThreads: blasThreadsFromEnv(env),
    apiKeys,
    logLevel: oneOf(env, 'LAMER_LOG_LEVEL', 'info', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const),
    limits,
    batchWindowMs: int(env, 'LAMER_BATCH_WINDOW_MS', 2, 0, 1000),
    maxBatchSize: int(env, 'LAMER_MAX_BATCH_SIZE', 32, 1, 4096),
    forwardSectionTokens: int(env, 'LAMER_FORWARD_SECTION_TOKENS', 512, 1, 1 << 20),
    forwardSectionMs: int(env, 'LAMER_FORWARD_SECTION_MS', 0, 0, 60_000),
    serveWorkers: int(env, 'LAMER_SERVE_WORKERS', 1, 1, 256),
    sessionIdleTtlSeconds: int(env, 'LAMER_SESSION_IDLE_TTL_SECONDS', 86_400, 0, 10 * 365 * 86_400),
    http: httpTimeouts(env),
    training: trainingSchedule(env),
    protection: {
      rateLimitMax: int(env, 'LAMER_RATE_LIMIT_MAX', 0, 0, 100_000_000),
      rateLimitWindowSeconds: int(env, 'LAMER_RATE_LIMIT_WINDOW_SECONDS', 60, 1, 86_400),
      maxOpenSessionsPerTenant: int(env, 'LAMER_MAX_OPEN_SESSIONS_PER_TENANT', 1000, 0, 100_000_000),
      maxQueuedSteps: int(env, 'LAMER_MAX_QUEUED_STEPS', 1024, 0, 1_000_000),
      overloadRetryAfterSeconds: int(env, 'LAMER_OVERLOAD_RETRY_AFTER_SECONDS', 1, 1, 3600),
    },
    database: {
      busyTimeoutMs: int(env, 'LAMER_SQLITE_BUSY_TIMEOUT_MS', 100, 0, 60_000),
      walLimitBytes: int(env, 'LAMER_SQLITE_WAL_LIMIT_BYTES', 64 * 1024 * 1024, 0, 2 ** 40),
      checkpointIntervalMs: int(env, 'LAMER_SQLITE_CHECKPOINT_INTERVAL_MS', 1000, 0, 86_400_000),
      busyRetryAfterSeconds: int(env, 'LAMER_DB_BUSY_RETRY_AFTER_SECONDS', 1, 1, 3600),
      storageRetryAfterSeconds: int(env, 'LAMER_STORAGE_RETRY_AFTER_SECONDS', 30, 1, 3600),
    },
    postgres: postgresConfig(env),
    role: oneOf(env, 'LAMER_ROLE', 'both', SERVER_ROLES),
    trustProxy: parseTrustProxy(env.LAMER_TRUST_PROXY),
    allowedHosts: parseAllowedHosts(env.LAMER_ALLOWED_HOSTS),
    health: healthPort(env, port),
    baseModelDir: path.resolve(env.LAMER_BASE_MODEL_DIR && env.LAMER_BASE_MODEL_DIR !== '' ? env.LAMER_BASE_MODEL_DIR : path.join(repoRoot, 'models', 'base')),
  };
}

/**
 * LAMER_DATABASE_URL and LAMER_DATABASE_* (pool settings): null when the URL is unset or empty
 * (SQLite in the data directory). The URL must be a `postgres://` or `postgresql://` URL; errors
 * never repeat it (it may hold a password). Whether the database answers is checked at start
 * (src/server.ts), not here.
 * @throws ConfigError for a URL that is not a PostgreSQL URL, or a pool setting out of range.
 */
function postgresConfig(env: Record<string, string | undefined>): PostgresConfig | null {
  const url = (env.LAMER_DATABASE_URL ?? '').trim();
  if (url === '') return null;
  const expected = 'expected postgres://user:password@host:port/database';
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new ConfigError(`LAMER_DATABASE_URL is not a URL (${expected})`);
  }
  if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:') {
    throw new ConfigError(`LAMER_DATABASE_URL must start with postgres:// or postgresql://, not ${u.protocol}// (${expected})`);
  }
  return {
    url,
    maxConnections: int(env, 'LAMER_DATABASE_POOL_MAX', 10, 1, 10_000),
    connectTimeoutMs: int(env, 'LAMER_DATABASE_CONNECT_TIMEOUT_MS', 5_000, 1, 600_000),
    statementTimeoutMs: int(env, 'LAMER_DATABASE_STATEMENT_TIMEOUT_MS', 30_000, 0, 86_400_000),
    idleTimeoutMs: int(env, 'LAMER_DATABASE_IDLE_TIMEOUT_MS', 30_000, 0, 86_400_000),
    migrationLockTimeoutMs: int(env, 'LAMER_DATABASE_MIGRATION_LOCK_TIMEOUT_MS', 60_000, 1, 86_400_000),
    pollMs: int(env, 'LAMER_DATABASE_POLL_MS', 2_000, 50, 600_000),
  };
}

/**
 * LAMER_HEALTH_PORT and LAMER_HEALTH_STALL_SECONDS: the health listener on its own port, in its
 * own thread (src/plugins/app/health-port.ts); null when LAMER_HEALTH_PORT is unset or empty.
 * `0` is any free port (tests, benches). The stall threshold is in seconds, fractions allowed.
 * @throws ConfigError for a port out of [0, 65535], the API's own port (`apiPort`, unless both are
 *   0), a threshold out of [0.5, 3600], or LAMER_HEALTH_STALL_SECONDS set without LAMER_HEALTH_PORT.
 */
function healthPort(env: Record<string, string | undefined>, apiPort: number): HealthPortConfig | null {
  if (env.LAMER_HEALTH_PORT === undefined || env.LAMER_HEALTH_PORT.trim() === '') {
    if (env.LAMER_HEALTH_STALL_SECONDS !== undefined && env.LAMER_HEALTH_STALL_SECONDS.trim() !== '') {
      throw new ConfigError(
        'LAMER_HEALTH_STALL_SECONDS is set but LAMER_HEALTH_PORT is not: set the health port to start the health listener',
      );
    }
    return null;
  }
  const port = int(env, 'LAMER_HEALTH_PORT', 0, 0, 65535);
  if (port !== 0 && port === apiPort) {
    throw new ConfigError(`LAMER_HEALTH_PORT=${port} is the API's port (LAMER_PORT): choose another port for the health listener`);
  }
  return { port, stallSeconds: num(env, 'LAMER_HEALTH_STALL_SECONDS', 30, 0.5, 3600) };
}

/**
 * LAMER_OPENAI_* (docs/remote-engines.md): the remote server of version `base` when
 * LAMER_ENGINE=openai, else null.
 * @throws ConfigError when LAMER_OPENAI_BASE_URL is not an http(s) URL or LAMER_OPENAI_MODEL is missing.
 */
function remoteEngine(env: Record<string, string | undefined>): RemoteVersionConfig | null {
  if (env.LAMER_ENGINE !== 'openai') return null;
  const baseUrl = env.LAMER_OPENAI_BASE_URL ?? '';
  const fault = remoteUrlFault(baseUrl);
  if (fault === 'not-url' || fault === 'not-http') {
    const expected = 'expected an http(s) URL such as http://gpu-host:8000/v1 (needed with LAMER_ENGINE=openai)';
    throw new ConfigError(`LAMER_OPENAI_BASE_URL=${JSON.stringify(baseUrl)}: ${expected}`);
  }
  if (fault === 'credentials') throw new ConfigError('LAMER_OPENAI_BASE_URL must not contain a user name or password: set LAMER_OPENAI_API_KEY instead');
  const model = env.LAMER_OPENAI_MODEL ?? '';
  if (model.trim() === '') throw new ConfigError('LAMER_OPENAI_MODEL: expected the remote model name (needed with LAMER_ENGINE=openai)');
  const apiKey = env.LAMER_OPENAI_API_KEY && env.LAMER_OPENAI_API_KEY !== '' ? env.LAMER_OPENAI_API_KEY : undefined;
  const kind = oneOf(env, 'LAMER_OPENAI_KIND', REMOTE_DEFAULTS.kind, REMOTE_KINDS);
  // Each integer setting from its variable, with the bounds and default that POST /v1/models uses too.
  const settings = Object.fromEntries(
    REMOTE_INTEGER_SETTINGS.map((k) => {
      const s = REMOTE_SETTINGS[k];
      return [k, int(env, s.env, s.default, s.min, s.max)];
    }),
  );
  return remoteVersionConfig({ baseUrl, model, apiKey, kind, ...settings });
}

/**
 * LAMER_HEADERS_TIMEOUT_MS, LAMER_REQUEST_TIMEOUT_MS, LAMER_KEEP_ALIVE_TIMEOUT_MS.
 * @throws ConfigError for a value out of range, or a headers timeout longer than the request timeout.
 */
function httpTimeouts(env: Record<string, string | undefined>): HttpTimeouts {
  const t: HttpTimeouts = {
    headersTimeoutMs: int(env, 'LAMER_HEADERS_TIMEOUT_MS', 10_000, 100, 3_600_000),
    requestTimeoutMs: int(env, 'LAMER_REQUEST_TIMEOUT_MS', 60_000, 0, 86_400_000),
    keepAliveTimeoutMs: int(env, 'LAMER_KEEP_ALIVE_TIMEOUT_MS', 72_000, 100, 3_600_000),
    drainBodyBytes: int(env, 'LAMER_BODY_DRAIN_BYTES', 64 * 1024 * 1024, 0, 2 ** 40),
    drainBodyMs: int(env, 'LAMER_BODY_DRAIN_MS', 10_000, 0, 3_600_000),
  };
  if (t.requestTimeoutMs > 0 && t.headersTimeoutMs > t.requestTimeoutMs) {
    throw new ConfigError(`LAMER_HEADERS_TIMEOUT_MS=${t.headersTimeoutMs} exceeds LAMER_REQUEST_TIMEOUT_MS=${t.requestTimeoutMs}`);
  }
  return t;
}

/** LAMER_TRAIN_* variables. @throws ConfigError for a bad value, including a cron expression croner rejects. */
function trainingSchedule(env: Record<string, string | undefined>): TrainingConfig {
  const cron = env.LAMER_TRAIN_CRON && env.LAMER_TRAIN_CRON.trim() !== '' ? env.LAMER_TRAIN_CRON.trim() : null;
  if (cron !== null) {
    try {
      new Cron(cron, { paused: true }).stop();
    } catch (err) {
      throw new ConfigError(`LAMER_TRAIN_CRON=${JSON.stringify(cron)}: not a cron expression (${(err as Error).message})`);
    }
  }
  const activate = oneOf(env, 'LAMER_TRAIN_ACTIVATE', 'false', ['true', 'false'] as const) === 'true';
  const gate = trainingGate(env);
  if (gate && activate) {
    throw new ConfigError(
      'LAMER_TRAIN_ACTIVATE=true activates every scheduled version; with LAMER_TRAIN_GATE_TASKS the gate activates those that pass: '
        + 'unset LAMER_TRAIN_ACTIVATE',
    );
  }
  return {
    everySessions: int(env, 'LAMER_TRAIN_EVERY_SESSIONS', 0, 0, 100_000_000),
    cron,
    algorithm: oneOf(env, 'LAMER_TRAIN_ALGORITHM', 'lamer', RL_ALGORITHMS),
    activate,
    gate,
    env: env.LAMER_TRAIN_ENV && env.LAMER_TRAIN_ENV !== '' ? env.LAMER_TRAIN_ENV : null,
    workers: parseTrainWorkers(env),
    maxQueuedJobs: int(env, 'LAMER_TRAIN_MAX_QUEUED_JOBS', 16, 0, 1_000_000),
    queueRetryAfterSeconds: int(env, 'LAMER_TRAIN_QUEUE_RETRY_AFTER_SECONDS', 60, 1, 86_400),
  };
}

/**
 * LAMER_TRAIN_GATE_*: the promotion gate of scheduled jobs (docs/training.md "Promotion gate"), on
 * when LAMER_TRAIN_GATE_TASKS > 0; the other variables need it.
 * @throws ConfigError naming the variable at fault (the rules of src/shared/promotion-gate.ts).
 */
function trainingGate(env: Record<string, string | undefined>): GateSpec | null {
  const tasks = int(env, 'LAMER_TRAIN_GATE_TASKS', 0, 0, MAX_GATE_TASKS);
  const names = ['ENV', 'ATTEMPTS', 'SEED_START', 'METRIC', 'MARGIN', 'DECISION', 'CONCURRENCY'].map((n) => `LAMER_TRAIN_GATE_${n}`);
  if (tasks === 0) {
    const stray = names.find((n) => env[n] !== undefined && env[n] !== '');
    if (stray) {
      throw new ConfigError(`${stray} is set but LAMER_TRAIN_GATE_TASKS is not: set the number of held-out tasks to turn the gate on`);
    }
    return null;
  }
  const attempts = int(env, 'LAMER_TRAIN_GATE_ATTEMPTS', 3, 1, MAX_GATE_ATTEMPTS);
  const input = {
    env: env.LAMER_TRAIN_GATE_ENV && env.LAMER_TRAIN_GATE_ENV !== '' ? env.LAMER_TRAIN_GATE_ENV : 'minesweeper',
    tasks,
    attempts,
    seedStart: int(env, 'LAMER_TRAIN_GATE_SEED_START', EVAL_SEED_START, EVAL_SEED_START, SEED_END - 1),
    metric: env.LAMER_TRAIN_GATE_METRIC && env.LAMER_TRAIN_GATE_METRIC !== '' ? env.LAMER_TRAIN_GATE_METRIC : `pass@${attempts}`,
    margin: num(env, 'LAMER_TRAIN_GATE_MARGIN', 0, -1, 1),
    decision: oneOf(env, 'LAMER_TRAIN_GATE_DECISION', 'mean', GATE_DECISIONS),
    concurrency: int(env, 'LAMER_TRAIN_GATE_CONCURRENCY', 4, 1, MAX_GATE_CONCURRENCY),
  };
  const problem = gateProblem(input);
  if (problem) {
    const names: Record<string, string> = {
      env: 'ENV', tasks: 'TASKS', attempts: 'ATTEMPTS', seedStart: 'SEED_START', metric: 'METRIC', margin: 'MARGIN', decision: 'DECISION',
      concurrency: 'CONCURRENCY',
    };
    const name = names[problem.field] ?? 'TASKS';
    throw new ConfigError(`LAMER_TRAIN_GATE_${name}: ${problem.message}`);
  }
  return resolveGate(input);
}
