/**
 * The LaMer session state machine (DESIGN §2; shared/LAMER.md §1) over the database and the policy
 * engine.
 *
 * A session is up to `maxAttempts` attempts at one task. Each attempt is a sequence of steps
 * 0, 1, ...: the environment posts an observation (and the reward of the previous action) and gets
 * an action. An attempt ends on a step with `done: true` (failed unless `success: true`) or at step
 * index `maxSteps` (endReason `max_steps`, failed). After a failed attempt with attempts left, the
 * policy writes a reflection (the session's memory). The session completes on success or when
 * attempts run out.
 *
 * Guarantees:
 * - Steps of one session are serialised (KeyedMutex): never two records for one position.
 * - The model call happens outside any transaction; the step record, the session update and the
 *   reflection are committed in one transaction, and the answer is returned only after the commit.
 * - Retries: the same position with the same body returns the stored answer; a different body is
 *   409 step-conflict; any other position than the expected one is 409 step-out-of-order.
 * - Bad input throws ApiProblem before anything is written.
 * - A write refused by the database (locked past the busy timeout, disk full, I/O error) throws
 *   DatabaseError (src/db/errors.ts; 503 over HTTP) and records nothing: the same request sent
 *   again is recorded exactly once. The model call of a refused step is simply made again.
 * - Overload: at most `protection.maxQueuedSteps` model calls (act/reflect) wait
 *   on or run in the engine at once; a step that would exceed it is 503 overloaded with
 *   Retry-After and records nothing, so the client retries the same step. A tenant may hold at
 *   most `protection.maxOpenSessionsPerTenant` active sessions; one more is 409 too-many-sessions.
 */
import { createHash, randomBytes } from 'node:crypto';
import { and, asc, desc, eq, lt, sql, type SQL, type SQLWrapper } from 'drizzle-orm';
import type { Db } from '../db/index.js';
import type { HotQueries, StepInsert } from '../db/queries.js';
import { DatabaseError } from '../db/errors.js';
import { reflections, sessions, steps, type AttemptSummary, type SessionRow } from '../db/schema.js';
import { callSeed, type CallKind } from '../model/sampling.js';
import { EngineError, EngineLimitError, type Generation, type PolicyEngine, type PromptParts, type SamplingParams } from '../policy/engine.js';
import { extractAction } from './actions.js';
import { invalidChoiceAction } from '../policy/openai-engine.js';
import type { ModelRegistry } from './models.js';
import { KeyedMutex } from './mutex.js';
import { passAtK, passAtKRate } from './passk.js';
import { ApiProblem } from './problems.js';
import { invalid, notFound, overloaded } from './errors.js';
import { renderActPrompt, renderReflectionPrompt, type MemoryMode, type PromptAttempt, type PromptStep } from './prompt.js';

export interface CreateSessionInput {
  taskId: string;
  instructions: string;
  maxAttempts?: number;
  maxSteps?: number;
  memory?: MemoryMode;
  mode?: 'train' | 'eval';
  sampling?: Partial<SamplingParams>;
  modelVersion?: string;
  env?: string;
  metadata?: Record<string, unknown>;
}

export interface StepInput {
  attempt: number;
  step: number;
  observation: string;
  reward?: number;
  done?: boolean;
  success?: boolean;
  availableActions?: string[];
  invalidAction?: boolean;
  info?: Record<string, unknown>;
}

export interface Position {
  attempt: number;
  step: number;
}

export interface ReflectionView {
  attempt: number;
  text: string;
  source: 'policy' | 'human';
  updatedAt: string;
}

export interface SessionView {
  id: string;
  taskId: string;
  env: string | null;
  mode: 'train' | 'eval';
  status: SessionRow['status'];
  maxAttempts: number;
  maxSteps: number;
  memory: MemoryMode;
  sampling: SamplingParams;
  modelVersion: string;
  metadata: Record<string, unknown>;
  createdAt: string;
  updatedAt: string;
  next: Position | null;
  attempts: AttemptSummary[];
  passAtK: Record<string, boolean>;
  reflections: ReflectionView[];
}

export interface AttemptResult {
  attempt: number;
  success: boolean;
  return: number;
  steps: number;
  endReason: 'done' | 'max_steps';
}

export interface StepAnswer {
  sessionId: string;
  attempt: number;
  step: number;
  action: string | null;
  output: string | null;
  modelVersion: string;
  attemptResult: AttemptResult | null;
  reflection: { attempt: number; text: string } | null;
  session: { status: SessionRow['status']; next: Position | null };
}

export interface SessionFilters {
  status?: SessionRow['status'];
  taskId?: string;
  env?: string;
  mode?: 'train' | 'eval';
  modelVersion?: string;
}

