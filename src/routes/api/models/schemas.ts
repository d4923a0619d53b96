/** TypeBox schemas of the model-version resource (docs/protocol.md "Model versions"). */
import { Type } from 'typebox';
import { REMOTE_KINDS } from '../../../domain.js';
import { FreeObject, Nullable, StringEnum } from '../common.js';
import { MODEL_ENGINES, MODEL_STATUSES } from '../../../domain.js';
import { GateReport } from '../../../training/schemas.js';

/** Where a remote version is served (the API key is never shown, only whether one is set). */
export const RemoteView = Type.Object({
  baseUrl: Type.String(),
  model: Type.String(),
  kind: StringEnum(REMOTE_KINDS),
  hasApiKey: Type.Boolean(),
  concurrency: Type.Integer(),
  timeoutMs: Type.Integer(),
  maxRetries: Type.Integer(),
  maxActionTokens: Type.Integer(),
  maxReflectionTokens: Type.Integer(),
  maxResponseBytes: Type.Integer(),
  callTimeoutMs: Type.Integer(),
});

/** POST /v1/models: a version served by a remote OpenAI-compatible server (docs/remote-engines.md). */
export const RegisterModel = Type.Object(
  {
    version: Type.String({
      minLength: 1,
      maxLength: 256,
      pattern: '^(?!\\.+$)[A-Za-z0-9._:-]+$',
      description: 'new version name: letters, digits and . _ : -, not only dots (".", ".." would name a folder, not a version)',
    }),
    parent: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 256, description: 'the registered version it was trained from' }))),
    engine: StringEnum(['openai'] as const, { description: 'only remote versions are registered this way (builtin ones come from training jobs)' }),
    baseUrl: Type.String({ minLength: 1, maxLength: 2048, pattern: '^https?://', description: 'e.g. http://gpu-host:8000/v1' }),
    model: Type.String({ minLength: 1, maxLength: 512, description: "the server's model name" }),
    apiKey: Type.Optional(Type.String({ minLength: 1, maxLength: 4096, description: 'sent as Authorization: Bearer' })),
    kind: Type.Optional(StringEnum(REMOTE_KINDS, { default: 'plain', description: 'server kind: how actions are kept inside availableActions' })),
    concurrency: Type.Optional(Type.Integer({ minimum: 1, maximum: 100000, default: 8, description: 'most requests in flight to this version' })),
    timeoutMs: Type.Optional(Type.Integer({ minimum: 1, maximum: 3600000, default: 60000, description: 'per HTTP try, ms' })),
    maxRetries: Type.Optional(Type.Integer({ minimum: 0, maximum: 100, default: 3, description: 'retries after 429, 5xx, timeouts, connection errors' })),
    maxActionTokens: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000000, default: 64 })),
    maxReflectionTokens: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000000, default: 512 })),
    maxResponseBytes: Type.Optional(Type.Integer({ minimum: 1024, maximum: 1073741824, default: 4194304, description: 'most bytes of one answer; a longer one is cut off and the try fails' })),
    callTimeoutMs: Type.Optional(Type.Integer({ minimum: 1, maximum: 3600000, default: 100000, description: "most time of one model call (every try, backoff and the wait for a slot), ms; keep it below the clients' timeout" })),
    metrics: Type.Optional(FreeObject({ description: 'free metrics of the external training run' })),
  },
  { additionalProperties: false },
);

export const Model = Type.Object({
  version: Type.String(),
  parent: Nullable(Type.String()),
  jobId: Nullable(Type.String(), { description: 'training job that produced it' }),
  status: StringEnum(MODEL_STATUSES),
  metrics: FreeObject(),
  createdAt: Type.String({ format: 'date-time' }),
  loaded: Type.Boolean({ description: 'loaded in the engine now (remote: its client is set up)' }),
  engine: StringEnum(MODEL_ENGINES, { description: 'builtin: tfjs checkpoint served here; openai: a remote OpenAI-compatible server' }),
  remote: Nullable(RemoteView),
  gate: Nullable(GateReport, {
    description: 'the promotion gate of the job that produced it (also in metrics.gate): its figures against the version active then, '
      + 'and whether it activated this one; null without a gate',
  }),
});

export const ModelList = Type.Object({ items: Type.Array(Model), active: Type.String() });

export const ModelParams = Type.Object({ version: Type.String({ minLength: 1, maxLength: 256 }) });
