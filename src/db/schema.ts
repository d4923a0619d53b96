/**
 * Database schema (drizzle-orm, SQLite). Migrations in `migrations/` are generated from this file
 * with `npm run db:generate` (drizzle-kit) and applied at start (src/db/index.ts).
 *
 * Times are integer milliseconds since the Unix epoch. JSON columns hold plain JSON text.
 * Indices are 0-based (attempt 0 is the first).
 */
import { sqliteTable, text, integer, real, index, uniqueIndex, primaryKey } from 'drizzle-orm/sqlite-core';
import {
  ALGORITHMS,
  JOB_STATUSES,
  MEMORY_MODES,
  MEMORY_PLACEMENTS,
  MODEL_ENGINES,
  MODEL_STATUSES,
  REFLECTION_SOURCES,
  REPLAY_DECODINGS,
  SESSION_MODES,
  SESSION_STATUSES,
  STATS_MEMORY,
  STEP_KINDS,
  type AttemptStatus,
  type EndReason,
} from '../domain.js';
import type { StatsGroupDoc } from '../shared/stats-aggregate.js';

/** Summary of one attempt, kept on the session row (rebuilt from steps if ever needed). */
export interface AttemptSummary {
  attempt: number;
  status: AttemptStatus;
  /** Number of steps posted in this attempt (observations, including the final one). */
  steps: number;
  /** Undiscounted sum of the attempt's rewards as given by the environment. */
  return: number;
  success: boolean;
  endReason: EndReason | null;
}

export const sessions = sqliteTable(
  'sessions',
  {
    id: text('id').primaryKey(),
    tenant: text('tenant').notNull(),
    taskId: text('task_id').notNull(),
    env: text('env'),
    mode: text('mode', { enum: SESSION_MODES }).notNull(),
    status: text('status', { enum: SESSION_STATUSES }).notNull(),
    instructions: text('instructions').notNull(),
    maxAttempts: integer('max_attempts').notNull(),
    maxSteps: integer('max_steps').notNull(),
    memory: text('memory', { enum: MEMORY_MODES }).notNull(),
    /** Where the memory goes in the requests of the session's OpenAI-compatible endpoint (src/agent/turns.ts). */
    memoryPlacement: text('memory_placement', { enum: MEMORY_PLACEMENTS }).notNull().default('system'),
    sampling: text('sampling', { mode: 'json' }).notNull(),
    modelVersion: text('model_version').notNull(),
    metadata: text('metadata', { mode: 'json' }).notNull(),
    nextAttempt: integer('next_attempt').notNull(),
    nextStep: integer('next_step').notNull(),
    attempts: text('attempts', { mode: 'json' }).$type<AttemptSummary[]>().notNull(),
    createdAt: integer('created_at').notNull(),
    updatedAt: integer('updated_at').notNull(),
  },
  (t) => [
    index('sessions_tenant_id').on(t.tenant, t.id),
    index('sessions_task').on(t.taskId),
    index('sessions_status').on(t.status),
  ],
);

