/**
 * Server configuration from environment variables (docs/deploy.md "7. Configuration" table).
 *
 * `loadConfig(env)` reads `LAMER_*` variables, applies defaults and validates every value; a bad
 * value throws a `ConfigError` whose message names the variable, the value and what is expected.
 * Sizes are in bytes or characters as named; durations in milliseconds.
 */
import path from 'node:path';
import { isIP } from 'node:net';
import { Cron } from 'croner';
import {
  REMOTE_DEFAULTS, REMOTE_INTEGER_SETTINGS, REMOTE_SETTINGS, remoteUrlFault, remoteVersionConfig, type RemoteVersionConfig,
} from './shared/remote-version.js';
import {
  GATE_DECISIONS, MAX_GATE_ATTEMPTS, MAX_GATE_CONCURRENCY, MAX_GATE_TASKS, gateProblem, resolveGate, type GateSpec,
} from './shared/promotion-gate.js';
import { EVAL_SEED_START, SEED_END } from './shared/env-names.js';
import {
  REMOTE_KINDS, RL_ALGORITHMS, SERVER_ENGINES, SERVER_ROLES, TFJS_BACKENDS, type RlAlgorithm, type ServerEngine, type ServerRole, type TfjsBackend,
} from './domain.js';

export type EngineKind = ServerEngine;
export type { TfjsBackend } from './domain.js';
export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

/** One API key: a Bearer token, the tenant it belongs to and whether it may use admin routes. */
export interface ApiKey {
  key: string;
  tenant: string;
  admin: boolean;
}

/** Size limits of request fields (docs/deploy.md "7. Configuration"): larger input is a 4xx naming the field. */
export interface Limits {
  /** Max HTTP body size in bytes for every route but the batch route. */
  bodyBytes: number;
  /** Max HTTP body size in bytes for `POST /v1/steps:batch`. */
  batchBodyBytes: number;
  /** Max characters of one observation. */
  observationChars: number;
  /** Max characters of a session's instructions. */
  instructionsChars: number;
  /** Max number of `availableActions` in one step. */
  availableActions: number;
  /** Max characters of one available action. */
  actionChars: number;
  /** Max items in one batch request. */
  batchItems: number;
  /** Max attempts per session. */
  maxAttempts: number;
  /** Max steps per attempt a client may ask for. */
  maxStepsCap: number;
  /** Step cap per attempt when the client gives none. */
  defaultMaxSteps: number;
  /**
   * Max characters (code points) of a reflection. The LaMer reference code keeps 2000
   * (docs/method.md#defaults). A model's reflection is cut to it; a human edit (PUT memory) longer
   * than it is refused (400), never silently cut.
   */
  reflectionChars: number;
  /**
   * Max candidate tokens of one step: each available action's UTF-8 bytes + 1 (EOS), summed; more
   * is 400 before any model work. The builtin engine scores candidates in bounded chunks, and
   * this caps the time one call holds the model.
   */
  candidateTokens: number;
  /** Max tokens (UTF-8 bytes) of a rendered prompt before it is fitted to the context; more is 400. */
  promptTokens: number;
  /** Max nesting depth of a JSON request body (objects and arrays; the body itself is depth 1). */
  jsonDepth: number;
  /** Max size of a step's free-form `info` object: bytes of its JSON text (UTF-8). */
  infoBytes: number;
  /** Max size of a session's free-form `metadata` object: bytes of its JSON text (UTF-8). */
  metadataBytes: number;
  /** Max JSON bytes of the rows of one trajectory page (a page always holds at least one row). */
  trajectoryPageBytes: number;
  /** Max recorded model calls one replay runs (docs/replay.md); a selection holding more is 400. */
  maxReplaySteps: number;
}

