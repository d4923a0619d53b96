/**
 * Graceful shutdown without connection resets. Decorates `app.beginShutdown()` (from now on every
 * new request is answered 503 `shutting-down`), `app.onShutdownBegin(listener)` (told when that
 * happens: the health listener, ./health-port.ts, turns its answers to 503 then) and
 * `app.drainAndClose()` (the whole shutdown: drain, stop listening, wait for connections, close the
 * app, whose onClose hooks stop the engine, the database and the health listener's thread).
 *
 * Why not just `app.close()`: Node's `http.Server.close()` destroys every connection it considers
 * idle, and a connection whose request bytes have arrived but are not parsed yet (accepted in the
 * last event-loop turn, or a keep-alive connection whose next request is in flight) counts as
 * idle, so its client gets ECONNRESET. Likewise connections still in the kernel's accept queue
 * when the listening socket closes are reset. So the shutdown here:
 *
 * 1. answers every new request 503 `shutting-down` (problem+json, `Retry-After`,
 *    `connection: close`) and puts `connection: close` on the answers of in-flight requests, so
 *    each connection is closed by Node right after its answer;
 * 2. keeps the listening socket open for `drainMs`: connections that arrive meanwhile are
 *    accepted and get the 503 answer (a load balancer sees /readyz 503 and stops sending);
 * 3. closes the listening socket from a `setImmediate` callback, i.e. right after the poll phase
 *    in which libuv accepted everything in the accept queue, and without Node's idle sweep;
 * 4. waits for the open connections: a connection with no request in progress and no new bytes
 *    since the last sweep is closed (if it has answered a request before: at once; if it has
 *    never sent a whole request: after `freshMs`, to let its first request arrive);
 * 5. after `graceMs` cuts whatever is left, then runs `app.close()` (onClose hooks: training
 *    job, engine, database).
 */
import net from 'node:net';
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { DomainError } from '../../agent/errors.js';

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * Start shutting down: from now on every new request is answered 503 `shutting-down` (with
     * `Retry-After` and `connection: close`); requests already past `onRequest` finish, and their
     * answers carry `connection: close`.
     */
    beginShutdown(): void;
    /** True once {@link beginShutdown} (or `app.close()`) was called. */
    isShuttingDown(): boolean;
    /**
     * Calls `listener` once, synchronously, when the shutdown begins ({@link beginShutdown},
     * {@link drainAndClose} or `app.close()`); at once when it has begun already. A listener that
     * throws is logged and does not stop the shutdown.
     */
    onShutdownBegin(listener: () => void): void;
    /**
     * The whole graceful shutdown (see the module comment); resolves when the app is closed
     * (database closed). Calling it again returns the same promise.
     */
    drainAndClose(): Promise<void>;
  }
}

/** Shutdown timings, ms. */
export interface ShutdownTimings {
  /** The listening socket stays open this long after the shutdown starts (new requests get 503). */
  drainMs: number;
  /** A connection that has not sent a whole request yet gets this long to send one. */
  freshMs: number;
  /** Longest wait for in-flight requests; then every connection is cut. */
  graceMs: number;
}

export const SHUTDOWN_DEFAULTS: ShutdownTimings = { drainMs: 100, freshMs: 1000, graceMs: 10_000 };

/** Interval between sweeps of the open connections while waiting, ms. */
const SWEEP_MS = 20;
/** Longest wait, after the drain window, for an event-loop turn without new connections, ms. */
const QUIET_WAIT_MS = 1000;

