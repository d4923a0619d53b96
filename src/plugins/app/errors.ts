/**
 * Errors as RFC 9457 `application/problem+json` (docs/protocol.md "Errors"). This file alone maps
 * error kinds to HTTP: domain errors (DomainError, src/agent/errors.ts) by their kind, Fastify's
 * validation errors (which field and why), body too large (413), bad JSON (400), unsupported media
 * type (415), unknown routes (404) and known paths with another method (405), a locked database or
 * failing storage (503 `database-busy`, `storage-full`, `storage-unavailable`, with Retry-After).
 * Anything unexpected is a 500 whose detail does not leak internals; it is logged with the request id.
 *
 * Early answers: an unknown route or method is answered 404/405 as soon as the request's headers
 * are in (before its body is read or parsed, so a large or malformed body does not turn it into a
 * 413, 415 or 400). Any answer sent while the request body is still unread (401 before a key was
 * checked against a large body, 415, 404/405, 413, 429, 503 `shutting-down`) waits for the rest of
 * the body to be drained, within the LAMER_BODY_DRAIN_* bounds (see drainBody), so that clients
 * that write the whole body before reading read the answer instead of a broken pipe.
 */
import fp from 'fastify-plugin';
import { randomUUID } from 'node:crypto';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DomainError, type ErrorKind, type FieldError } from '../../agent/errors.js';
import { databaseErrorOf } from '../../db/errors.js';

/** Problem `type` URIs are `${PROBLEM_BASE}<kind>`. */
export const PROBLEM_BASE = 'https://lamer-server.dev/problems/';

/** The HTTP status and problem title of each error kind. */
export const PROBLEM_STATUS: Readonly<Record<ErrorKind, { status: number; title: string }>> = {
  validation: { status: 400, title: 'Bad Request' },
  'bad-request': { status: 400, title: 'Bad Request' },
  unauthorized: { status: 401, title: 'Unauthorized' },
  forbidden: { status: 403, title: 'Forbidden' },
  'host-not-allowed': { status: 403, title: 'Forbidden' },
  'not-found': { status: 404, title: 'Not Found' },
  'method-not-allowed': { status: 405, title: 'Method Not Allowed' },
  'request-timeout': { status: 408, title: 'Request Timeout' },
  'session-not-active': { status: 409, title: 'Session Not Active' },
  'step-conflict': { status: 409, title: 'Step Conflict' },
  'step-out-of-order': { status: 409, title: 'Step Out Of Order' },
  conflict: { status: 409, title: 'Conflict' },
  'too-many-sessions': { status: 409, title: 'Too Many Sessions' },
  'payload-too-large': { status: 413, title: 'Payload Too Large' },
  'uri-too-long': { status: 414, title: 'URI Too Long' },
  'unsupported-media-type': { status: 415, title: 'Unsupported Media Type' },
  'rate-limited': { status: 429, title: 'Too Many Requests' },
  'too-many-jobs': { status: 429, title: 'Too Many Requests' },
  'header-too-large': { status: 431, title: 'Request Header Fields Too Large' },
  internal: { status: 500, title: 'Internal Server Error' },
  overloaded: { status: 503, title: 'Service Unavailable' },
  'shutting-down': { status: 503, title: 'Service Unavailable' },
  'engine-unavailable': { status: 503, title: 'Engine Unavailable' },
  'database-busy': { status: 503, title: 'Service Unavailable' },
  'storage-full': { status: 503, title: 'Service Unavailable' },
  'storage-unavailable': { status: 503, title: 'Service Unavailable' },
};

/** `Retry-After` seconds of the database problems (config.database). */
export interface DatabaseRetry {
  busyRetryAfterSeconds: number;
  storageRetryAfterSeconds: number;
}

const DEFAULT_DB_RETRY: DatabaseRetry = { busyRetryAfterSeconds: 1, storageRetryAfterSeconds: 30 };

/**
 * The domain error of a SQLite failure (src/db/errors.ts kinds), or null when `err` is none:
 * - `busy` (another connection holds the lock past the busy timeout): 503 `database-busy`;
 * - `full` (no space for the write): 503 `storage-full`;
 * - `io`, `readonly`, `corrupt`: 503 `storage-unavailable`.
 * All carry `Retry-After`; in every case the write was rolled back, so the client sends the same
 * request again (a step is then recorded exactly once).
 */