export interface Config {
  host: string;
  port: number;
  dataDir: string;
  engine: EngineKind;
  tfjsBackend: TfjsBackend;
  apiKeys: ApiKey[];
  logLevel: LogLevel;
  limits: Limits;
  /** Dynamic batching window of the builtin engine, ms. */
  batchWindowMs: number;
  /** Max requests per forward pass of the builtin engine. */
  maxBatchSize: number;
  /**
   * Most padded tokens (rows x the longest row's new tokens) one synchronous forward section of the
   * builtin engine runs before the event loop gets its turns (src/model/batcher.ts). Optional in
   * code (absent = the batcher's default, DEFAULT_FORWARD_SECTION_TOKENS).
   */
  forwardSectionTokens?: number;
  /**
   * Target wall time of one forward section of the builtin engine, ms (0: the token bound alone);
   * sections shrink from `forwardSectionTokens` towards it as their measured cost per token says
   * (src/model/batcher.ts). Optional in code (absent = 0).
   */
  forwardSectionMs?: number;
  /**
   * Serving worker threads of the builtin engine (src/policy/serving-pool.ts): 1 = one engine in
   * the server's own thread; N > 1 = N worker threads, each with its own engine and tfjs backend,
   * sessions pinned to one of them. Optional in code (absent = 1).
   */
  serveWorkers?: number;
  /** Directory of the base checkpoint (registered as version `base`). */
  baseModelDir: string;
  /** `LAMER_ENGINE=openai`: the remote server of version `base` (LAMER_OPENAI_*); null otherwise. */
  openai?: RemoteVersionConfig | null;
  /**
   * Gateway addresses or CIDR ranges whose `X-Forwarded-For/-Proto/-Host` headers are trusted
   * (Fastify `trustProxy`; docs/deploy.md). Empty = trust none: `request.ip` is the TCP peer.
   */
  trustProxy: string[];
  /**
   * LAMER_ALLOWED_HOSTS: host names or addresses (lower-case, no port, IPv6 without brackets)
   * accepted in the `Host` header besides the loopback ones (src/plugins/app/host-check.ts). With
   * no API keys every other Host is refused 403 `host-not-allowed` (DNS rebinding); with keys the
   * Host is checked only when this list is not empty. Optional in code (absent = none).
   */
  allowedHosts?: string[];
  /** An active session without a step for this long becomes `expired`, seconds; 0 = never. */
  sessionIdleTtlSeconds: number;
  /** Time limits of HTTP connections (slow or stalled clients). */
  http: HttpTimeouts;
  /** Automatic training jobs (src/training/run/scheduler.ts). */
  training: TrainingConfig;
  /** Overload protection (docs/operations.md "Protection"). */
  protection: ProtectionConfig;
  /** SQLite lock waits, WAL size and the answers to a busy or full database (src/db/index.ts). */
  database: DatabaseConfig;
  /**
   * LAMER_DATABASE_URL and its pool settings: the PostgreSQL store several replicas share; null
   * (or absent) = SQLite in the data directory. Optional in code.
   */
  postgres?: PostgresConfig | null;
  /** LAMER_ROLE: what this server does (domain.ts SERVER_ROLES). Optional in code (absent = `both`). */
  role?: ServerRole;
}

/** The PostgreSQL store (docs/deploy.md "Several replicas on PostgreSQL"): where, and the pool of this replica. */
export interface PostgresConfig {
  /** `postgres://user:password@host:port/database` (or `postgresql://`). */
  url: string;
  /** Most connections this replica's pool opens. */
  maxConnections: number;
  /** Longest wait for a new connection, or for a free one of a full pool, ms. */
  connectTimeoutMs: number;
  /** Server-side limit of one statement, ms; 0 = none. */
  statementTimeoutMs: number;
  /** An idle pooled connection is closed after this long, ms; 0 = never. */
  idleTimeoutMs: number;
  /** Longest wait at start for another replica that holds the migration lock, ms. */
  migrationLockTimeoutMs: number;
  /**
   * How often this replica reads what other replicas change (the active model version; for the
   * trainer the job queue, cancel requests and the trainer lock), ms: activation and rollback
   * reach every replica within it.
   */
  pollMs: number;
}

/** SQLite contention and growth (docs/deploy.md "7. Configuration" and "3. Persistence"). */
export interface DatabaseConfig {
  /** Longest synchronous wait for another connection's lock, ms; then 503 `database-busy`. */
  busyTimeoutMs: number;
  /** `-wal` size the server brings the log back to (journal_size_limit, checkpoint threshold), bytes. */
  walLimitBytes: number;
  /** How often the WAL size is checked and an oversized log checkpointed, ms; 0 = never (only SQLite's own checkpoints). */
  checkpointIntervalMs: number;
  /** `Retry-After` of 503 `database-busy`, seconds. */
  busyRetryAfterSeconds: number;
  /** `Retry-After` of 503 `storage-full` / `storage-unavailable`, seconds. */
  storageRetryAfterSeconds: number;
}

