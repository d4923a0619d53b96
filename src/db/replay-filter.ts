/**
 * The session filter of a batch replay (src/agent/replays.ts, docs/replay.md) as SQL conditions,
 * one definition for both stores: `ReplaysRepo.sessions` (SQLite, ./replays-repo.ts) and
 * `pgReplays().sessions` (PostgreSQL, ./pg/replays-repo.ts) pass their own `sessions` table.
 * Drizzle's `eq`, `gte` and `lt` build dialect-neutral SQL that each dialect renders at query time,
 * binding the values through the given column's own encoder, so the conditions need no per-dialect
 * part; only running the query (synchronous `.all()` on SQLite, a promise on PostgreSQL) differs.
 */
import { eq, gte, lt, type Column, type SQL } from 'drizzle-orm';
import type { SessionMode, SessionStatus } from '../domain.js';

/** Which of a tenant's sessions a batch replay reads (every given field must match). */
export interface ReplaySessionFilter {
  env?: string;
  /** The version the sessions were recorded with (pinned). */
  modelVersion?: string;
  taskId?: string;
  mode?: SessionMode;
  status?: SessionStatus;
  /** Sessions created at or after this time, ms since the epoch. */
  since?: number;
  /** Sessions created before this time, ms since the epoch. */
  until?: number;
}

/** The columns of a `sessions` table (either store's schema) that the filter reads. */
export type ReplayFilterColumns = Record<'tenant' | 'env' | 'modelVersion' | 'taskId' | 'mode' | 'status' | 'createdAt', Column>;

/**
 * The conditions selecting the tenant's sessions that match `f`, to be joined with `and`: the
 * tenant always, then one condition per given field (`since` inclusive, `until` exclusive, both on
 * `createdAt` in ms since the epoch). Throws nothing.
 */
export function replaySessionConditions(t: ReplayFilterColumns, tenant: string, f: ReplaySessionFilter): SQL[] {
  const conds: SQL[] = [eq(t.tenant, tenant)];
  if (f.env !== undefined) conds.push(eq(t.env, f.env));
  if (f.modelVersion !== undefined) conds.push(eq(t.modelVersion, f.modelVersion));
  if (f.taskId !== undefined) conds.push(eq(t.taskId, f.taskId));
  if (f.mode !== undefined) conds.push(eq(t.mode, f.mode));
  if (f.status !== undefined) conds.push(eq(t.status, f.status));
  if (f.since !== undefined) conds.push(gte(t.createdAt, f.since));
  if (f.until !== undefined) conds.push(lt(t.createdAt, f.until));
  return conds;
}
