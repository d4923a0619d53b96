/**
 * API keys as Bearer tokens. With keys configured every route under `/v1` needs one; each key
 * belongs to a tenant (`request.tenant`) and admin keys may use model and training routes
 * (`app.requireAdmin`, an onRequest hook of those route plugins). With no keys configured every
 * request is tenant `default` with admin rights (the server then listens on loopback only).
 *
 * The decision is taken on the route the router matched (`request.routeOptions.url`, the pattern
 * written in the code, e.g. `/v1/sessions/:id`), never on the request's URL text: the router
 * decodes percent-escapes (`/%76%31/sessions` reaches `/v1/sessions`), so any test on `req.url`
 * could be bypassed by another spelling of the same route. A request no route matched reaches no
 * handler (404/405). While keys are configured, reading `request.tenant` on a request that was not
 * authenticated throws 401: no handler can fall back to a default tenant.
 */
import { createHash } from 'node:crypto';
import fp from 'fastify-plugin';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ApiKey } from '../../config.js';
import { DomainError } from '../../agent/errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The tenant of the request's API key (`default` without keys). @throws DomainError `unauthorized` when not authenticated. */
    tenant: string;
    isAdmin: boolean;
    /** The authenticated tenant, or null before/without authentication (read `tenant` instead). */
    authTenant: string | null;
  }
  interface FastifyInstance {
    requireAdmin: (req: FastifyRequest, reply: FastifyReply) => Promise<void>;
  }
}

const digest = (k: string) => createHash('sha256').update(k).digest('hex');

/**
 * True when a matched route pattern (Fastify `routeOptions.url`, e.g. `/v1/steps::batch`) is an
 * API route that needs a key: the `/v1` API and the OpenAI-compatible endpoint under `/openai/v1/`.
 * `undefined` (no route matched: the 404 handler) is false.
 */
export function isApiRoute(pattern: string | undefined): boolean {
  return (
    pattern !== undefined &&
    (pattern === '/v1' || pattern.startsWith('/v1/') || pattern.startsWith('/v1:') || pattern.startsWith('/openai/v1/'))
  );
}

const unauthorized = (detail: string) => new DomainError('unauthorized', detail);

export default fp(
  async function authentication(app: FastifyInstance, opts: { apiKeys: ApiKey[] }) {
    // Keys are compared by their sha256 digest: constant-time in the key's content.
    const byDigest = new Map(opts.apiKeys.map((k) => [digest(k.key), k]));
    const open = opts.apiKeys.length === 0;
    app.decorateRequest('authTenant', null);
    app.decorateRequest('tenant', {
      getter(this: FastifyRequest) {
        if (this.authTenant === null) throw unauthorized('send an API key as "Authorization: Bearer <key>"');
        return this.authTenant;
      },
    });
    app.decorateRequest('isAdmin', false);
    app.addHook('onRequest', (req, _reply, done) => {
      if (open) {
        req.authTenant = 'default';
        req.isAdmin = true;
        return done();
      }
      if (!isApiRoute(req.routeOptions.url)) return done();
      const h = req.headers.authorization;
      const m = typeof h === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(h) : null;
      if (!m) return done(unauthorized('send an API key as "Authorization: Bearer <key>"'));
      const key = byDigest.get(digest(m[1]!));
      if (!key) return done(unauthorized('unknown API key'));
      req.authTenant = key.tenant;
      req.isAdmin = key.admin;
      done();
    });
    app.decorate('requireAdmin', async (req: FastifyRequest) => {
      if (req.authTenant === null) throw unauthorized('send an API key as "Authorization: Bearer <key>"');
      if (!req.isAdmin) throw new DomainError('forbidden', 'this route needs an admin API key');
    });
  },
  { name: 'authentication' },
);