/**
 * Time limits of HTTP/1.1 connections (Node's http.Server): a client that is too slow is answered
 * 408 `request-timeout` and its connection closed.
 */
export interface HttpTimeouts {
  /** The request line and headers must arrive within this time of the request's start, ms. */
  headersTimeoutMs: number;
  /** The whole request (headers and body) must arrive within this time, ms; 0 = no limit. */
  requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this long without a new request, ms. */
  keepAliveTimeoutMs: number;
  /**
   * A body over the size limit, or one refused before it was read (401, 404/405, 415, 429, 503),
   * is read and discarded, up to this many bytes, before the answer is sent (after a 413 the
   * connection is closed), so that a client that writes its whole body before reading (Python's
   * urllib) reads the answer instead of a broken pipe; a body declared larger is answered at once.
   * 0 = never drain. Optional in code (absent = 64 MiB).
   */
  drainBodyBytes?: number;
  /** Most time spent draining such a body, ms; then the answer is sent anyway. Optional in code (absent = 10 s). */
  drainBodyMs?: number;
}

/** Rate limits, session caps and the bound on queued model calls. */
export interface ProtectionConfig {
  /** Requests per window per API key (per client IP without keys) on `/v1` routes; 0 = no limit. */
  rateLimitMax: number;
  /** Length of the rate-limit window, seconds. */
  rateLimitWindowSeconds: number;
  /** Max sessions with status `active` per tenant; creating one more is 409 too-many-sessions; 0 = no cap. */
  maxOpenSessionsPerTenant: number;
  /** Max model calls (act/reflect) waiting on or running in the engine; one more step is 503 overloaded. 0 = no bound. */
  maxQueuedSteps: number;
  /** Seconds sent in `Retry-After` with 503 overloaded. */
  overloadRetryAfterSeconds: number;
}

/** RL algorithms a schedule may start (SFT needs a demonstrations file, so it is HTTP-only). */
export type ScheduledAlgorithm = RlAlgorithm;

export interface TrainingConfig {
  /** Start a job after this many newly completed training sessions; 0 = off. */
  everySessions: number;
  /** croner expression (5 fields, or 6 with seconds first); null = off. */
  cron: string | null;
  algorithm: ScheduledAlgorithm;
  /** Activate the version a scheduled job produces. */
  activate: boolean;
  /** Train only on sessions with this env label; null = all. */
  env: string | null;
  /** LAMER_TRAIN_WORKERS: data-parallel training threads per job; 0 = every core on wasm/cpu, 1 on
   *  the multi-threaded backends (src/training/run/job.ts resolveTrainWorkers). Checked here so
   *  that a bad value stops the server at start; every job reads it from the environment with the
   *  same parser (`parseTrainWorkers`, through src/training/run/job.ts trainWorkersFromEnv), as do
   *  the training scripts. */
  workers: number;
  /** LAMER_TRAIN_MAX_QUEUED_JOBS: most training jobs waiting to run (the running one not counted);
   *  one more is 429 `too-many-jobs` with Retry-After; 0 = no bound. Optional in code (absent = 0). */
  maxQueuedJobs?: number;
  /** LAMER_TRAIN_QUEUE_RETRY_AFTER_SECONDS: `Retry-After` of 429 `too-many-jobs`. Optional in code (absent = 60). */
  queueRetryAfterSeconds?: number;
  /** Model I/O module of the training worker (not from the environment: for tests and embedding);
   *  default the builtin GPT adapter on `tfjsBackend`. */
  modelIO?: { module: string; exportName?: string; options?: Record<string, unknown> };
  /** LAMER_TRAIN_GATE_*: the promotion gate of scheduled jobs (src/shared/promotion-gate.ts); null = none
   *  (scheduled versions are activated as LAMER_TRAIN_ACTIVATE says). Optional in code (absent = none). */
  gate?: GateSpec | null;
  /** Evaluator module of the promotion gates' worker thread (not from the environment: for tests and
   *  embedding); default src/cli/gate-eval.ts (src/training/run/gate-worker.ts DEFAULT_GATE_EVALUATOR). */
  gateEvaluator?: { module: string; exportName?: string };
}

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

