/**
 * Training-job routes (DESIGN §3 `training/jobs`): create, list (filters, cursor
 * pagination, newest first), get (status, progress, data counts with skipped groups, metrics per
 * iteration, result version, error), cancel. Admin key required when API keys are configured.
 * Dependencies by decoration: `app.training` (TrainingJobManager, src/plugins/app/training.ts).
 *
 * Cancel is `POST /v1/training/jobs/{id}/cancel`: a queued job becomes `cancelled` at once (200);
 * a running one stops after its current iteration (202, the job as it is now); a cancelled one is
 * returned unchanged (200); a succeeded or failed one is a 409 problem.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Static } from 'typebox';
import type { TrainingJobRow } from '../../../db/schema.js';
import { listJobs } from '../../../db/jobs-repo.js';
import { DomainError, invalid, notFound } from '../../../agent/errors.js';
import { ensureDirSync } from '../../../ensure-dir.js';
import type { CreateJobRequest } from '../../../training/manager.js';
import type { DataFilter } from '../../../training/select.js';
import type { IterationMetrics } from '../../../training/job.js';
import { bearer, errorResponses } from '../common.js';
import { CreateJob, Job, JobList, JobParams, ListJobsQuery } from './schemas.js';

const tags = ['training'];

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** `<dataDir>/demos`: where sft demonstrations are read from (and inline ones written to). */
const demosDirOf = (app: FastifyInstance) => path.join(app.config.dataDir, 'demos');

/** A job as listed: everything but the per-iteration metrics. */
function summaryOf(r: TrainingJobRow, demosDir: string) {
  const c = r.config as Partial<CreateJobRequest> & { baseVersion?: string; dataStats?: unknown; dataset?: { path: string; samples: number } };
  const metrics = (r.metrics ?? []) as IterationMetrics[];
  const data = c.data ? { ...c.data, ...(c.data.since !== undefined ? { since: iso(c.data.since) } : {}) } : null;
  return {
    id: r.id,
    algorithm: r.algorithm,
    status: r.status,
    progress: r.progress,
    baseVersion: c.baseVersion ?? '',
    version: c.version ?? null,
    resultVersion: r.resultVersion,
    activateWhenDone: c.activate === true,
    data: r.algorithm === 'sft' ? null : data,
    demonstrations: c.demosPath ? path.relative(demosDir, c.demosPath) : null,
    hyperparameters: (c.hyper ?? {}) as Record<string, unknown>,
    dataStats: (c.dataStats ?? null) as never,
    // remote base versions: the batch written for an external trainer, relative to the data directory
    dataset: c.dataset ? { path: path.relative(path.dirname(demosDir), c.dataset.path), samples: c.dataset.samples } : null,
    iterations: metrics.length,
    lastMetrics: metrics.length > 0 ? metrics[metrics.length - 1]! : null,
    error: r.error,
    createdAt: iso(r.createdAt)!,
    startedAt: iso(r.startedAt),
    finishedAt: iso(r.finishedAt),
  };
}

/** A job with its metrics per iteration. */
const viewOf = (r: TrainingJobRow, demosDir: string) => ({ ...summaryOf(r, demosDir), metrics: (r.metrics ?? []) as IterationMetrics[] });

/** The job `id`. @throws DomainError `not-found`. */
function findJob(app: FastifyInstance, id: string): TrainingJobRow {
  const r = app.training.get(id);
  if (!r) throw notFound(`training job '${id}'`);
  return r;
}

/**
 * The JSONL file an sft job reads: an existing file under <dataDir>/demos/, or the inline sessions
 * written there. @throws DomainError `validation` naming the demonstrations field at fault.
 */
function demosFile(demosDir: string, d: { path?: string; sessions?: unknown[] } | undefined): string {
  if (!d || (d.path === undefined) === (d.sessions === undefined)) {
    throw invalid('body/demonstrations', 'an sft job needs exactly one of demonstrations.path or demonstrations.sessions');
  }
  if (d.path !== undefined) {
    const rel = d.path;
    if (rel.startsWith('/') || rel.split('/').includes('..')) throw invalid('body/demonstrations/path', 'must be relative to the demos folder, without ..');
    const file = path.join(demosDir, rel);
    if (!existsSync(file) || !statSync(file).isFile()) throw invalid('body/demonstrations/path', `no file '${rel}' in the data directory's demos/ folder`);
    return file;
  }
  ensureDirSync(path.join(demosDir, 'inline'));
  const file = path.join(demosDir, 'inline', `${randomUUID()}.jsonl`);
  writeFileSync(file, d.sessions!.map((s) => JSON.stringify(s)).join('\n') + '\n');
  return file;
}

/** The data filter of a request body (`since` as ms since the epoch). @throws DomainError `validation`. */
function dataFilterOf(data: Static<typeof CreateJob>['data']): DataFilter | undefined {
  if (!data) return undefined;
  const { since, ...rest } = data;
  const filter: DataFilter = { ...rest };
  if (since !== undefined) {
    const ms = Date.parse(since);
    if (!Number.isFinite(ms)) throw invalid('body/data/since', 'must be a date-time');
    filter.since = ms;
  }
  return filter;
}

