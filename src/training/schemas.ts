/**
 * TypeBox schemas of the training-job resource (docs/protocol.md "Training jobs").
 *
 * Hyperparameter ranges are the ones the runner accepts (src/training/run/job.ts TrainingHyper) and the
 * returns/advantages take (src/training/maths/returns.ts, advantages.ts; docs/method.md#returns, docs/method.md#advantages).
 * SFT demonstrations (`DemoSession` JSONL, src/envs/demos.ts) come either as a `path` relative to
 * `<dataDir>/demos/` (large sets: write the file there, e.g. with `lamer demos --out`), or inline as
 * `sessions` (small sets; bounded by the request body limit); exactly one of the two.
 */
import { Type } from 'typebox';
import { FreeObject, Nullable, StringEnum } from '../schema-helpers.js';
import { ALGORITHMS, JOB_STATUSES, OLD_LOGPROB_SOURCES, LR_SCHEDULES, POSITION_OFFSETS, REFLECTION_GROUPS, RETURN_MODES } from '../domain.js';
import {
  GATE_DECISIONS, GATE_DEFAULT_SAMPLING, GATE_DEFAULTS, MAX_GATE_ATTEMPTS, MAX_GATE_CONCURRENCY, MAX_GATE_TASKS,
} from '../shared/promotion-gate.js';
import { EVAL_SEED_START, SEED_END } from '../shared/env-names.js';
import { GateReport, GateSampling } from '../agent/gate-schemas.js';

export const DataFilter = Type.Object(
  {
    since: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'RFC 3339 date-time: sessions created at or after it' })),
    env: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
    taskIds: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 1024 }), { minItems: 1, maxItems: 10_000 })),
    modelVersion: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: 'sessions that pinned this version' })),
    maxSessions: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000, description: 'newest first' })),
  },
  { additionalProperties: false, description: 'RL data: completed sessions with mode "train" matching every given field' },
);

const DemoStep = Type.Object(
  {
    observation: Type.String({ maxLength: 65_536 }),
    action: Nullable(Type.String({ maxLength: 1024 })),
    reward: Type.Number(),
    done: Type.Boolean(),
    success: Type.Boolean(),
  },
  { additionalProperties: false },
);

export const DemoSessionSchema = Type.Object(
  {
    env: Type.String({ maxLength: 256 }),
    taskId: Type.String({ minLength: 1, maxLength: 1024 }),
    instructions: Type.String({ maxLength: 65_536 }),
    memory: StringEnum(['reflection_only'] as const),
    attempts: Type.Array(
      Type.Object({ steps: Type.Array(DemoStep, { minItems: 1, maxItems: 1000 }), reflection: Nullable(Type.String({ maxLength: 20_000 })) }, { additionalProperties: false }),
      { minItems: 1, maxItems: 100 },
    ),
  },
  { additionalProperties: false, description: 'a demonstration session (src/envs/demos.ts DemoSession)' },
);

export const Demonstrations = Type.Object(
  {
    path: Type.Optional(Type.String({ minLength: 1, maxLength: 512, pattern: '^[A-Za-z0-9._/-]+$', description: 'JSONL file relative to <dataDir>/demos/ (no leading /, no ..)' })),
    sessions: Type.Optional(Type.Array(DemoSessionSchema, { minItems: 1, maxItems: 10_000 })),
  },
  { additionalProperties: false, description: 'sft only: exactly one of path or sessions' },
);

