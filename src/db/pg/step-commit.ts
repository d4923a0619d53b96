/**
 * The statement that commits a step on PostgreSQL: the session's lock and check, the step rows'
 * inserts, the reflection's and the session's update in one statement (data-modifying CTEs), so
 * that a step costs one round trip to the database instead of four or more (BEGIN, each INSERT,
 * UPDATE, COMMIT: on loopback TCP, the socket writes of those round trips were over half of a
 * replica's CPU per step).
 *
 * ```sql
 * WITH s    AS (SELECT id FROM sessions WHERE id = $id AND status = 'active'
 *               AND ($expected IS NULL OR updated_at = $expected) FOR UPDATE),
 *      ins  AS (INSERT INTO steps (...) SELECT $row0... FROM s
 *               ON CONFLICT (session_id, attempt, step, kind) DO NOTHING RETURNING 1),
 *      more AS (INSERT INTO steps (...) SELECT * FROM (VALUES ($row1...), ...) v
 *               WHERE EXISTS (SELECT 1 FROM ins)),                       -- commits of 2 rows or more
 *      refl AS (INSERT INTO reflections (...) SELECT $id, ... FROM ins), -- commits with a reflection
 *      upd  AS (UPDATE sessions SET ... WHERE id = $id AND EXISTS (SELECT 1 FROM ins)
 *               RETURNING ...)                      -- the session's fields, for a completing commit
 * SELECT count(s), count(ins), count(upd) [, the session's fields]
 * ```
 *
 * - `s` locks the session row while it is active and unchanged, so step commits of one session
 *   take turns on its row (on every replica); a commit that waited re-checks the row as the one
 *   before it left it (READ COMMITTED), and finds it changed or ended.
 * - `ins` writes the first row only under that lock, and nothing when its position is recorded
 *   (the `steps_position` unique index, which sees rows committed after the statement began).
 * - `more` and `refl` write the other rows (a reflection's record) and the reflection only when
 *   the first row was written; a position or reflection already recorded then fails the whole
 *   statement (unique violation), which writes nothing.
 * - `upd` applies the session update only when the first row was written. A commit that completes
 *   the session returns the session's fields as stored, for its statistics (./stats-aggregates.ts).
 *
 * So the statement writes either every row, the reflection and the session update, or nothing:
 * `unchanged` 0 (the session ended, changed, or is missing) or `inserted` 0 (the position is
 * recorded) mean nothing was written. Outside a transaction it is its own transaction, committed
 * when its answer arrives. Its text, one per shape of commit (rows, reflection, completion), is
 * built once from the schema and sent as a named prepared statement (./statements.ts).
 */
import type pg from 'pg';
import { sql, type SQL } from 'drizzle-orm';
import type { PgColumn } from 'drizzle-orm/pg-core';
import type { StatsSession } from '../../shared/stats-aggregate.js';
import type { StepCommit, StepInsert } from '../queries.js';
import { reflections, sessions, steps, unescapeText } from './schema.js';
import { asIs, namedStatement, runNamed, type NamedStatement, type ParamOf } from './statements.js';

/** The step row's fields, in the order of the insert's columns (every StepInsert field). */
const STEP_FIELDS = [
  'sessionId', 'attempt', 'step', 'kind', 'observation', 'reward', 'done', 'success', 'invalidAction', 'availableActions', 'info',
  'prompt', 'output', 'action', 'promptTokenIds', 'outputTokenIds', 'logprobs', 'droppedSteps', 'promptTruncatedChars',
  'engineRecord', 'turn', 'modelVersion', 'requestHash', 'answer', 'createdAt',
] as const satisfies ReadonlyArray<keyof StepInsert & keyof typeof steps>;

/** The session's fields a completing commit returns: those its statistics read (StatsSession and the update time). */
const STATS_FIELDS = ['id', 'tenant', 'taskId', 'modelVersion', 'env', 'mode', 'memory', 'maxAttempts', 'attempts', 'updatedAt'] as const;

/** What a commit writes besides its first row and the session update. */
export interface StepCommitShape {
  /** Rows of the commit (>= 1). */
  rows: number;
  reflection: boolean;
  /** The commit completes the session: the statement returns the session's fields. */
  completes: boolean;
}

