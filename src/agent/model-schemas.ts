/**
 * TypeBox schemas of the model-version resource (docs/protocol.md "Model versions"). The model
 * registry's answers (src/agent/models.ts `view`) and registrations are typed from them, and the
 * model routes declare them. A remote version's bounds and defaults come from
 * src/shared/remote-version.ts, which the server's configuration reads as well.
 */
import { Type, type Static } from 'typebox';
import { MODEL_ENGINES, MODEL_STATUSES, REMOTE_KINDS } from '../domain.js';
import { FreeObject, Nullable, StringEnum } from '../schema-helpers.js';
import { REMOTE_DEFAULTS, REMOTE_SETTINGS, type RemoteIntegerSetting } from '../shared/remote-version.js';
import { GateReport } from './gate-schemas.js';

/** `minimum`, `maximum` and `default` of an integer setting of a remote version, in that order. */
function bounds(k: RemoteIntegerSetting) {
  const s = REMOTE_SETTINGS[k];
  return { minimum: s.min, maximum: s.max, default: s.default };
}

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
    kind: Type.Optional(StringEnum(REMOTE_KINDS, { default: REMOTE_DEFAULTS.kind, description: 'server kind: how actions are kept inside availableActions' })),
    concurrency: Type.Optional(Type.Integer({ ...bounds('concurrency'), description: 'most requests in flight to this version' })),
    timeoutMs: Type.Optional(Type.Integer({ ...bounds('timeoutMs'), description: 'per HTTP try, ms' })),
    maxRetries: Type.Optional(Type.Integer({ ...bounds('maxRetries'), description: 'retries after 429, 5xx, timeouts, connection errors' })),
    maxActionTokens: Type.Optional(Type.Integer(bounds('maxActionTokens'))),
    maxReflectionTokens: Type.Optional(Type.Integer(bounds('maxReflectionTokens'))),
    maxResponseBytes: Type.Optional(Type.Integer({ ...bounds('maxResponseBytes'), description: 'most bytes of one answer; a longer one is cut off and the try fails' })),
    callTimeoutMs: Type.Optional(Type.Integer({ ...bounds('callTimeoutMs'), description: "most time of one model call (every try, backoff and the wait for a slot), ms; keep it below the clients' timeout" })),
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

/** A `POST /v1/models` body. */
export type RegisterModelBody = Static<typeof RegisterModel>;
/** The model resource (`GET /v1/models/{version}` and the others). */
export type ModelView = Static<typeof Model>;
