/**
 * The `Host` header check against DNS rebinding. With no API keys the server listens on loopback
 * and gives every request admin rights; a web page in the operator's browser could still reach it
 * by pointing a DNS name it controls at 127.0.0.1, and the browser would then treat the server's
 * answers as the page's own (same origin). Such requests carry the page's name in `Host`, so with
 * no keys only loopback names and addresses are accepted (`localhost`, 127.0.0.0/8, `[::1]`, any
 * port), plus the names of LAMER_ALLOWED_HOSTS; every other Host is refused with 403
 * `host-not-allowed` before any route runs (nothing is read or written). A request without a Host
 * header (HTTP/1.0; no browser sends one) is accepted. With API keys a page cannot use the API
 * without a key, so the Host is checked only when LAMER_ALLOWED_HOSTS is set.
 *
 * The raw `Host` header is checked, never `X-Forwarded-Host`: a gateway in front of the server
 * must pass a listed name (or a loopback one) in `Host`.
 */
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { hostNameOf, isLoopbackHostName } from '../../config/access.js';
import { DomainError } from '../../agent/errors.js';

/** Most characters of a refused Host value repeated in the problem's detail. */
const SHOWN_HOST_CHARS = 100;

export default fp(
  async function hostCheck(app: FastifyInstance, opts: { keyless: boolean; allowedHosts: string[] }) {
    if (!opts.keyless && opts.allowedHosts.length === 0) return;
    const allowed = new Set(opts.allowedHosts);
    const why = opts.keyless
      ? 'with no API keys (LAMER_API_KEYS) this server answers only requests addressed to a loopback name (localhost, 127.0.0.1, [::1])'
      : 'this server answers only requests addressed to a loopback name (localhost, 127.0.0.1, [::1])';
    app.addHook('onRequest', (req, _reply, done) => {
      const header = req.headers.host;
      if (header === undefined) return done();
      const name = hostNameOf(header);
      if (name !== null && (isLoopbackHostName(name) || allowed.has(name))) return done();
      const shown = header.length > SHOWN_HOST_CHARS ? `${header.slice(0, SHOWN_HOST_CHARS)}...` : header;
      done(new DomainError(
        'host-not-allowed',
        `Host ${JSON.stringify(shown)} is not allowed: ${why} or to a name listed in LAMER_ALLOWED_HOSTS; use http://127.0.0.1:<port>, or add the name to LAMER_ALLOWED_HOSTS`,
      ));
    });
  },
  { name: 'host-check' },
);
