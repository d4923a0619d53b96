/**
 * Domain errors: what went wrong, by kind, with no HTTP in them. The agent (and the layers it
 * calls) throw `DomainError`; src/plugins/app/errors.ts alone maps each kind to a status code, a
 * problem `type` URI, a title and headers (RFC 9457 `application/problem+json`, docs/protocol.md
 * "Errors").
 */

/** Stable error kinds; the problem `type` URI of each is `https://lamer-server.dev/problems/<kind>`. */
export type ErrorKind =
  | 'validation'
  | 'bad-request'
  | 'not-found'
  | 'session-not-active'
  | 'step-conflict'
  | 'step-out-of-order'
  | 'unauthorized'
  | 'forbidden'
  | 'host-not-allowed'
  | 'payload-too-large'
  | 'unsupported-media-type'
  | 'method-not-allowed'
  | 'uri-too-long'
  | 'header-too-large'
  | 'request-timeout'
  | 'conflict'
  | 'rate-limited'
  | 'too-many-sessions'
  | 'too-many-jobs'
  | 'overloaded'
  | 'shutting-down'
  | 'engine-unavailable'
  | 'database-busy'
  | 'storage-full'
  | 'storage-unavailable'
  | 'internal';

/** One field error of a validation error: JSON pointer into the request part, and why. */
export interface FieldError {
  /** e.g. "body/observation", "querystring/limit". */
  field: string;
  message: string;
}

/** Members a kind may carry besides its message (written into the problem body or headers). */
export interface ErrorDetails {
  /** validation / bad-request: which fields and why. */
  errors?: FieldError[];
  /** step-out-of-order: the position the server expects next (null once the session ended). */
  expected?: { attempt: number; step: number } | null;
  /** overloaded / shutting-down / rate-limited / too-many-jobs / storage: seconds to wait before sending again. */
  retryAfterSeconds?: number;
}

/** An error of the domain: `kind` says what, `message` is the human detail, `details` the rest. */
export class DomainError extends Error {
  constructor(
    readonly kind: ErrorKind,
    message: string,
    readonly details: ErrorDetails = {},
  ) {
    super(message);
    this.name = 'DomainError';
  }
}

/** Kinds that are the server's condition rather than the caller's fault (sending the same request later may succeed). */
const SERVER_KINDS: ReadonlySet<ErrorKind> = new Set<ErrorKind>([
  'internal', 'overloaded', 'shutting-down', 'engine-unavailable', 'database-busy', 'storage-full', 'storage-unavailable',
]);

/** True when an error of `kind` is the caller's fault (bad input, unknown resource, wrong state, refused credentials). */
export const isCallerFault = (kind: ErrorKind): boolean => !SERVER_KINDS.has(kind);

/** `overloaded`: the bound on queued model calls is reached; nothing was recorded, retry the same request. */
export const overloaded = (detail: string, retryAfterSeconds: number): DomainError =>
  new DomainError('overloaded', detail, { retryAfterSeconds });

/** `not-found`: "<what> not found". */
export const notFound = (what: string): DomainError => new DomainError('not-found', `${what} not found`);

/** `validation` naming one field: detail "<field> <message>", errors [{ field, message }]. */
export const invalid = (field: string, message: string): DomainError =>
  new DomainError('validation', `${field} ${message}`, { errors: [{ field, message }] });
