/**
 * TypeBox schemas of the session resource (docs/protocol.md): create body, Session, step body and
 * answer, trajectory, memory. The session service's answer types derive from them
 * (./session-types.ts) and the session routes declare them. Size limits come from the server
 * configuration (`config.limits` fits `SchemaLimits`).
 */
import { Type, type Static } from 'typebox';
import { FreeObject, Nullable, Position, StringEnum } from '../schema-helpers.js';
import {
  ATTEMPT_STATUSES,
  END_REASONS,
  MEMORY_MODES,
  MEMORY_PLACEMENTS,
  REFLECTION_SOURCES,
  SESSION_MODES,
  SESSION_STATUSES,
  STEP_END_REASONS,
  STEP_KINDS,
} from '../domain.js';

export const MAX_REWARD = 1e9;

/** Highest sampling temperature any route accepts (the native API's `sampling.temperature` and
 * `/openai`'s `temperature`): far above any useful value, low enough that a typo is refused. */
export const MAX_TEMPERATURE = 10;

export const Sampling = Type.Object(
  {
    temperature: Type.Number({ minimum: 0, maximum: MAX_TEMPERATURE, description: '0 = greedy' }),
    topP: Type.Number({ exclusiveMinimum: 0, maximum: 1 }),
    topK: Type.Integer({ minimum: 0, maximum: 1_000_000, description: '0 disables' }),
    seed: Type.Optional(Type.Integer({ minimum: 0, maximum: 4294967295 })),
  },
  { additionalProperties: false },
);

export const SessionParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });

export const AttemptSummary = Type.Object({
  attempt: Type.Integer({ minimum: 0 }),
  status: StringEnum(ATTEMPT_STATUSES),
  steps: Type.Integer({ minimum: 0, description: 'observations posted in this attempt, the final one included' }),
  return: Type.Number({ description: 'undiscounted sum of the rewards as given by the environment' }),
  success: Type.Boolean(),
  endReason: Nullable(StringEnum(END_REASONS), {
    description: 'null while running; done or max_steps when a step ended the attempt; abandoned when the session was abandoned (DELETE) while it ran (status failed)',
  }),
});

export const Reflection = Type.Object({
  attempt: Type.Integer({ minimum: 0 }),
  text: Type.String(),
  source: StringEnum(REFLECTION_SOURCES),
  updatedAt: Type.String({ format: 'date-time' }),
});

export const Session = Type.Object({
  id: Type.String(),
  taskId: Type.String(),
  env: Nullable(Type.String()),
  mode: StringEnum(SESSION_MODES),
  status: StringEnum(SESSION_STATUSES),
  maxAttempts: Type.Integer(),
  maxSteps: Type.Integer(),
  memory: StringEnum(MEMORY_MODES),
  memoryPlacement: StringEnum(MEMORY_PLACEMENTS, {
    description: "where the memory goes in requests to the session's OpenAI-compatible endpoint (docs/agent-endpoint.md)",
  }),
  sampling: Type.Object({
    temperature: Type.Number(),
    topP: Type.Number(),
    topK: Type.Integer(),
    seed: Type.Optional(Type.Integer()),
  }),
  modelVersion: Type.String(),
  metadata: FreeObject(),
  createdAt: Type.String({ format: 'date-time' }),
  updatedAt: Type.String({ format: 'date-time' }),
  next: Nullable(Position, { description: 'the (attempt, step) expected next; null when not active' }),
  attempts: Type.Array(AttemptSummary),
  passAtK: Type.Record(Type.String(), Type.Boolean(), { description: '"k" -> solved within attempts 0..k-1' }),
  reflections: Type.Array(Reflection),
});

export const SessionList = Type.Object({
  items: Type.Array(Session),
  nextCursor: Nullable(Type.String(), { description: 'pass as `cursor` for the next page; null at the end' }),
});