export interface Limits {
  maxAttempts: number;
  maxStepsCap: number;
  defaultMaxSteps: number;
  reflectionChars: number;
  /** Most candidate tokens of one step: each available action's UTF-8 bytes + 1, summed (absent or 0: no bound). */
  candidateTokens?: number;
  /** Most tokens (UTF-8 bytes) of a rendered prompt, before it is fitted to the model's context (absent or 0: no bound). */
  promptTokens?: number;
}

/**
 * How one step request ended: `recorded` (committed), `replayed` (an identical retry answered
 * from the stored answer), `overloaded` (503, queue bound), `engine_error` (503 engine-unavailable),
 * `database_error` (the commit failed: database locked, storage full or failing; 503, nothing
 * recorded), `rejected` (any other problem: 4xx).
 */
export type StepOutcome = 'recorded' | 'replayed' | 'overloaded' | 'engine_error' | 'database_error' | 'rejected';

export interface StepEvents {
  /** Called after each committed step record; kind 'action' or 'reflection'. */
  onStep?(kind: 'action' | 'reflection', modelVersion: string): void;
  onSessionEnd?(status: SessionRow['status']): void;
  /** Called once per step request when it ends; not for 4xx problems (counted by the step routes). */
  onStepOutcome?(outcome: StepOutcome): void;
}

/** Overload protection of the agent (src/config.ts ProtectionConfig); 0 disables a bound. */
export interface AgentProtection {
  maxQueuedSteps: number;
  maxOpenSessionsPerTenant: number;
  /** Retry-After seconds of 503 overloaded. */
  overloadRetryAfterSeconds: number;
}

const NO_PROTECTION: AgentProtection = { maxQueuedSteps: 0, maxOpenSessionsPerTenant: 0, overloadRetryAfterSeconds: 1 };

/** JSON with object keys sorted, so equal values give equal text. */
export function canonicalJson(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v) ?? 'null';
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o)
    .filter((k) => o[k] !== undefined)
    .sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`).join(',')}}`;
}

/** sha256 (hex) of the step body with defaults filled in: equal retries hash equal. */
export function stepHash(b: StepInput): string {
  const norm = {
    attempt: b.attempt,
    step: b.step,
    observation: b.observation,
    reward: b.reward ?? 0,
    done: b.done ?? false,
    success: b.success ?? false,
    availableActions: b.availableActions ?? null,
    invalidAction: b.invalidAction ?? false,
    info: b.info ?? null,
  };
  return createHash('sha256').update(canonicalJson(norm)).digest('hex');
}

/** Shape of a session id (see newSessionId). */
export const SESSION_ID = /^ses_[0-9a-z]{9}[0-9a-f]{12}$/;

/** Time-ordered session id: `ses_` + 9 base-36 digits of ms + 12 hex random. */
export function newSessionId(now = Date.now()): string {
  return `ses_${now.toString(36).padStart(9, '0')}${randomBytes(6).toString('hex')}`;
}

const iso = (ms: number): string => new Date(ms).toISOString();

/** Candidate tokens of `actions` for the builtin byte-level model: each one's UTF-8 bytes + EOS. */
export function candidateTokenCount(actions: readonly string[]): number {
  let n = 0;
  for (const a of actions) n += Buffer.byteLength(a, 'utf8') + 1;
  return n;
}

/** Tokens (UTF-8 bytes) of a rendered prompt before fitting: head + every step + tail. */
export function promptTokenCount(p: PromptParts): number {
  let n = Buffer.byteLength(p.head, 'utf8') + Buffer.byteLength(p.tail, 'utf8');
  for (const s of p.steps) n += Buffer.byteLength(s, 'utf8');
  return n;
}

/** The first `max` characters (code points, as JSON Schema's maxLength counts) of `text`. */
function cutChars(text: string, max: number): string {
  if (text.length <= max) return text;
  let out = '';
  let n = 0;
  for (const ch of text) {
    if (n++ === max) break;
    out += ch;
  }
  return out;
}

/** A generation's token array as stored: null when a remote engine did not return it (record.available). */
function recorded(g: Generation, k: 'promptTokenIds' | 'outputTokenIds' | 'logprobs'): number[] | null {
  return g.record && !g.record.available[k] ? null : g[k];
}

/** The prompt text the engine used: the earliest `droppedSteps` steps removed (contract of PromptParts). */
function promptAsSeen(p: PromptParts, droppedSteps: number): string {
  return p.head + p.steps.slice(Math.max(0, droppedSteps)).join('') + p.tail;
}

export class SessionService {
  private readonly mutex = new KeyedMutex();
  private modelCalls = 0;

  constructor(
    private readonly db: Db,
    private readonly hot: HotQueries,
    private readonly engine: PolicyEngine,
    private readonly models: ModelRegistry,
    private readonly limits: Limits,
    private readonly events: StepEvents = {},
    private readonly protection: AgentProtection = NO_PROTECTION,
  ) {}

