/**
 * The PostgreSQL dialect of the one schema (src/db/schema.ts is the source): the same tables,
 * columns, indexes, primary and foreign keys, with the column types mapped (test/db/pg/schema.test.ts
 * holds the two together). Migrations in `migrations-pg/` are generated from this file with
 * `npm run db:generate` (drizzle-kit, drizzle.config.pg.ts) and applied at start under an advisory
 * lock (src/db/pg/connection.ts).
 *
 * Type mapping (SQLite -> PostgreSQL):
 * - `text` -> `text`; JSON text (`mode: 'json'`) -> `json` (kept as the exact text written, like
 *   SQLite's; not `jsonb`, which reorders keys and rewrites numbers).
 * - `integer` -> `integer` for counts and indices; `bigint` (read as a JS number) for times in ms
 *   since the epoch and the `steps.id` row id, which outgrow 32 bits.
 * - `integer` boolean (`mode: 'boolean'`) -> `boolean`.
 * - `real` (SQLite's 8-byte float) -> `double precision`.
 * Enumerated text columns stay plain `text` (no CHECK constraint), as in SQLite.
 */
import { bigint, boolean, customType, doublePrecision, index, integer, pgTable, primaryKey, text, uniqueIndex } from 'drizzle-orm/pg-core';
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
} from '../../domain.js';
import type { StatsGroupDoc } from '../../shared/stats-aggregate.js';
import type { AttemptSummary } from '../schema.js';

/** The escape character of free text (U+FFFF, a Unicode noncharacter). */
const ESC = '\uFFFF';

/**
 * Free text as PostgreSQL's `text` can hold it: it cannot hold U+0000 (SQLite's text can, and a
 * model that samples bytes may write one), so U+0000 is stored as U+FFFF '0' and U+FFFF itself as
 * U+FFFF '1'. Text holding neither (all but such rare text) is stored unchanged, so comparisons,
 * indexes and lengths are those of the text itself. {@link unescapeText} reverses it exactly.
 */
export function escapeText(s: string): string {
  if (!s.includes('\u0000') && !s.includes(ESC)) return s;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: U+0000 is the character this escapes
  return s.replace(/[\u0000\uFFFF]/g, (c) => (c === ESC ? `${ESC}1` : `${ESC}0`));
}

/** The text {@link escapeText} stored. */
export function unescapeText(s: string): string {
  return s.includes(ESC) ? s.replace(/\uFFFF([01])/g, (_m, d: string) => (d === '0' ? '\u0000' : ESC)) : s;
}

/** A `text` column of free text (client or model text): any JavaScript string, stored through {@link escapeText}. */
const freeText = customType<{ data: string; driverData: string }>({
  dataType: () => 'text',
  toDriver: (value) => escapeText(value),
  fromDriver: (value) => unescapeText(value),
});

/**
 * A `json` column read back as the driver parsed it. node-postgres already parses `json` values
 * (JSON.parse), so drizzle's own `json` column would parse a JSON string value a second time
 * (`"123"` would come back as the number 123); this one parses once, as SQLite's JSON text columns do.
 */
const json = customType<{ data: unknown; driverData: string }>({
  dataType: () => 'json',
  toDriver: (value) => JSON.stringify(value),
  fromDriver: (value) => value,
});

/** Milliseconds since the Unix epoch (or a row id): `bigint`, read as a JS number (exact below 2^53). */
const ms = (name: string) => bigint(name, { mode: 'number' });

export const sessions = pgTable(
  'sessions',
  {
    id: text('id').primaryKey(),
    tenant: text('tenant').notNull(),
    taskId: freeText('task_id').notNull(),
    env: freeText('env'),
    mode: text('mode', { enum: SESSION_MODES }).notNull(),
    status: text('status', { enum: SESSION_STATUSES }).notNull(),
    instructions: freeText('instructions').notNull(),
    maxAttempts: integer('max_attempts').notNull(),
    maxSteps: integer('max_steps').notNull(),
    memory: text('memory', { enum: MEMORY_MODES }).notNull(),
    memoryPlacement: text('memory_placement', { enum: MEMORY_PLACEMENTS }).notNull().default('system'),
    sampling: json('sampling').notNull(),
    modelVersion: text('model_version').notNull(),
    metadata: json('metadata').notNull(),
    nextAttempt: integer('next_attempt').notNull(),
    nextStep: integer('next_step').notNull(),
    attempts: json('attempts').$type<AttemptSummary[]>().notNull(),
    createdAt: ms('created_at').notNull(),
    updatedAt: ms('updated_at').notNull(),
  },
  (t) => [
    index('sessions_tenant_id').on(t.tenant, t.id),
    index('sessions_task').on(t.taskId),
    index('sessions_status').on(t.status),
  ],
);

