/**
 * Decorates `app.training` (TrainingJobManager: queue, worker thread, new model versions) and
 * `app.trainingScheduler` (TrainingScheduler, or null when `config.training` sets neither
 * `everySessions` nor `cron`). On close: stop the schedule, cancel the running job (it stops after
 * its current iteration) and wait for it, before the engine and the database close.
 *
 * Jobs write checkpoints under `<dataDir>/checkpoints/<version>/`; the worker's model I/O is the
 * builtin GPT adapter on `config.tfjsBackend` unless `config.training.modelIO` names another.
 */
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../../config.js';
import { jobCountsByStatus, runningJobs } from '../../db/jobs-repo.js';
import { TrainingJobManager } from '../../training/manager.js';
import { TrainingScheduler } from '../../training/scheduler.js';
import { DEFAULT_MODEL_IO } from '../../training/worker.js';

declare module 'fastify' {
  interface FastifyInstance {
    training: TrainingJobManager;
    trainingScheduler: TrainingScheduler | null;
  }
}

export default fp(
  async function training(app: FastifyInstance, opts: { config: Config }) {
    const { config } = opts;
    const logger = app.log.child({ component: 'training' });
    const modelIO = config.training.modelIO ?? { ...DEFAULT_MODEL_IO, options: { backend: config.tfjsBackend } };
    const manager = new TrainingJobManager({
      db: app.db.db, dataDir: config.dataDir, registry: app.models, logger, modelIO,
      maxQueuedJobs: config.training.maxQueuedJobs ?? 0, queueRetryAfterSeconds: config.training.queueRetryAfterSeconds ?? 60,
    });
    let scheduler: TrainingScheduler | null = null;
    const t = config.training;
    if (t.everySessions > 0 || t.cron !== null) {
      scheduler = new TrainingScheduler(
        app.db.db,
        manager,
        {
          ...(t.everySessions > 0 ? { everySessions: t.everySessions } : {}),
          ...(t.cron !== null ? { cron: t.cron } : {}),
          job: { algorithm: t.algorithm, activate: t.activate, ...(t.env !== null ? { data: { env: t.env } } : {}) },
        },
        logger,
      );
      scheduler.start();
      logger.info({ everySessions: t.everySessions || null, cron: t.cron, algorithm: t.algorithm, activate: t.activate, nextRun: scheduler.nextRun() }, 'training schedule started');
    }
    // /metrics: progress of running jobs and job counts by status, read from the jobs table.
    app.metrics.sources.runningJobs = () => runningJobs(app.db.db);
    app.metrics.sources.jobsByStatus = () => jobCountsByStatus(app.db.db);
    app.decorate('training', manager);
    app.decorate('trainingScheduler', scheduler);
    app.addHook('onClose', async () => {
      scheduler?.stop();
      await manager.close();
    });
  },
  { name: 'training', dependencies: ['db', 'engine', 'metrics'] },
);
