/**
 * Training (docs/method.md; docs/architecture.md "Folder map"), in three folders:
 * - `maths/`: returns, advantages, losses, the PPO / SFT optimiser step, the learning-rate schedule;
 * - `data/`: samples from recorded sessions and demonstrations, packing, batches, minibatches, the
 *   behaviour policy, selection from the database, the remote training batch;
 * - `run/`: the job runner (in-thread and worker thread, data-parallel over replica threads), the
 *   job manager over the `training_jobs` table, the schedule, the promotion gate, model I/O, the
 *   held-out loss.
 */
export { discountedReturns, sessionReturns, DEFAULT_RETURNS, type ReturnConfig, type ReturnMode, type SessionReturns } from './maths/returns.js';
export { computeAdvantages, type AdvantageOptions, type AdvantageResult, type Estimator, type Turn, type TurnAdvantage, type TurnKind } from './maths/advantages.js';
export { AdamW, clipByGlobalNorm, PPO_DEFAULTS, ppoClipLoss, ppoObjective, sftLoss, tokenMean } from './maths/losses.js';
export {
  attemptOutcomes, behaviourOf, buildRlSamples, buildSftSamples, parseDemoJsonl, sessionOutcomes,
  type Algorithm, type Behaviour, type SampleOutcome, type SamplerSettings, type DataStats, type DemoSession, type RlAlgorithm, type StepRecord, type TrainingSample, type TurnScore,
} from './data/data.js';
export { behaviourLogits, effectiveBehaviour, makeBatch, type Batch, type Supports } from './data/batch.js';
export { behaviourOutputs, outputLogprobs, recomputeOldLogprobs, type OldPolicy } from './data/behaviour.js';
export { lengthBucketedMinibatches, minibatchOrder, splitMicroBatches } from './data/minibatches.js';
export { ppoLoss, ppoUpdate, sftObjective, type Objective, type StepLosses } from './maths/ppo.js';
export {
  JobCancelledError, positionOffsetProblem, resolveTrainWorkers, rolloutMetrics, runTrainingJob, trainWorkersFromEnv,
  type IterationMetrics, type JobProgress, type JobResult, type TrainingHyper, type TrainingJobSpec,
} from './run/job.js';
export { balanceShards, liveReplicaThreads, ReplicaError } from './run/data-parallel.js';
export type { ModelIO, ModelIOModule, TrainableModel } from './model-api.js';
export { DEFAULT_MODEL_IO, startTrainingWorker, TrainingJobError, type TrainingWorkerHandle, type WorkerJobRequest } from './run/worker.js';
export { TrainingJobManager, JobRequestError, type CreateJobRequest, type ManagerOptions, type VersionRegistry } from './run/manager.js';
export { TrainingScheduler, type ScheduleConfig } from './run/scheduler.js';
export { selectTrainingRecords, writeTurnScores, type DataFilter } from './data/select.js';
export { heldOutLoss, HELD_OUT_MICRO_BATCH_TOKENS, type HeldOutLoss, type KindLoss } from './run/heldout-loss.js';
export { TrainingService, type CreateJobBody, type JobPage, type JobView, type ListJobsParams, type TrainingServiceOptions } from './service.js';
export { GATE_STATUSES, type GateStatus } from '../shared/promotion-gate.js';
export {
  gateFigures, pendingReport,
  type GateEvaluation, type GateEvaluator, type GateFigures, type GateReport, type GateTaskOutcome,
} from './run/gate.js';
export {
  DEFAULT_GATE_EVALUATOR, GateCancelledError, startGateWorker, type GateEvaluatorModule, type GateRunner,
} from './run/gate-worker.js';
export { runGate, type GateSettings } from './run/gate-run.js';