interface ConnState {
  /** Requests received and not yet answered (HTTP/1.1 pipelining can make it > 1). */
  active: number;
  /** Requests answered on this connection. */
  answered: number;
  /** `socket.bytesRead` at the last sweep. */
  bytesRead: number;
  /** When the connection was accepted, ms (performance.now()). */
  since: number;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const afterPoll = () => new Promise<void>((r) => setImmediate(r));

type Server = FastifyInstance['server'];

/** The server's open connections, and a count of events that tells a quiet event-loop turn. */
interface Tracker {
  conns: Map<net.Socket, ConnState>;
  /** Connections accepted plus requests received, ever. */
  events: number;
}

/** Whether the shutdown has begun; shared by the hooks, the decorations and the drain. */
interface ShutdownFlag {
  readonly closing: boolean;
  /** Marks the shutdown begun and, the first time, calls the `onShutdownBegin` listeners. */
  begin(): void;
}

/**
 * Tracks every connection of `server` from its accept to its close: requests in progress and
 * answered on it, and when it was accepted. Also counts accepts and requests in `events`.
 */
function trackConnections(server: Server): Tracker {
  const tracker: Tracker = { conns: new Map(), events: 0 };
  server.on('connection', (socket: net.Socket) => {
    tracker.events++;
    tracker.conns.set(socket, { active: 0, answered: 0, bytesRead: 0, since: performance.now() });
    socket.once('close', () => tracker.conns.delete(socket));
  });
  server.on('request', (req: { socket: net.Socket }, res: NodeJS.EventEmitter) => {
    tracker.events++;
    const c = tracker.conns.get(req.socket);
    if (!c) return;
    c.active++;
    res.once('close', () => {
      c.active--;
      c.answered++;
    });
  });
  return tracker;
}

/**
 * Decorates `beginShutdown` and `isShuttingDown`, and adds the hooks that, once the shutdown has
 * begun (or `app.close()` was called), answer every new request 503 `shutting-down` (a
 * DomainError with `Retry-After: retryAfterSeconds`) and put `connection: close` on every answer.
 * Also decorates `onShutdownBegin` (listeners called when the shutdown begins).
 * @returns the flag the hooks read; `begin()` begins the shutdown.
 */
function refuseWhileClosing(app: FastifyInstance, retryAfterSeconds: number): ShutdownFlag {
  let closing = false;
  const listeners: Array<() => void> = [];
  const call = (listener: () => void) => {
    try {
      listener();
    } catch (err) {
      app.log.error({ err }, 'a shutdown listener failed');
    }
  };
  const flag: ShutdownFlag = {
    get closing() {
      return closing;
    },
    begin() {
      if (closing) return;
      closing = true;
      for (const l of listeners) call(l);
    },
  };
  app.decorate('beginShutdown', () => flag.begin());
  app.decorate('isShuttingDown', () => flag.closing);
  app.decorate('onShutdownBegin', (listener: () => void) => {
    if (closing) call(listener);
    else listeners.push(listener);
  });
  app.addHook('preClose', async () => {
    flag.begin();
  });
  app.addHook('onRequest', (_req, reply, done) => {
    if (!flag.closing) return done();
    // Ask keep-alive clients to reconnect (elsewhere) after this answer.
    reply.header('connection', 'close');
    done(new DomainError('shutting-down', 'the server is shutting down; send the same request again (to another instance)', {
      retryAfterSeconds,
    }));
  });
  // In-flight requests answered during the shutdown close their connection after the answer.
  app.addHook('onSend', (_req, reply, payload, done) => {
    if (flag.closing) reply.header('connection', 'close');
    done(null, payload);
  });
  return flag;
}

/**
 * Steps 2 and 3 of the module comment: keeps accepting for `drainMs`, then closes the listening
 * socket right after a quiet poll phase (at most {@link QUIET_WAIT_MS} later), leaving the open
 * connections alone.
 */
async function stopListening(server: Server, tracker: Tracker, drainMs: number): Promise<void> {
  await sleep(drainMs);
  // Close right after a poll phase that brought no new connection and no new request: libuv
  // has just emptied the accept queue and nothing delayed this callback, so (almost) no
  // connection can be waiting in the queue, where closing the socket would reset it. Under
  // a storm of reconnecting clients such a turn may not come: then after QUIET_WAIT_MS.
  const until = performance.now() + QUIET_WAIT_MS;
  for (;;) {
    const seen = tracker.events;
    await afterPoll();
    if (tracker.events === seen || performance.now() > until) break;
  }
  // net.Server's close stops listening only; http.Server's would also destroy connections
  // whose request bytes are not parsed yet (they count as idle), resetting them.
  net.Server.prototype.close.call(server);
}

/**
 * Step 4 of the module comment: every {@link SWEEP_MS} until no connection is left or `deadline`
 * (performance.now() ms) passes, closes each connection with no request in progress and no bytes
 * since the last sweep that has answered a request, or that has been open `freshMs` without one.
 */
async function closeIdleConnections(conns: Map<net.Socket, ConnState>, deadline: number, freshMs: number): Promise<void> {
  while (conns.size > 0 && performance.now() < deadline) {
    await sleep(SWEEP_MS);
    // After a poll phase, so bytes that arrived meanwhile have been read and parsed.
    await afterPoll();
    const now = performance.now();
    for (const [socket, c] of conns) {
      if (c.active > 0) continue;
      if (socket.bytesRead !== c.bytesRead) {
        c.bytesRead = socket.bytesRead; // part of a request arrived: give it another sweep
        continue;
      }
      if (c.answered > 0 || now - c.since >= freshMs) socket.destroy();
    }
  }
}

export default fp(
  async function shutdown(app: FastifyInstance, opts: { retryAfterSeconds: number; timings?: Partial<ShutdownTimings> }) {
    const t: ShutdownTimings = { ...SHUTDOWN_DEFAULTS, ...opts.timings };
    const server = app.server;
    const tracker = trackConnections(server);
    const flag = refuseWhileClosing(app, opts.retryAfterSeconds);

    let done: Promise<void> | null = null;
    app.decorate('drainAndClose', () => {
      done ??= run();
      return done;
    });

    /** The whole shutdown, steps 1 to 5 of the module comment. */
    async function run(): Promise<void> {
      flag.begin();
      const deadline = performance.now() + t.graceMs;
      if (server.listening) await stopListening(server, tracker, t.drainMs);
      await closeIdleConnections(tracker.conns, deadline, t.freshMs);
      for (const socket of tracker.conns.keys()) socket.destroy(); // the grace period is over
      await app.close();
    }
  },
  { name: 'shutdown' },
);