export const steps = sqliteTable(
  'steps',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    sessionId: text('session_id')
      .notNull()
      .references(() => sessions.id),
    attempt: integer('attempt').notNull(),
    step: integer('step').notNull(),
    /** 'action': one posted observation (and the sampled action unless the attempt ended);
     *  'reflection': the reflection turn written after a failed attempt (same attempt/step as its last observation). */
    kind: text('kind', { enum: STEP_KINDS }).notNull(),
    observation: text('observation').notNull(),
    /** Reward of the previous action, as given by the environment. */
    reward: real('reward').notNull(),
    done: integer('done', { mode: 'boolean' }).notNull(),
    success: integer('success', { mode: 'boolean' }).notNull(),
    invalidAction: integer('invalid_action', { mode: 'boolean' }).notNull(),
    availableActions: text('available_actions', { mode: 'json' }).$type<string[] | null>(),
    info: text('info', { mode: 'json' }).$type<Record<string, unknown> | null>(),
    /**
     * Prompt text exactly as fed to the model (for the builtin engine `decode(prompt_token_ids)`):
     * earliest steps dropped, and the start cut when even head + tail did not fit (null when no
     * model call was made).
     */
    prompt: text('prompt'),
    output: text('output'),
    action: text('action'),
    promptTokenIds: text('prompt_token_ids', { mode: 'json' }).$type<number[] | null>(),
    outputTokenIds: text('output_token_ids', { mode: 'json' }).$type<number[] | null>(),
    logprobs: text('logprobs', { mode: 'json' }).$type<number[] | null>(),
    droppedSteps: integer('dropped_steps'),
    /** Characters (code points) cut from the start of the prompt beyond the dropped steps; 0 normally, null when no model call was made. */
    promptTruncatedChars: integer('prompt_truncated_chars'),
    /** Remote engines: the chat messages sent and which token arrays the server returned (GenerationRecord, src/policy/engine.ts); null for builtin. */
    engineRecord: text('engine_record', { mode: 'json' }).$type<Record<string, unknown> | null>(),
    /**
     * Turns of the session's OpenAI-compatible endpoint (src/agent/turns.ts TurnRecord): the request
     * exactly as the agent sent it, the memory added, the sampling used, the latency, tool calls;
     * null for rows written by steps.
     */
    turn: text('turn', { mode: 'json' }).$type<Record<string, unknown> | null>(),
    modelVersion: text('model_version').notNull(),
    /** sha256 of the canonical request body: identical retries return `answer`. */
    requestHash: text('request_hash').notNull(),
    /** The stored step answer (JSON) returned to retries. */
    answer: text('answer', { mode: 'json' }),
    /** Filled by training: cross-episode return G and advantage (docs/method.md#returns, docs/method.md#advantages). */
    return: real('return'),
    advantage: real('advantage'),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [uniqueIndex('steps_position').on(t.sessionId, t.attempt, t.step, t.kind)],
);

