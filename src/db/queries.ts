/**
 * Prepared statements of the step hot path (one session read, one position lookup, the current
 * attempt's steps, the step insert, the session update, and on the step that completes a session
 * the statistics aggregates of ./stats-aggregates.ts), prepared once per connection. Drizzle
 * builds and prepares SQL on every call; these skip that (src/db/schema.ts is the source of the
 * column names; the HTTP tests under test/routes cover every statement).
 */
import type Database from 'better-sqlite3';
import type { ReflectionSource, StepKind } from '../domain.js';
import type { AttemptSummary, SessionRow } from './schema.js';
import { connectionTuning, guardedWrite, storageHealth, type StorageHealth } from './index.js';
import { DatabaseError, SessionNotActiveError, StaleSessionError } from './errors.js';
import { statsAggregates, type SqliteStatsAggregates } from './stats-aggregates.js';

interface RawSession {
  id: string;
  tenant: string;
  task_id: string;
  env: string | null;
  mode: SessionRow['mode'];
  status: SessionRow['status'];
  instructions: string;
  max_attempts: number;
  max_steps: number;
  memory: SessionRow['memory'];
  memory_placement: SessionRow['memoryPlacement'];
  sampling: string;
  model_version: string;
  metadata: string;
  next_attempt: number;
  next_step: number;
  attempts: string;
  created_at: number;
  updated_at: number;
}

export interface StepInsert {
  sessionId: string;
  attempt: number;
  step: number;
  kind: StepKind;
  observation: string;
  reward: number;
  done: boolean;
  success: boolean;
  invalidAction: boolean;
  availableActions: string[] | null;
  info: Record<string, unknown> | null;
  prompt: string | null;
  output: string | null;
  action: string | null;
  promptTokenIds: number[] | null;
  outputTokenIds: number[] | null;
  logprobs: number[] | null;
  droppedSteps: number | null;
  /** Characters cut from the start of the prompt beyond the dropped steps (Generation.promptTruncatedChars); null without a model call. */
  promptTruncatedChars?: number | null;
  /** Remote engines: messages sent and which arrays were returned (GenerationRecord); null or absent for local engines. */
  engineRecord?: object | null;
  /** Turns of the session's OpenAI-compatible endpoint: what the agent sent and how it was served (src/agent/turns.ts TurnRecord); null or absent for steps. */
  turn?: object | null;
  modelVersion: string;
  requestHash: string;
  /** Already-serialised answer JSON, or null. */
  answer: string | null;
  createdAt: number;
}

/** Everything one step writes. */
export interface StepCommit {
  rows: StepInsert[];
  reflection: { sessionId: string; attempt: number; text: string; updatedAt: number } | null;
  session: {
    id: string;
    status: string;
    attempts: AttemptSummary[];
    nextAttempt: number;
    nextStep: number;
    updatedAt: number;
    /**
     * The session's `updatedAt` as the step read it: the commit applies only while the stored row
     * still has it (every change of a session moves it on), else it is refused (StaleSessionError).
     * Absent: not checked.
     */
    expectedUpdatedAt?: number;
  };
}

/** Scratch space of `intArrayJson`: 64 KiB, kept (a longer array gets a buffer of its own). */
let digits = Buffer.allocUnsafe(1 << 16);

/**
 * JSON text of an array of integers in [0, 2^31) (token ids), written as ASCII digits into a
 * buffer and read back as one string: the same text as `JSON.stringify`, without a string per
 * element. Null when an element is anything else (the caller serialises it another way).
 */
function intArrayJson(a: readonly unknown[]): string | null {
  const n = a.length;
  // at most 10 digits and a comma per element, and the brackets
  const need = n * 11 + 2;
  const b = need <= digits.length ? digits : Buffer.allocUnsafe(need);
  let p = 0;
  b[p++] = 0x5b; // [
  for (let i = 0; i < n; i++) {
    const x = a[i];
    if (typeof x !== 'number' || !(x >= 0 && x <= 0x7fffffff) || (x | 0) !== x) return null;
    if (i > 0) b[p++] = 0x2c; // ,
    if (x < 10) {
      b[p++] = 0x30 + x;
    } else if (x < 100) {
      b[p++] = 0x30 + ((x / 10) | 0);
      b[p++] = 0x30 + (x % 10);
    } else if (x < 1000) {
      b[p++] = 0x30 + ((x / 100) | 0);
      b[p++] = 0x30 + (((x / 10) | 0) % 10);
      b[p++] = 0x30 + (x % 10);
    } else {
      const s = String(x);
      for (let k = 0; k < s.length; k++) b[p++] = s.charCodeAt(k);
    }
  }
  b[p++] = 0x5d; // ]
  if (b !== digits && b.length <= 1 << 20) digits = b;
  return b.toString('latin1', 0, p);
}