  /** Model calls (act/reflect) waiting on or running in the engine now. */
  modelCallsInFlight(): number {
    return this.modelCalls;
  }

  /** Resolves once no step is in flight (graceful shutdown). */
  drain(): Promise<void> {
    return this.mutex.drain();
  }

  // ---------------------------------------------------------------- sessions

  /**
   * @throws ApiProblem 400 for bad limits or an unknown model version; 409 too-many-sessions when
   *   the tenant already holds `maxOpenSessionsPerTenant` active sessions.
   */
  create(tenant: string, input: CreateSessionInput): SessionView {
    const cap = this.protection.maxOpenSessionsPerTenant;
    if (cap > 0) {
      // Synchronous count and insert: no other create of this process runs in between.
      const open = this.activeCount(tenant);
      if (open >= cap) {
        throw new ApiProblem(
          409,
          'too-many-sessions',
          'Too Many Sessions',
          `tenant has ${open} active sessions (limit ${cap}); finish or close one (DELETE /v1/sessions/{id}) first`,
        );
      }
    }
    const maxAttempts = input.maxAttempts ?? 3;
    if (maxAttempts > this.limits.maxAttempts) throw invalid('body/maxAttempts', `must be <= ${this.limits.maxAttempts}`);
    const maxSteps = input.maxSteps ?? this.limits.defaultMaxSteps;
    if (maxSteps > this.limits.maxStepsCap) throw invalid('body/maxSteps', `must be <= ${this.limits.maxStepsCap}`);
    let modelVersion: string;
    if (input.modelVersion !== undefined) {
      if (!this.models.get(input.modelVersion)) throw invalid('body/modelVersion', `unknown model version '${input.modelVersion}'`);
      modelVersion = input.modelVersion;
    } else {
      modelVersion = this.models.active().version;
    }
    const sampling: SamplingParams = {
      temperature: input.sampling?.temperature ?? 1,
      topP: input.sampling?.topP ?? 1,
      topK: input.sampling?.topK ?? 0,
    };
    if (input.sampling?.seed !== undefined) sampling.seed = input.sampling.seed;
    const now = Date.now();
    const row: SessionRow = {
      id: newSessionId(now),
      tenant,
      taskId: input.taskId,
      env: input.env ?? null,
      mode: input.mode ?? 'train',
      status: 'active',
      instructions: input.instructions,
      maxAttempts,
      maxSteps,
      memory: input.memory ?? 'reflection_only',
      sampling,
      modelVersion,
      metadata: input.metadata ?? {},
      nextAttempt: 0,
      nextStep: 0,
      attempts: [],
      createdAt: now,
      updatedAt: now,
    };
    this.hot.write(() => this.db.insert(sessions).values(row).run());
    return this.view(row, []);
  }

  private row(tenant: string, id: string): SessionRow {
    const row = this.hot.session(id);
    // Another tenant's session is indistinguishable from a missing one.
    if (!row || row.tenant !== tenant) throw notFound(`session '${id}'`);
    return row;
  }

  private reflectionRows(id: string) {
    return this.hot.reflections(id);
  }

  private view(row: SessionRow, refl: ReturnType<SessionService['reflectionRows']>): SessionView {
    return {
      id: row.id,
      taskId: row.taskId,
      env: row.env,
      mode: row.mode,
      status: row.status,
      maxAttempts: row.maxAttempts,
      maxSteps: row.maxSteps,
      memory: row.memory,
      sampling: row.sampling as SamplingParams,
      modelVersion: row.modelVersion,
      metadata: row.metadata as Record<string, unknown>,
      createdAt: iso(row.createdAt),
      updatedAt: iso(row.updatedAt),
      next: row.status === 'active' ? { attempt: row.nextAttempt, step: row.nextStep } : null,
      attempts: row.attempts,
      passAtK: passAtK(row.attempts, row.maxAttempts),
      reflections: refl.map((r) => ({ attempt: r.attempt, text: r.text, source: r.source, updatedAt: iso(r.updatedAt) })),
    };
  }

  get(tenant: string, id: string): SessionView {
    const row = this.row(tenant, id);
    return this.view(row, this.reflectionRows(id));
  }

