/**
 * Rate limits per API key with @fastify/rate-limit: at most `protection.rateLimitMax` requests per
 * `rateLimitWindowSeconds` on API routes (`/v1...`, `/openai/v1/...`: the route the router matched,
 * whatever the spelling of the URL), counted per API key (the sha256 of the Bearer token; per
 * client IP when the request has none). Operations routes (`/healthz`, `/readyz`, `/metrics`,
 * `/docs`) are never limited. Over the limit the answer is 429 `rate-limited` problem+json with
 * `Retry-After` (seconds until the window resets) and the `x-ratelimit-*` headers; nothing is
 * recorded. Not registered when `rateLimitMax` is 0.
 *
 * The other protections live in the agent: the bound on queued model calls (503 overloaded) and
 * the cap on open sessions per tenant (409 too-many-sessions).
 */
import { createHash } from 'node:crypto';
import fp from 'fastify-plugin';
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ProtectionConfig } from '../../config.js';
import { DomainError } from '../../agent/errors.js';
import { isApiRoute } from '../app/authentication.js';

/** Rate-limit key of a request: `key:<sha256 of the Bearer token>` or `ip:<address>`. */
export function rateLimitKey(req: FastifyRequest): string {
  const h = req.headers.authorization;
  const m = typeof h === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(h) : null;
  return m ? `key:${createHash('sha256').update(m[1]!).digest('hex')}` : `ip:${req.ip}`;
}

export default fp(
  async function rateLimitPlugin(app: FastifyInstance, opts: { protection: ProtectionConfig }) {
    const p = opts.protection;
    if (p.rateLimitMax <= 0) return;
    await app.register(rateLimit, {
      global: true,
      hook: 'onRequest',
      max: p.rateLimitMax,
      timeWindow: p.rateLimitWindowSeconds * 1000,
      keyGenerator: rateLimitKey,
      // Decided on the matched route pattern, never on the URL text (which has many spellings of
      // one route: `/%76%31/sessions` is routed to `/v1/sessions`).
      allowList: (req) => !isApiRoute(req.routeOptions.url),
      onExceeded: () => app.metrics.rateLimited.inc(),
      errorResponseBuilder: (_req, ctx) =>
        new DomainError(
          'rate-limited',
          `rate limit of ${ctx.max} requests per ${p.rateLimitWindowSeconds} s exceeded; retry in ${ctx.after}`,
          { retryAfterSeconds: Math.max(1, Math.ceil(ctx.ttl / 1000)) },
        ),
    });
  },
  { name: 'rate-limit', dependencies: ['errors', 'metrics'] },
);
