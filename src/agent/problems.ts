/**
 * Domain errors that map onto RFC 9457 problem details (docs/protocol.md "Errors"). The agent and
 * routes throw `ApiProblem`; src/plugins/app/errors.ts writes it as `application/problem+json`.
 */

/** Stable problem kinds; the `type` URI is `${PROBLEM_BASE}<kind>`. */
export type ProblemKind =
  | 'validation'
  | 'bad-request'
  | 'not-found'
  | 'session-not-active'
  | 'step-conflict'
  | 'step-out-of-order'
  | 'unauthorized'
  | 'forbidden'
  | 'payload-too-large'
  | 'unsupported-media-type'
  | 'method-not-allowed'
  | 'uri-too-long'
  | 'header-too-large'
  | 'request-timeout'
  | 'conflict'
  | 'rate-limited'
  | 'too-many-sessions'
  | 'overloaded'
  | 'shutting-down'
  | 'engine-unavailable'
  | 'database-busy'
  | 'storage-full'
  | 'storage-unavailable'
  | 'internal';

export const PROBLEM_BASE = 'https://lamer-server.dev/problems/';

/** One field error of a validation problem: JSON pointer into the request part, and why. */
export interface FieldError {
  /** e.g. "body/observation", "querystring/limit". */
  field: string;
  message: string;
}

export interface ProblemExtras {
  errors?: FieldError[];
  /** step-out-of-order: the position the server expects next. */
  expected?: { attempt: number; step: number } | null;
  /** rate-limited / overloaded: seconds to wait, sent as the `Retry-After` header (not in the body). */
  retryAfterSeconds?: number;
}

export class ApiProblem extends Error {
  constructor(
    readonly status: number,
    readonly kind: ProblemKind,
    readonly title: string,
    readonly detail: string,
    readonly extras: ProblemExtras = {},
  ) {
    super(detail);
    this.name = 'ApiProblem';
  }
}

/** 503 overloaded: the bound on queued model calls is reached; nothing was recorded, retry the same request. */
export const overloaded = (detail: string, retryAfterSeconds: number): ApiProblem =>
  new ApiProblem(503, 'overloaded', 'Service Unavailable', detail, { retryAfterSeconds });

export const notFound = (what: string): ApiProblem => new ApiProblem(404, 'not-found', 'Not Found', `${what} not found`);

export const invalid = (field: string, message: string): ApiProblem =>
  new ApiProblem(400, 'validation', 'Bad Request', `${field} ${message}`, { errors: [{ field, message }] });
