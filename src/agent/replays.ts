/**
 * The replay service (docs/replay.md): replays a tenant's recorded sessions against another model
 * version. For every recorded model call (a step that acted, or a turn of the session's
 * OpenAI-compatible endpoint) it asks the other version for its own action on the same prompt and,
 * for builtin versions, for the log-probability it gives the recorded answer (./replay-plan.ts says
 * how prompts are rebuilt and what is scored); the report is stored (`replays` table) and can be
 * read again. Nothing of the replayed sessions is written: their rows, reflections and KV caches
 * are only read.
 *
 * Serving: the calls of a replay run one after another, each through the session service's bound
 * on queued model calls (`SessionService.modelCall`: 503 overloaded past it) and the engine's batcher,
 * so a replay holds the model as much as one session stepping without pause; one replay runs at a
 * time (a second is 503 overloaded with Retry-After). A call the other version cannot take (a turn
 * with tools on a builtin version, a candidate longer than its context) is reported as skipped; an
 * engine failure ends the replay with its 503 and stores nothing.
 *
 * Refusals, before any model work and with nothing stored: an unknown session (or another
 * tenant's) 404; an unknown version, a remote version asked for logprobs, or a selection of more
 * recorded calls than `maxSteps` 400 validation; a selection without any recorded call 409 conflict.
 */
import type { AsyncRepositories } from '../db/async-repositories.js';
import type { ReplayRow, SessionRow } from '../db/schema.js';
import type { ReplaySessionFilter } from '../db/replay-filter.js';
import type { ReplayDecoding } from '../domain.js';
import type { PolicyEngine } from '../policy/engine.js';
import { DomainError, invalid, notFound, overloaded } from './errors.js';
import type { ModelRegistry } from './models.js';
import { iso } from './session-views.js';
import type { SessionService } from './sessions.js';
import { newReplayId, REPLAY_ID } from './step-hash.js';
import {
  planCall,
  recordedEntry,
  replayedEntry,
  summarize,
  type RecordedCall,
  type ReplayOptions,
  type VersionText,
} from './replay-plan.js';
import type {
  ReplayFilterBody,
  ReplayListItemView,
  ReplayOptionsBody,
  ReplayStepView,
  ReplaySummaryView,
  ReplayView,
} from './replay-schemas.js';

/** Replays that may run at once (each holds the model like one busy session). */
export const MAX_REPLAYS_IN_FLIGHT = 1;

/** Sessions a batch replay reads when its filter gives no limit. */
export const DEFAULT_REPLAY_SESSIONS = 20;

/** The limits a replay reads: most recorded calls per replay (LAMER_MAX_REPLAY_STEPS), and the longest action (LAMER_MAX_ACTION_CHARS). */
export interface ReplayLimits {
  maxReplaySteps: number;
  actionChars: number;
}

/** What a replay was asked for, as stored with its report. */
interface ReplayRequestRecord {
  sessionId?: string;
  filter?: ReplayFilterBody;
  maxSteps: number;
  logprobs: boolean;
}

/** A checked request: the other version, the options, the step cap. */
interface Checked {
  target: string;
  decoding: ReplayDecoding;
  logprobs: boolean;
  maxSteps: number;
}

export class ReplayService {
  private running = 0;

  /**
   * @param repos `replays` (reports and the reads of recorded sessions) and `hot` (session rows).
   * @param sessions the session service, whose bound on queued model calls every replayed call goes through.
   * @param retryAfterSeconds Retry-After of 503 overloaded when a replay is already running.
   */
  constructor(
    private readonly repos: Pick<AsyncRepositories, 'replays' | 'hot'>,
    private readonly engine: PolicyEngine,
    private readonly models: ModelRegistry,
    private readonly sessions: SessionService,
    private readonly limits: ReplayLimits,
    private readonly retryAfterSeconds = 1,
  ) {}

  /**
   * Replay session `id` of `tenant` against `body.modelVersion`; the report is stored and returned.
   * @throws DomainError `not-found`, `validation`, `conflict`, `overloaded`, `engine-unavailable` (see the top of this file).
   */
  async replaySession(tenant: string, id: string, body: ReplayOptionsBody, signal?: AbortSignal): Promise<ReplayView> {
    const row = await this.repos.hot.session(id);
    if (!row || row.tenant !== tenant) throw notFound(`session '${id}'`);
    const c = await this.check(body);
    const calls = (await this.repos.replays.modelCalls([id])).get(id) ?? 0;
    if (calls === 0) throw new DomainError('conflict', `session '${id}' holds no recorded model call to replay (no step has acted yet)`);
    this.checkSize(calls, 1, c.maxSteps);
    return this.run(tenant, [row], c, { sessionId: id, maxSteps: c.maxSteps, logprobs: c.logprobs }, signal);
  }

