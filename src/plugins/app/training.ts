/**
 * Decorates `app.training` (TrainingService, src/training/service.ts: the job rules over the
 * TrainingJobManager's queue, worker thread and new model versions) and `app.trainingScheduler`
 * (TrainingScheduler, or null when `config.training` sets neither `everySessions` nor `cron`, or
 * the server does not run jobs). Every server queues jobs; one that runs them (LAMER_ROLE `trainer`
 * or `both`) runs the queue while it holds the store's trainer lease, one server of the database
 * at a time (src/db/store.ts TrainerLease), and its schedule starts jobs only then.
 * On close: stop the schedule, cancel the running job (it stops after its current iteration) and
 * wait for it, before the engine and the database close.
 *
 * Jobs write checkpoints under `<dataDir>/checkpoints/<version>/`; sft demonstrations are read from
 * (and inline ones written to) `<dataDir>/demos/`; the worker's model I/O is the builtin GPT
 * adapter on `config.tfjsBackend` unless `config.training.modelIO` names another. Promotion gates
 * evaluate with the server's engine kind and backend, in a worker thread running
 * `config.training.gateEvaluator` (default src/cli/gate-eval.ts); scheduled jobs carry
 * `config.training.gate` (LAMER_TRAIN_GATE_*). Repositories come from `app.repos` (src/plugins/app/db.ts).
 */
import path from 'node:path';
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../../config.js';
import { TrainingJobManager } from '../../training/run/manager.js';
import { TrainingScheduler } from '../../training/run/scheduler.js';
import { TrainingService } from '../../training/service.js';
import { DEFAULT_MODEL_IO } from '../../training/run/worker.js';
import { DEFAULT_GATE_EVALUATOR } from '../../training/run/gate-worker.js';

declare module 'fastify' {
  interface FastifyInstance {
    training: TrainingService;
    trainingScheduler: TrainingScheduler | null;
  }
}

export default fp(
  async function training(app: FastifyInstance, opts: { config: Config }) {
    const { config } = opts;
    const { repos } = app;
    const logger = app.log.child({ component: 'training' });
    const modelIO = config.training.modelIO ?? { ...DEFAULT_MODEL_IO, options: { backend: config.tfjsBackend } };
    const runsJobs = (config.role ?? 'both') !== 'server';
    const manager = new TrainingJobManager({ repos, dataDir: config.dataDir, registry: app.models, logger, modelIO,
      maxQueuedJobs: config.training.maxQueuedJobs ?? 0, queueRetryAfterSeconds: config.training.queueRetryAfterSeconds ?? 60,
      runsJobs, lease: app.store.trainerLease(), pollMs: config.postgres?.pollMs ?? 2000,
      gate: {
        engine: { kind: config.engine, tfjsBackend: config.tfjsBackend },
        evaluator: config.training.gateEvaluator ?? DEFAULT_GATE_EVALUATOR,
      },
    });
    const service = new TrainingService({ manager, jobs: repos.jobs, demosDir: path.join(config.dataDir, 'demos') });
    await manager.start();
    let scheduler: TrainingScheduler | null = null;
    const t = config.training;
    if (runsJobs && (t.everySessions > 0 || t.cron !== null)) {
      scheduler = new TrainingScheduler(
        repos.trainingData,
        manager,
        {
          ...(t.everySessions > 0 ? { everySessions: t.everySessions } : {}),
          ...(t.cron !== null ? { cron: t.cron } : {}),
          job: {
            algorithm: t.algorithm, activate: t.activate,
            ...(t.env !== null ? { data: { env: t.env } } : {}), ...(t.gate ? { gate: t.gate } : {}),
          },
        },
        logger,
      );
      await scheduler.start();
      logger.info({
        everySessions: t.everySessions || null, cron: t.cron, algorithm: t.algorithm, activate: t.activate, nextRun: scheduler.nextRun(),
        gate: t.gate ? { env: t.gate.env, tasks: t.gate.tasks, metric: t.gate.metric, margin: t.gate.margin } : null,
      }, 'training schedule started');
    }
    // /metrics: progress of running jobs and job counts by status, read from the jobs table.
    app.metrics.sources.runningJobs = () => repos.jobs.running();
    app.metrics.sources.jobsByStatus = () => repos.jobs.countsByStatus();
    app.decorate('training', service);
    app.decorate('trainingScheduler', scheduler);
    app.addHook('onClose', async () => {
      scheduler?.stop();
      await service.close();
    });
  },
  { name: 'training', dependencies: ['db', 'engine', 'metrics'] },
);