export const defaultLimits: Limits = {
  bodyBytes: 2 * 1024 * 1024,
  batchBodyBytes: 16 * 1024 * 1024,
  observationChars: 64 * 1024,
  instructionsChars: 64 * 1024,
  availableActions: 512,
  actionChars: 1024,
  batchItems: 256,
  maxAttempts: 10,
  maxStepsCap: 1000,
  defaultMaxSteps: 20,
  reflectionChars: 2000,
  candidateTokens: 262144,
  promptTokens: 1 << 20,
  jsonDepth: 64,
  infoBytes: 64 * 1024,
  metadataBytes: 64 * 1024,
  trajectoryPageBytes: 1024 * 1024,
  maxReplaySteps: 1000,
};

const repoRoot = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');

function int(env: Record<string, string | undefined>, name: string, def: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return def;
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(`${name}=${JSON.stringify(raw)}: expected an integer in [${min}, ${max}]`);
  const v = Number(raw.trim());
  if (v < min || v > max) throw new ConfigError(`${name}=${raw}: expected an integer in [${min}, ${max}]`);
  return v;
}

/**
 * LAMER_TRAIN_WORKERS, its one parser (the server's config and every training job read it with
 * this): data-parallel training threads per job, an integer in [0, 256]; unset or '' is 0, every
 * core on wasm/cpu (src/training/run/job.ts resolveTrainWorkers).
 * @throws ConfigError for any other value.
 */
export function parseTrainWorkers(env: Record<string, string | undefined>): number {
  return int(env, 'LAMER_TRAIN_WORKERS', 0, 0, 256);
}

function oneOf<T extends string>(env: Record<string, string | undefined>, name: string, def: T, allowed: readonly T[]): T {
  const raw = env[name];
  if (raw === undefined || raw === '') return def;
  if (!(allowed as readonly string[]).includes(raw)) {
    throw new ConfigError(`${name}=${JSON.stringify(raw)}: expected one of ${allowed.join(', ')}`);
  }
  return raw as T;
}

/**
 * Parse `LAMER_API_KEYS`: comma-separated `key:tenant[:admin]` entries.
 * @throws ConfigError for an empty key or tenant, a duplicate key or an unknown flag.
 */