export const reflections = sqliteTable(
  'reflections',
  {
    sessionId: text('session_id')
      .notNull()
      .references(() => sessions.id),
    attempt: integer('attempt').notNull(),
    text: text('text').notNull(),
    source: text('source', { enum: REFLECTION_SOURCES }).notNull(),
    updatedAt: integer('updated_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.sessionId, t.attempt] })],
);

export const models = sqliteTable('models', {
  version: text('version').primaryKey(),
  parent: text('parent'),
  jobId: text('job_id'),
  checkpointDir: text('checkpoint_dir').notNull(),
  /** `builtin`: tfjs checkpoint in `checkpointDir`; `openai`: served by a remote OpenAI-compatible server (`engineConfig`). */
  engine: text('engine', { enum: MODEL_ENGINES }).notNull().default('builtin'),
  /** Remote versions: RemoteVersionConfig (src/policy/engine.ts); null for builtin. */
  engineConfig: text('engine_config', { mode: 'json' }).$type<Record<string, unknown> | null>(),
  status: text('status', { enum: MODEL_STATUSES }).notNull(),
  metrics: text('metrics', { mode: 'json' }).$type<Record<string, unknown>>().notNull(),
  createdAt: integer('created_at').notNull(),
});

export const trainingJobs = sqliteTable('training_jobs', {
  id: text('id').primaryKey(),
  algorithm: text('algorithm', { enum: ALGORITHMS }).notNull(),
  status: text('status', { enum: JOB_STATUSES }).notNull(),
  config: text('config', { mode: 'json' }).$type<Record<string, unknown>>().notNull(),
  /** Fraction done in [0, 1]. */
  progress: real('progress').notNull().default(0),
  /** Metrics per iteration. */
  metrics: text('metrics', { mode: 'json' }).$type<unknown[]>().notNull(),
  resultVersion: text('result_version'),
  error: text('error'),
  createdAt: integer('created_at').notNull(),
  startedAt: integer('started_at'),
  finishedAt: integer('finished_at'),
  /** A running job's cancel was asked for at this time (on any replica); its trainer stops it after the current iteration. */
  cancelRequestedAt: integer('cancel_requested_at'),
});

/**
 * Replay reports (src/agent/replays.ts, docs/replay.md): what another model version does at the
 * recorded steps of a tenant's sessions, stored so that they can be fetched later. Written once,
 * never changed; nothing of the replayed sessions is written.
 */
export const replays = sqliteTable(
  'replays',
  {
    /** `rpl_` + time-ordered id. */
    id: text('id').primaryKey(),
    tenant: text('tenant').notNull(),
    /** The version replayed (the other version). */
    modelVersion: text('model_version').notNull(),
    decoding: text('decoding', { enum: REPLAY_DECODINGS }).notNull(),
    /** The request: one session, or the filter of a batch replay, and the options. */
    request: text('request', { mode: 'json' }).$type<Record<string, unknown>>().notNull(),
    /** Agreement, logprob differences, counts (ReplaySummary of src/agent/replay-schemas.ts). */
    summary: text('summary', { mode: 'json' }).$type<Record<string, unknown>>().notNull(),
    /** The sessions replayed: id, recorded version, steps. */
    sessions: text('sessions', { mode: 'json' }).$type<unknown[]>().notNull(),
    /** One entry per recorded model call, in session then position order (ReplayStep). */
    steps: text('steps', { mode: 'json' }).$type<unknown[]>().notNull(),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [index('replays_tenant_id').on(t.tenant, t.id)],
);

/**
 * Statistics of completed sessions kept on write (src/shared/stats-aggregate.ts; written by
 * src/db/stats-aggregates.ts in the transaction that completes a session): one row per tenant and
 * (modelVersion, env, mode, memory) group, `memory` 'none' for single-attempt sessions.
 * `group_key` is statsGroupKey (JSON of the four fields; env may be null, so it cannot be part of
 * the primary key itself). `updated_at` is the latest update time of the group's sessions.
 */
export const statsGroups = sqliteTable(
  'stats_groups',
  {
    tenant: text('tenant').notNull(),
    groupKey: text('group_key').notNull(),
    modelVersion: text('model_version').notNull(),
    env: text('env'),
    mode: text('mode', { enum: SESSION_MODES }).notNull(),
    memory: text('memory', { enum: STATS_MEMORY }).notNull(),
    /** Completed sessions counted. */
    sessions: integer('sessions').notNull(),
    updatedAt: integer('updated_at').notNull(),
    /** StatsGroupDoc: counts and exact return sums by attempt (and by streak for memory 'none'). */
    doc: text('doc', { mode: 'json' }).$type<StatsGroupDoc>().notNull(),
  },
  (t) => [primaryKey({ columns: [t.tenant, t.groupKey] })],
);

/**
 * The outcome of each completed single-attempt session in its task's chain of retries
 * (src/shared/stats-aggregate.ts RetryOutcome): `chain_key` is retryChainKey (task, version, env,
 * mode), `streak` the session's streak (null without an attempt). A session that completes out of
 * creation order reads its neighbours here and moves their streaks.
 */
export const statsRetries = sqliteTable(
  'stats_retries',
  {
    tenant: text('tenant').notNull(),
    chainKey: text('chain_key').notNull(),
    sessionId: text('session_id')
      .notNull()
      .references(() => sessions.id),
    attempted: integer('attempted', { mode: 'boolean' }).notNull(),
    success: integer('success', { mode: 'boolean' }).notNull(),
    played: integer('played', { mode: 'boolean' }).notNull(),
    return: real('return').notNull(),
    streak: integer('streak'),
  },
  (t) => [primaryKey({ columns: [t.tenant, t.chainKey, t.sessionId] })],
);

/** Per tenant: the number of completions so far, which is the `seq` of its latest stats_completions row. */
export const statsTenants = sqliteTable('stats_tenants', {
  tenant: text('tenant').primaryKey(),
  completed: integer('completed').notNull(),
});

/**
 * The order in which the tenant's sessions completed, as committed: `seq` 1, 2, ... without gaps
 * (the completing transaction takes the next number from stats_tenants, and a later one cannot
 * commit before it). A cache of answers over completed sessions (the diversity window,
 * src/agent/diversity-cache.ts) reads only the rows after the last `seq` it has. A rebuild at
 * open appends the sessions missing here and never renumbers.
 */
export const statsCompletions = sqliteTable(
  'stats_completions',
  {
    tenant: text('tenant').notNull(),
    seq: integer('seq').notNull(),
    sessionId: text('session_id')
      .notNull()
      .references(() => sessions.id),
  },
  (t) => [primaryKey({ columns: [t.tenant, t.seq] })],
);

export type SessionRow = typeof sessions.$inferSelect;
export type StepRow = typeof steps.$inferSelect;
export type ReflectionRow = typeof reflections.$inferSelect;
export type ModelRow = typeof models.$inferSelect;
export type TrainingJobRow = typeof trainingJobs.$inferSelect;
export type ReplayRow = typeof replays.$inferSelect;
