/**
 * What a step of an active session reads, kept in memory between its steps and written through:
 * the session row, the current attempt's steps so far, the previous attempt's steps and final
 * observation, and the reflections. A step then reads nothing from the database that it (or an
 * earlier step of this process) wrote, and its cost does not grow with the attempt.
 *
 * Consistency: in one server, the session service (src/agent/sessions.ts) is the only writer of a
 * session's row, steps and reflections, and every write of one session runs under its per-session
 * mutex. Servers that share a PostgreSQL database write the same sessions: there an entry may be
 * behind, and the service re-reads it ({@link ActiveSessions.load}) when a step is not at the
 * position it expects, and its commits apply only while the stored session is unchanged. A step
 * updates the entry only after its transaction has committed ({@link ActiveSessions.committed});
 * a step that fails changes nothing. Every other write of a session (close, expiry, a human edit
 * of a reflection) drops the entry, and the next step reads the database again. An entry also
 * goes when its session leaves `active`, and the least recently used entries go when the cache is
 * over its bounds (entries or bytes of step text), so memory stays bounded. After a restart every
 * entry is read again from the database, which stays the record (a step is durable before its
 * answer).
 */
import type { StepCommit } from '../db/queries.js';
import type { SessionRow } from '../db/schema.js';
import type { PromptStep } from './prompt.js';

/** One attempt's steps as prompts show them, and the observation it ended on. */
export interface AttemptSteps {
  /** Steps with an action, in order (the step that ended the attempt has none). */
  steps: PromptStep[];
  /** The observation of the attempt's last recorded step ('' when it has none). */
  finalObservation: string;
}

/** The in-memory state of one active session. */
export interface SessionState {
  /** The session row as committed. Callers must not change it (the transition copies what it changes). */
  row: SessionRow;
  /** Steps of attempt `row.nextAttempt` recorded so far, in order (all have an action: the attempt is running). */
  current: PromptStep[];
  /** Attempt `row.nextAttempt - 1` (null at attempt 0, or when the session's memory mode never shows it). */
  previous: AttemptSteps | null;
  /** Reflection texts by attempt. */
  reflections: Map<number, string>;
  /** Characters of step text held in `current` and in `previous` (observations and actions), for the bound. */
  currentChars: number;
  previousChars: number;
}

/** Where the state of a session is read from when it is not in memory (the store's hot path, src/db/async-repositories.ts AsyncHot). */
export interface SessionStateSource {
  session(id: string): Promise<SessionRow | undefined>;
  stepsOfAttempt(sessionId: string, attempt: number): Promise<Array<{ observation: string; action: string | null }>>;
  reflections(sessionId: string): Promise<Array<{ attempt: number; text: string }>>;
}

/** Bounds of the cache: entries, and characters of step text (about 2 bytes each in memory). */
export interface ActiveSessionLimits {
  maxEntries: number;
  maxChars: number;
}

export const DEFAULT_ACTIVE_SESSION_LIMITS: ActiveSessionLimits = { maxEntries: 10_000, maxChars: 32 * 1024 * 1024 };

const stepChars = (s: PromptStep): number => s.observation.length + s.action.length;
const sumChars = (steps: readonly PromptStep[]): number => steps.reduce((n, s) => n + stepChars(s), 0);

/** A state with nothing recorded in memory. */
const bare = (row: SessionRow): SessionState => ({ row, current: [], previous: null, reflections: new Map(), currentChars: 0, previousChars: 0 });

/** The in-memory state of active sessions (see the top of this file). */
export class ActiveSessions {
  /** Entries, least recently used first, each with the characters counted for it in `chars`. */
  private readonly entries = new Map<string, { state: SessionState; chars: number }>();
  private chars = 0;

  constructor(
    private readonly source: SessionStateSource,
    private readonly limits: ActiveSessionLimits = DEFAULT_ACTIVE_SESSION_LIMITS,
  ) {}

  /** Number of sessions held now. */
  get size(): number {
    return this.entries.size;
  }

