/**
 * The repositories of one open database, built once and shared: the server decorates them as
 * `app.repos` (src/plugins/app/db.ts) and hands them to its services (sessions, model registry,
 * training); the CLI and tests build them with `createRepositories` over a connection of their
 * own. Each repository owns the queries of its table(s); the rules that decide what is written
 * live in the services above them.
 */
import type { DatabaseConnection } from './index.js';
import { JobsRepo } from './jobs-repo.js';
import { ModelsRepo } from './models-repo.js';
import { HotQueries } from './queries.js';
import { ReplaysRepo } from './replays-repo.js';
import { SessionsRepo } from './sessions-repo.js';
import { StepsRepo } from './steps-repo.js';
import { TrainingDataRepo } from './training-data.js';

export interface Repositories {
  /** `sessions`: create, list, read, stats (./sessions-repo.ts). */
  sessions: SessionsRepo;
  /** `steps`: trajectory pages (./steps-repo.ts). */
  steps: StepsRepo;
  /** The step hot path's prepared statements on `sessions` and `steps` (./queries.ts). */
  hot: HotQueries;
  /** `models`: model versions (./models-repo.ts). */
  models: ModelsRepo;
  /** `training_jobs`: the job queue and its listing (./jobs-repo.ts). */
  jobs: JobsRepo;
  /** Training's reads of recorded sessions and its writes of step scores (./training-data.ts). */
  trainingData: TrainingDataRepo;
  /** `replays`: stored replay reports, and the reads of recorded sessions a replay needs (./replays-repo.ts). */
  replays: ReplaysRepo;
}

/** The repositories over `conn` (prepares the hot-path statements once). */
export function createRepositories(conn: DatabaseConnection): Repositories {
  return {
    sessions: new SessionsRepo(conn.db),
    steps: new StepsRepo(conn.db),
    hot: new HotQueries(conn.sqlite),
    models: new ModelsRepo(conn.db),
    jobs: new JobsRepo(conn.db),
    trainingData: new TrainingDataRepo(conn.db),
    replays: new ReplaysRepo(conn.db),
  };
}
