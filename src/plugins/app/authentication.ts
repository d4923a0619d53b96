/**
 * API keys as Bearer tokens (issue 2, "Auth"). With keys configured every `/v1` route needs one;
 * each key belongs to a tenant (`request.tenant`) and admin keys may use model and training routes
 * (`app.requireAdmin`, an onRequest hook for those route plugins). With no keys configured every
 * request is tenant `default` with admin rights (the server then listens on loopback only).
 */
import { createHash } from 'node:crypto';
import fp from 'fastify-plugin';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ApiKey } from '../../config.js';
import { ApiProblem } from '../../agent/problems.js';

declare module 'fastify' {
  interface FastifyRequest {
    tenant: string;
    isAdmin: boolean;
  }
  interface FastifyInstance {
    requireAdmin: (req: FastifyRequest, reply: FastifyReply) => Promise<void>;
  }
}

const digest = (k: string) => createHash('sha256').update(k).digest('hex');

export default fp(
  async function authentication(app: FastifyInstance, opts: { apiKeys: ApiKey[] }) {
    // Keys are compared by their sha256 digest: constant-time in the key's content.
    const byDigest = new Map(opts.apiKeys.map((k) => [digest(k.key), k]));
    const open = opts.apiKeys.length === 0;
    app.decorateRequest('tenant', 'default');
    app.decorateRequest('isAdmin', false);
    app.addHook('onRequest', async (req) => {
      if (open) {
        req.tenant = 'default';
        req.isAdmin = true;
        return;
      }
      if (!req.url.startsWith('/v1/') && req.url !== '/v1') return;
      const h = req.headers.authorization;
      const m = typeof h === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(h) : null;
      if (!m) throw new ApiProblem(401, 'unauthorized', 'Unauthorized', 'send an API key as "Authorization: Bearer <key>"');
      const key = byDigest.get(digest(m[1]!));
      if (!key) throw new ApiProblem(401, 'unauthorized', 'Unauthorized', 'unknown API key');
      req.tenant = key.tenant;
      req.isAdmin = key.admin;
    });
    app.decorate('requireAdmin', async (req: FastifyRequest) => {
      if (!req.isAdmin) throw new ApiProblem(403, 'forbidden', 'Forbidden', 'this route needs an admin API key');
    });
  },
  { name: 'authentication' },
);
