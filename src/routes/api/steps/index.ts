/**
 * `POST /v1/steps:batch` (docs/protocol.md "Batch"): many sessions' steps in one request (vectorised
 * environments). Items run concurrently (each session still serialised) and succeed or fail on
 * their own: `{results: [{ok: true, result} | {ok: false, error: <problem>}]}` in input order.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { bearer, checkJsonBytes, errorResponses, Problem } from '../common.js';
import { StepAnswer, makeSessionSchemas } from '../../../agent/schemas.js';
import { retryAfterOf, toProblem } from '../../../plugins/app/errors.js';

const BatchResult = Type.Object({
  ok: Type.Boolean(),
  result: Type.Optional(StepAnswer),
  error: Type.Optional(Problem),
});

const stepsRoutes: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { BatchBody, BatchItem } = makeSessionSchemas(app.config.limits);
  // The request is validated loosely (items: objects with a sessionId); each item is then
  // validated on its own against BatchItem, so one bad item fails alone. The OpenAPI document
  // still shows BatchBody with the full item shape.
  const LooseBatchBody = Type.Object(
    {
      items: Type.Array(Type.Object({ sessionId: Type.String({ minLength: 1, maxLength: 64 }) }, { additionalProperties: true }), {
        minItems: 1,
        maxItems: app.config.limits.batchItems,
      }),
    },
    { additionalProperties: false },
  );
  const validateLoose = app.bodyAjv.compile(LooseBatchBody);
  const validateItem = app.bodyAjv.compile(BatchItem);
  app.post(
    '/v1/steps::batch',
    {
      bodyLimit: app.config.limits.batchBodyBytes,
      validatorCompiler: () => validateLoose,
      schema: {
        tags: ['sessions'],
        summary: "Post many sessions' steps at once; each item succeeds or fails on its own",
        security: bearer,
        body: BatchBody,
        response: { 200: Type.Object({ results: Type.Array(BatchResult) }), ...errorResponses },
      },
    },
    async (req, reply) => {
      let retryAfter = 0;
      const results = await Promise.all(
        req.body.items.map(async (item, i) => {
          try {
            if (!validateItem(item)) {
              throw Object.assign(new Error('batch item is invalid'), {
                validation: validateItem.errors ?? [],
                validationContext: `body/items/${i}`,
              });
            }
            checkJsonBytes(item.info, app.config.limits.infoBytes, `body/items/${i}/info`, 'LAMER_MAX_INFO_BYTES');
            const { sessionId, ...step } = item;
            return { ok: true, result: await app.agent.step(req.tenant, sessionId, step) };
          } catch (err) {
            const p = toProblem(err, `${req.url}#/items/${i}`, req.id, app.config.database);
            retryAfter = Math.max(retryAfter, retryAfterOf(err, app.config.database) ?? 0);
            if (p.status >= 500) req.log.error({ err, item: i }, 'batch item failed');
            if (p.status >= 400 && p.status < 500) app.metrics.stepRequests.inc({ outcome: 'rejected' });
            return { ok: false, error: p };
          }
        }),
      );
      // An item refused for overload carries its 503 in the results; the header says when to retry it.
      if (retryAfter > 0) reply.header('retry-after', String(retryAfter));
      return { results };
    },
  );
};

export default stepsRoutes;