export function databaseProblem(err: unknown, retry: DatabaseRetry = DEFAULT_DB_RETRY): DomainError | null {
  const de = databaseErrorOf(err);
  if (!de) return null;
  switch (de.kind) {
    case 'busy':
      return new DomainError('database-busy',
        'the database is locked by another connection; nothing was recorded, send the same request again', {
          retryAfterSeconds: retry.busyRetryAfterSeconds,
        });
    case 'full':
      return new DomainError('storage-full',
        'the disk holding the database is full; nothing was recorded, send the same request again once space is freed', {
          retryAfterSeconds: retry.storageRetryAfterSeconds,
        });
    default:
      return new DomainError('storage-unavailable',
        `the database cannot be written (${de.code}); nothing was recorded, send the same request again later`, {
          retryAfterSeconds: retry.storageRetryAfterSeconds,
        });
  }
}

/**
 * Seconds for the `Retry-After` header of a thrown error (DomainError details, or a database
 * problem: see databaseProblem), or null.
 */
export function retryAfterOf(err: unknown, retry: DatabaseRetry = DEFAULT_DB_RETRY): number | null {
  if (err instanceof DomainError) return err.details.retryAfterSeconds ?? null;
  return databaseProblem(err, retry)?.details.retryAfterSeconds ?? null;
}

export interface ProblemDocument {
  type: string;
  title: string;
  status: number;
  detail: string;
  instance: string;
  requestId?: string;
  errors?: FieldError[];
  expected?: { attempt: number; step: number } | null;
  /** `/openai/v1` routes: the problem in OpenAI's error shape as well (see {@link withOpenAiError}). */
  error?: OpenAiError;
}

/** OpenAI's error object (`{"error": {message, type, param, code}}`), as vLLM also answers. */
export interface OpenAiError {
  message: string;
  type: string;
  param: string | null;
  code: string | null;
}

/** OpenAI's error `type` of an HTTP status. */
function openAiErrorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  return status >= 500 ? 'server_error' : 'invalid_request_error';
}

/** Paths of the OpenAI-compatible endpoints: `/openai/...` and a session's `/v1/sessions/{id}/openai/...`. */
const isOpenAiPath = (url: string): boolean => url.startsWith('/openai/') || /^\/v1\/sessions\/[^/?]+\/openai\//.test(url);

/**
 * A problem answered on an `/openai/` path (or a session's `/v1/sessions/{id}/openai/` path) gets, besides its RFC 9457 members, OpenAI's `error`
 * member, since OpenAI SDKs read `error.message` (and `type`, `param`, `code`): message = the
 * detail; type from the status; param = the first field at fault without its `body/` prefix,
 * dotted (`guided_choice.0`); code = the problem kind (the last segment of `type`). Other paths:
 * unchanged.
 */
export function withOpenAiError(p: ProblemDocument, url: string): ProblemDocument {
  if (!isOpenAiPath(url)) return p;
  const field = p.errors?.[0]?.field;
  const param = field === undefined ? null : field.replace(/^(body|querystring|params|headers)\/?/, '').split('/').join('.') || null;
  return { ...p, error: { message: p.detail, type: openAiErrorType(p.status), param, code: p.type.startsWith(PROBLEM_BASE) ? p.type.slice(PROBLEM_BASE.length) : null } };
}

interface AjvLikeError {
  instancePath?: string;
  keyword?: string;
  message?: string;
  params?: Record<string, unknown>;
}

function fieldErrors(validation: AjvLikeError[], context: string | undefined): FieldError[] {
  return validation.map((e) => {
    let field = `${context ?? 'body'}${e.instancePath ?? ''}`;
    const p = e.params ?? {};
    if (e.keyword === 'required' && typeof p.missingProperty === 'string') field += `/${p.missingProperty}`;
    if (e.keyword === 'additionalProperties' && typeof p.additionalProperty === 'string') {
      return { field: `${field}/${p.additionalProperty}`, message: 'is not an allowed property' };
    }
    // ajv says only "must be equal to one of the allowed values": name them
    if (e.keyword === 'enum' && Array.isArray(p.allowedValues)) {
      return { field, message: `must be one of ${p.allowedValues.map((v) => JSON.stringify(v)).join(', ')}` };
    }
    return { field, message: e.message ?? 'is invalid' };
  });
}