export function parseApiKeys(raw: string | undefined): ApiKey[] {
  if (raw === undefined || raw.trim() === '') return [];
  const keys: ApiKey[] = [];
  for (const entry of raw.split(',').map((s) => s.trim()).filter((s) => s !== '')) {
    const parts = entry.split(':');
    const [key, tenant, flag] = parts;
    if (parts.length < 2 || parts.length > 3 || !key || !tenant || (flag !== undefined && flag !== 'admin')) {
      throw new ConfigError(
        `LAMER_API_KEYS: bad entry ${JSON.stringify(entry.slice(0, 8) + '...')}: expected key:tenant or key:tenant:admin`,
      );
    }
    if (key.length < 8) throw new ConfigError('LAMER_API_KEYS: every key must have at least 8 characters');
    if (keys.some((k) => k.key === key)) throw new ConfigError('LAMER_API_KEYS: duplicate key');
    keys.push({ key, tenant, admin: flag === 'admin' });
  }
  return keys;
}

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
  return {
    host,
    port: int(env, 'LAMER_PORT', 8080, 0, 65535),
    dataDir: path.resolve(env.LAMER_DATA_DIR && env.LAMER_DATA_DIR !== '' ? env.LAMER_DATA_DIR : 'data'),
    engine: oneOf(env, 'LAMER_ENGINE', 'builtin', SERVER_ENGINES),
    openai: remoteEngine(env),
    tfjsBackend: oneOf(env, 'LAMER_TFJS_BACKEND', 'auto', TFJS_BACKENDS),
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

/** A number variable (a fraction such as a margin): finite, in [min, max]. */
function num(env: Record<string, string | undefined>, name: string, def: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return def;
  const v = Number(raw.trim());
  if (!Number.isFinite(v) || v < min || v > max) {
    throw new ConfigError(`${name}=${JSON.stringify(raw)}: expected a number in [${min}, ${max}]`);
  }
  return v;
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

/**
 * LAMER_TRUST_PROXY: comma-separated IPv4/IPv6 addresses or CIDR ranges (`10.0.0.2`,
 * `10.0.0.0/24`, `fd00::/8`). `true`/`*` are refused on purpose: trusting every peer's
 * X-Forwarded-For would let any client choose its own address (and its rate-limit bucket).
 * @throws ConfigError naming the bad entry.
 */
export function parseTrustProxy(raw: string | undefined): string[] {
  if (raw === undefined || raw.trim() === '') return [];
  return raw.split(',').map((part) => {
    const entry = part.trim();
    const [addr, prefix, extra] = entry.split('/');
    const family = isIP(addr ?? '');
    const maxPrefix = family === 4 ? 32 : 128;
    const prefixOk = prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= maxPrefix);
    if (family === 0 || !prefixOk || extra !== undefined) {
      throw new ConfigError(
        `LAMER_TRUST_PROXY: ${JSON.stringify(entry)} is not an IP address or CIDR range ` +
          '(expected e.g. "10.0.0.2" or "10.0.0.0/24"; list the gateway addresses, never all clients)',
      );
    }
    return entry;
  });
}

/** A DNS name: dot-separated labels of letters, digits and inner hyphens (no trailing dot). */
const DNS_NAME = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/;

/**
 * The host name of a `Host` header value (`name`, `name:port`, `1.2.3.4:port`, `[v6]:port`) in the
 * form {@link parseAllowedHosts} gives: lower-cased, one trailing dot dropped, IPv6 without
 * brackets and in canonical form (`0:0:0:0:0:0:0:1` is `::1`); the port is ignored. Null when the
 * value is not a host name or address followed by an optional port (`a b`, `x@y`, ``).
 */
export function hostNameOf(header: string): string | null {
  const v = header.trim().toLowerCase();
  const bracketed = /^\[([0-9a-f:.]+)\](?::\d{1,5})?$/.exec(v);
  if (bracketed) return isIP(bracketed[1]!) === 6 ? canonicalIpv6(bracketed[1]!) : null;
  const plain = /^([^:]+)(?::\d{1,5})?$/.exec(v);
  if (!plain) return null;
  const name = plain[1]!.endsWith('.') ? plain[1]!.slice(0, -1) : plain[1]!;
  return isIP(name) === 4 || DNS_NAME.test(name) ? name : null;
}

/** An IPv6 address in the WHATWG URL's canonical text (lower-case, longest zero run as `::`). */
function canonicalIpv6(addr: string): string {
  return new URL(`http://[${addr}]/`).hostname.slice(1, -1);
}

/**
 * True when a host name from {@link hostNameOf} names this machine's loopback interface:
 * `localhost`, an IPv4 address in 127.0.0.0/8, or `::1`.
 */
export function isLoopbackHostName(name: string): boolean {
  return name === 'localhost' || name === '::1' || (isIP(name) === 4 && name.startsWith('127.'));
}

/**
 * LAMER_ALLOWED_HOSTS: comma-separated host names or addresses (`lamer.internal`, `10.0.0.7`,
 * `[fd00::1]` or `fd00::1`) accepted in the `Host` header besides loopback ones; without a port
 * (any port is accepted). Returned lower-cased, without a trailing dot, IPv6 without brackets.
 * `*` is refused on purpose: accepting every Host would undo the DNS-rebinding check.
 * @throws ConfigError naming the bad entry.
 */
export function parseAllowedHosts(raw: string | undefined): string[] {
  if (raw === undefined || raw.trim() === '') return [];
  const out: string[] = [];
  for (const part of raw.split(',')) {
    const entry = part.trim();
    if (entry === '') continue;
    const bare = entry.replace(/^\[(.*)\]$/, '$1');
    const name = isIP(bare) === 6 ? canonicalIpv6(bare) : /^[^:]+:\d+$/.test(entry) ? 'port' : hostNameOf(entry);
    if (name === 'port') {
      throw new ConfigError(`LAMER_ALLOWED_HOSTS: ${JSON.stringify(entry)}: give the host name without a port (every port is accepted)`);
    }
    if (name === null) {
      throw new ConfigError(
        `LAMER_ALLOWED_HOSTS: ${JSON.stringify(entry)} is not a host name or IP address ` +
          '(expected e.g. "lamer.internal,10.0.0.7"; list the names clients use, never "*")',
      );
    }
    if (!out.includes(name)) out.push(name);
  }
  return out;
}

/** True when `host` only accepts connections from this machine. */
export function isLoopback(host: string): boolean {
  return host === '127.0.0.1' || host === '::1' || host === 'localhost' || host.startsWith('127.');
}