  /**
   * Newest first; `cursor` is the last id of the previous page. Throws 400 `validation` naming
   * `querystring/cursor` when the cursor is not the id of one of the tenant's sessions (a garbage
   * or tampered cursor would otherwise read as the end of the list).
   */
  list(tenant: string, f: SessionFilters, limit: number, cursor?: string): { items: SessionView[]; nextCursor: string | null } {
    if (cursor !== undefined) {
      const at = SESSION_ID.test(cursor) ? this.hot.session(cursor) : undefined;
      if (!at || at.tenant !== tenant) throw invalid('querystring/cursor', 'is not a cursor from a previous page (nextCursor)');
    }
    const conds: SQL[] = [eq(sessions.tenant, tenant)];
    if (f.status) conds.push(eq(sessions.status, f.status));
    if (f.taskId) conds.push(eq(sessions.taskId, f.taskId));
    if (f.env) conds.push(eq(sessions.env, f.env));
    if (f.mode) conds.push(eq(sessions.mode, f.mode));
    if (f.modelVersion) conds.push(eq(sessions.modelVersion, f.modelVersion));
    if (cursor) conds.push(lt(sessions.id, cursor));
    const rows = this.db
      .select()
      .from(sessions)
      .where(and(...conds))
      .orderBy(desc(sessions.id))
      .limit(limit + 1)
      .all();
    const page = rows.slice(0, limit);
    return {
      items: page.map((r) => this.view(r, this.reflectionRows(r.id))),
      nextCursor: rows.length > limit ? page[page.length - 1]!.id : null,
    };
  }

  /** Close a session (status `abandoned`); closing an abandoned one again returns it unchanged. */
  close(tenant: string, id: string): Promise<SessionView> {
    return this.mutex.run(id, async () => {
      const row = this.row(tenant, id);
      if (row.status === 'active') {
        const now = Date.now();
        this.hot.write(() => this.db.update(sessions).set({ status: 'abandoned', updatedAt: now }).where(eq(sessions.id, id)).run());
        row.status = 'abandoned';
        row.updatedAt = now;
        this.engine.release(id);
        this.events.onSessionEnd?.('abandoned');
      } else if (row.status !== 'abandoned') {
        throw new ApiProblem(409, 'session-not-active', 'Session Not Active', `session '${id}' is ${row.status}`);
      }
      return this.view(row, this.reflectionRows(id));
    });
  }

  // ---------------------------------------------------------------- memory

  memory(tenant: string, id: string): { sessionId: string; memory: MemoryMode; reflections: ReflectionView[] } {
    const row = this.row(tenant, id);
    return { sessionId: id, memory: row.memory, reflections: this.view(row, this.reflectionRows(id)).reflections };
  }

  /** Replace the reflection of `attempt` with a human-written text (source `human`). */
  editReflection(tenant: string, id: string, attempt: number, text: string): Promise<ReflectionView> {
    return this.mutex.run(id, async () => {
      this.row(tenant, id);
      const now = Date.now();
      const res = this.hot.write(() =>
        this.db
          .update(reflections)
          .set({ text, source: 'human', updatedAt: now })
          .where(and(eq(reflections.sessionId, id), eq(reflections.attempt, attempt)))
          .run(),
      );
      if (res.changes === 0) throw notFound(`reflection of attempt ${attempt} in session '${id}'`);
      return { attempt, text, source: 'human' as const, updatedAt: iso(now) };
    });
  }

  // ---------------------------------------------------------------- steps

  step(tenant: string, id: string, input: StepInput): Promise<StepAnswer> {
    const outcome = this.events.onStepOutcome;
    const p = this.mutex.run(id, () => this.stepLocked(tenant, id, input));
    if (!outcome) return p;
    return p.then(
      (a) => a,
      (err: unknown) => {
        const kind = err instanceof ApiProblem ? err.kind : 'internal';
        // 4xx answers are counted as `rejected` where the answer is sent (the step routes), so that
        // schema, size and media-type rejections that never reach the agent count too.
        if (!(err instanceof ApiProblem && err.status >= 400 && err.status < 500)) {
          outcome(
            kind === 'overloaded'
              ? 'overloaded'
              : kind === 'engine-unavailable'
                ? 'engine_error'
                : err instanceof DatabaseError
                  ? 'database_error'
                  : 'rejected',
          );
        }
        throw err;
      },
    );
  }

  private promptSteps(id: string, attempt: number): PromptStep[] {
    return this.hot.stepsOfAttempt(id, attempt).filter((s): s is PromptStep => s.action !== null);
  }

  private previousAttempts(row: SessionRow, attempt: number): PromptAttempt[] {
    const refl = new Map(this.reflectionRows(row.id).map((r) => [r.attempt, r.text]));
    const withHistory = row.memory !== 'reflection_only';
    const out: PromptAttempt[] = [];
    for (let a = 0; a < attempt; a++) {
      const summary = row.attempts[a];
      // Only the most recent attempt's steps are shown (history modes); skip the reads otherwise.
      let stepsOf: PromptStep[] = [];
      let finalObservation = '';
      if (withHistory && a === attempt - 1) {
        const rows = this.hot.stepsOfAttempt(row.id, a);
        stepsOf = rows.filter((s): s is PromptStep => s.action !== null);
        finalObservation = rows.length > 0 ? rows[rows.length - 1]!.observation : '';
      }
      out.push({ steps: stepsOf, finalObservation, success: summary?.success ?? false, reflection: refl.get(a) ?? null });
    }
    return out;
  }