export const Hyperparameters = Type.Object(
  {
    lr: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 1, description: 'learning rate (default 1e-4 RL, 1e-3 SFT)' })),
    lrSchedule: Type.Optional(StringEnum(LR_SCHEDULES, {
      description: "'constant' (default): lr at every optimiser step; 'cosine': linear warm-up over warmupSteps, then cosine decay to lr x minLrRatio at the job's last step",
    })),
    warmupSteps: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000, description: "'cosine' only: steps of linear warm-up (default 0); must be below the job's number of optimiser steps" })),
    minLrRatio: Type.Optional(Type.Number({ minimum: 0, maximum: 1, description: "'cosine' only: learning rate at the last step as a fraction of lr (default 0.1)" })),
    epochs: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
    minibatchSize: Type.Optional(Type.Integer({ minimum: 1, maximum: 4096 })),
    pack: Type.Optional(Type.Boolean({
      default: true,
      description: "train each attempt as one sequence where the recorded prompts extend each other (RL: its acting turns, then its reflection; sft: its steps), the same per-token losses at fewer positions; false: one sequence per turn",
    })),
    clipCoef: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 1 })),
    dualClip: Type.Optional(Type.Number({ exclusiveMinimum: 1, maximum: 100 })),
    entCoef: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
    maxGradNorm: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 1e6 })),
    weightDecay: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
    oldLogprobs: Type.Optional(StringEnum(OLD_LOGPROB_SOURCES)),
    microBatchTokens: Type.Optional(Type.Integer({ minimum: 16, maximum: 1_048_576 })),
    seed: Type.Optional(Type.Integer({ minimum: 0, maximum: 4_294_967_295 })),
    positionOffset: Type.Optional(StringEnum(POSITION_OFFSETS, {
      description: "sft only: 'random' trains each sample, each epoch, at a uniform random start position in [0, block - its length] drawn from seed (so the model cannot learn where a format goes by absolute position); 'none' (default) at position 0, as served",
    })),
    gammaStep: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
    gammaTraj: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
    returnMode: Type.Optional(StringEnum(RETURN_MODES, { description: "cross-episode return: LaMer Eq. 4 ('paper') or the reference code's recursion ('code')" })),
    invalidPenalty: Type.Optional(Type.Number({ minimum: 0, maximum: 100 })),
    stepCoef: Type.Optional(Type.Number({ minimum: 0, maximum: 100, description: 'GiGPO step-term weight' })),
    reflectionGroup: Type.Optional(StringEnum(REFLECTION_GROUPS, {
      description: "lamer only: what a reflection's GiGPO episode term is centred against: 'task' (default, the reference) every turn of its task; 'own' (an ablation) its task's reflections only, and action turns their task's action turns only",
    })),
  },
  { additionalProperties: false },
);

/** The promotion gate of a job (src/shared/promotion-gate.ts; docs/training.md "Promotion gate"). */
export const PromotionGate = Type.Object(
  {
    env: Type.String({
      minLength: 1, maxLength: 64,
      description: "built-in env of the held-out tasks: 'minesweeper', 'sokoban' or a full name such as 'minesweeper-6x6-3'",
    }),
    tasks: Type.Integer({ minimum: 1, maximum: MAX_GATE_TASKS, description: 'held-out tasks; each version plays one session per task' }),
    attempts: Type.Optional(Type.Integer({
      minimum: 1, maximum: MAX_GATE_ATTEMPTS, description: `attempts per session (default ${GATE_DEFAULTS.attempts})`,
    })),
    seedStart: Type.Optional(Type.Integer({
      minimum: EVAL_SEED_START, maximum: SEED_END - 1,
      description: `first task seed (default ${EVAL_SEED_START}); the tasks are seeds seedStart .. seedStart + tasks - 1, `
        + 'in the held-out range and in no training session of the job',
    })),
    metric: Type.Optional(Type.String({
      pattern: '^pass@[1-9][0-9]{0,2}$', description: 'pass@k with k <= attempts (default pass@<attempts>)',
    })),
    margin: Type.Optional(Type.Number({
      minimum: -1, maximum: 1,
      description: "the new version is activated only when its metric minus the active version's, paired over the tasks, "
        + 'exceeds this (fraction: 0.05 = 5 points; default 0)',
    })),
    decision: Type.Optional(StringEnum(GATE_DECISIONS, {
      description: "'mean' (default): the mean paired difference must exceed the margin; "
        + "'lower-bound': the lower end of its 95% bootstrap interval must",
    })),
    concurrency: Type.Optional(Type.Integer({
      minimum: 1, maximum: MAX_GATE_CONCURRENCY, description: `sessions played at once per version (default ${GATE_DEFAULTS.concurrency})`,
    })),
    availableActions: Type.Optional(Type.Boolean({ description: "send the env's legal actions with each step (default true)" })),
    sampling: Type.Optional(Type.Object(GateSampling.properties, {
      additionalProperties: false,
      description: `sampling of the gate's sessions (default ${JSON.stringify(GATE_DEFAULT_SAMPLING)}, the paper's evaluation setting)`,
    })),
  },
  {
    additionalProperties: false,
    description: 'activate the new version only when it beats the active one on held-out tasks; '
      + 'without it the job behaves as activateWhenDone says',
  },
);

export const CreateJob = Type.Object(
  {
    algorithm: StringEnum(ALGORITHMS),
    data: Type.Optional(DataFilter),
    demonstrations: Type.Optional(Demonstrations),
    baseVersion: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: 'default: the active version' })),
    version: Type.Optional(Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9][A-Za-z0-9._-]*$', description: 'name of the new version; default <algorithm>-<job id>' })),
    activateWhenDone: Type.Optional(Type.Boolean({ default: false })),
    hyperparameters: Type.Optional(Hyperparameters),
    gate: Type.Optional(PromotionGate),
  },
  { additionalProperties: false },
);