/** A problem document of `kind` (status and title from PROBLEM_STATUS unless `status` is given). */
const doc = (kind: ErrorKind, detail: string, instance: string, requestId?: string, status?: number): ProblemDocument => {
  const k = PROBLEM_STATUS[kind];
  const d: ProblemDocument = { type: PROBLEM_BASE + kind, title: k.title, status: status ?? k.status, detail, instance };
  if (requestId !== undefined) d.requestId = requestId;
  return d;
};

/**
 * Map any thrown value to a problem document (`retry`: Retry-After seconds of database problems;
 * `bodyLimit`: the byte limit of the request's route, named in a 413's detail so that the client
 * knows how far to shrink the body).
 */
export function toProblem(err: unknown, instance: string, requestId?: string, retry: DatabaseRetry = DEFAULT_DB_RETRY, bodyLimit?: number): ProblemDocument {
  if (!(err instanceof DomainError)) err = databaseProblem(err, retry) ?? err;
  if (err instanceof DomainError) {
    const d = doc(err.kind, err.message, instance, requestId);
    if (err.details.errors) d.errors = err.details.errors;
    if (err.details.expected !== undefined) d.expected = err.details.expected;
    return d;
  }
  const e = err as Partial<FastifyError> & { validation?: AjvLikeError[]; validationContext?: string };
  if (e && Array.isArray(e.validation)) {
    const errors = fieldErrors(e.validation, e.validationContext);
    const detail = errors.map((x) => `${x.field} ${x.message}`).join('; ');
    return { ...doc('validation', detail, instance, requestId), errors };
  }
  switch (e?.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return doc('payload-too-large', bodyLimit === undefined ? 'request body is larger than the limit' : `request body is larger than the limit of ${bodyLimit} bytes`, instance, requestId);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return doc('unsupported-media-type', 'send the body as application/json', instance, requestId);
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return doc('bad-request', 'body is empty but content-type is application/json', instance, requestId);
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return doc('bad-request', 'body is not valid JSON', instance, requestId);
    default:
      break;
  }
  const status = typeof e?.statusCode === 'number' ? e.statusCode : 500;
  if (status === 429) return doc('rate-limited', e.message ?? 'rate limited', instance, requestId);
  if (status === 503) return doc('overloaded', e.message ?? 'overloaded', instance, requestId);
  if (status >= 400 && status < 500) {
    // JSON.parse errors and other client errors reported by Fastify.
    const detail = err instanceof SyntaxError ? `body is not valid JSON: ${err.message}` : (e.message ?? 'bad request');
    return doc('bad-request', detail, instance, requestId, status);
  }
  return doc('internal', 'internal error; see the server log for this request id', instance, requestId);
}

/**
 * Fastify `frameworkErrors`: router errors raised before any route runs, as problem+json
 * (FST_ERR_MAX_PARAM_LENGTH: a path parameter longer than `maxParamLength` -> 414 `uri-too-long`;
 * FST_ERR_BAD_URL: an undecodable path -> 400 `bad-request`).
 */
export function frameworkErrorProblem(err: FastifyError, req: FastifyRequest, reply: FastifyReply): void {
  const path = req.url.split('?')[0];
  const p =
    err.code === 'FST_ERR_MAX_PARAM_LENGTH'
      ? doc('uri-too-long', `a path parameter of ${path} is longer than 256 characters`, req.url, req.id)
      : err.code === 'FST_ERR_BAD_URL'
        ? doc('bad-request', `${path} is not a valid URL path`, req.url, req.id)
        : toProblem(err, req.url, req.id);
  const answer = withOpenAiError(p, req.url);
  req.log.info({ problem: p.type, status: p.status }, 'request rejected');
  reply.header('x-request-id', req.id).header('x-content-type-options', 'nosniff').code(p.status).type('application/problem+json').send(answer);
}

