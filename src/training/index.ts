/**
 * Training (shared/DESIGN.md §4, shared/LAMER.md §2-3): returns, advantages, losses, samples from
 * recorded sessions and demonstrations, the job runner (in-thread and worker thread, data-parallel over replica threads), the job
 * manager over the `training_jobs` table, and the schedule.
 */
export { discountedReturns, sessionReturns, DEFAULT_RETURNS, type ReturnConfig, type ReturnMode, type SessionReturns } from './returns.js';
export { computeAdvantages, type AdvantageOptions, type AdvantageResult, type Estimator, type Turn, type TurnAdvantage, type TurnKind } from './advantages.js';
export { AdamW, clipByGlobalNorm, ppoClipLoss, ppoObjective, sftLoss, tokenMean } from './losses.js';
export {
  attemptOutcomes, behaviourOf, buildRlSamples, buildSftSamples, parseDemoJsonl, sessionOutcomes,
  type Algorithm, type Behaviour, type SampleOutcome, type SamplerSettings, type DataStats, type DemoSession, type RlAlgorithm, type StepRecord, type TrainingSample, type TurnScore,
} from './data.js';
export { behaviourLogits, effectiveBehaviour, makeBatch, type Batch, type Supports } from './batch.js';
export { behaviourOutputs, outputLogprobs, recomputeOldLogprobs, type OldPolicy } from './behaviour.js';
export { lengthBucketedMinibatches, minibatchOrder, splitMicroBatches } from './minibatches.js';
export { ppoLoss, ppoUpdate, sftObjective, type Objective, type StepLosses } from './ppo.js';
export {
  JobCancelledError, resolveTrainWorkers, rolloutMetrics, runTrainingJob, trainWorkersFromEnv,
  type IterationMetrics, type JobProgress, type JobResult, type TrainingHyper, type TrainingJobSpec,
} from './job.js';
export { balanceShards, liveReplicaThreads, ReplicaError } from './data-parallel.js';
export type { ModelIO, ModelIOModule, TrainableModel } from './model-api.js';
export { DEFAULT_MODEL_IO, startTrainingWorker, TrainingJobError, type TrainingWorkerHandle, type WorkerJobRequest } from './worker.js';
export { TrainingJobManager, JobRequestError, type CreateJobRequest, type ManagerOptions, type VersionRegistry } from './manager.js';
export { TrainingScheduler, type ScheduleConfig } from './scheduler.js';
export { TrainingService, type CreateJobBody, type JobPage, type JobView, type ListJobsParams, type TrainingServiceOptions } from './service.js';
export { selectTrainingRecords, writeTurnScores, type DataFilter } from './select.js';