/**
 * JSON text of a JSON column's value (null stays SQL NULL), the same text as `JSON.stringify(v)`,
 * made faster for the arrays a step records: token ids (integers) are written as digits into a
 * buffer (`intArrayJson`), and other arrays of finite numbers (logprobs) are their elements joined
 * by commas (a finite number's JSON is its `String()`). `JSON.stringify` makes a string per
 * element and takes V8's slow path for arrays made with `new Array(n)` (holey) and for doubles.
 */
export function jsonText(v: unknown): string | null {
  if (v === null || v === undefined) return null;
  if (Array.isArray(v) && v.length > 0 && typeof v[0] === 'number') {
    const ints = intArrayJson(v);
    if (ints !== null) return ints;
    let numbers = true;
    for (let i = 0; i < v.length; i++) {
      const x: unknown = v[i];
      if (typeof x !== 'number' || !Number.isFinite(x)) {
        numbers = false;
        break;
      }
    }
    if (numbers) return `[${v.join(',')}]`;
  }
  return JSON.stringify(v);
}

export class HotQueries {
  private readonly sessionById: Database.Statement<[string], RawSession>;
  private readonly stepAt: Database.Statement<[string, number, number], { request_hash: string; answer: string | null }>;
  private readonly attemptSteps: Database.Statement<[string, number], { observation: string; action: string | null }>;
  private readonly insertStep: Database.Statement;
  private readonly updateSession: Database.Statement;
  private readonly updateActiveSession: Database.Statement;
  private readonly statusOf: Database.Statement<[string], { status: string }>;
  private readonly activeOfTenant: Database.Statement<[string], { n: number }>;
  private readonly insertReflection: Database.Statement;
  private readonly reflectionsOf: Database.Statement<[string], { attempt: number; text: string; source: ReflectionSource; updated_at: number }>;

  private readonly health: StorageHealth;
  /** The statistics aggregates a completing step updates in its transaction (./stats-aggregates.ts). */
  private readonly stats: SqliteStatsAggregates;

  private readonly beginImmediate: Database.Statement;
  private readonly commit: Database.Statement;
  private readonly rollback: Database.Statement;
  /** `apply` inside a savepoint (a better-sqlite3 transaction function run inside a transaction), built once. */
  private readonly applyInSavepoint: (commit: StepCommit) => void;