  /**
   * Replay the tenant's sessions matching `body.filter` (newest first, at most `filter.limit`,
   * default 20) against `body.modelVersion`; the report is stored and returned.
   * @throws DomainError as `replaySession`; `validation` for `since` not before `until`.
   */
  async replayBatch(tenant: string, body: ReplayOptionsBody & { filter?: ReplayFilterBody }, signal?: AbortSignal): Promise<ReplayView> {
    const c = await this.check(body);
    const f = body.filter ?? {};
    const filter: ReplaySessionFilter = {
      env: f.env,
      modelVersion: f.modelVersion,
      taskId: f.taskId,
      mode: f.mode,
      status: f.status,
      since: dateTime('body/filter/since', f.since),
      until: dateTime('body/filter/until', f.until),
    };
    if (filter.since !== undefined && filter.until !== undefined && !(filter.since < filter.until)) {
      throw invalid('body/filter/until', `must be after since (${f.since}), got ${f.until}`);
    }
    const found = await this.repos.replays.sessions(tenant, filter, f.limit ?? DEFAULT_REPLAY_SESSIONS);
    const counts = await this.repos.replays.modelCalls(found.map((s) => s.id));
    const selected = found.filter((s) => (counts.get(s.id) ?? 0) > 0);
    if (selected.length === 0) {
      throw new DomainError('conflict', `none of the ${found.length} sessions matching the filter holds a recorded model call to replay`);
    }
    this.checkSize(
      selected.reduce((n, s) => n + counts.get(s.id)!, 0),
      selected.length,
      c.maxSteps,
    );
    return this.run(tenant, selected, c, { filter: f, maxSteps: c.maxSteps, logprobs: c.logprobs }, signal);
  }

  /** The tenant's report `id`. @throws DomainError `not-found` (another tenant's reads as missing). */
  async get(tenant: string, id: string): Promise<ReplayView> {
    const row = REPLAY_ID.test(id) ? await this.repos.replays.get(tenant, id) : undefined;
    if (!row) throw notFound(`replay '${id}'`);
    return { ...listItem(row), steps: row.steps as ReplayStepView[] };
  }

  /**
   * The tenant's reports without their steps, newest first; `cursor` is the last id of the previous page.
   * @throws DomainError `validation` naming `querystring/cursor` when it is not one of the tenant's reports.
   */
  async list(
    tenant: string,
    q: { modelVersion?: string; limit: number; cursor?: string },
  ): Promise<{ items: ReplayListItemView[]; nextCursor: string | null }> {
    if (q.cursor !== undefined && !(await this.repos.replays.has(tenant, q.cursor))) {
      throw invalid('querystring/cursor', 'is not a cursor from a previous page (nextCursor)');
    }
    const rows = await this.repos.replays.list(tenant, { modelVersion: q.modelVersion }, q.limit, q.cursor);
    const page = rows.slice(0, q.limit);
    return { items: page.map(listItem), nextCursor: rows.length > q.limit ? page[page.length - 1]!.id : null };
  }

  /** The options of a request, checked against the registry. @throws DomainError `validation`. */
  private async check(body: ReplayOptionsBody): Promise<Checked> {
    const m = await this.models.get(body.modelVersion);
    if (!m) throw invalid('body/modelVersion', `unknown model version '${body.modelVersion}'`);
    const logprobs = body.logprobs ?? true;
    if (m.engine !== 'builtin' && logprobs) {
      throw invalid(
        'body/logprobs',
        `must be false for model version '${m.version}': it is served by a remote server, which is not asked for the logprobs ` +
          'of a given answer; send logprobs: false to replay its actions only',
      );
    }
    return { target: m.version, decoding: body.decoding ?? 'greedy', logprobs, maxSteps: body.maxSteps ?? this.limits.maxReplaySteps };
  }

  /** @throws DomainError `validation` when a selection holds more recorded calls than `maxSteps`. */
  private checkSize(calls: number, sessions: number, maxSteps: number): void {
    if (calls <= maxSteps) return;
    throw invalid(
      'body/maxSteps',
      `is ${maxSteps}, and the selection holds ${calls} recorded model calls in ${sessions} session${sessions === 1 ? '' : 's'}; ` +
        `narrow it (filter since, until, limit) or raise maxSteps (at most ${this.limits.maxReplaySteps}, LAMER_MAX_REPLAY_STEPS)`,
    );
  }

  /** How `version` reads text and whether it is remote; null when it is not registered. */
  private async versionText(version: string): Promise<VersionText | null> {
    const m = await this.models.get(version);
    if (!m) return null;
    const remote = m.engine !== 'builtin';
    const tokenizer = await this.models.tokenizer(version);
    return {
      version,
      remote,
      format: await this.models.promptFormat(version),
      tokenizer,
      tokenKey: remote ? null : JSON.stringify(tokenizer.spec),
    };
  }