  /**
   * Refuses a prompt larger than `limits.promptTokens` (400 validation) before it is encoded.
   * @throws ApiProblem 400.
   */
  private checkPrompt(prompt: PromptParts): void {
    const cap = this.limits.promptTokens ?? 0;
    if (cap <= 0) return;
    const n = promptTokenCount(prompt);
    if (n > cap) {
      throw invalid('body', `makes a prompt of ${n} tokens (UTF-8 bytes of the instructions, observations, actions and reflections it shows); at most ${cap} (LAMER_MAX_PROMPT_TOKENS)`);
    }
  }

  /**
   * One model call under the queue bound.
   * @throws ApiProblem 503 overloaded (bound reached; the call is not made) or engine-unavailable.
   */
  private async generate<T>(fn: () => Promise<T>): Promise<T> {
    const bound = this.protection.maxQueuedSteps;
    if (bound > 0 && this.modelCalls >= bound) {
      throw overloaded(`${this.modelCalls} model calls are queued (limit ${bound}); retry this step later`, this.protection.overloadRetryAfterSeconds);
    }
    this.modelCalls++;
    try {
      return await fn();
    } catch (err) {
      if (err instanceof ApiProblem) throw err;
      // a request too large for the model: the caller's fault, and nothing was computed
      if (err instanceof EngineLimitError) throw invalid(err.field, err.message);
      const msg = err instanceof Error ? err.message : String(err);
      if (err instanceof EngineError) throw new ApiProblem(503, 'engine-unavailable', 'Engine Unavailable', msg);
      throw new ApiProblem(503, 'engine-unavailable', 'Engine Unavailable', `engine failed: ${msg}`);
    } finally {
      this.modelCalls--;
    }
  }

  /**
   * One model call outside any session (the OpenAI-compatible endpoint) under the same bound on
   * queued model calls as steps.
   * @throws ApiProblem 503 overloaded or engine-unavailable, as for a step.
   */
  modelCall<T>(fn: () => Promise<T>): Promise<T> {
    return this.generate(fn);
  }