  constructor(readonly sqlite: Database.Database) {
    this.health = storageHealth(sqlite);
    this.stats = statsAggregates(sqlite);
    this.beginImmediate = sqlite.prepare('BEGIN IMMEDIATE');
    this.commit = sqlite.prepare('COMMIT');
    this.rollback = sqlite.prepare('ROLLBACK');
    this.sessionById = sqlite.prepare('SELECT * FROM sessions WHERE id = ?');
    this.stepAt = sqlite.prepare(
      "SELECT request_hash, answer FROM steps WHERE session_id = ? AND attempt = ? AND step = ? AND kind = 'action'",
    );
    this.attemptSteps = sqlite.prepare(
      "SELECT observation, action FROM steps WHERE session_id = ? AND attempt = ? AND kind = 'action' ORDER BY step",
    );
    // Positional parameters: binding 25 values from an argument list costs less than from an
    // object by name (and the object spread that built it).
    this.insertStep = sqlite.prepare(
      `INSERT INTO steps (session_id, attempt, step, kind, observation, reward, done, success, invalid_action,
        available_actions, info, prompt, output, action, prompt_token_ids, output_token_ids, logprobs, dropped_steps, prompt_truncated_chars,
        engine_record, turn, model_version, request_hash, answer, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    // A step is committed only on an active session, unchanged since the step read it: the update
    // matches no row otherwise, and the step's writes are rolled back (SessionNotActiveError or
    // StaleSessionError), which costs no extra read on the way that succeeds. Parameters: the new
    // values, then id, expectedUpdatedAt, expectedUpdatedAt.
    const unchanged = `id = ? AND status = 'active' AND (? IS NULL OR updated_at = ?)`;
    this.updateSession = sqlite.prepare(
      `UPDATE sessions SET status = ?, attempts = ?, next_attempt = ?, next_step = ?, updated_at = ? WHERE ${unchanged}`,
    );
    // While the session stays active, the status column (and its index) need not be written.
    this.updateActiveSession = sqlite.prepare(
      `UPDATE sessions SET attempts = ?, next_attempt = ?, next_step = ?, updated_at = ? WHERE ${unchanged}`,
    );
    this.statusOf = sqlite.prepare('SELECT status FROM sessions WHERE id = ?');
    this.activeOfTenant = sqlite.prepare("SELECT count(*) AS n FROM sessions WHERE tenant = ? AND status = 'active'");
    this.insertReflection = sqlite.prepare(
      `INSERT INTO reflections (session_id, attempt, text, source, updated_at) VALUES (?, ?, ?, 'policy', ?)`,
    );
    this.reflectionsOf = sqlite.prepare('SELECT attempt, text, source, updated_at FROM reflections WHERE session_id = ? ORDER BY attempt');
    this.applyInSavepoint = sqlite.transaction((c: StepCommit) => this.apply(c));
  }

  /** Number of active sessions of `tenant` (the open-session cap at each session create). */
  activeCount(tenant: string): number {
    return this.activeOfTenant.get(tenant)?.n ?? 0;
  }

  /** Reflections of a session, attempt order. */
  reflections(sessionId: string): Array<{ sessionId: string; attempt: number; text: string; source: ReflectionSource; updatedAt: number }> {
    return this.reflectionsOf.all(sessionId).map((r) => ({ sessionId, attempt: r.attempt, text: r.text, source: r.source, updatedAt: r.updated_at }));
  }

  session(id: string): SessionRow | undefined {
    const r = this.sessionById.get(id);
    if (!r) return undefined;
    return {
      id: r.id,
      tenant: r.tenant,
      taskId: r.task_id,
      env: r.env,
      mode: r.mode,
      status: r.status,
      instructions: r.instructions,
      maxAttempts: r.max_attempts,
      maxSteps: r.max_steps,
      memory: r.memory,
      memoryPlacement: r.memory_placement,
      sampling: JSON.parse(r.sampling) as unknown,
      modelVersion: r.model_version,
      metadata: JSON.parse(r.metadata) as unknown,
      nextAttempt: r.next_attempt,
      nextStep: r.next_step,
      attempts: JSON.parse(r.attempts) as AttemptSummary[],
      createdAt: r.created_at,
      updatedAt: r.updated_at,
    };
  }

  /** The recorded action step at a position: its request hash and stored answer (JSON text). */
  stepAtPosition(sessionId: string, attempt: number, step: number): { requestHash: string; answer: string | null } | undefined {
    const r = this.stepAt.get(sessionId, attempt, step);
    return r ? { requestHash: r.request_hash, answer: r.answer } : undefined;
  }

  /** The request hash and answer stored at a position of any kind (a step commit that lost its position reads the winner's). */
  storedAt(sessionId: string, attempt: number, step: number, kind: StepKind): { requestHash: string; answer: string | null } | undefined {
    return this.sqlite
      .prepare('SELECT request_hash AS requestHash, answer FROM steps WHERE session_id = ? AND attempt = ? AND step = ? AND kind = ?')
      .get(sessionId, attempt, step, kind) as { requestHash: string; answer: string | null } | undefined;
  }

  /** Observations and actions of one attempt's action steps, in order. */
  stepsOfAttempt(sessionId: string, attempt: number): Array<{ observation: string; action: string | null }> {
    return this.attemptSteps.all(sessionId, attempt);
  }

  private pending: Array<{ commit: StepCommit; resolve: () => void; reject: (err: unknown) => void; since: number }> = [];
  private flushScheduled = false;
  /** Consecutive lock refusals of the current flush (backoff of the retries). */
  private busyTries = 0;

  /**
   * Commit one step atomically (its record(s), the reflection if any, the session update) and
   * resolve once it is durable in the database. Group commit: the steps that arrive within one
   * event-loop turn share one SQLite transaction, each inside its own savepoint, so one step's
   * failure (e.g. a constraint violation) rolls back only that step and rejects only its promise.
   *
   * Lock waits never block the event loop: the write lock is asked for without waiting
   * (`BEGIN IMMEDIATE` under busy_timeout 0) and, while another connection holds it, asked again on
   * timers (2, 4, 8 ... 32 ms apart) until the step has waited the connection's busy timeout
   * (ConnectionTuning.busyTimeoutMs); then it is rejected as busy. When the transaction cannot
   * start or is lost (disk full, I/O error) every step of the batch is rejected and none is
   * recorded. A step whose session is no longer `active` is rolled back alone.
   * @throws (rejects) SessionNotActiveError when the session is not active (or missing);
   *   StaleSessionError when it changed since `commit.session.expectedUpdatedAt`;
   *   DatabaseError kind `busy` | `full` | `io` | `readonly` | `corrupt` for those
   *   SQLite failures; other errors unchanged.
   */
  commitStep(commit: StepCommit): Promise<void> {
    return new Promise((resolve, reject) => {
      this.pending.push({ commit, resolve, reject, since: Date.now() });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.flushScheduled = false;
    if (this.pending.length === 0) return;
    const began = this.begin();
    if (began !== true) {
      const err = this.health.failed(began);
      if (!(err instanceof DatabaseError && err.kind === 'busy')) {
        this.busyTries = 0;
        for (const item of this.pending.splice(0)) item.reject(err);
        return;
      }
      // Locked by another connection: refuse the steps that waited long enough, retry the others.
      const waitMs = connectionTuning(this.sqlite).busyTimeoutMs;
      const now = Date.now();
      const keep: typeof this.pending = [];
      for (const item of this.pending) (now - item.since >= waitMs ? item.reject(err) : keep.push(item));
      this.pending = keep;
      if (keep.length > 0) {
        this.flushScheduled = true;
        const delay = Math.min(32, 2 ** ++this.busyTries);
        setTimeout(() => this.flush(), delay);
      } else {
        this.busyTries = 0;
      }
      return;
    }
    this.busyTries = 0;
    const batch = this.pending;
    this.pending = [];
    const failed = new Map<number, unknown>();
    try {
      // A step alone in its transaction needs no savepoint: its failure rolls the transaction back.
      if (batch.length === 1) this.apply(batch[0]!.commit);
      for (let i = 0; batch.length > 1 && i < batch.length; i++) {
        try {
          // Inside a transaction a better-sqlite3 transaction is a savepoint.
          this.applyInSavepoint(batch[i]!.commit);
        } catch (err) {
          failed.set(i, err);
          // SQLite rolls the whole transaction back on some errors (SQLITE_FULL, SQLITE_IOERR):
          // the steps before this one are gone too and later ones would run outside it.
          if (!this.sqlite.inTransaction) throw err;
        }
      }
      this.commit.run();
    } catch (err) {
      if (this.sqlite.inTransaction) this.rollback.run();
      const e = this.health.failed(err);
      for (const item of batch) item.reject(e);
      return;
    }
    if (failed.size < batch.length) this.health.succeeded();
    batch.forEach((item, i) => (failed.has(i) ? item.reject(this.health.failed(failed.get(i))) : item.resolve()));
  }

  /** `BEGIN IMMEDIATE` without waiting for the lock: true, or the error (SQLITE_BUSY when locked). */
  private begin(): true | unknown {
    try {
      // A PRAGMA busy_timeout takes effect when it is compiled, so it cannot be a reused statement;
      // exec runs it without building a statement object.
      this.sqlite.exec('PRAGMA busy_timeout = 0');
      try {
        this.beginImmediate.run();
        return true;
      } finally {
        this.sqlite.exec(`PRAGMA busy_timeout = ${connectionTuning(this.sqlite).busyTimeoutMs}`);
      }
    } catch (err) {
      // SQLITE_BUSY, or anything else (e.g. the connection was closed): the caller rejects.
      return err;
    }
  }

  /**
   * Run a synchronous write (`fn`, e.g. a drizzle insert) and record its outcome in the
   * connection's StorageHealth.
   * @throws DatabaseError for SQLite busy/full/io/readonly/corrupt failures; other errors unchanged.
   */
  write<T>(fn: () => T): T {
    return guardedWrite(this.sqlite, fn);
  }

  private apply({ rows, reflection, session }: StepCommit): void {
    {
      for (const r of rows) {
        this.insertStep.run(
          r.sessionId, r.attempt, r.step, r.kind, r.observation, r.reward, r.done ? 1 : 0, r.success ? 1 : 0, r.invalidAction ? 1 : 0,
          jsonText(r.availableActions), jsonText(r.info), r.prompt, r.output, r.action,
          jsonText(r.promptTokenIds), jsonText(r.outputTokenIds), jsonText(r.logprobs), r.droppedSteps, r.promptTruncatedChars ?? null,
          jsonText(r.engineRecord ?? null), jsonText(r.turn ?? null), r.modelVersion, r.requestHash, r.answer, r.createdAt,
        );
      }
      if (reflection) this.insertReflection.run(reflection.sessionId, reflection.attempt, reflection.text, reflection.updatedAt);
      const attempts = JSON.stringify(session.attempts);
      const expected = session.expectedUpdatedAt ?? null;
      const changed = (
        session.status === 'active'
          ? this.updateActiveSession.run(attempts, session.nextAttempt, session.nextStep, session.updatedAt, session.id, expected, expected)
          : this.updateSession.run(session.status, attempts, session.nextAttempt, session.nextStep, session.updatedAt, session.id, expected, expected)
      ).changes;
      if (changed !== 1) {
        // the way that fails: why
        throw this.statusOf.get(session.id)?.status === 'active' ? new StaleSessionError(session.id) : new SessionNotActiveError(session.id);
      }
      // the update matched the session while it was active, so this is the session's one completion
      if (session.status === 'completed') this.stats.recordCompletion(session.id);
    }
  }
}