/** A completed session as its statistics read it: its fields as stored by the commit. */
export type CompletedSession = StatsSession & { tenant: string; updatedAt: number };

/** What the statement did: see the top of this file. */
export interface StepCommitOutcome {
  /** 1 when the session was active and unchanged (and is now locked until the statement's transaction ends), else 0. */
  unchanged: number;
  /** 1 when the rows were written, 0 when the first one's position was recorded already (or `unchanged` is 0). */
  inserted: number;
  /** 1 when the session update was applied (exactly when `inserted` is 1). */
  updated: number;
  /** For a completing commit that was written: the session as stored; else null. */
  completed: CompletedSession | null;
}

/** Parameter names: `r<i>.<field>` for row i's fields, `s.<field>` for the session's update, `ref.<field>` for the reflection. */
type ParamName = string;

/** The shape of `commit`. */
export function shapeOf(commit: StepCommit): StepCommitShape {
  return { rows: commit.rows.length, reflection: commit.reflection !== null, completes: commit.session.status === 'completed' };
}

/** Row `i`'s values, in the order of STEP_FIELDS (`answer` is JSON text already: sent as it is and cast). */
function rowValues(param: ParamOf<ParamName>, i: number): SQL {
  return sql.join(STEP_FIELDS.map((f) => param(`r${i}.${f}`, steps[f], f === 'answer' ? asIs : undefined)), sql`, `);
}

/** The statement (see the top of this file) of commits of `shape`. Result row: unchanged, inserted, updated[, the session's fields]. */
function statement(shape: StepCommitShape, param: ParamOf<ParamName>): SQL {
  const id = () => param('s.id', sessions.id);
  const expected = () => param('s.expectedUpdatedAt', sessions.updatedAt);
  const columns = sql.join(STEP_FIELDS.map((f) => sql.identifier(steps[f].name)), sql`, `);
  const position = sql.join([steps.sessionId, steps.attempt, steps.step, steps.kind].map((c) => sql.identifier(c.name)), sql`, `);
  const set = (column: PgColumn, name: string) => sql`${sql.identifier(column.name)} = ${param(`s.${name}`, column)}`;
  const ctes: SQL[] = [
    sql`s AS (
      SELECT ${sessions.id} FROM ${sessions}
      WHERE ${sessions.id} = ${id()} AND ${sessions.status} = 'active' AND (${expected()} IS NULL OR ${sessions.updatedAt} = ${expected()})
      FOR UPDATE)`,
    sql`ins AS (INSERT INTO ${steps} (${columns}) SELECT ${rowValues(param, 0)} FROM s ON CONFLICT (${position}) DO NOTHING RETURNING 1)`,
  ];
  if (shape.rows > 1) {
    const more = sql.join(Array.from({ length: shape.rows - 1 }, (_, i) => sql`(${rowValues(param, i + 1)})`), sql`, `);
    ctes.push(sql`more AS (INSERT INTO ${steps} (${columns})
      SELECT * FROM (VALUES ${more}) AS v WHERE EXISTS (SELECT 1 FROM ins) RETURNING 1)`);
  }
  if (shape.reflection) {
    const cols = [reflections.sessionId, reflections.attempt, reflections.text, reflections.source, reflections.updatedAt];
    ctes.push(sql`refl AS (INSERT INTO ${reflections} (${sql.join(cols.map((c) => sql.identifier(c.name)), sql`, `)})
      SELECT ${id()}, ${param('ref.attempt', reflections.attempt)}, ${param('ref.text', reflections.text)}, 'policy',
        ${param('ref.updatedAt', reflections.updatedAt)} FROM ins RETURNING 1)`);
  }
  const updates = [
    set(sessions.status, 'status'), set(sessions.attempts, 'attempts'), set(sessions.nextAttempt, 'nextAttempt'),
    set(sessions.nextStep, 'nextStep'), set(sessions.updatedAt, 'updatedAt'),
  ];
  const returned = shape.completes ? sql.join(STATS_FIELDS.map((f) => sql`${sessions[f]} AS ${sql.identifier(f)}`), sql`, `) : sql`1`;
  ctes.push(sql`upd AS (UPDATE ${sessions} SET ${sql.join(updates, sql`, `)} WHERE ${sessions.id} = ${id()} AND EXISTS (SELECT 1 FROM ins)
    RETURNING ${returned})`);
  const counts = sql`(SELECT count(*) FROM s)::int AS "unchanged", (SELECT count(*) FROM ins)::int AS "inserted",
    (SELECT count(*) FROM upd)::int AS "updated"`;
  const fields = shape.completes ? sql`, ${sql.join(STATS_FIELDS.map((f) => sql`u.${sql.identifier(f)}`), sql`, `)}` : sql``;
  const from = shape.completes ? sql` FROM (SELECT 1) AS one LEFT JOIN upd AS u ON true` : sql``;
  return sql`WITH ${sql.join(ctes, sql`, `)} SELECT ${counts}${fields}${from}`;
}

