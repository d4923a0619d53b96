/**
 * The session service: the LaMer session state machine (docs/protocol.md "Post a step";
 * docs/method.md#sessions-attempts-and-steps) over the database and the policy engine. It
 * orchestrates (per-session mutex, engine calls, commit); the prompts and engine calls are made in
 * model-calls.ts, a request's session is read and its step committed in session-states.ts, the
 * step transition is pure (src/agent/step-transition.ts), the records it writes are built in
 * step-records.ts, views in session-views.ts, statistics in session-stats.ts, and the SQL lives in
 * src/db (queries.ts hot path, sessions-repo.ts, steps-repo.ts).
 *
 * A session is up to `maxAttempts` attempts at one task. Each attempt is a sequence of steps
 * 0, 1, ...: the environment posts an observation (and the reward of the previous action) and gets
 * an action. An attempt ends on a step with `done: true` (failed unless `success: true`) or at step
 * index `maxSteps` (endReason `max_steps`, failed). After a failed attempt with attempts left, the
 * policy writes a reflection (the session's memory). The session completes on success or when
 * attempts run out.
 *
 * Guarantees:
 * - Steps of one session are serialised (KeyedMutex): never two records for one position. Across
 *   servers on one PostgreSQL database the store keeps a position exactly once: of two commits of
 *   one position one is stored, and the other server answers the stored answer (or step-conflict
 *   for another body). The state kept in memory between steps is re-read when another server may
 *   have moved the session on, and a commit computed from a state that changed meanwhile (a
 *   reflection edited elsewhere) is computed again from the stored session.
 * - The model call happens outside any transaction; the step record, the session update and the
 *   reflection are committed in one transaction, and the answer is returned only after the commit.
 * - Retries: the same position with the same body returns the stored answer; a different body is
 *   409 step-conflict; an attempt index at or beyond the session's maxAttempts is 400 validation
 *   naming body/attempt; any other position than the expected one is 409 step-out-of-order.
 * - Bad input throws DomainError (src/agent/errors.ts) before anything is written.
 * - A write refused by the database (locked past the busy timeout, disk full, I/O error) throws
 *   DatabaseError (src/db/errors.ts; 503 over HTTP) and records nothing: the same request sent
 *   again is recorded exactly once. The model call of a refused step is simply made again.
 * - Overload: at most `protection.maxQueuedSteps` model calls (act/reflect) wait
 *   on or run in the engine at once; a step that would exceed it is 503 overloaded with
 *   Retry-After and records nothing, so the client retries the same step. A tenant may hold at
 *   most `protection.maxOpenSessionsPerTenant` active sessions; one more is 409 too-many-sessions.
 */
import { DatabaseError } from '../db/errors.js';
import type { SessionRow } from '../db/schema.js';
import type { AsyncHot, AsyncRepositories, AsyncSessions, AsyncSteps } from '../db/async-repositories.js';
import type { SessionFilters } from '../db/sessions-repo.js';
import type { StepPosition } from '../db/steps-repo.js';
import type { PolicyEngine } from '../policy/engine.js';
import type { ModelRegistry } from './models.js';
import { ActiveSessions } from './active-sessions.js';
import { KeyedMutex } from './mutex.js';
import { DomainError, invalid, isCallerFault, notFound } from './errors.js';
import { ModelCalls } from './model-calls.js';
import { SessionStates } from './session-states.js';
import { sessionStats, statsFromGroups } from './session-stats.js';
import type { DiversityAnswer } from './diversity.js';
import { DiversityCache } from './diversity-cache.js';
import { iso, newSessionRow, sessionView, trajectoryStep } from './session-views.js';
import type {
  AgentProtection, CreateSessionInput, EndAttemptInput, Limits, MemoryView, ReflectionView, SessionView, StepAnswer, StepEvents, StepInput, StepOutcome,
  TurnAnswer, TurnInput,
} from './session-types.js';
import { SESSION_ID, stepHash } from './step-hash.js';
import { admitStep, attemptsAbandoned, planStep, stepTransition } from './step-transition.js';
import { checkTurnable } from './turns.js';

const NO_PROTECTION: AgentProtection = { maxQueuedSteps: 0, maxOpenSessionsPerTenant: 0, overloadRetryAfterSeconds: 1 };

/** The outcome of a step request that failed, or null for a caller's fault (counted where the 4xx is sent). */
function failedStepOutcome(err: unknown): StepOutcome | null {
  if (err instanceof DomainError) {
    if (err.kind === 'overloaded') return 'overloaded';
    if (err.kind === 'engine-unavailable') return 'engine_error';
    if (isCallerFault(err.kind)) return null;
    return 'rejected';
  }
  return err instanceof DatabaseError ? 'database_error' : 'rejected';
}