  /**
   * The state of session `id`: from memory, else read from the database (and kept when the
   * session is active). Undefined when there is no such session. The caller checks the tenant.
   * Call it under the session's mutex.
   */
  async get(id: string): Promise<SessionState | undefined> {
    const hit = this.entries.get(id);
    if (hit) {
      // most recently used last
      this.entries.delete(id);
      this.entries.set(id, hit);
      return hit.state;
    }
    return this.load(id);
  }

  /** Whether session `id` is held in memory now. */
  has(id: string): boolean {
    return this.entries.has(id);
  }

  /**
   * The state of session `id` read from the database (held when the session is active), whether
   * or not it was in memory: for a store that other servers write too, where an entry may be behind.
   * Call it under the session's mutex.
   */
  async load(id: string): Promise<SessionState | undefined> {
    this.drop(id);
    const row = await this.source.session(id);
    if (!row) return undefined;
    if (row.status !== 'active') return bare(row);
    const current = (await this.attemptSteps(id, row.nextAttempt)).steps;
    const previous = row.nextAttempt > 0 && row.memory !== 'reflection_only' ? await this.attemptSteps(id, row.nextAttempt - 1) : null;
    const reflections = new Map((await this.source.reflections(id)).map((r) => [r.attempt, r.text] as const));
    const state: SessionState = { row, current, previous, reflections, currentChars: sumChars(current), previousChars: previous ? sumChars(previous.steps) : 0 };
    this.put(id, state);
    return state;
  }

  /** Hold the state of a session just created (status active, nothing recorded yet). */
  created(row: SessionRow): void {
    this.put(row.id, bare(row));
  }

  /**
   * Apply a committed step of `state`'s session: the action record's observation and action, the
   * attempt's end, the reflection and the session update of `commit`. Call it only once the
   * commit is durable, under the session's mutex. A session that is no longer active is dropped.
   */
  committed(state: SessionState, commit: StepCommit): void {
    const s = commit.session;
    const id = s.id;
    if (s.status !== 'active') {
      this.drop(id);
      return;
    }
    const record = commit.rows.find((r) => r.kind === 'action');
    const attemptEnded = s.nextAttempt !== state.row.nextAttempt;
    if (record && record.action !== null) {
      const step = { observation: record.observation, action: record.action };
      state.current.push(step);
      state.currentChars += stepChars(step);
    }
    if (attemptEnded) {
      const keep = state.row.memory !== 'reflection_only';
      state.previous = keep ? { steps: state.current, finalObservation: record?.observation ?? '' } : null;
      state.previousChars = keep ? state.currentChars : 0;
      state.current = [];
      state.currentChars = 0;
    }
    if (commit.reflection) state.reflections.set(commit.reflection.attempt, commit.reflection.text);
    state.row = { ...state.row, status: s.status as SessionRow['status'], attempts: s.attempts, nextAttempt: s.nextAttempt, nextStep: s.nextStep, updatedAt: s.updatedAt };
    this.put(id, state);
  }

  /** Forget session `id` (after a write other than a step: close, expiry, a reflection edit). */
  drop(id: string): void {
    const e = this.entries.get(id);
    if (!e) return;
    this.entries.delete(id);
    this.chars -= e.chars;
  }

  /** Hold `state` as the most recently used entry, then evict the least recently used over the bounds. */
  private put(id: string, state: SessionState): void {
    this.drop(id);
    const chars = state.currentChars + state.previousChars;
    this.entries.set(id, { state, chars });
    this.chars += chars;
    for (const [k, e] of this.entries) {
      if (this.entries.size <= this.limits.maxEntries && this.chars <= this.limits.maxChars) break;
      if (e.state === state) continue;
      this.entries.delete(k);
      this.chars -= e.chars;
    }
  }

  private async attemptSteps(id: string, attempt: number): Promise<AttemptSteps> {
    const rows = await this.source.stepsOfAttempt(id, attempt);
    return {
      steps: rows.filter((r): r is PromptStep => r.action !== null),
      finalObservation: rows.length > 0 ? rows[rows.length - 1]!.observation : '',
    };
  }
}