  /** Replays `sessions` (one at a time, calls in order) and stores the report. */
  private async run(
    tenant: string,
    sessions: SessionRow[],
    c: Checked,
    request: ReplayRequestRecord,
    signal?: AbortSignal,
  ): Promise<ReplayView> {
    if (this.running >= MAX_REPLAYS_IN_FLIGHT) {
      throw overloaded(`a replay is running (at most ${MAX_REPLAYS_IN_FLIGHT} at a time); retry later`, this.retryAfterSeconds);
    }
    this.running++;
    try {
      await this.models.ensureLoaded(c.target);
      const target = (await this.versionText(c.target))!;
      const opts: ReplayOptions = { decoding: c.decoding, logprobs: c.logprobs, replayId: newReplayId() };
      const texts = new Map<string, Promise<VersionText | null>>();
      const steps: ReplayStepView[] = [];
      const done: ReplayRow['sessions'] = [];
      for (const session of sessions) {
        const rows = await this.repos.replays.actionRows(session.id);
        const reflections = await this.repos.replays.reflections(session.id);
        let calls = 0;
        for (let index = 0; index < rows.length && steps.length < c.maxSteps; index++) {
          const row = rows[index]!;
          if (row.output === null) continue;
          if (signal?.aborted)
            throw new DomainError('bad-request', 'the client closed the connection; the replay was stopped and nothing was stored');
          if (!texts.has(row.modelVersion)) texts.set(row.modelVersion, this.versionText(row.modelVersion));
          const recorded = await texts.get(row.modelVersion)!;
          steps.push(await this.replayCall({ session, rows, reflections, index }, target, recorded, opts));
          calls++;
        }
        done.push({ id: session.id, taskId: session.taskId, env: session.env, modelVersion: session.modelVersion, calls });
      }
      const row: ReplayRow = {
        id: opts.replayId,
        tenant,
        modelVersion: c.target,
        decoding: c.decoding,
        request: request as unknown as Record<string, unknown>,
        summary: summarize(steps) as unknown as Record<string, unknown>,
        sessions: done,
        steps,
        createdAt: Date.now(),
      };
      await this.repos.replays.insert(row);
      return { ...listItem(row), steps };
    } finally {
      this.running--;
    }
  }

  /**
   * One recorded call on the other version, under the bound on queued model calls. A call the
   * version cannot take (a plan's skip, or a `validation` refusal of the engine) is reported as skipped.
   * @throws DomainError `overloaded`, `engine-unavailable`.
   */
  private async replayCall(
    c: RecordedCall,
    target: VersionText,
    recorded: VersionText | null,
    opts: ReplayOptions,
  ): Promise<ReplayStepView> {
    const plan = planCall(c, target, recorded, opts);
    const skipped = (reason: string): ReplayStepView => ({ ...recordedEntry(c), skipped: reason });
    const chars = this.limits.actionChars;
    const engine = this.engine;
    try {
      switch (plan.kind) {
        case 'skip':
          return skipped(plan.reason);
        case 'local': {
          if (!engine.replay) throw new DomainError('engine-unavailable', 'this engine does not replay recorded calls');
          const a = await this.sessions.modelCall(() => engine.replay!(plan.req));
          return replayedEntry(c, a.generation, a.scoredLogprobs, a.promptFrom === 'tokens' ? 'recorded-tokens' : plan.source, chars);
        }
        case 'remote-act': {
          const g = await this.sessions.modelCall(() => engine.act(plan.req));
          return replayedEntry(c, g, null, 'rendered', chars);
        }
        case 'remote-chat': {
          if (!engine.chatTurn) throw new DomainError('engine-unavailable', 'this engine does not serve remote chat turns');
          const g = await this.sessions.modelCall(() => engine.chatTurn!(plan.req));
          return replayedEntry(c, g, null, 'recorded-messages', chars);
        }
      }
    } catch (err) {
      if (err instanceof DomainError && err.kind === 'validation') return skipped(err.message);
      throw err;
    }
  }
}

/** ms since the epoch of an RFC 3339 date-time (undefined: absent). @throws DomainError `validation` naming `field`. */
function dateTime(field: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const ms = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/i.test(v) ? Date.parse(v) : Number.NaN;
  if (!Number.isFinite(ms)) throw invalid(field, `must be an RFC 3339 date-time such as 2026-12-01T00:00:00Z, got '${v}'`);
  return ms;
}

/** A stored report as listed (without its steps). */
function listItem(row: Omit<ReplayRow, 'steps'>): ReplayListItemView {
  const req = row.request as unknown as ReplayRequestRecord;
  return {
    id: row.id,
    modelVersion: row.modelVersion,
    decoding: row.decoding,
    logprobs: req.logprobs,
    request: {
      ...(req.sessionId !== undefined ? { sessionId: req.sessionId } : {}),
      ...(req.filter ? { filter: req.filter } : {}),
      maxSteps: req.maxSteps,
    },
    summary: row.summary as unknown as ReplaySummaryView,
    sessions: row.sessions as ReplayListItemView['sessions'],
    createdAt: iso(row.createdAt),
  };
}
