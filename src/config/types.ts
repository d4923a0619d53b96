/**
 * The server configuration's shapes (docs/deploy.md "7. Configuration" table): `Config` and its
 * sections (request size limits, HTTP timeouts, protection, SQLite, PostgreSQL, automatic
 * training), with the typed defaults of the size limits (`defaultLimits`) that the CLI's own
 * settings share. Read from the environment by `loadConfig` (src/config.ts). Sizes are in bytes or
 * characters as named; durations in milliseconds unless the field says seconds.
 */
import type { RemoteVersionConfig } from '../shared/remote-version.js';
import type { GateSpec } from '../shared/promotion-gate.js';
import type { MatmulKind, RlAlgorithm, ServerEngine, ServerRole, TfjsBackend } from '../domain.js';

export type EngineKind = ServerEngine;
export type { TfjsBackend } from '../domain.js';
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
  /** The wasm backend's matmul (LAMER_MATMUL; src/model/blas.ts reads it in every thread, this checks it at start). */
  matmul: MatmulKind;
  /** SQLite's `synchronous` pragma for the server's database (LAMER_SQLITE_SYNC): `normal` (WAL default) or `full`. */
  sqliteSync: 'normal' | 'full';
  /** OpenBLAS threads per product (LAMER_BLAS_THREADS, default 1; read by src/model/blas.ts, checked here). */
  blasThreads: number;
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
  /**
   * LAMER_HEALTH_PORT / LAMER_HEALTH_STALL_SECONDS: `/healthz` and `/readyz` also answered on their
   * own port by a worker thread (src/plugins/app/health-port.ts); null (or absent) = not started.
   */
  health?: HealthPortConfig | null;
  /** LAMER_ROLE: what this server does (domain.ts SERVER_ROLES). Optional in code (absent = `both`). */
  role?: ServerRole;
}

/**
 * The health listener (docs/performance.md "Health checks under a burst"): a worker thread that
 * answers `/healthz` and `/readyz` on `port` from what the server's thread last wrote to shared
 * memory, so that a busy event loop does not delay the answer, while a stuck one still fails it.
 */
export interface HealthPortConfig {
  /** TCP port on the API's host (`0`: any free port). */
  port: number;
  /** `/healthz` and `/readyz` answer 503 once the server's thread has not written its heartbeat for this long, seconds. */
  stallSeconds: number;
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
