/**
 * Typed TypeScript client for lamer-server: openapi-fetch over the types that openapi-typescript
 * generated from `openapi/openapi.json` (`./schema.d.ts`; regenerate with `npm run generate`).
 *
 *   const lamer = createLamerClient({ baseUrl: 'http://127.0.0.1:8080', apiKey: process.env.LAMER_API_KEY });
 *   const session = await unwrap(lamer.POST('/v1/sessions', { body: { taskId, instructions } }));
 *   const answer = await unwrap(lamer.POST('/v1/sessions/{id}/steps', {
 *     params: { path: { id: session.id } }, body: { attempt: 0, step: 0, observation } }));
 *
 * Every method answers `{ data, error, response }` (openapi-fetch); `unwrap` turns an error
 * answer (RFC 9457 `application/problem+json`) into a thrown `LamerProblemError`.
 */
import createClient, { type Client } from 'openapi-fetch';
import type { paths } from './schema.js';

export type { paths, components, operations } from './schema.js';

/** The client: `GET`, `POST`, `PUT`, `DELETE`, ... keyed by the document's paths. */
export type LamerClient = Client<paths>;

/** JSON body of a path+method's 200/201 answer, e.g. `ResponseOf<'/v1/sessions/{id}', 'get'>`. */
export type ResponseOf<P extends keyof paths, M extends keyof paths[P]> = paths[P][M] extends {
  responses: infer R;
}
  ? R extends { 200: { content: { 'application/json': infer T } } }
    ? T
    : R extends { 201: { content: { 'application/json': infer T } } }
      ? T
      : never
  : never;

/** JSON request body of a path+method. */
export type RequestBodyOf<P extends keyof paths, M extends keyof paths[P]> = paths[P][M] extends {
  requestBody?: { content: { 'application/json': infer B } };
}
  ? B
  : never;

/** A session, as `GET /v1/sessions/{id}` answers it. */
export type Session = ResponseOf<'/v1/sessions/{id}', 'get'>;
/** The body of `POST /v1/sessions`. */
export type CreateSessionRequest = RequestBodyOf<'/v1/sessions', 'post'>;
/** The body of `POST /v1/sessions/{id}/steps`. */
export type StepRequest = RequestBodyOf<'/v1/sessions/{id}/steps', 'post'>;
/** The answer of `POST /v1/sessions/{id}/steps`: the action to execute, or the attempt's result. */
export type StepResponse = ResponseOf<'/v1/sessions/{id}/steps', 'post'>;

export interface LamerClientOptions {
  /** e.g. 'http://127.0.0.1:8080' (no trailing /v1: paths carry it) */
  baseUrl: string;
  /** sent as `Authorization: Bearer <apiKey>` when given */
  apiKey?: string;
  /** extra headers for every request (e.g. `x-request-id`) */
  headers?: Record<string, string>;
  /** a fetch implementation (defaults to globalThis.fetch) */
  fetch?: (input: Request) => Promise<Response>;
}

/** Creates a client bound to one server and API key. */
export function createLamerClient(opts: LamerClientOptions): LamerClient {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.apiKey) headers.authorization = `Bearer ${opts.apiKey}`;
  return createClient<paths>({ baseUrl: opts.baseUrl.replace(/\/+$/, ''), headers, ...(opts.fetch ? { fetch: opts.fetch } : {}) });
}

/** An RFC 9457 problem document (`type` is a stable URI per error kind). */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail?: string;
  instance?: string;
  [extra: string]: unknown;
}

/** Thrown by `unwrap` for an error answer; `retryAfter` in seconds (429/503) or null. */
export class LamerProblemError extends Error {
  readonly status: number;
  readonly problem: Problem;
  readonly retryAfter: number | null;
  constructor(status: number, problem: Problem, retryAfter: number | null) {
    super(`${status} ${problem.title}: ${problem.detail ?? problem.type}`);
    this.name = 'LamerProblemError';
    this.status = status;
    this.problem = problem;
    this.retryAfter = retryAfter;
  }
  /** Last segment of the problem type URI, e.g. 'step-out-of-order'. */
  get kind(): string {
    return this.problem.type.replace(/\/+$/, '').split('/').pop() ?? this.problem.type;
  }
}

/**
 * Awaits an openapi-fetch call and returns its `data`; throws `LamerProblemError` when the server
 * answered an error (status >= 400), with the problem document it sent (or one made from the status).
 */
export async function unwrap<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  const { data, error, response } = await call;
  if (!response.ok) {
    const retry = response.headers.get('retry-after');
    const doc =
      error && typeof error === 'object' && typeof (error as Problem).type === 'string'
        ? (error as Problem)
        : { type: 'about:blank', title: response.statusText || String(response.status), status: response.status, detail: typeof error === 'string' ? error : undefined };
    throw new LamerProblemError(response.status, doc, retry !== null && retry !== '' && Number.isFinite(Number(retry)) ? Number(retry) : null);
  }
  return data as T;
}
