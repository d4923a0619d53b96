/**
 * The export query: recorded steps joined with their session, read in keyset-paginated chunks as
 * `ExportLine`s, the JSONL line format for external trainers (docs/export.md; JSON Schema
 * docs/export.schema.json). `lamer export` (src/cli/export.ts) writes them.
 *
 * A line carries the session's ids and labels (session, task, env, mode, status, tenant), the
 * position (attempt, step, kind `action` | `reflection`), the model version that produced the
 * output, the observation, the prompt and output as text and as token ids (`[promptLen]` /
 * `[outLen]` int token ids of the engine's tokenizer), the per-token logprobs (`[outLen]` natural
 * log, as sampled), the reward as given by the environment, and the return and advantage once a
 * training job computed them (docs/method.md#returns, docs/method.md#advantages), else null.
 */
import fs from 'node:fs';
import Database from 'better-sqlite3';
import type { SessionMode, SessionStatus, StepKind } from '../domain.js';

/** One exported step record (docs/export.md). Times are ISO 8601 strings. */
export interface ExportLine {
  schemaVersion: 1;
  sessionId: string;
  tenant: string;
  taskId: string;
  env: string | null;
  mode: SessionMode;
  /** Session status at export time: active | completed | abandoned | expired. */
  sessionStatus: SessionStatus;
  attempt: number;
  step: number;
  kind: StepKind;
  modelVersion: string;
  observation: string;
  availableActions: string[] | null;
  /** Prompt text as the engine saw it; null when no model call was made (an attempt's last step). */
  prompt: string | null;
  output: string | null;
  /** The action sent to the environment (action records that sampled one), else null. */
  action: string | null;
  promptTokenIds: number[] | null;
  outputTokenIds: number[] | null;
  logprobs: number[] | null;
  /** Earliest steps of the attempt left out of the prompt to fit the context. */
  droppedSteps: number | null;
  /** Characters cut from the start of the prompt beyond the dropped steps (when even its head and tail did not fit); 0 normally, null without a model call. */
  promptTruncatedChars: number | null;
  /** Reward of the previous action, as given by the environment (0 on reflection records). */
  reward: number;
  done: boolean;
  success: boolean;
  invalidAction: boolean;
  /** Cross-episode return G (LaMer Eq. 4), null until a training job computed it. */
  return: number | null;
  /** Advantage used by the training job, null until computed. */
  advantage: number | null;
  createdAt: string;
  /**
   * Remote versions: the chat messages sent, which token arrays the server returned
   * (`available`), the constraint used, `invalidChoice`, the sampling sent; null for local engines.
   */
  engine?: Record<string, unknown> | null;
  /**
   * Turns of a session's OpenAI-compatible endpoint (src/agent/turns.ts TurnRecord): the request
   * as the agent sent it, the memory added, the sampling used, latencyMs, finishReason, toolCalls,
   * stream; null for steps.
   */
  turn?: Record<string, unknown> | null;
}

export interface ExportFilter {
  /** Sessions created at or after this time, ms since the Unix epoch. */
  since?: number;
  env?: string;
  mode?: SessionMode;
  /** The model version the session pinned (every step of a session uses it). */
  modelVersion?: string;
  tenant?: string;
  /** Only sessions with status `completed` (what training jobs use). */
  completedOnly?: boolean;
}

interface Row {
  session_id: string;
  tenant: string;
  task_id: string;
  env: string | null;
  mode: SessionMode;
  status: SessionStatus;
  attempt: number;
  step: number;
  kind: StepKind;
  model_version: string;
  observation: string;
  available_actions: string | null;
  prompt: string | null;
  output: string | null;
  action: string | null;
  prompt_token_ids: string | null;
  output_token_ids: string | null;
  logprobs: string | null;
  dropped_steps: number | null;
  prompt_truncated_chars: number | null;
  reward: number;
  done: number;
  success: number;
  invalid_action: number;
  return: number | null;
  advantage: number | null;
  created_at: number;
  engine_record: string | null;
  turn: string | null;
}

const json = <T>(s: string | null): T | null => (s === null ? null : (JSON.parse(s) as T));

