/**
 * The step workload of the HTTP benches (bench/http.ts, bench/scale-out.ts): each client drives
 * its own sessions through real step sequences: create a session (3 attempts, maxSteps 8); in
 * each attempt post steps 0..7 with 4 available actions (each answered with an action) and step 8
 * with done: attempts 0 and 1 fail (a reflection is written), attempt 2 succeeds; then start a new
 * session. 27 steps a session, one session creation for every 27 steps.
 */

/** Index of the done step of an attempt (maxSteps of the sessions). */
export const STEPS = 8;
export const ATTEMPTS = 3;
export const ACTIONS = ['up', 'down', 'left', 'right'];
/** Steps a session of the workload posts: 27. */
export const STEPS_PER_SESSION = ATTEMPTS * (STEPS + 1);

/**
 * Body of step `t` (0..STEPS) of attempt `a` (0..2): a Sokoban-like board; reward 0 at step 0,
 * then -0.1 a step, except +10 at the last step of the third attempt, which succeeds.
 */
export function stepBody(a: number, t: number) {
  const last = t === STEPS;
  return {
    attempt: a,
    step: t,
    observation: `0: # # # # # #\n1: # _ P _ _ #\n2: # _ X _ O #\n3: # _ _ _ _ #\n4: # # # # # #\nstep ${t}`,
    reward: t === 0 ? 0 : last && a === ATTEMPTS - 1 ? 10 : -0.1,
    done: last,
    success: last && a === ATTEMPTS - 1,
    availableActions: ACTIONS,
  };
}

/** Body of `POST /v1/sessions` for the workload's session `taskId`. */
export function sessionBody(taskId: string) {
  return { taskId, instructions: 'Push the box onto the target. Answer with one move.', maxAttempts: ATTEMPTS, maxSteps: STEPS, env: 'bench' };
}

/** What one autocannon run of the workload measured. Latencies include the 1-in-28 session creations. */
export interface AutocannonRun {
  seconds: number;
  /** Requests answered (steps and session creations). */
  requests: number;
  /** Steps answered: requests x 27 / 28. */
  steps: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Connection errors (timeouts included) and answers other than 2xx. */
  errors: number;
}

/**
 * The workload driven by autocannon (low client CPU, which matters when client and servers share
 * the cores; latencies in whole ms) against `http://127.0.0.1:<port>` for `seconds` with
 * `connections` keep-alive connections, each cycling through [create session, 27 steps] with its
 * session id in autocannon's per-connection `context`.
 */
export async function autocannonSteps(port: number, connections: number, seconds: number): Promise<AutocannonRun> {
  const specifier = 'autocannon'; // untyped package: imported by name to skip type resolution
  const { default: autocannon } = (await import(specifier)) as {
    default: (opts: Record<string, unknown>) => Promise<Record<string, any>>;
  };
  const stepRequests = [];
  for (let a = 0; a < ATTEMPTS; a++) {
    for (let t = 0; t <= STEPS; t++) {
      stepRequests.push({
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(stepBody(a, t)),
        setupRequest: (req: Record<string, unknown>, ctx: Record<string, unknown>) => ({ ...req, path: `/v1/sessions/${String(ctx.id)}/steps` }),
      });
    }
  }
  let n = 0;
  const requests = [
    {
      method: 'POST',
      path: '/v1/sessions',
      headers: { 'content-type': 'application/json' },
      setupRequest: (req: Record<string, unknown>) => ({ ...req, body: JSON.stringify(sessionBody(`bench-${n++}`)) }),
      onResponse: (status: number, body: string, ctx: Record<string, unknown>) => {
        // a refused creation leaves no id: the session's steps are then refused too (counted as errors)
        ctx.id = status === 201 ? (JSON.parse(body) as { id: string }).id : 'none';
      },
    },
    ...stepRequests,
  ];
  const r = await autocannon({ url: `http://127.0.0.1:${port}`, connections, duration: seconds, requests });
  const total = r.requests.total as number;
  return {
    seconds,
    requests: total,
    steps: Math.round((total * STEPS_PER_SESSION) / (STEPS_PER_SESSION + 1)),
    p50Ms: r.latency.p50 as number,
    p99Ms: r.latency.p99 as number,
    maxMs: r.latency.max as number,
    errors: (r.errors as number) + (r.non2xx as number),
  };
}