  private async stepLocked(tenant: string, id: string, input: StepInput): Promise<StepAnswer> {
    const row = this.row(tenant, id);
    const hash = stepHash(input);
    const existing = this.hot.stepAtPosition(id, input.attempt, input.step);
    if (existing) {
      if (existing.requestHash === hash) {
        this.events.onStepOutcome?.('replayed');
        return JSON.parse(existing.answer ?? 'null') as StepAnswer;
      }
      throw new ApiProblem(
        409,
        'step-conflict',
        'Step Conflict',
        `attempt ${input.attempt} step ${input.step} was already recorded with a different body`,
      );
    }
    if (row.status !== 'active') {
      throw new ApiProblem(409, 'session-not-active', 'Session Not Active', `session '${id}' is ${row.status}`);
    }
    if (input.attempt !== row.nextAttempt || input.step !== row.nextStep) {
      const expected = { attempt: row.nextAttempt, step: row.nextStep };
      throw new ApiProblem(
        409,
        'step-out-of-order',
        'Step Out Of Order',
        `expected attempt ${expected.attempt} step ${expected.step}, got attempt ${input.attempt} step ${input.step}`,
        { expected },
      );
    }
    if (input.success === true && input.done !== true) throw invalid('body/success', 'may be true only with done: true');
    if (input.step === 0 && input.done === true) throw invalid('body/done', 'must be false at step 0 (no action was taken yet)');

    const reward = input.reward ?? 0;
    const done = input.done ?? false;
    const success = done && (input.success ?? false);
    const ends = done || input.step >= row.maxSteps;
    const modelVersion = row.modelVersion;
    const attempts = row.attempts.map((a) => ({ ...a }));
    if (input.step === 0) attempts.push({ attempt: input.attempt, status: 'running', steps: 0, return: 0, success: false, endReason: null });
    const cur = attempts[input.attempt]!;
    cur.steps = input.step + 1;
    cur.return += reward;

    // the model work of one step is bounded before any of it is done (README "Configuration")
    const candidateCap = this.limits.candidateTokens ?? 0;
    if (candidateCap > 0 && input.availableActions && !ends) {
      const n = candidateTokenCount(input.availableActions);
      if (n > candidateCap) {
        throw invalid('body/availableActions', `total ${n} tokens (UTF-8 bytes + 1 per action); at most ${candidateCap} per step (LAMER_MAX_CANDIDATE_TOKENS)`);
      }
    }
    await this.models.ensureLoaded(modelVersion);
    const stepsSoFar = this.promptSteps(id, input.attempt);
    const sessionSampling = row.sampling as SamplingParams;
    // a seeded session reproduces itself, and each call (attempt, step, act/reflect) has its own stream
    const sampling = (kind: CallKind): SamplingParams =>
      sessionSampling.seed === undefined ? sessionSampling : { ...sessionSampling, seed: callSeed(sessionSampling.seed, input.attempt, input.step, kind) };

    let act: Generation | null = null;
    let actPromptText: string | null = null;
    let refl: Generation | null = null;
    let reflPromptText: string | null = null;
    let reflectionText: string | null = null;
    let attemptResult: AttemptResult | null = null;
    let status: SessionRow['status'] = 'active';
    let next: Position | null = { attempt: input.attempt, step: input.step + 1 };

    if (!ends) {
      const prompt = renderActPrompt({
        instructions: row.instructions,
        memory: row.memory,
        attempt: input.attempt,
        previousAttempts: input.attempt > 0 ? this.previousAttempts(row, input.attempt) : [],
        steps: stepsSoFar,
        observation: input.observation,
      });
      this.checkPrompt(prompt);
      const req = { sessionId: id, modelVersion, prompt, sampling: sampling('act'), instructions: row.instructions, ...(input.availableActions ? { availableActions: input.availableActions } : {}) };
      act = await this.generate(() => this.engine.act(req));
      actPromptText = act.promptText ?? promptAsSeen(prompt, act.droppedSteps);
    } else {
      cur.success = success;
      cur.status = success ? 'succeeded' : 'failed';
      cur.endReason = done ? 'done' : 'max_steps';
      attemptResult = { attempt: input.attempt, success, return: cur.return, steps: cur.steps, endReason: cur.endReason };
      const attemptsLeft = input.attempt + 1 < row.maxAttempts;
      if (!success && attemptsLeft) {
        const prompt = renderReflectionPrompt({
          instructions: row.instructions,
          attempt: input.attempt,
          steps: stepsSoFar,
          finalObservation: input.observation,
        });
        this.checkPrompt(prompt);
        refl = await this.generate(() => this.engine.reflect({ sessionId: id, modelVersion, prompt, sampling: sampling('reflect'), instructions: row.instructions }));
        reflPromptText = refl.promptText ?? promptAsSeen(prompt, refl.droppedSteps);
        // the model's reflection is cut to the limit (a human edit over it is refused instead)
        reflectionText = cutChars(refl.output.trim(), this.limits.reflectionChars);
        next = { attempt: input.attempt + 1, step: 0 };
      } else {
        status = 'completed';
        next = null;
      }
    }

    // With availableActions the output is the chosen one; a remote answer that matched none (record.invalidChoice) is executed as parsed.
    const action = act ? (act.record?.invalidChoice ? invalidChoiceAction(act.output) : input.availableActions ? act.output : extractAction(act.output)) : null;
    const answer: StepAnswer = {
      sessionId: id,
      attempt: input.attempt,
      step: input.step,
      action,
      output: act ? act.output : null,
      modelVersion,
      attemptResult,
      reflection: reflectionText !== null ? { attempt: input.attempt, text: reflectionText } : null,
      session: { status, next },
    };

    const now = Date.now();
    const records: StepInsert[] = [
      {
        sessionId: id,
        attempt: input.attempt,
        step: input.step,
        kind: 'action',
        observation: input.observation,
        reward,
        done,
        success,
        invalidAction: input.invalidAction ?? false,
        availableActions: input.availableActions ?? null,
        info: input.info ?? null,
        prompt: actPromptText,
        output: act?.output ?? null,
        action,
        promptTokenIds: act ? recorded(act, 'promptTokenIds') : null,
        outputTokenIds: act ? recorded(act, 'outputTokenIds') : null,
        logprobs: act ? recorded(act, 'logprobs') : null,
        droppedSteps: act?.droppedSteps ?? null,
        engineRecord: act?.record ?? null,
        promptTruncatedChars: act ? (act.promptTruncatedChars ?? 0) : null,
        modelVersion: act?.modelVersion ?? modelVersion,
        requestHash: hash,
        answer: JSON.stringify(answer),
        createdAt: now,
      },
    ];
    if (refl && reflectionText !== null) {
      records.push({
        sessionId: id,
        attempt: input.attempt,
        step: input.step,
        kind: 'reflection',
        observation: input.observation,
        reward: 0,
        done: true,
        success: false,
        invalidAction: false,
        availableActions: null,
        info: null,
        prompt: reflPromptText,
        output: refl.output,
        action: null,
        promptTokenIds: recorded(refl, 'promptTokenIds'),
        outputTokenIds: recorded(refl, 'outputTokenIds'),
        logprobs: recorded(refl, 'logprobs'),
        droppedSteps: refl.droppedSteps,
        engineRecord: refl.record ?? null,
        promptTruncatedChars: refl.promptTruncatedChars ?? 0,
        modelVersion: refl.modelVersion,
        requestHash: hash,
        answer: null,
        createdAt: now,
      });
    }
    await this.hot.commitStep({
      rows: records,
      reflection: refl && reflectionText !== null ? { sessionId: id, attempt: input.attempt, text: reflectionText, updatedAt: now } : null,
      session: {
        id,
        status,
        attempts,
        nextAttempt: next ? next.attempt : row.nextAttempt,
        nextStep: next ? next.step : row.nextStep,
        updatedAt: now,
      },
    });
    this.events.onStep?.('action', modelVersion);
    if (refl) this.events.onStep?.('reflection', modelVersion);
    this.events.onStepOutcome?.('recorded');
    if (status !== 'active') {
      this.engine.release(id);
      this.events.onSessionEnd?.(status);
    }
    return answer;
  }

