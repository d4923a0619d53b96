/**
 * A tenant's session as the session service (src/agent/sessions.ts) reads it for one request, and
 * the commit of a step or turn: the stored row (`row`), or the state a step or turn works on
 * (`stateFor`), kept in memory between steps (src/agent/active-sessions.ts) and read again from the
 * store when other servers write it too and the request is not at the position expected here. A
 * commit applies only while the stored session is unchanged (`commitStep`), and a request is
 * computed again once when it was not (`fresh`): the "Guarantees" of sessions.ts about servers that
 * share one PostgreSQL database.
 *
 * Apart from sessions.ts because this is where the service decides whether the state held in
 * memory can be trusted; the rest of the service takes a state from here and hands its commit back.
 */
import { SessionNotActiveError, StaleSessionError } from '../db/errors.js';
import type { AsyncHot, StepCommitResult } from '../db/async-repositories.js';
import type { StepCommit } from '../db/queries.js';
import type { SessionRow } from '../db/schema.js';
import type { ActiveSessions, SessionState } from './active-sessions.js';
import { DomainError, notFound } from './errors.js';

/** The sessions of one session service as its requests read and commit them, over its active sessions and the store's hot path. */
export class SessionStates {
  /**
   * @param active the active sessions the service keeps (it drops an entry on every other write).
   * @param shared other servers write the same database (PostgreSQL): a session's state held here
   *   may be behind, so a step at another position than the one expected here reads the database's
   *   state first.
   */
  constructor(
    private readonly hot: AsyncHot,
    private readonly active: ActiveSessions,
    private readonly shared: boolean,
  ) {}

  /** The tenant's session `id`. @throws DomainError `not-found` (another tenant's session is indistinguishable from a missing one). */
  async row(tenant: string, id: string): Promise<SessionRow> {
    const row = await this.hot.session(id);
    if (!row || row.tenant !== tenant) throw notFound(`session '${id}'`);
    return row;
  }

  /**
   * The state of session `id` for a request at position `at` (null: at whatever position is next):
   * from memory, and on a store other servers write too, read again from the database when the
   * position is not the one expected here (another server may have moved the session on).
   * @throws DomainError `not-found` (unknown session, another tenant's).
   */
  async stateFor(tenant: string, id: string, at: { attempt: number; step: number } | null): Promise<SessionState> {
    const held = this.active.has(id);
    let state = await this.active.get(id);
    const row = state?.row;
    const expected = row?.status === 'active' && (at === null || (at.attempt === row.nextAttempt && at.step === row.nextStep));
    if (state && held && this.shared && !expected) state = await this.active.load(id);
    if (!state || state.row.tenant !== tenant) throw notFound(`session '${id}'`);
    return state;
  }

  /**
   * Commit a step's writes, then apply them to the state held in memory. When `recorded` is false
   * another server recorded the position first (nothing of this commit was written), and the
   * state held here is dropped: the next request reads the database's.
   * @throws DomainError `session-not-active` when the session ended meanwhile (another server closed
   *   or expired it; nothing was written); StaleSessionError when it changed since the state was
   *   read (the state is dropped: compute the step again); DatabaseError as the store's commit.
   */
  async commitStep(state: SessionState, commit: StepCommit): Promise<StepCommitResult> {
    const id = state.row.id;
    let result: StepCommitResult;
    try {
      result = await this.hot.commitStep({ ...commit, session: { ...commit.session, expectedUpdatedAt: state.row.updatedAt } });
    } catch (err) {
      if (!(err instanceof SessionNotActiveError || err instanceof StaleSessionError)) throw err;
      this.active.drop(id);
      if (err instanceof StaleSessionError) throw err;
      const now = await this.hot.session(id);
      throw new DomainError('session-not-active', `session '${id}' is ${now?.status ?? 'gone'}`);
    }
    if (result.recorded) this.active.committed(state, commit);
    else this.active.drop(id);
    return result;
  }

  /**
   * `fn` (one step or turn), once more when its commit finds the session changed since its state
   * was read (StaleSessionError: another server edited it; nothing was written), now from the
   * session as stored.
   * @throws DomainError `conflict` when it changed again (nothing was written: send it again).
   */
  async fresh<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (!(err instanceof StaleSessionError)) throw err;
    }
    try {
      return await fn();
    } catch (err) {
      if (!(err instanceof StaleSessionError)) throw err;
      const why = `session '${err.sessionId}' kept changing while this request was served; nothing was recorded, send it again`;
      throw new DomainError('conflict', why);
    }
  }
}
