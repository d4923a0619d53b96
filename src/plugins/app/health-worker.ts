/**
 * The health listener's thread (started by ./health-port.ts): a node:http server on its own port
 * that answers `GET /healthz` and `GET /readyz` (and HEAD) without the server's event loop, from
 * what the server's thread last wrote (./health-state.ts): the heartbeat, the phase and the latest
 * readiness snapshot. It loads nothing but node:http and that module, so it starts in milliseconds
 * and its answers wait on nothing the server's thread does.
 *
 * Answers, the same shapes and codes as the API's routes (src/routes/ops.ts):
 * - while draining (the graceful shutdown has begun): both 503 `shutting-down` problem+json with
 *   `Retry-After` and `connection: close`, as the API answers every request then;
 * - while the heartbeat is older than the stall threshold (the server's event loop has not run its
 *   timers for that long: stuck, or blocked by one long synchronous section): `/healthz` 503
 *   `{"status":"stalled"}`, `/readyz` 503 with the last snapshot marked `not-ready`;
 * - else `/healthz` 200 `{"status":"ok"}`; `/readyz` the last snapshot, 200 when ready, else 503
 *   (and 503 `not-ready` until the API's port listens);
 * - another method on those paths 405 with `Allow`, any other path 404 (problem+json).
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { parentPort, workerData } from 'node:worker_threads';
import {
  HealthPhase, beatAgeMs, healthState, readPhase, type HealthWorkerData, type HealthWorkerMessage, type ReadinessMessage,
} from './health-state.js';

const data = workerData as HealthWorkerData & { readiness: ReadinessMessage };
const state = healthState(data.buffer);
let readiness: ReadinessMessage = data.readiness;
parentPort!.on('message', (m: ReadinessMessage) => {
  if (m.type === 'readiness') readiness = m;
});

const PROBLEMS = 'https://lamer-server.dev/problems/';
const PATHS = new Set(['/healthz', '/readyz']);

/** Writes `body` (JSON text) with `status` and the headers every answer of the server carries. */
function send(req: http.IncomingMessage, res: http.ServerResponse, status: number, body: string, type = 'application/json; charset=utf-8') {
  res.statusCode = status;
  res.setHeader('content-type', type);
  res.setHeader('content-length', Buffer.byteLength(body));
  res.setHeader('x-content-type-options', 'nosniff');
  res.setHeader('cache-control', 'no-store');
  res.end(req.method === 'HEAD' ? undefined : body);
}

/** An RFC 9457 problem answer, as src/plugins/app/errors.ts writes them. */
function problem(req: http.IncomingMessage, res: http.ServerResponse, status: number, kind: string, title: string, detail: string) {
  const requestId = randomUUID();
  res.setHeader('x-request-id', requestId);
  const doc = { type: PROBLEMS + kind, title, status, detail, instance: req.url ?? '', requestId };
  send(req, res, status, JSON.stringify(doc), 'application/problem+json; charset=utf-8');
}

/**
 * The answer to one request (see the module comment): the status and JSON body of a health or
 * readiness answer, or null when `problem` has answered already.
 */
function route(req: http.IncomingMessage, res: http.ServerResponse): { status: number; body: string } | null {
  const path = (req.url ?? '/').split('?')[0]!;
  if (!PATHS.has(path)) {
    problem(req, res, 404, 'not-found', 'Not Found', `no route ${req.method} ${path}`);
    return null;
  }
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.setHeader('allow', 'GET, HEAD');
    problem(req, res, 405, 'method-not-allowed', 'Method Not Allowed', `${req.method} is not allowed on ${path}; allowed: GET, HEAD`);
    return null;
  }
  const phase = readPhase(state);
  if (phase === HealthPhase.draining) {
    res.setHeader('retry-after', String(data.retryAfterSeconds));
    res.setHeader('connection', 'close');
    const detail = 'the server is shutting down; send the same request again (to another instance)';
    problem(req, res, 503, 'shutting-down', 'Service Unavailable', detail);
    return null;
  }
  const stalled = beatAgeMs(state) > data.stallMs;
  if (path === '/healthz') return stalled ? { status: 503, body: '{"status":"stalled"}' } : { status: 200, body: '{"status":"ok"}' };
  const ready = readiness.ready && !stalled && phase === HealthPhase.running;
  if (ready || !readiness.ready) return { status: ready ? 200 : 503, body: readiness.body };
  // ready by the last snapshot, but the server's thread is stalled or not listening yet
  return { status: 503, body: JSON.stringify({ ...JSON.parse(readiness.body), status: 'not-ready' }) };
}

/** The request handler: a body is not expected, so any is read and discarded. */
function answer(req: http.IncomingMessage, res: http.ServerResponse): void {
  req.resume();
  const a = route(req, res);
  if (a) send(req, res, a.status, a.body);
}

const server = http.createServer(answer);
// Health checks send no body and a small request: a client this slow is not one.
server.headersTimeout = 10_000;
server.requestTimeout = 10_000;
const post = (m: HealthWorkerMessage) => parentPort!.postMessage(m);
server.once('error', (err: NodeJS.ErrnoException) => post({ type: 'listen-error', code: err.code ?? 'error', message: err.message }));
server.listen({ host: data.host, port: data.port }, () => {
  const addr = server.address();
  post({ type: 'listening', port: typeof addr === 'object' && addr ? addr.port : data.port });
});