export const IterationMetrics = Type.Object({
  iteration: Type.Integer(),
  epoch: Type.Integer(),
  lr: Type.Number({ description: 'learning rate of this step (the schedule\'s value)' }),
  loss: Type.Number(),
  pgLoss: Type.Number(),
  entropy: Type.Number(),
  clipFrac: Type.Number(),
  dualClipFrac: Type.Number(),
  approxKl: Type.Number(),
  gradNorm: Type.Number(),
  reflectionShare: Type.Optional(Type.Number({ description: 'share of the trained output tokens that belong to reflection turns (absent in jobs recorded before it was)' })),
  reflectionEntropyShare: Type.Optional(Type.Number({ description: 'token-mean over all trained tokens of the entropy at reflection tokens (0 at action tokens)' })),
  actionEntropy: Type.Optional(Nullable(Type.Number(), { description: 'entropy over the action tokens alone; null when the step trained none' })),
  reflectionEntropy: Type.Optional(Nullable(Type.Number(), { description: 'entropy over the reflection tokens alone; null when the step trained none' })),
  meanReturn: Type.Number(),
  passAtK: Type.Record(Type.String(), Type.Number()),
  tokens: Type.Integer(),
  padFrac: Type.Number(),
  tokensPerSec: Type.Number(),
  seconds: Type.Number(),
});

export const DataStats = Type.Object({
  sessions: Type.Integer(),
  tasks: Type.Integer(),
  turns: Type.Integer(),
  samples: Type.Integer(),
  groups: Type.Integer({ description: 'advantage groups (task ids) in the data; 0 for sft' }),
  zeroAdvantageGroups: Type.Integer({ description: 'groups in which every advantage is 0 (no policy-gradient signal); trained all the same, they only dilute the token mean' }),
  zeroAdvantageTurns: Type.Integer({ description: 'turns in those groups' }),
  droppedTurns: Type.Integer({ description: 'turns not trained: reflections with no recorded next attempt' }),
  meanReturn: Type.Number(),
  passAtK: Type.Record(Type.String(), Type.Number()),
  outputTokens: Type.Integer(),
  reflectionTokens: Type.Optional(Type.Integer({ description: 'of those, the output tokens of reflection turns (absent in jobs recorded before it was)' })),
});

const jobFields = {
  id: Type.String(),
  algorithm: StringEnum(ALGORITHMS),
  status: StringEnum(JOB_STATUSES),
  progress: Type.Number({ minimum: 0, maximum: 1 }),
  baseVersion: Type.String(),
  version: Nullable(Type.String(), { description: 'requested name of the new version' }),
  resultVersion: Nullable(Type.String(), { description: 'the model version the job produced' }),
  activateWhenDone: Type.Boolean(),
  data: Nullable(FreeObject()),
  demonstrations: Nullable(Type.String({ description: 'sft: the JSONL file trained on' })),
  hyperparameters: FreeObject(),
  dataStats: Nullable(DataStats, { description: 'known once the data is read' }),
  dataset: Nullable(
    Type.Object({
      path: Type.String({ description: 'the training batch file, relative to the data directory (datasets/<jobId>/batch.jsonl)' }),
      samples: Type.Integer({ description: 'lines (turns) in it' }),
    }),
    { description: 'a job on a remote base version: the training batch it wrote for an external trainer (null otherwise, and until written)' },
  ),
  iterations: Type.Integer({ description: 'iterations reported so far' }),
  lastMetrics: Nullable(IterationMetrics),
  gate: Nullable(GateReport, { description: 'the promotion gate, its state and figures; null for a job without one' }),
  error: Nullable(Type.String()),
  createdAt: Type.String({ format: 'date-time' }),
  startedAt: Nullable(Type.String({ format: 'date-time' })),
  finishedAt: Nullable(Type.String({ format: 'date-time' })),
};

export const JobSummary = Type.Object(jobFields);
export const Job = Type.Object({ ...jobFields, metrics: Type.Array(IterationMetrics, { description: 'per iteration (optimiser step)' }) });

export const JobList = Type.Object({
  items: Type.Array(JobSummary),
  nextCursor: Nullable(Type.String(), { description: 'pass as `cursor` for the next page; null at the end' }),
});

export const ListJobsQuery = Type.Object(
  {
    status: Type.Optional(StringEnum(JOB_STATUSES)),
    algorithm: Type.Optional(StringEnum(ALGORITHMS)),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
    cursor: Type.Optional(Type.String({ maxLength: 64, pattern: '^\\d{1,15}~[A-Za-z0-9_]{1,40}$' })),
  },
  { additionalProperties: false },
);

export const JobParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });
