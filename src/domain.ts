/**
 * The server's lists of names, each written out once. These constant arrays feed the TypeBox
 * schemas (`StringEnum(ARR)` in src/routes), the drizzle column enums (`text('x', { enum: ARR })` in
 * src/db/schema.ts), configuration checks (src/config.ts) and the CLI (src/cli); the union types
 * below are derived from them. This module imports nothing, so every layer may import it.
 *
 * Order matters where a list reaches the outside: it is the order of `enum` in openapi/openapi.json
 * and of the values named in error messages.
 */

/** Training algorithms of a job (docs/method.md): LaMer meta-RL, the RL baselines, and SFT on demonstrations. */
export const ALGORITHMS = ['lamer', 'gigpo', 'grpo', 'rloo', 'sft'] as const;
export type Algorithm = (typeof ALGORITHMS)[number];

/** The RL algorithms (every algorithm but 'sft'): trained on recorded sessions, and schedulable. */
export const RL_ALGORITHMS = ['lamer', 'gigpo', 'grpo', 'rloo'] as const;
export type RlAlgorithm = (typeof RL_ALGORITHMS)[number];

/** What of the earlier attempts a session's acting prompt shows (docs/method.md#memory-and-reflections). */
export const MEMORY_MODES = ['reflection_only', 'history_only', 'history_and_reflection'] as const;
export type MemoryMode = (typeof MEMORY_MODES)[number];

/**
 * Where a session's memory goes in the requests of an agent that calls the session's OpenAI-compatible
 * endpoint (docs/agent-endpoint.md): one system message after the request's leading system messages,
 * or a prefix of the first user message.
 */
export const MEMORY_PLACEMENTS = ['system', 'user_prefix'] as const;
export type MemoryPlacement = (typeof MEMORY_PLACEMENTS)[number];

/**
 * Memory as statistics group and filter sessions (`GET /v1/stats`, `/v1/stats/diversity`): 'none'
 * for single-attempt sessions (maxAttempts 1: no earlier attempt to remember, whatever their
 * memory setting; read as independent retries), otherwise the memory mode of a multi-attempt session.
 */
export const STATS_MEMORY = ['none', ...MEMORY_MODES] as const;
export type StatsMemory = (typeof STATS_MEMORY)[number];

/** Prompt layouts a model version may declare (src/agent/prompt.ts PromptFormat). */
export const PROMPT_FORMATS = ['chat', 'compact'] as const;

/** 'train' sessions are training data; 'eval' sessions are never trained on. */
export const SESSION_MODES = ['train', 'eval'] as const;
export type SessionMode = (typeof SESSION_MODES)[number];

/** Life of a session: 'active' until its last attempt ends ('completed'), it is abandoned, or it expires. */
export const SESSION_STATUSES = ['active', 'completed', 'abandoned', 'expired'] as const;
export type SessionStatus = (typeof SESSION_STATUSES)[number];

/** Life of one attempt inside a session. */
export const ATTEMPT_STATUSES = ['running', 'succeeded', 'failed'] as const;
export type AttemptStatus = (typeof ATTEMPT_STATUSES)[number];

/** Why a step ended an attempt: the env said done, or the step cap (`maxSteps`) was reached. */
export const STEP_END_REASONS = ['done', 'max_steps'] as const;
export type StepEndReason = (typeof STEP_END_REASONS)[number];

/**
 * Why an attempt ended: a step ended it (STEP_END_REASONS), or its environment left it while it
 * was still running: its session was abandoned (`DELETE /v1/sessions/{id}`) or expired (no step
 * for the idle TTL).
 */
export const END_REASONS = [...STEP_END_REASONS, 'abandoned'] as const;
export type EndReason = (typeof END_REASONS)[number];

/** Kinds of recorded step rows: an acting turn, or the reflection written after a failed attempt. */
export const STEP_KINDS = ['action', 'reflection'] as const;
export type StepKind = (typeof STEP_KINDS)[number];

/** Who wrote a reflection: the policy, or a person through the API. */
export const REFLECTION_SOURCES = ['policy', 'human'] as const;
export type ReflectionSource = (typeof REFLECTION_SOURCES)[number];

