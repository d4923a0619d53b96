/**
 * Paged reads of the `steps` table (a session's trajectory, for the session service); the step writes
 * are the prepared statements of src/db/queries.ts.
 */
import { and, asc, eq, sql, type SQL, type SQLWrapper } from 'drizzle-orm';
import type { StepKind } from '../domain.js';
import type { Db } from './index.js';
import { steps, type StepRow } from './schema.js';

/** A row position: attempt, step, then the action before the reflection ('action' < 'reflection'). */
export interface StepPosition {
  attempt: number;
  step: number;
  kind: StepKind;
}

/** One page of rows and the position of the last row when more follow (else null). */
export interface StepPage {
  rows: StepRow[];
  last: StepPosition | null;
}

/** Paged reads of the `steps` table. */
export class StepsRepo {
  constructor(private readonly db: Db) {}

  /**
   * One page of session `sessionId`'s rows after position `after` (exclusive; from the start when
   * absent), in position order on the `steps_position` index: at most `limit` rows and at most
   * `maxBytes` bytes of row text (estimated from the stored column sizes before the rows are read),
   * but always at least one row. Column bytes as sent: text columns as JSON string literals
   * (json_quote escapes as JSON does), JSON columns as stored, plus ~600 bytes of keys, numbers and
   * dates per row.
   */
  page(sessionId: string, after: StepPosition | undefined, limit: number, maxBytes: number): StepPage {
    const position = sql`(${steps.attempt}, ${steps.step}, ${steps.kind})`;
    const afterCond: SQL | undefined = after ? sql`${position} > (${after.attempt}, ${after.step}, ${after.kind})` : undefined;
    const text = (c: SQLWrapper) => sql`coalesce(length(CAST(json_quote(${c}) AS BLOB)), 4)`;
    const json = (c: SQLWrapper) => sql`coalesce(length(CAST(${c} AS BLOB)), 4)`;
    const size = sql<number>`600 + ${text(steps.observation)} + ${json(steps.availableActions)} + ${json(steps.info)} + ${text(steps.prompt)} + ${text(steps.output)} + ${text(steps.action)} + ${json(steps.promptTokenIds)} + ${json(steps.outputTokenIds)} + ${json(steps.logprobs)} + ${json(steps.engineRecord)} + ${text(steps.modelVersion)}`;
    const where = afterCond ? and(eq(steps.sessionId, sessionId), afterCond) : eq(steps.sessionId, sessionId);
    const order = [asc(steps.attempt), asc(steps.step), asc(steps.kind)] as const;
    const sized = this.db.select({ attempt: steps.attempt, step: steps.step, kind: steps.kind, size }).from(steps).where(where).orderBy(...order).limit(limit + 1).all();
    let n = 0;
    let total = 0;
    while (n < sized.length && n < limit && (n === 0 || total + sized[n]!.size <= maxBytes)) total += sized[n++]!.size;
    const last = sized[n - 1];
    if (n === 0 || !last) return { rows: [], last: null };
    const rows = this.db.select().from(steps).where(and(where, sql`${position} <= (${last.attempt}, ${last.step}, ${last.kind})`)).orderBy(...order).all();
    return { rows, last: n < sized.length ? { attempt: last.attempt, step: last.step, kind: last.kind } : null };
  }
}
