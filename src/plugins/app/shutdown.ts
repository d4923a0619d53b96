/**
 * Graceful shutdown without connection resets. Decorates `app.beginShutdown()` (from now on every
 * new request is answered 503 `shutting-down`) and `app.drainAndClose()` (the whole shutdown:
 * drain, stop listening, wait for connections, close the app).
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

export default fp(
  async function shutdown(app: FastifyInstance, opts: { retryAfterSeconds: number; timings?: Partial<ShutdownTimings> }) {
    const t: ShutdownTimings = { ...SHUTDOWN_DEFAULTS, ...opts.timings };
    const server = app.server;
    const conns = new Map<net.Socket, ConnState>();
    /** Connections accepted plus requests received, ever: tells a quiet event-loop turn. */
    let events = 0;
    server.on('connection', (socket: net.Socket) => {
      events++;
      conns.set(socket, { active: 0, answered: 0, bytesRead: 0, since: performance.now() });
      socket.once('close', () => conns.delete(socket));
    });
    server.on('request', (req: { socket: net.Socket }, res: NodeJS.EventEmitter) => {
      events++;
      const c = conns.get(req.socket);
      if (!c) return;
      c.active++;
      res.once('close', () => {
        c.active--;
        c.answered++;
      });
    });

    let closing = false;
    app.decorate('beginShutdown', () => {
      closing = true;
    });
    app.decorate('isShuttingDown', () => closing);
    app.addHook('preClose', async () => {
      closing = true;
    });
    app.addHook('onRequest', async (_req, reply) => {
      if (closing) {
        // Ask keep-alive clients to reconnect (elsewhere) after this answer.
        reply.header('connection', 'close');
        throw new DomainError('shutting-down', 'the server is shutting down; send the same request again (to another instance)', {
          retryAfterSeconds: opts.retryAfterSeconds,
        });
      }
    });
    // In-flight requests answered during the shutdown close their connection after the answer.
    app.addHook('onSend', async (_req, reply) => {
      if (closing) reply.header('connection', 'close');
    });

    let done: Promise<void> | null = null;
    app.decorate('drainAndClose', () => {
      done ??= run();
      return done;
    });

    async function run(): Promise<void> {
      closing = true;
      const deadline = performance.now() + t.graceMs;
      if (server.listening) {
        await sleep(t.drainMs);
        // Close right after a poll phase that brought no new connection and no new request: libuv
        // has just emptied the accept queue and nothing delayed this callback, so (almost) no
        // connection can be waiting in the queue, where closing the socket would reset it. Under
        // a storm of reconnecting clients such a turn may not come: then after QUIET_WAIT_MS.
        const until = performance.now() + QUIET_WAIT_MS;
        for (;;) {
          const seen = events;
          await afterPoll();
          if (events === seen || performance.now() > until) break;
        }
        // net.Server's close stops listening only; http.Server's would also destroy connections
        // whose request bytes are not parsed yet (they count as idle), resetting them.
        net.Server.prototype.close.call(server);
      }
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
          if (c.answered > 0 || now - c.since >= t.freshMs) socket.destroy();
        }
      }
      for (const socket of conns.keys()) socket.destroy(); // the grace period is over
      await app.close();
    }
  },
  { name: 'shutdown' },
);