  // ---------------------------------------------------------------- trajectory

  /**
   * One page of a session's recorded steps, in order (attempt, step, then the action before the
   * reflection of the same position; 'action' < 'reflection' also sorts them so, on the
   * `steps_position` index). A page holds at most `page.limit` rows and at most `page.maxBytes`
   * bytes of row text (estimated from the stored column sizes before the rows are read), but
   * always at least one row, so no answer grows with the session. `page.cursor` is the
   * `nextCursor` of the previous page (`<attempt>.<step>.<a|r>`); `nextCursor` is null on the last.
   * @throws ApiProblem 404 for a session of another tenant or none; 400 for a malformed cursor.
   */
  trajectory(tenant: string, id: string, page: { limit: number; cursor?: string; maxBytes: number }) {
    this.row(tenant, id);
    const position = sql`(${steps.attempt}, ${steps.step}, ${steps.kind})`;
    let after: SQL | undefined;
    if (page.cursor !== undefined) {
      const m = /^(\d{1,9})\.(\d{1,9})\.([ar])$/.exec(page.cursor);
      if (!m) throw invalid('querystring/cursor', 'is not a trajectory cursor (pass nextCursor of the previous page)');
      after = sql`${position} > (${Number(m[1])}, ${Number(m[2])}, ${m[3] === 'a' ? 'action' : 'reflection'})`;
    }
    // Bytes of each column as it will be sent: text columns as JSON string literals (json_quote
    // escapes quotes, backslashes and control characters as JSON does), JSON columns as stored
    // (their stored text is their JSON), plus ~600 bytes of keys, numbers and dates per row.
    const text = (c: SQLWrapper) => sql`coalesce(length(CAST(json_quote(${c}) AS BLOB)), 4)`;
    const json = (c: SQLWrapper) => sql`coalesce(length(CAST(${c} AS BLOB)), 4)`;
    const size = sql<number>`600 + ${text(steps.observation)} + ${json(steps.availableActions)} + ${json(steps.info)} + ${text(steps.prompt)} + ${text(steps.output)} + ${text(steps.action)} + ${json(steps.promptTokenIds)} + ${json(steps.outputTokenIds)} + ${json(steps.logprobs)} + ${json(steps.engineRecord)} + ${text(steps.modelVersion)}`;
    const where = after ? and(eq(steps.sessionId, id), after) : eq(steps.sessionId, id);
    const order = [asc(steps.attempt), asc(steps.step), asc(steps.kind)] as const;
    const sized = this.db
      .select({ attempt: steps.attempt, step: steps.step, kind: steps.kind, size })
      .from(steps)
      .where(where)
      .orderBy(...order)
      .limit(page.limit + 1)
      .all();
    let n = 0;
    let total = 0;
    while (n < sized.length && n < page.limit && (n === 0 || total + sized[n]!.size <= page.maxBytes)) total += sized[n++]!.size;
    const cursorOf = (r: { attempt: number; step: number; kind: string }) => `${r.attempt}.${r.step}.${r.kind === 'action' ? 'a' : 'r'}`;
    const last = sized[n - 1];
    const nextCursor = n < sized.length && last ? cursorOf(last) : null;
    const rows =
      n === 0 || !last
        ? []
        : this.db
            .select()
            .from(steps)
            .where(and(where, sql`${position} <= (${last.attempt}, ${last.step}, ${last.kind})`))
            .orderBy(...order)
            .all();
    return {
      sessionId: id,
      nextCursor,
      steps: rows.map((r) => ({
        attempt: r.attempt,
        step: r.step,
        kind: r.kind,
        observation: r.observation,
        reward: r.reward,
        done: r.done,
        success: r.success,
        invalidAction: r.invalidAction,
        availableActions: r.availableActions ?? null,
        info: r.info ?? null,
        prompt: r.prompt,
        output: r.output,
        action: r.action,
        promptTokenIds: r.promptTokenIds ?? null,
        outputTokenIds: r.outputTokenIds ?? null,
        logprobs: r.logprobs ?? null,
        droppedSteps: r.droppedSteps,
        promptTruncatedChars: r.promptTruncatedChars ?? null,
        modelVersion: r.modelVersion,
        return: r.return,
        advantage: r.advantage,
        createdAt: iso(r.createdAt),
      })),
    };
  }