export const ListQuery = Type.Object(
  {
    status: Type.Optional(StringEnum(SESSION_STATUSES)),
    taskId: Type.Optional(Type.String({ maxLength: 1024 })),
    env: Type.Optional(Type.String({ maxLength: 256 })),
    mode: Type.Optional(StringEnum(SESSION_MODES)),
    modelVersion: Type.Optional(Type.String({ maxLength: 256 })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
    cursor: Type.Optional(Type.String({ maxLength: 64, pattern: '^ses_[0-9a-z]{9}[0-9a-f]{12}$', description: 'nextCursor of the previous page' })),
  },
  { additionalProperties: false },
);

export const AttemptResult = Type.Object({
  attempt: Type.Integer(),
  success: Type.Boolean(),
  return: Type.Number(),
  steps: Type.Integer(),
  endReason: StringEnum(STEP_END_REASONS),
});

export const StepAnswer = Type.Object({
  sessionId: Type.String(),
  attempt: Type.Integer(),
  step: Type.Integer(),
  action: Nullable(Type.String(), { description: 'what to execute; null when the attempt ended' }),
  output: Nullable(Type.String(), { description: "the model's full text" }),
  modelVersion: Type.String(),
  attemptResult: Nullable(AttemptResult),
  reflection: Nullable(Type.Object({ attempt: Type.Integer(), text: Type.String() })),
  session: Type.Object({ status: StringEnum(SESSION_STATUSES), next: Nullable(Position) }),
});

/** The request-size limits the body schemas are made from (the matching fields of `config.limits`). */
export interface SchemaLimits {
  instructionsChars: number;
  maxAttempts: number;
  maxStepsCap: number;
  defaultMaxSteps: number;
  observationChars: number;
  actionChars: number;
  availableActions: number;
  batchItems: number;
  reflectionChars: number;
}

/** The body schemas whose bounds are the server's limits: create, step, batch item and body, reflection edit. */
export function makeSessionSchemas(limits: SchemaLimits) {
  const CreateSession = Type.Object(
    {
      taskId: Type.String({ minLength: 1, maxLength: 1024, description: 'task instance; sessions with one taskId form a group' }),
      instructions: Type.String({ maxLength: limits.instructionsChars, description: 'the rules, as the env would tell a person' }),
      maxAttempts: Type.Optional(Type.Integer({ minimum: 1, maximum: limits.maxAttempts, description: 'default 3' })),
      maxSteps: Type.Optional(
        Type.Integer({ minimum: 1, maximum: limits.maxStepsCap, description: `step cap per attempt; default ${limits.defaultMaxSteps}` }),
      ),
      memory: Type.Optional(StringEnum(MEMORY_MODES, { description: 'default reflection_only' })),
      memoryPlacement: Type.Optional(
        StringEnum(MEMORY_PLACEMENTS, {
          description:
            "agents calling the session's OpenAI-compatible endpoint (/v1/sessions/{id}/openai/v1): on attempts after the first the memory is a system message after the request's leading system messages (system, default) or a prefix of the first user message (user_prefix); docs/agent-endpoint.md",
        }),
      ),
      mode: Type.Optional(StringEnum(SESSION_MODES, { description: 'default train' })),
      sampling: Type.Optional(Type.Partial(Sampling, {
        additionalProperties: false,
        description: 'each field left out comes from the model version\'s default sampling (a checkpoint may declare one, e.g. the shipped base: temperature 0.7, topP 0.8, topK 20), else temperature 1, topP 1, topK 0; the session records what it uses',
      })),
      modelVersion: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: 'default: the active version' })),
      env: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
      metadata: Type.Optional(FreeObject()),
    },
    { additionalProperties: false },
  );

  const stepFields = {
    attempt: Type.Integer({
      minimum: 0,
      maximum: limits.maxAttempts,
      description: "0-based; below the session's maxAttempts (anything else is a 400 naming body/attempt)",
    }),
    step: Type.Integer({ minimum: 0, maximum: limits.maxStepsCap }),
    observation: Type.String({ maxLength: limits.observationChars }),
    reward: Type.Optional(
      Type.Number({ minimum: -MAX_REWARD, maximum: MAX_REWARD, description: 'reward of the previous action; 0 or absent at step 0 (anything else is a 400)' }),
    ),
    done: Type.Optional(Type.Boolean()),
    success: Type.Optional(Type.Boolean({ description: 'only with done: true' })),
    availableActions: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: limits.actionChars }), {
        minItems: 1, maxItems: limits.availableActions, uniqueItems: true,
        description: 'the actions the policy may choose from, each once (a duplicate is a 400)',
      }),
    ),
    invalidAction: Type.Optional(Type.Boolean({ description: 'the env rejected the previous action' })),
    info: Type.Optional(FreeObject({ description: 'free JSON stored with the step' })),
  };
  const StepBody = Type.Object(stepFields, { additionalProperties: false });
  const BatchItem = Type.Object({ sessionId: Type.String({ minLength: 1, maxLength: 64 }), ...stepFields }, { additionalProperties: false });
  const BatchBody = Type.Object(
    { items: Type.Array(BatchItem, { minItems: 1, maxItems: limits.batchItems }) },
    { additionalProperties: false },
  );
  const EditReflection = Type.Object(
    { text: Type.String({ minLength: 1, maxLength: limits.reflectionChars }) },
    { additionalProperties: false },
  );
  return { CreateSession, StepBody, BatchItem, BatchBody, EditReflection };
}