/** The statements built so far, by shape. */
const built = new Map<string, NamedStatement<ParamName>>();

/** The statement of `shape`, built on its first use. */
function statementOf(shape: StepCommitShape): NamedStatement<ParamName> {
  const key = `${shape.rows}${shape.reflection ? 'r' : ''}${shape.completes ? 'c' : ''}`;
  let st = built.get(key);
  if (!st) {
    // the name changes with the text: connections keep what they prepared under a name
    st = namedStatement(`lamer_step_commit_v2_${key}`, (param) => statement(shape, param));
    built.set(key, st);
  }
  return st;
}

/** The parameters of `commit`'s statement by name (see ParamName). */
export function stepCommitParams(commit: StepCommit): Record<ParamName, unknown> {
  const out: Record<ParamName, unknown> = {};
  commit.rows.forEach((r, i) => {
    for (const f of STEP_FIELDS) out[`r${i}.${f}`] = r[f] ?? null;
  });
  const s = commit.session;
  Object.assign(out, {
    's.id': s.id, 's.expectedUpdatedAt': s.expectedUpdatedAt ?? null, 's.status': s.status, 's.attempts': s.attempts,
    's.nextAttempt': s.nextAttempt, 's.nextStep': s.nextStep, 's.updatedAt': s.updatedAt,
  });
  const ref = commit.reflection;
  if (ref) Object.assign(out, { 'ref.attempt': ref.attempt, 'ref.text': ref.text, 'ref.updatedAt': ref.updatedAt });
  return out;
}

type OutcomeRow = { unchanged: number; inserted: number; updated: number } & Partial<Record<(typeof STATS_FIELDS)[number], unknown>>;

/**
 * Run `commit`'s statement on `client` (a pool: its own transaction; a checked-out client: inside
 * the caller's transaction).
 * @throws TypeError for a commit without rows; the driver's error (nothing written).
 */
export async function runStepCommit(client: pg.Pool | pg.PoolClient, commit: StepCommit): Promise<StepCommitOutcome> {
  if (commit.rows.length === 0) throw new TypeError('a step commit needs at least one row');
  const shape = shapeOf(commit);
  const [row] = await runNamed<ParamName, OutcomeRow>(client, statementOf(shape), stepCommitParams(commit));
  if (!row) throw new Error('step commit statement returned no row');
  const { unchanged, inserted, updated } = row;
  return { unchanged, inserted, updated, completed: shape.completes && updated === 1 ? completedOf(row) : null };
}

/** The session's fields of a completing commit's result row, read as stored (free text unescaped, bigint as a number). */
function completedOf(r: OutcomeRow): CompletedSession {
  return {
    id: r.id as string,
    tenant: r.tenant as string,
    taskId: unescapeText(r.taskId as string),
    modelVersion: r.modelVersion as string,
    env: r.env === null ? null : unescapeText(r.env as string),
    mode: r.mode as CompletedSession['mode'],
    memory: r.memory as CompletedSession['memory'],
    maxAttempts: r.maxAttempts as number,
    attempts: r.attempts as CompletedSession['attempts'],
    updatedAt: Number(r.updatedAt),
  };
}
