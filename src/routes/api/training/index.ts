/**
 * Training-job routes (docs/protocol.md "Training jobs"): create, list (filters, cursor
 * pagination, newest first), get (status, progress, data counts with zero-advantage groups, metrics per
 * iteration, result version, error), cancel. Admin key required when API keys are configured.
 * Dependencies by decoration: `app.training` (TrainingService, src/training/service.ts), which
 * holds every job rule; these handlers only pass requests through.
 *
 * Cancel is `POST /v1/training/jobs/{id}/cancel`: a queued job becomes `cancelled` at once (200);
 * a running one stops after its current iteration (202, the job as it is now); a cancelled one is
 * returned unchanged (200); a succeeded or failed one is a 409 problem.
 */
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { CreateJob, Job, JobList, JobParams, ListJobsQuery } from '../../../training/schemas.js';
import { bearer, errorResponses } from '../common.js';

const tags = ['training'];

/** POST /v1/training/jobs: queue a job (201 with Location). */
function createRoute(fastify: FastifyInstance): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.post(
    '/v1/training/jobs',
    {
      schema: {
        tags,
        summary: 'Start a training job (queued; one runs at a time)',
        description:
          'RL algorithms (lamer, gigpo, grpo, rloo) train on completed `mode: train` sessions matching `data`; `sft` trains on `demonstrations`. ' +
          'The result is a new model version (status candidate, or active with activateWhenDone). ' +
          'With a gate, the new version and the active one then play the same held-out tasks in a worker thread, and the new one is ' +
          'activated only when its pass@k beats the active one\'s by the margin (the gate\'s figures on the job and the version).',
        security: bearer,
        body: CreateJob,
        response: {
          201: Job,
          ...errorResponses,
          '429': {
            ...errorResponses['429'],
            description: 'rate limit of the API key exceeded (problem rate-limited), or LAMER_TRAIN_MAX_QUEUED_JOBS jobs already queued (problem too-many-jobs); the Retry-After header gives the seconds to wait',
          },
        },
      },
    },
    async (req, reply) => {
      const job = await app.training.create(req.body);
      req.log.info({ jobId: job.id, algorithm: job.algorithm }, 'training job created');
      reply.code(201).header('location', `/v1/training/jobs/${job.id}`);
      return job;
    },
  );
}

/** GET /v1/training/jobs: newest first, filters, cursor pagination. */
function listRoute(fastify: FastifyInstance): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    '/v1/training/jobs',
    {
      schema: {
        tags,
        summary: 'List training jobs, newest first, with filters and cursor pagination',
        security: bearer,
        querystring: ListJobsQuery,
        response: { 200: JobList, ...errorResponses },
      },
    },
    async (req) => app.training.list(req.query),
  );
}

/** GET /v1/training/jobs/:id. */
function getRoute(fastify: FastifyInstance): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    '/v1/training/jobs/:id',
    {
      schema: {
        tags,
        summary: 'Get a training job: status, progress, data counts (zero-advantage groups), metrics per iteration, result version',
        security: bearer,
        params: JobParams,
        response: { 200: Job, ...errorResponses },
      },
    },
    async (req) => app.training.get(req.params.id),
  );
}

/** POST /v1/training/jobs/:id/cancel (202 while the job is still running). */
function cancelRoute(fastify: FastifyInstance): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.post(
    '/v1/training/jobs/:id/cancel',
    {
      schema: {
        tags,
        summary: 'Cancel a job: a queued one at once (200), a running one after its current iteration (202); 409 when it already finished',
        security: bearer,
        params: JobParams,
        response: { 200: Job, 202: Job, ...errorResponses },
      },
    },
    async (req, reply) => {
      const { job, running } = await app.training.cancel(req.params.id);
      if (running) reply.code(202);
      req.log.info({ jobId: job.id, status: job.status }, 'training job cancel requested');
      return job;
    },
  );
}

const trainingRoutes: FastifyPluginAsync = async (app) => {
  app.addHook('onRequest', app.requireAdmin);
  createRoute(app);
  listRoute(app);
  getRoute(app);
  cancelRoute(app);
};

export default trainingRoutes;