/** The manager's request for a create body. @throws DomainError `validation` for a body that mixes sft and RL fields. */
function jobRequestOf(b: Static<typeof CreateJob>, demosDir: string): CreateJobRequest {
  const isSft = b.algorithm === 'sft';
  if (!isSft && b.demonstrations !== undefined) throw invalid('body/demonstrations', `only sft jobs take demonstrations, not ${b.algorithm}`);
  // RL trains at the positions the sampler served (offset 0): see TrainingHyper.positionOffset
  if (!isSft && b.hyperparameters?.positionOffset === 'random') throw invalid('body/hyperparameters/positionOffset', `random position offsets are for sft jobs only, not ${b.algorithm}`);
  // warm-up and final ratio shape the cosine schedule; with a constant lr they would be silently ignored
  const hp = b.hyperparameters;
  for (const k of ['warmupSteps', 'minLrRatio'] as const) {
    if (hp?.[k] !== undefined && hp.lrSchedule !== 'cosine') throw invalid(`body/hyperparameters/${k}`, `applies to lrSchedule 'cosine' only (lrSchedule is ${hp.lrSchedule ?? "'constant' by default"})`);
  }
  if (isSft && b.data !== undefined) throw invalid('body/data', 'sft jobs train on demonstrations, not on recorded sessions');
  const data = dataFilterOf(b.data);
  return {
    algorithm: b.algorithm,
    ...(data ? { data } : {}),
    ...(isSft ? { demosPath: demosFile(demosDir, b.demonstrations) } : {}),
    ...(b.baseVersion !== undefined ? { baseVersion: b.baseVersion } : {}),
    ...(b.version !== undefined ? { version: b.version } : {}),
    activate: b.activateWhenDone ?? false,
    ...(b.hyperparameters ? { hyper: b.hyperparameters } : {}),
  };
}

/** POST /v1/training/jobs: queue a job (201 with Location). */
function createRoute(fastify: FastifyInstance): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const demosDir = demosDirOf(app);
  app.post(
    '/v1/training/jobs',
    {
      schema: {
        tags,
        summary: 'Start a training job (queued; one runs at a time)',
        description:
          'RL algorithms (lamer, gigpo, grpo, rloo) train on completed `mode: train` sessions matching `data`; `sft` trains on `demonstrations`. ' +
          'The result is a new model version (status candidate, or active with activateWhenDone).',
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
      const request = jobRequestOf(req.body, demosDir);
      // refusals are DomainErrors by kind: conflict (version taken), validation, too-many-jobs, overloaded (closing)
      let row: TrainingJobRow;
      try {
        row = app.training.create(request);
      } catch (err) {
        // a refused job leaves nothing behind: the inline demonstrations written for it go too
        if (request.demosPath?.startsWith(path.join(demosDir, 'inline') + path.sep)) rmSync(request.demosPath, { force: true });
        throw err;
      }
      req.log.info({ jobId: row.id, algorithm: row.algorithm }, 'training job created');
      reply.code(201).header('location', `/v1/training/jobs/${row.id}`);
      return viewOf(row, demosDir);
    },
  );
}

/** GET /v1/training/jobs: newest first, filters, cursor pagination. */
function listRoute(fastify: FastifyInstance): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const demosDir = demosDirOf(app);
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
    async (req) => {
      const { status, algorithm, cursor } = req.query;
      const limit = req.query.limit ?? 50;
      const rows = listJobs(app.db.db, { ...(status ? { status } : {}), ...(algorithm ? { algorithm } : {}), ...(cursor ? { cursor } : {}), limit });
      const page = rows.slice(0, limit);
      const last = page[page.length - 1];
      return { items: page.map((r) => summaryOf(r, demosDir)), nextCursor: rows.length > limit && last ? `${last.createdAt}~${last.id}` : null };
    },
  );
}

/** GET /v1/training/jobs/:id. */
function getRoute(fastify: FastifyInstance): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const demosDir = demosDirOf(app);
  app.get(
    '/v1/training/jobs/:id',
    {
      schema: {
        tags,
        summary: 'Get a training job: status, progress, data counts (skipped groups), metrics per iteration, result version',
        security: bearer,
        params: JobParams,
        response: { 200: Job, ...errorResponses },
      },
    },
    async (req) => viewOf(findJob(app, req.params.id), demosDir),
  );
}

/** POST /v1/training/jobs/:id/cancel. @throws DomainError `conflict` for a job that already finished. */
function cancelRoute(fastify: FastifyInstance): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const demosDir = demosDirOf(app);
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
      const before = findJob(app, req.params.id);
      if (before.status === 'succeeded' || before.status === 'failed') {
        throw new DomainError('conflict', `training job '${before.id}' already ${before.status}`);
      }
      const after = app.training.cancel(before.id) ?? before;
      if (after.status === 'running') reply.code(202);
      req.log.info({ jobId: before.id, status: after.status }, 'training job cancel requested');
      return viewOf(after, demosDir);
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