export const steps = pgTable(
  'steps',
  {
    id: ms('id').primaryKey().generatedByDefaultAsIdentity(),
    sessionId: text('session_id')
      .notNull()
      .references(() => sessions.id),
    attempt: integer('attempt').notNull(),
    step: integer('step').notNull(),
    kind: text('kind', { enum: STEP_KINDS }).notNull(),
    observation: freeText('observation').notNull(),
    reward: doublePrecision('reward').notNull(),
    done: boolean('done').notNull(),
    success: boolean('success').notNull(),
    invalidAction: boolean('invalid_action').notNull(),
    availableActions: json('available_actions').$type<string[] | null>(),
    info: json('info').$type<Record<string, unknown> | null>(),
    prompt: freeText('prompt'),
    output: freeText('output'),
    action: freeText('action'),
    promptTokenIds: json('prompt_token_ids').$type<number[] | null>(),
    outputTokenIds: json('output_token_ids').$type<number[] | null>(),
    logprobs: json('logprobs').$type<number[] | null>(),
    droppedSteps: integer('dropped_steps'),
    promptTruncatedChars: integer('prompt_truncated_chars'),
    engineRecord: json('engine_record').$type<Record<string, unknown> | null>(),
    turn: json('turn').$type<Record<string, unknown> | null>(),
    modelVersion: text('model_version').notNull(),
    requestHash: text('request_hash').notNull(),
    answer: json('answer'),
    return: doublePrecision('return'),
    advantage: doublePrecision('advantage'),
    createdAt: ms('created_at').notNull(),
  },
  (t) => [uniqueIndex('steps_position').on(t.sessionId, t.attempt, t.step, t.kind)],
);

export const reflections = pgTable(
  'reflections',
  {
    sessionId: text('session_id')
      .notNull()
      .references(() => sessions.id),
    attempt: integer('attempt').notNull(),
    text: freeText('text').notNull(),
    source: text('source', { enum: REFLECTION_SOURCES }).notNull(),
    updatedAt: ms('updated_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.sessionId, t.attempt] })],
);

export const models = pgTable('models', {
  version: text('version').primaryKey(),
  parent: text('parent'),
  jobId: text('job_id'),
  checkpointDir: text('checkpoint_dir').notNull(),
  engine: text('engine', { enum: MODEL_ENGINES }).notNull().default('builtin'),
  engineConfig: json('engine_config').$type<Record<string, unknown> | null>(),
  status: text('status', { enum: MODEL_STATUSES }).notNull(),
  metrics: json('metrics').$type<Record<string, unknown>>().notNull(),
  createdAt: ms('created_at').notNull(),
});

export const trainingJobs = pgTable('training_jobs', {
  id: text('id').primaryKey(),
  algorithm: text('algorithm', { enum: ALGORITHMS }).notNull(),
  status: text('status', { enum: JOB_STATUSES }).notNull(),
  config: json('config').$type<Record<string, unknown>>().notNull(),
  progress: doublePrecision('progress').notNull().default(0),
  metrics: json('metrics').$type<unknown[]>().notNull(),
  resultVersion: text('result_version'),
  error: text('error'),
  createdAt: ms('created_at').notNull(),
  startedAt: ms('started_at'),
  finishedAt: ms('finished_at'),
  cancelRequestedAt: ms('cancel_requested_at'),
});

/** Replay reports (src/agent/replays.ts, docs/replay.md): written once, never changed. */
export const replays = pgTable(
  'replays',
  {
    id: text('id').primaryKey(),
    tenant: text('tenant').notNull(),
    modelVersion: text('model_version').notNull(),
    decoding: text('decoding', { enum: REPLAY_DECODINGS }).notNull(),
    request: json('request').$type<Record<string, unknown>>().notNull(),
    summary: json('summary').$type<Record<string, unknown>>().notNull(),
    sessions: json('sessions').$type<unknown[]>().notNull(),
    steps: json('steps').$type<unknown[]>().notNull(),
    createdAt: ms('created_at').notNull(),
  },
  (t) => [index('replays_tenant_id').on(t.tenant, t.id)],
);

/** Statistics of completed sessions kept on write, one row per tenant and group (src/db/schema.ts statsGroups). */
export const statsGroups = pgTable(
  'stats_groups',
  {
    tenant: text('tenant').notNull(),
    groupKey: text('group_key').notNull(),
    modelVersion: text('model_version').notNull(),
    env: freeText('env'),
    mode: text('mode', { enum: SESSION_MODES }).notNull(),
    memory: text('memory', { enum: STATS_MEMORY }).notNull(),
    sessions: integer('sessions').notNull(),
    updatedAt: ms('updated_at').notNull(),
    doc: json('doc').$type<StatsGroupDoc>().notNull(),
  },
  (t) => [primaryKey({ columns: [t.tenant, t.groupKey] })],
);

/** Each completed single-attempt session's outcome in its task's chain of retries (src/db/schema.ts statsRetries). */
export const statsRetries = pgTable(
  'stats_retries',
  {
    tenant: text('tenant').notNull(),
    chainKey: text('chain_key').notNull(),
    sessionId: text('session_id')
      .notNull()
      .references(() => sessions.id),
    attempted: boolean('attempted').notNull(),
    success: boolean('success').notNull(),
    played: boolean('played').notNull(),
    return: doublePrecision('return').notNull(),
    streak: integer('streak'),
  },
  (t) => [primaryKey({ columns: [t.tenant, t.chainKey, t.sessionId] })],
);

/** Per tenant: the number of completions so far (src/db/schema.ts statsTenants). */
export const statsTenants = pgTable('stats_tenants', {
  tenant: text('tenant').primaryKey(),
  completed: integer('completed').notNull(),
});

/** The order in which the tenant's sessions completed, as committed (src/db/schema.ts statsCompletions). */
export const statsCompletions = pgTable(
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