/** One page of a tenant's sessions, newest first. */
type SessionPage = { items: SessionView[]; nextCursor: string | null };
/** A new session's limits, model version and default sampling. */
type NewSessionSettings = Parameters<typeof newSessionRow>[2];

/** 409 `too-many-sessions`: the tenant holds `open` active sessions, the cap is `cap`. */
function tooManySessions(open: number, cap: number): DomainError {
  const what = `tenant has ${open} active sessions (limit ${cap}); finish or close one (DELETE /v1/sessions/{id}) first`;
  return new DomainError('too-many-sessions', what);
}

/** The position of a trajectory cursor `<attempt>.<step>.<a|r>`. @throws DomainError `validation`. */
function trajectoryCursor(cursor: string): StepPosition {
  const m = /^(\d{1,9})\.(\d{1,9})\.([ar])$/.exec(cursor);
  if (!m) throw invalid('querystring/cursor', 'is not a trajectory cursor (pass nextCursor of the previous page)');
  return { attempt: Number(m[1]), step: Number(m[2]), kind: m[3] === 'a' ? 'action' : 'reflection' };
}

export class SessionService {
  private readonly mutex = new KeyedMutex();
  private readonly repo: AsyncSessions;
  private readonly steps: AsyncSteps;
  private readonly hot: AsyncHot;
  /** Active sessions' rows, attempt steps and reflections, kept between steps (./active-sessions.ts). */
  private readonly active: ActiveSessions;
  /** A request's session (its stored row, or the state a step or turn works on) and its commit (./session-states.ts). */
  private readonly states: SessionStates;
  /** Prompts and engine calls of steps and turns, under the bound on queued model calls (./model-calls.ts). */
  private readonly calls: ModelCalls;
  /** Diversity answers kept between calls (./diversity-cache.ts). */
  private readonly diversityCache: DiversityCache;

  /** @param repos the repositories of the server's store (`app.repos`): sessions, steps and the step hot path. */
  constructor(
    repos: Pick<AsyncRepositories, 'sessions' | 'steps' | 'hot' | 'store'>,
    private readonly engine: PolicyEngine,
    private readonly models: ModelRegistry,
    private readonly limits: Limits,
    private readonly events: StepEvents = {},
    private readonly protection: AgentProtection = NO_PROTECTION,
  ) {
    ({ sessions: this.repo, steps: this.steps, hot: this.hot } = repos);
    this.active = new ActiveSessions(this.hot);
    this.states = new SessionStates(this.hot, this.active, repos.store === 'postgres');
    this.calls = new ModelCalls(engine, models, limits, protection);
    this.diversityCache = new DiversityCache(this.repo);
  }

  /** Model calls (act/reflect) waiting on or running in the engine now. */
  modelCallsInFlight(): number {
    return this.calls.inFlight();
  }

  /** Resolves once no step is in flight (graceful shutdown). */
  drain(): Promise<void> {
    return this.mutex.drain();
  }

  // ---------------------------------------------------------------- sessions

  /**
   * @throws DomainError `validation` for bad limits or an unknown model version; `too-many-sessions`
   *   when the tenant already holds `maxOpenSessionsPerTenant` active sessions.
   */
  async create(tenant: string, input: CreateSessionInput): Promise<SessionView> {
    let settings: NewSessionSettings;
    try {
      settings = await this.newSessionSettings(input);
    } catch (err) {
      // a tenant at its cap is refused whatever else is wrong with the request
      await this.checkOpenCap(tenant);
      throw err;
    }
    const row = newSessionRow(tenant, input, settings, Date.now());
    // The count and the insert, as one step of the store (creates of the tenant take turns there).
    const cap = this.protection.maxOpenSessionsPerTenant;
    const { inserted, open } = await this.repo.insertUnderCap(row, cap);
    if (!inserted) throw tooManySessions(open, cap);
    this.active.created(row);
    return sessionView(row, []);
  }

  /**
   * The limits, model version and sampling of a new session from `input`.
   * @throws DomainError `validation` for bad limits or an unknown model version.
   */
  private async newSessionSettings(input: CreateSessionInput): Promise<NewSessionSettings> {
    const maxAttempts = input.maxAttempts ?? 3;
    if (maxAttempts > this.limits.maxAttempts) throw invalid('body/maxAttempts', `must be <= ${this.limits.maxAttempts}`);
    const maxSteps = input.maxSteps ?? this.limits.defaultMaxSteps;
    if (maxSteps > this.limits.maxStepsCap) throw invalid('body/maxSteps', `must be <= ${this.limits.maxStepsCap}`);
    let modelVersion: string;
    if (input.modelVersion !== undefined) {
      if (!(await this.models.get(input.modelVersion))) throw invalid('body/modelVersion', `unknown model version '${input.modelVersion}'`);
      modelVersion = input.modelVersion;
    } else {
      modelVersion = this.models.active().version;
    }
    return { maxAttempts, maxSteps, modelVersion, sampling: await this.models.defaultSampling(modelVersion) };
  }

  /** @throws DomainError `too-many-sessions` when `tenant` holds `maxOpenSessionsPerTenant` active sessions. */
  private async checkOpenCap(tenant: string): Promise<void> {
    const cap = this.protection.maxOpenSessionsPerTenant;
    if (cap <= 0) return;
    const open = await this.hot.activeCount(tenant);
    if (open >= cap) throw tooManySessions(open, cap);
  }

  private async view(row: SessionRow): Promise<SessionView> {
    return sessionView(row, await this.hot.reflections(row.id));
  }

  async get(tenant: string, id: string): Promise<SessionView> {
    return this.view(await this.states.row(tenant, id));
  }

  /**
   * Newest first; `cursor` is the last id of the previous page. Throws `validation` naming
   * `querystring/cursor` when the cursor is not the id of one of the tenant's sessions (a garbage
   * or tampered cursor would otherwise read as the end of the list).
   */
  async list(tenant: string, f: SessionFilters, limit: number, cursor?: string): Promise<SessionPage> {
    if (cursor !== undefined) {
      const at = SESSION_ID.test(cursor) ? await this.hot.session(cursor) : undefined;
      if (!at || at.tenant !== tenant) throw invalid('querystring/cursor', 'is not a cursor from a previous page (nextCursor)');
    }
    const rows = await this.repo.list(tenant, f, limit, cursor);
    const page = rows.slice(0, limit);
    return {
      items: await Promise.all(page.map((r) => this.view(r))),
      nextCursor: rows.length > limit ? page[page.length - 1]!.id : null,
    };
  }

  /**
   * Abandon a session (status `abandoned`): it takes no more steps, an attempt still running ends
   * `failed` with endReason `abandoned`, and nothing recorded is removed (the session, its steps
   * and reflections stay readable and exportable). Abandoning an abandoned one again returns it
   * unchanged. @throws DomainError `session-not-active` for a completed or expired session.
   */
  close(tenant: string, id: string): Promise<SessionView> {
    return this.mutex.run(id, async () => {
      const row = await this.states.row(tenant, id);
      if (row.status === 'active') {
        const now = Date.now();
        const attempts = attemptsAbandoned(row.attempts);
        await this.repo.abandon(id, attempts, now);
        this.active.drop(id);
        row.status = 'abandoned';
        row.attempts = attempts;
        row.updatedAt = now;
        this.engine.release(id);
        this.events.onSessionEnd?.('abandoned');
      } else if (row.status !== 'abandoned') {
        throw new DomainError('session-not-active', `session '${id}' is ${row.status}`);
      }
      return this.view(row);
    });
  }

  // ---------------------------------------------------------------- memory

  async memory(tenant: string, id: string): Promise<MemoryView> {
    const row = await this.states.row(tenant, id);
    return { sessionId: id, memory: row.memory, reflections: (await this.view(row)).reflections };
  }

  /** Replace the reflection of `attempt` with a human-written text (source `human`). @throws DomainError `not-found`. */
  editReflection(tenant: string, id: string, attempt: number, text: string): Promise<ReflectionView> {
    return this.mutex.run(id, async () => {
      await this.states.row(tenant, id);
      const now = Date.now();
      const changes = await this.repo.editReflection(id, attempt, text, now);
      this.active.drop(id);
      if (changes === 0) throw notFound(`reflection of attempt ${attempt} in session '${id}'`);
      return { attempt, text, source: 'human' as const, updatedAt: iso(now) };
    });
  }

  // ---------------------------------------------------------------- steps

  /** Record one step and answer it (see the guarantees above); serialised per session. */
  step(tenant: string, id: string, input: StepInput): Promise<StepAnswer> {
    const outcome = this.events.onStepOutcome;
    const p = this.mutex.run(id, () => this.states.fresh(() => this.stepLocked(tenant, id, input)));
    if (!outcome) return p;
    return p.catch((err: unknown) => {
      // Caller faults are counted as `rejected` where the answer is sent (the step routes), so that
      // schema, size and media-type rejections that never reach the agent count too.
      const o = failedStepOutcome(err);
      if (o) outcome(o);
      throw err;
    });
  }

