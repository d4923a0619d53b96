/**
 * The client side of the scale-out tests: concurrent clients playing whole sessions over HTTP (a
 * gateway in front of replicas), every request timed and recorded, and the check that every step
 * a client saw answered is stored exactly once, with the answer the client saw.
 *
 * A client creates a session (`maxAttempts` attempts of `steps` + 1 posts: steps 0..steps-1, then
 * step `steps` with `done`; the last attempt succeeds, the others fail, so the test engine writes
 * reflections between them), plays it to its end, and starts the next. A request that fails (a
 * connection error, 408, 429 or 5xx) is recorded as an error and sent again, the same body, after
 * 50 ms, at most 40 times; steps are idempotent, so a step sent again returns the stored answer.
 * Any other answer (409 step-conflict, 400 ...) fails the client.
 */

/** One HTTP request a client made: what, when (performance.now() ms) and how it ended. */
export interface RequestRecord {
  /** `create <client>/<n>` or `<session> <attempt>/<step>`. */
  what: string;
  start: number;
  end: number;
  ok: boolean;
  /** HTTP status, or the error's message. */
  detail: string;
}

/** A step a client saw answered: its position, the answer's action, and when the answer came. */
export interface StepSeen {
  sessionId: string;
  attempt: number;
  step: number;
  action: string | null;
  at: number;
}

export interface PlayResult {
  /** Answered steps by `<session>/<attempt>/<step>`. */
  answered: Map<string, StepSeen>;
  /** Each session the clients played: created at (ms), and when its last step was answered. */
  sessions: Array<{ id: string; created: number; finished: number }>;
  requests: RequestRecord[];
  errors: RequestRecord[];
}

export interface PlayOptions {
  /** Base URL, e.g. the gateway's `http://127.0.0.1:<port>`. */
  url: string;
  clients: number;
  sessionsPerClient: number;
  attempts: number;
  /** Index of the last step of an attempt (its `done` step); maxSteps of the sessions. */
  steps: number;
  /** Called after each answered step with the number answered so far (all clients). */
  onAnswered?: (n: number) => void;
}

/** The JSON body of step `t` of attempt `a` (of `o.attempts`) for client `c`'s session `k`. */
export function stepBody(o: Pick<PlayOptions, 'attempts' | 'steps'>, c: number, k: number, a: number, t: number) {
  const last = t === o.steps;
  return {
    attempt: a,
    step: t,
    observation: `client ${c} session ${k} attempt ${a} step ${t}\n# # # #\n# P X #\n# # # #`,
    reward: t === 0 ? 0 : -0.1,
    done: last,
    success: last && a === o.attempts - 1,
    availableActions: ['up', 'down', 'left', 'right'],
  };
}

const RETRYABLE = (status: number) => status === 408 || status === 429 || status >= 500;

/**
 * Run `o.clients` clients, each playing `o.sessionsPerClient` sessions to their end.
 * @throws Error when a request is refused with a non-retryable status or fails 40 times in a row.
 */
export async function playSessions(o: PlayOptions): Promise<PlayResult> {
  const result: PlayResult = { answered: new Map(), sessions: [], requests: [], errors: [] };
  const send = async (what: string, path: string, body: unknown, want: number): Promise<any> => {
    for (let tries = 0; tries < 40; tries++) {
      const start = performance.now();
      let detail: string;
      try {
        const r = await fetch(o.url + path, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
        const text = await r.text();
        detail = String(r.status);
        const rec = { what, start, end: performance.now(), ok: r.status === want, detail };
        result.requests.push(rec);
        if (r.status === want) return JSON.parse(text);
        result.errors.push(rec);
        if (!RETRYABLE(r.status)) throw new Error(`${what}: HTTP ${r.status} ${text.slice(0, 300)}`);
      } catch (err) {
        if ((err as Error).message.startsWith(`${what}: HTTP`)) throw err;
        detail = (err as Error).message;
        const rec = { what, start, end: performance.now(), ok: false, detail };
        result.requests.push(rec);
        result.errors.push(rec);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`${what}: failed 40 times`);
  };
  const client = async (c: number) => {
    for (let k = 0; k < o.sessionsPerClient; k++) {
      const created = await send(`create ${c}/${k}`, '/v1/sessions', {
        taskId: `scale-out-${c}`,
        instructions: 'Push the box onto the target. Answer with one move.',
        maxAttempts: o.attempts,
        maxSteps: o.steps,
        env: 'scale-out',
      }, 201);
      const id = created.id as string;
      const session = { id, created: performance.now(), finished: NaN };
      result.sessions.push(session);
      for (let a = 0; a < o.attempts; a++) {
        for (let t = 0; t <= o.steps; t++) {
          const answer = await send(`${id} ${a}/${t}`, `/v1/sessions/${id}/steps`, stepBody(o, c, k, a, t), 200);
          const seen: StepSeen = { sessionId: id, attempt: a, step: t, action: answer.action ?? null, at: performance.now() };
          result.answered.set(`${id}/${a}/${t}`, seen);
          session.finished = seen.at;
          o.onAnswered?.(result.answered.size);
        }
      }
    }
  };
  await Promise.all(Array.from({ length: o.clients }, (_, c) => client(c)));
  return result;
}

/** A stored row of the steps table (either store), the columns the check reads. */
export interface StoredStep {
  session_id: string;
  attempt: number;
  step: number;
  kind: string;
  /** The stored answer: parsed JSON, or its text (SQLite). */
  answer: unknown;
}

/**
 * What is wrong between the steps the clients saw answered and the rows stored: a position stored
 * twice, an answered step not stored, a stored step no client saw answered, or a stored answer
 * whose action differs from the one the client saw. Empty when every answered step is stored
 * exactly once with the answer the client got. `rows` are the steps of the played sessions, or of
 * the whole database (rows of sessions no client knows must not hold steps either).
 */
export function storedOnceProblems(result: PlayResult, rows: StoredStep[]): string[] {
  const problems: string[] = [];
  const count = new Map<string, number>();
  for (const r of rows) {
    const k = `${r.session_id}/${r.attempt}/${r.step}/${r.kind}`;
    count.set(k, (count.get(k) ?? 0) + 1);
  }
  for (const [k, n] of count) if (n > 1) problems.push(`${k} stored ${n} times`);
  const actions = new Map<string, StoredStep>();
  for (const r of rows) if (r.kind === 'action') actions.set(`${r.session_id}/${r.attempt}/${r.step}`, r);
  for (const [k, seen] of result.answered) {
    const row = actions.get(k);
    if (!row) {
      problems.push(`${k} answered but not stored`);
      continue;
    }
    const answer = (typeof row.answer === 'string' ? JSON.parse(row.answer) : row.answer) as { action?: string | null } | null;
    if ((answer?.action ?? null) !== seen.action) problems.push(`${k}: stored action ${answer?.action} but the client saw ${seen.action}`);
  }
  for (const k of actions.keys()) if (!result.answered.has(k)) problems.push(`${k} stored but no client saw it answered`);
  return problems;
}

/** The requests that failed although they were not in flight at `t` (started after it, or ended before it). */
export function errorsOutside(result: PlayResult, t: number): RequestRecord[] {
  return result.errors.filter((e) => !(e.start <= t && e.end >= t));
}