/**
 * Fastify `clientErrorHandler`: a request Node's HTTP parser refused (no route ran), answered as
 * problem+json on the raw socket, which is then closed: HPE_HEADER_OVERFLOW (headers, request line
 * or query string beyond Node's 16 KiB header limit) -> 431 `header-too-large`; a request
 * timeout -> 408 `request-timeout`; anything else -> 400 `bad-request`; each with a fresh request id (body `requestId`, header
 * `x-request-id`) and an empty `instance` (no request line was read).
 */
export function clientErrorProblem(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  // the parser gave up before a request existed: a fresh request id, so that this answer too can be
  // quoted and found in the logs like every other one
  const requestId = randomUUID();
  const p =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? doc('header-too-large', 'the request line and headers are larger than 16 KiB (a long query string counts)', '', requestId)
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? doc('request-timeout', 'the request was not received in time', '', requestId)
        : doc('bad-request', 'the request is not valid HTTP/1.1', '', requestId);
  if (socket.writable) {
    const body = JSON.stringify(p);
    socket.write(
      `HTTP/1.1 ${p.status} ${p.title}\r\ncontent-type: application/problem+json\r\nx-content-type-options: nosniff\r\nx-request-id: ${requestId}\r\n`
        + `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}

/**
 * A Fastify route URL (`/v1/sessions/:id`, `/v1/steps::batch`) as a regexp over request paths,
 * exactly as the router matches them (no trailing slash: `/v1/sessions/` is no route, so 404).
 */
function routePattern(url: string): RegExp {
  const parts = url.split('::').map((seg) => seg.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/:[A-Za-z0-9_]+/g, '[^/]+'));
  return new RegExp(`^${parts.join(':')}$`);
}

/** How much of an unread body is drained before an early answer (config.http drainBodyBytes / drainBodyMs). */
export interface DrainLimits {
  maxBytes: number;
  maxMs: number;
}

const DEFAULT_DRAIN: DrainLimits = { maxBytes: 64 * 1024 * 1024, maxMs: 10_000 };

/**
 * Reads and discards the rest of a request body the server will not use (it is over the size
 * limit, or the request is refused before its body was read: no route, no key, an unsupported
 * media type), so that the answer reaches a client that writes its whole body before it reads: closing
 * the connection while such a client still writes makes its kernel see a reset, and the client a
 * broken pipe instead of the 413 (nginx's lingering close solves the same problem). Resolves when
 * the body has ended, the connection is gone, `maxBytes` more bytes were discarded, or `maxMs`
 * passed, whichever comes first; a body whose declared Content-Length is over `maxBytes` is not
 * drained at all. Memory stays flat: chunks are only counted.
 */
export function drainBody(raw: NodeJS.ReadableStream & { complete?: boolean; readableEnded?: boolean; destroyed?: boolean; headers?: Record<string, unknown> }, limits: DrainLimits): Promise<void> {
  if (limits.maxBytes <= 0 || limits.maxMs <= 0 || raw.complete || raw.readableEnded || raw.destroyed) return Promise.resolve();
  const declared = Number(raw.headers?.['content-length']);
  if (Number.isFinite(declared) && declared > limits.maxBytes) return Promise.resolve();
  return new Promise((resolve) => {
    let seen = 0;
    const done = (): void => {
      clearTimeout(timer);
      raw.removeListener('data', onData);
      raw.removeListener('end', done);
      raw.removeListener('close', done);
      raw.removeListener('error', done);
      resolve();
    };
    const onData = (chunk: Buffer | string): void => {
      seen += typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length;
      if (seen > limits.maxBytes) done();
    };
    const timer = setTimeout(done, limits.maxMs);
    raw.on('data', onData);
    raw.once('end', done);
    raw.once('close', done);
    raw.once('error', done);
    raw.resume();
  });
}

/** The serializer of every problem answer of the error handler: the document as JSON. */
const problemJson = (p: unknown): string => JSON.stringify(p);

export default fp(
  async function errors(app: FastifyInstance) {
    const dbRetry: DatabaseRetry = app.config?.database ?? DEFAULT_DB_RETRY;
    const drain: DrainLimits = {
      maxBytes: app.config?.http?.drainBodyBytes ?? DEFAULT_DRAIN.maxBytes,
      maxMs: app.config?.http?.drainBodyMs ?? DEFAULT_DRAIN.maxMs,
    };
    // Any answer sent before the request body was read whole (an error thrown before or while it
    // was read, a 404/405 from the hook below) first drains the rest of the body, so that the
    // client that is still writing it reads the answer. A body not drained to its end (over the
    // drain bounds) closes the connection after the answer: its unread rest cannot be parsed as
    // the next request.
    app.addHook('onSend', (req, reply, payload, done) => {
      if (req.raw.complete || req.raw.destroyed) return done(null, payload);
      drainBody(req.raw, drain).then(
        () => {
          if (!req.raw.complete) reply.header('connection', 'close');
          done(null, payload);
        },
        (err: Error) => done(err),
      );
    });
    app.setErrorHandler(async (err, req, reply) => {
      // routeOptions.bodyLimit is the limit in force for this request: the route's own
      // (steps:batch) or the server's (LAMER_BODY_LIMIT_BYTES)
      const p = withOpenAiError(toProblem(err, req.url, req.id, dbRetry, req.routeOptions?.bodyLimit), req.url);
      const db = databaseErrorOf(err);
      // A locked or full database is a condition, not a bug: one line without a stack.
      if (db) req.log.warn({ problem: p.type, code: db.code }, 'request refused: database busy or storage failing');
      // Refusing a request because the server is stopping is routine: one info line, no stack.
      else if (err instanceof DomainError && err.kind === 'shutting-down') req.log.info({ problem: p.type, status: p.status }, 'request refused: shutting down');
      else if (p.status >= 500) req.log.error({ err }, 'request failed');
      else req.log.info({ problem: p.type, status: p.status, detail: p.detail }, 'request rejected');
      if (p.status === 401) reply.header('www-authenticate', 'Bearer');
      const retryAfter = retryAfterOf(err, dbRetry);
      if (retryAfter !== null) reply.header('retry-after', String(retryAfter));
      // A problem document is written as plain JSON, never through the route's response schema
      // for its status: /readyz declares its own 503 body (the readiness report), and that
      // serializer would fail on a 503 `shutting-down` problem and turn it into a 500.
      return reply.code(p.status).type('application/problem+json').serializer(problemJson).send(p);
    });
    // Route patterns by method, to tell 405 (known path, other method) from 404.
    const routes: Array<{ re: RegExp; methods: string[] }> = [];
    app.addHook('onRoute', (r) => {
      if (r.url.includes('*')) return;
      const methods = (Array.isArray(r.method) ? r.method : [r.method]).map(String);
      routes.push({ re: routePattern(r.url), methods });
    });
    /** Answers a request that matched no route: 405 with Allow when its path has other methods, else 404. */
    const answerNoRoute = (req: FastifyRequest, reply: FastifyReply): void => {
      const path = req.url.split('?')[0]!;
      const allow = [...new Set(routes.filter((r) => r.re.test(path)).flatMap((r) => r.methods))].sort();
      if (allow.length > 0) {
        const p = withOpenAiError(doc('method-not-allowed', `${req.method} is not allowed on ${path}; allowed: ${allow.join(', ')}`, req.url, req.id), req.url);
        reply.code(405).header('allow', allow.join(', ')).type('application/problem+json').send(p);
        return;
      }
      const p = withOpenAiError(doc('not-found', `no route ${req.method} ${path}`, req.url, req.id), req.url);
      reply.code(404).type('application/problem+json').send(p);
    };
    // A request no route matched is answered from its headers: its body (however large, whatever
    // its type or encoding) is never parsed, only drained (onSend above).
    app.addHook('onRequest', (req, reply, done) => {
      if (req.routeOptions.url !== undefined) return done();
      // answered here: the request goes no further (done is not called)
      answerNoRoute(req, reply);
    });
    app.setNotFoundHandler(answerNoRoute);
  },
  { name: 'errors' },
);