/** The export line of one joined steps/sessions row. */
function toLine(r: Row): ExportLine {
  return {
    schemaVersion: 1,
    sessionId: r.session_id,
    tenant: r.tenant,
    taskId: r.task_id,
    env: r.env,
    mode: r.mode,
    sessionStatus: r.status,
    attempt: r.attempt,
    step: r.step,
    kind: r.kind,
    modelVersion: r.model_version,
    observation: r.observation,
    availableActions: json<string[]>(r.available_actions),
    prompt: r.prompt,
    output: r.output,
    action: r.action,
    promptTokenIds: json<number[]>(r.prompt_token_ids),
    outputTokenIds: json<number[]>(r.output_token_ids),
    logprobs: json<number[]>(r.logprobs),
    droppedSteps: r.dropped_steps,
    promptTruncatedChars: r.prompt_truncated_chars,
    reward: r.reward,
    done: r.done === 1,
    success: r.success === 1,
    invalidAction: r.invalid_action === 1,
    return: r.return,
    advantage: r.advantage,
    createdAt: new Date(r.created_at).toISOString(),
    engine: json<Record<string, unknown>>(r.engine_record),
    turn: json<Record<string, unknown>>(r.turn),
  };
}

/** Rows read per chunk of {@link exportLines}: each chunk is one short read transaction. */
export const EXPORT_CHUNK_ROWS = 256;

/**
 * Iterate the export lines of the database at `dbFile` matching `filter`, at most `chunkRows` rows
 * in memory at a time. The database is opened read-only and closed when the iteration ends (or is
 * abandoned).
 *
 * Rows are read in keyset-paginated chunks (`(session_id, attempt, step, kind) > last key`, the
 * `steps_position` unique index), each chunk one query, so a read snapshot lives only while a
 * chunk is read, never while lines wait to be written: a running server's WAL can be checkpointed
 * during a long export. Against a live database the export is therefore not one snapshot: a step
 * committed during the export is included if its position comes after the chunk being read, and
 * `sessionStatus` is the status when its chunk was read. Filters on fixed fields (`since`, env,
 * mode, model version, tenant) and on a final status (`completedOnly`) still select whole sessions.
 * @throws Error when the file does not exist or is not a lamer database.
 */
export function* exportLines(dbFile: string, filter: ExportFilter = {}, chunkRows = EXPORT_CHUNK_ROWS): Generator<ExportLine> {
  if (!fs.existsSync(dbFile)) throw new Error(`no database at ${dbFile} (is --data-dir right?)`);
  const db = new Database(dbFile, { readonly: true, fileMustExist: true });
  try {
    const where: string[] = [];
    const params: unknown[] = [];
    if (filter.since !== undefined) (where.push('s.created_at >= ?'), params.push(filter.since));
    if (filter.env !== undefined) (where.push('s.env = ?'), params.push(filter.env));
    if (filter.mode !== undefined) (where.push('s.mode = ?'), params.push(filter.mode));
    if (filter.modelVersion !== undefined) (where.push('s.model_version = ?'), params.push(filter.modelVersion));
    if (filter.tenant !== undefined) (where.push('s.tenant = ?'), params.push(filter.tenant));
    if (filter.completedOnly) where.push("s.status = 'completed'");
    const select = (after: boolean) =>
      db.prepare(
        `SELECT st.session_id, s.tenant, s.task_id, s.env, s.mode, s.status, st.attempt, st.step, st.kind,
                st.model_version, st.observation, st.available_actions, st.prompt, st.output, st.action,
                st.prompt_token_ids, st.output_token_ids, st.logprobs, st.dropped_steps, st.prompt_truncated_chars, st.reward, st.done,
                st.success, st.invalid_action, st.return, st.advantage, st.created_at, st.engine_record, st.turn
           FROM steps st JOIN sessions s ON s.id = st.session_id
          ${[...where, ...(after ? ['(st.session_id, st.attempt, st.step, st.kind) > (?, ?, ?, ?)'] : [])]
            .map((w, i) => `${i === 0 ? 'WHERE' : 'AND'} ${w}`)
            .join(' ')}
          ORDER BY st.session_id, st.attempt, st.step, st.kind
          LIMIT ?`,
      );
    const first = select(false);
    const next = select(true);
    let last: Row | null = null;
    for (;;) {
      // One statement run to completion (.all) = one read transaction, ended before any line is yielded.
      const rows = (last === null
        ? first.all(...params, chunkRows)
        : next.all(...params, last.session_id, last.attempt, last.step, last.kind, chunkRows)) as Row[];
      for (const r of rows) yield toLine(r);
      if (rows.length < chunkRows) break;
      last = rows[rows.length - 1]!;
    }
  } finally {
    db.close();
  }
}