export type CreateSessionBody = Static<ReturnType<typeof makeSessionSchemas>['CreateSession']>;

export const TrajectoryStep = Type.Object({
  attempt: Type.Integer(),
  step: Type.Integer(),
  kind: StringEnum(STEP_KINDS),
  observation: Type.String(),
  reward: Type.Number(),
  done: Type.Boolean(),
  success: Type.Boolean(),
  invalidAction: Type.Boolean(),
  availableActions: Nullable(Type.Array(Type.String())),
  info: Nullable(FreeObject()),
  prompt: Nullable(Type.String()),
  output: Nullable(Type.String()),
  action: Nullable(Type.String()),
  promptTokenIds: Nullable(Type.Array(Type.Integer())),
  outputTokenIds: Nullable(Type.Array(Type.Integer())),
  logprobs: Nullable(Type.Array(Type.Number())),
  droppedSteps: Nullable(Type.Integer()),
  promptTruncatedChars: Nullable(
    Type.Integer({
      description:
        'characters (code points) cut from the start of the prompt beyond the dropped steps, when even its head and tail did not fit the context; 0 normally, null without a model call',
    }),
  ),
  turn: Type.Optional(
    Nullable(
      FreeObject({
        description:
          "a turn of the session's OpenAI-compatible endpoint: the request as the agent sent it, the memory added, the sampling used, latencyMs, finishReason, toolCalls (docs/agent-endpoint.md); null for steps",
      }),
    ),
  ),
  modelVersion: Type.String(),
  return: Nullable(Type.Number(), { description: 'cross-episode return G (LaMer Eq. 4), once computed by training' }),
  advantage: Nullable(Type.Number()),
  createdAt: Type.String({ format: 'date-time' }),
});

export const Trajectory = Type.Object({
  sessionId: Type.String(),
  steps: Type.Array(TrajectoryStep, { description: 'one page of rows, in (attempt, step) order, the action before the reflection' }),
  nextCursor: Nullable(Type.String(), { description: 'pass as `cursor` for the next page; null at the end' }),
});

export const TrajectoryQuery = Type.Object(
  {
    limit: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 1000, default: 100, description: 'most rows in the page (a page is also bounded by LAMER_TRAJECTORY_PAGE_BYTES)' }),
    ),
    cursor: Type.Optional(Type.String({ maxLength: 32, pattern: '^[0-9]{1,9}\\.[0-9]{1,9}\\.[ar]$', description: 'nextCursor of the previous page' })),
  },
  { additionalProperties: false },
);

export const Memory = Type.Object({
  sessionId: Type.String(),
  memory: StringEnum(MEMORY_MODES),
  reflections: Type.Array(Reflection),
});

export const ReflectionParams = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 64 }),
  attempt: Type.Integer({ minimum: 0, maximum: 1_000_000 }),
});