/** Life of a training job. */
export const JOB_STATUSES = ['queued', 'running', 'succeeded', 'failed', 'cancelled'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

/** Job statuses from which a job never moves again. */
export const FINISHED_JOB_STATUSES = ['succeeded', 'failed', 'cancelled'] as const satisfies readonly JobStatus[];

/** Life of a model version: trained or registered ('candidate'), serving by default ('active'), replaced ('retired'). */
export const MODEL_STATUSES = ['candidate', 'active', 'retired'] as const;
export type ModelStatus = (typeof MODEL_STATUSES)[number];

/** What serves a model version: a tfjs checkpoint here ('builtin'), or a remote OpenAI-compatible server ('openai'). */
export const MODEL_ENGINES = ['builtin', 'openai'] as const;
export type ModelEngine = (typeof MODEL_ENGINES)[number];

/** The server's engine (LAMER_ENGINE): the model engines plus 'test', a scripted engine for tests. */
export const SERVER_ENGINES = ['builtin', 'test', 'openai'] as const;
export type ServerEngine = (typeof SERVER_ENGINES)[number];
/**
 * What one server (replica) does (LAMER_ROLE): `server` serves sessions and never runs a training
 * job; `trainer` runs training jobs (one replica at a time) and serves no sessions; `both` does both.
 */
export const SERVER_ROLES = ['server', 'trainer', 'both'] as const;
export type ServerRole = (typeof SERVER_ROLES)[number];


/** Built-in environment kinds (src/envs); full env names carry parameters, e.g. `minesweeper-6x6-3`. */
export const ENV_KINDS = ['minesweeper', 'sokoban'] as const;
export type EnvKind = (typeof ENV_KINDS)[number];

/** Where PPO's old logprobs come from: recomputed from the loaded checkpoint, or those recorded at sampling time. */
export const OLD_LOGPROB_SOURCES = ['recompute', 'stored'] as const;
export type OldLogprobSource = (typeof OLD_LOGPROB_SOURCES)[number];

/** Where SFT training starts each sample's positions: at 0, as served, or at a random offset (src/training/run/job.ts TrainingHyper.positionOffset). */
export const POSITION_OFFSETS = ['none', 'random'] as const;
export type PositionOffset = (typeof POSITION_OFFSETS)[number];

/** Learning-rate schedules of a training job (src/training/maths/lr-schedule.ts). */
export const LR_SCHEDULES = ['constant', 'cosine'] as const;
export type LrSchedule = (typeof LR_SCHEDULES)[number];

/** Cross-episode return: LaMer Eq. 4 ('paper') or the reference code's recursion ('code'); docs/method.md#returns. */
export const RETURN_MODES = ['paper', 'code'] as const;
export type ReturnMode = (typeof RETURN_MODES)[number];

/** Which turns a reflection's GiGPO episode term is centred against (docs/method.md#gigpo):
 *  'task', the reference: every turn of its task; 'own', an ablation: its task's reflections only
 *  (and action turns against their task's action turns only). */
export const REFLECTION_GROUPS = ['task', 'own'] as const;
export type ReflectionGroup = (typeof REFLECTION_GROUPS)[number];

/** The advantage estimators (docs/method.md#advantages): each RL algorithm's, `lamer` using GiGPO's. */
export const ADVANTAGE_ESTIMATORS = ['gigpo', 'grpo', 'rloo'] as const satisfies readonly RlAlgorithm[];
export type AdvantageEstimator = (typeof ADVANTAGE_ESTIMATORS)[number];

/** TensorFlow.js backends a process can ask for (LAMER_TFJS_BACKEND, src/model/backend.ts): 'auto'
 *  tries tensorflow (tfjs-node-gpu, tfjs-node), then wasm, then cpu. */
export const TFJS_BACKENDS = ['auto', 'tensorflow', 'webgpu', 'wasm', 'cpu'] as const;
export type TfjsBackend = (typeof TFJS_BACKENDS)[number];

/** Matmul implementations of the wasm backend (LAMER_MATMUL, src/model/blas.ts): 'auto' takes OpenBLAS
 *  when its addon loads, else the wasm kernel; 'blas' requires the addon; 'wasm' never uses it. */
export const MATMUL_KINDS = ['auto', 'blas', 'wasm'] as const;
export type MatmulKind = (typeof MATMUL_KINDS)[number];

/** Kinds of OpenAI-compatible server a remote version can live on: how actions are kept inside availableActions (docs/remote-engines.md). */
export const REMOTE_KINDS = ['vllm', 'vllm-legacy', 'lamer', 'llamacpp', 'openai', 'plain'] as const;
export type RemoteKind = (typeof REMOTE_KINDS)[number];

/**
 * How a replay decodes the other version's own action at each recorded step (docs/replay.md):
 * 'greedy' (temperature 0: its most likely action) or 'sampled' (the recorded call's sampling, its
 * seed included, so a seeded session replayed against its own version repeats itself).
 */
export const REPLAY_DECODINGS = ['greedy', 'sampled'] as const;
export type ReplayDecoding = (typeof REPLAY_DECODINGS)[number];

/**
 * Where a replayed step's prompt comes from (docs/replay.md "Prompts"): the recorded prompt token
 * ids as they are ('recorded-tokens': same tokenizer and prompt format), the step re-rendered from
 * the recorded observations, actions and reflections in the other version's format ('rendered'),
 * or a turn's recorded messages with its memory ('recorded-messages').
 */
export const REPLAY_PROMPT_SOURCES = ['recorded-tokens', 'rendered', 'recorded-messages'] as const;
export type ReplayPromptSource = (typeof REPLAY_PROMPT_SOURCES)[number];