  /**
   * One model call outside any session (the OpenAI-compatible endpoint) under the same bound on
   * queued model calls as steps.
   * @throws DomainError `overloaded` or `engine-unavailable`, as for a step.
   */
  modelCall<T>(fn: () => Promise<T>): Promise<T> {
    return this.calls.generate(fn);
  }

  private async stepLocked(tenant: string, id: string, input: StepInput): Promise<StepAnswer> {
    const state = await this.states.stateFor(tenant, id, input);
    const { row } = state;
    const hash = stepHash(input);
    // Nothing is recorded yet at an active session's next position; any other position may hold
    // a step to replay (or to refuse as a conflict).
    const atNext = row.status === 'active' && input.attempt === row.nextAttempt && input.step === row.nextStep;
    const admitted = admitStep(row, atNext ? undefined : await this.hot.stepAtPosition(id, input.attempt, input.step), input, hash);
    if (admitted) {
      this.events.onStepOutcome?.('replayed');
      return admitted.replay;
    }
    const plan = planStep(row, input, this.limits.candidateTokens ?? 0);
    await this.models.ensureLoaded(row.modelVersion);
    const gens = await this.calls.generateStep(state, input, plan);
    const { answer, commit, status } = stepTransition(row, input, hash, plan, gens, Date.now(), this.limits.actionChars ?? Infinity);
    const result = await this.states.commitStep(state, commit);
    if (!result.recorded) {
      // Another server recorded this position first: answered as a retry of it is (its stored
      // answer for the same body, step-conflict for another).
      const replay = admitStep(row, result, input, hash)!.replay;
      this.events.onStepOutcome?.('replayed');
      return replay;
    }
    this.events.onStep?.('action', row.modelVersion);
    if (gens.refl) this.events.onStep?.('reflection', row.modelVersion);
    this.events.onStepOutcome?.('recorded');
    if (status !== 'active') {
      this.engine.release(id);
      this.events.onSessionEnd?.(status);
    }
    return answer;
  }

  // ---------------------------------------------------------------- turns

  /**
   * One turn of an agent on the session's OpenAI-compatible endpoint (src/agent/turns.ts): served
   * by the session's pinned version at the session's next position, with the session's memory on
   * attempts after the first, and recorded as a step row once the model answered. Turns of one
   * session are serialised with its steps (KeyedMutex): concurrent calls are served one after
   * another in arrival order, each at its own position.
   * @throws DomainError `not-found` (unknown session, another tenant's); `session-not-active`;
   *   `conflict` when the attempt already holds `maxSteps` turns (end it first); `validation` for
   *   tools or response_format on a builtin version, completions or guided_choice on a remote
   *   one, or a prompt too large; `overloaded`, `engine-unavailable` as for a step. Nothing is
   *   recorded then.
   */
  turn(tenant: string, id: string, t: TurnInput): Promise<TurnAnswer> {
    return this.mutex.run(id, () => this.states.fresh(() => this.turnLocked(tenant, id, t)));
  }

  private async turnLocked(tenant: string, id: string, t: TurnInput): Promise<TurnAnswer> {
    // the session's state in memory, as a step reads it; updated after the turn's commit
    const state = await this.states.stateFor(tenant, id, null);
    const { row } = state;
    checkTurnable(row);
    const { commit, answer } = await this.calls.generateTurn(state, t);
    const result = await this.states.commitStep(state, commit);
    if (!result.recorded) {
      const { attempt, step } = answer;
      const why = `another call on session '${id}' was recorded at attempt ${attempt} step ${step} first; send this one again`;
      throw new DomainError('conflict', why);
    }
    this.events.onStep?.('action', answer.modelVersion);
    return answer;
  }

  /**
   * End the running attempt of a session driven by turns: records the final observation (default
   * '') with `reward` and `success` as a step with `done: true` at the next position, so the
   * attempt ends as a step would end it (reflection by the session's version after a failure with
   * attempts left; the session completes on success or after its last attempt). Answers as a step.
   * @throws DomainError `not-found`; `session-not-active` (ended session); `conflict` for an attempt
   *   that already ended or has not started, or one without any turn yet; `validation` naming
   *   `params/attempt` for an attempt at or beyond maxAttempts. Nothing is recorded then.
   */
  endAttempt(tenant: string, id: string, e: EndAttemptInput): Promise<StepAnswer> {
    return this.mutex.run(id, async () => {
      const row = await this.states.row(tenant, id);
      if (e.attempt >= row.maxAttempts) {
        throw invalid('params/attempt', `is ${e.attempt}, beyond the session's maxAttempts of ${row.maxAttempts} (attempts are numbered 0 to ${row.maxAttempts - 1})`);
      }
      if (row.status !== 'active') throw new DomainError('session-not-active', `session '${id}' is ${row.status}`);
      if (e.attempt < row.nextAttempt) {
        const a = row.attempts[e.attempt];
        throw new DomainError('conflict', `attempt ${e.attempt} already ended (${a?.status ?? 'ended'}); the current attempt is ${row.nextAttempt}`);
      }
      if (e.attempt > row.nextAttempt) throw new DomainError('conflict', `attempt ${e.attempt} has not started; the current attempt is ${row.nextAttempt}`);
      if (row.nextStep === 0) throw new DomainError('conflict', `attempt ${e.attempt} has no turn yet: make at least one call before ending it`);
      const input: StepInput = { attempt: e.attempt, step: row.nextStep, observation: e.observation ?? '', reward: e.reward ?? 0, done: true, success: e.success ?? false };
      return this.states.fresh(() => this.stepLocked(tenant, id, input));
    });
  }

  // ---------------------------------------------------------------- trajectory

  /**
   * One page of a session's recorded steps, in order (attempt, step, then the action before the
   * reflection of the same position). A page holds at most `page.limit` rows and at most
   * `page.maxBytes` bytes of row text (src/db/steps-repo.ts StepsRepo.page), but always at least one row,
   * so no answer grows with the session. `page.cursor` is the `nextCursor` of the previous page
   * (`<attempt>.<step>.<a|r>`); `nextCursor` is null on the last.
   * @throws DomainError `not-found` for a session of another tenant or none; `validation` for a malformed cursor.
   */
  async trajectory(tenant: string, id: string, page: { limit: number; cursor?: string; maxBytes: number }) {
    await this.states.row(tenant, id);
    const after = page.cursor !== undefined ? trajectoryCursor(page.cursor) : undefined;
    const { rows, last } = await this.steps.page(id, after, page.limit, page.maxBytes);
    const nextCursor = last ? `${last.attempt}.${last.step}.${last.kind === 'action' ? 'a' : 'r'}` : null;
    return { sessionId: id, nextCursor, steps: rows.map(trajectoryStep) };
  }

  // ---------------------------------------------------------------- stats

  /**
   * Mark active sessions whose last change is older than `ttlMs` as `expired` (all tenants) and
   * release their engine state; an attempt still running ends `failed` with endReason
   * `abandoned`, as when the session is closed. Returns the ids expired. Serialised with steps per
   * session, so a step in flight is never expired under it.
   */
  async expireIdle(ttlMs: number, now = Date.now()): Promise<string[]> {
    const cutoff = now - ttlMs;
    const expired: string[] = [];
    for (const id of await this.repo.idleIds(cutoff)) {
      await this.mutex.run(id, async () => {
        const row = await this.hot.session(id);
        if (!row) return;
        const wasExpired = await this.repo.expire(id, attemptsAbandoned(row.attempts), cutoff, now);
        this.active.drop(id);
        if (wasExpired) {
          expired.push(id);
          this.engine.release(id);
          this.events.onSessionEnd?.('expired');
        }
      });
    }
    return expired;
  }

  /** Number of active sessions of `tenant`, or of all tenants (for /metrics). */
  activeCount(tenant?: string): Promise<number> {
    return this.repo.activeCount(tenant);
  }

  /**
   * Statistics over the tenant's completed sessions (docs/method.md#metrics): pass@1..k, success rate
   * and mean return by attempt, overall and per (modelVersion, env, mode, memory) group, with
   * single-attempt sessions read as chains of up to `retries` independent retries (session-stats.ts).
   * Answered from the groups' aggregates kept on write (one row per group, whatever the number of
   * sessions); with a `taskId` filter, from that task's sessions.
   */
  async stats(tenant: string, f: Omit<SessionFilters, 'status'>, retries = 3) {
    if (f.taskId) return sessionStats(await this.repo.completed(tenant, f), retries);
    return statsFromGroups(await this.repo.statsGroups(tenant), f, retries);
  }

  /**
   * Trajectory diversity per (modelVersion, env, memory) over the tenant's newest `maxSessions` completed
   * sessions matching `f` (diversity.ts). Reading the actions is the costly part (about 250 ms for
   * 2,000 sessions on the shared 2-core VM under load), so answers are kept and brought up to date
   * with the sessions completed since (diversity-cache.ts): a polling dashboard reads one row while
   * nothing completes, and only the new sessions' actions when some did.
   */
  diversity(tenant: string, f: Omit<SessionFilters, 'status'>, maxSessions: number): Promise<DiversityAnswer> {
    return this.diversityCache.answer(tenant, f, maxSessions);
  }
}