  // ---------------------------------------------------------------- stats

  /**
   * Mark active sessions whose last change is older than `ttlMs` as `expired` (all tenants) and
   * release their engine state. Returns the ids expired. Serialised with steps per session, so a
   * step in flight is never expired under it.
   */
  async expireIdle(ttlMs: number, now = Date.now()): Promise<string[]> {
    const cutoff = now - ttlMs;
    const ids = this.db
      .select({ id: sessions.id })
      .from(sessions)
      .where(and(eq(sessions.status, 'active'), lt(sessions.updatedAt, cutoff)))
      .all()
      .map((r) => r.id);
    const expired: string[] = [];
    for (const id of ids) {
      await this.mutex.run(id, async () => {
        const res = this.hot.write(() =>
          this.db
            .update(sessions)
            .set({ status: 'expired', updatedAt: now })
            .where(and(eq(sessions.id, id), eq(sessions.status, 'active'), lt(sessions.updatedAt, cutoff)))
            .run(),
        );
        if (res.changes === 1) {
          expired.push(id);
          this.engine.release(id);
          this.events.onSessionEnd?.('expired');
        }
      });
    }
    return expired;
  }

  /** Number of active sessions of `tenant`, or of all tenants (for /metrics). */
  activeCount(tenant?: string): number {
    const where = tenant === undefined ? eq(sessions.status, 'active') : and(eq(sessions.tenant, tenant), eq(sessions.status, 'active'));
    const r = this.db.select({ n: sql<number>`count(*)` }).from(sessions).where(where).get();
    return r?.n ?? 0;
  }

  /**
   * Statistics over the tenant's completed sessions (shared/LAMER.md §4): pass@1..k, success rate
   * and mean return by attempt, overall and per (modelVersion, env, mode) group.
   */
  stats(tenant: string, f: Omit<SessionFilters, 'status'>) {
    const conds: SQL[] = [eq(sessions.tenant, tenant), eq(sessions.status, 'completed')];
    if (f.taskId) conds.push(eq(sessions.taskId, f.taskId));
    if (f.env) conds.push(eq(sessions.env, f.env));
    if (f.mode) conds.push(eq(sessions.mode, f.mode));
    if (f.modelVersion) conds.push(eq(sessions.modelVersion, f.modelVersion));
    const rows = this.db
      .select({ attempts: sessions.attempts, maxAttempts: sessions.maxAttempts, modelVersion: sessions.modelVersion, env: sessions.env, mode: sessions.mode })
      .from(sessions)
      .where(and(...conds))
      .all();
    const summarise = (rs: typeof rows) => {
      const maxK = rs.reduce((m, r) => Math.max(m, r.maxAttempts), 0);
      const successByAttempt: number[] = [];
      const meanReturnByAttempt: number[] = [];
      const playedByAttempt: number[] = [];
      for (let a = 0; a < maxK; a++) {
        const played = rs.map((r) => r.attempts[a]).filter((x): x is AttemptSummary => x !== undefined && x.status !== 'running');
        playedByAttempt.push(played.length);
        successByAttempt.push(played.length === 0 ? 0 : played.filter((x) => x.success).length / played.length);
        meanReturnByAttempt.push(played.length === 0 ? 0 : played.reduce((s, x) => s + x.return, 0) / played.length);
      }
      return {
        sessions: rs.length,
        passAtK: passAtKRate(rs.map((r) => r.attempts), maxK),
        successByAttempt,
        meanReturnByAttempt,
        attemptsPlayed: playedByAttempt,
      };
    };
    const groups = new Map<string, typeof rows>();
    for (const r of rows) {
      const key = JSON.stringify([r.modelVersion, r.env, r.mode]);
      const g = groups.get(key);
      if (g) g.push(r);
      else groups.set(key, [r]);
    }
    return {
      ...summarise(rows),
      groups: [...groups.entries()]
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([key, rs]) => {
          const [modelVersion, env, mode] = JSON.parse(key) as [string, string | null, 'train' | 'eval'];
          return { modelVersion, env, mode, ...summarise(rs) };
        }),
    };
  }
}
