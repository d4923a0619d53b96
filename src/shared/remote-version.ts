/**
 * The settings of a model version served by a remote OpenAI-compatible server
 * (docs/remote-engines.md), written once: their shape (`RemoteVersionConfig`), their defaults and
 * bounds (`REMOTE_SETTINGS`, `REMOTE_DEFAULTS`), the rule for the server's URL (`remoteUrlFault`)
 * and the settings a registration gets with the defaults filled in (`remoteVersionConfig`).
 *
 * Three places read them: `config.ts` (LAMER_ENGINE=openai, the LAMER_OPENAI_* variables), the
 * model registry (`agent/models.ts`, `POST /v1/models`, whose request schema takes its bounds and
 * defaults from here too) and the remote engine (`policy/openai-engine.ts`, for settings a stored
 * version does not carry). This module sits at the bottom of the layers (docs/architecture.md) so
 * that `config.ts` can use it; it imports nothing but a type of `domain.ts`.
 */
import type { RemoteKind } from '../domain.js';

/** Where and how a remote version is served (src/policy/openai-engine.ts; docs/remote-engines.md). */
export interface RemoteVersionConfig {
  /** Base URL of the OpenAI-compatible API, e.g. `http://gpu-host:8000/v1` (no trailing slash needed). */
  baseUrl: string;
  /** The server's model name (`model` field of requests). */
  model: string;
  /** Sent as `Authorization: Bearer <apiKey>` when set. */
  apiKey?: string;
  /**
   * Server kind, which decides how actions are kept inside `availableActions`: `vllm`
   * (`structured_outputs.choice`), `vllm-legacy` (`guided_choice`), `lamer` (this server's
   * `guided_choice`), `llamacpp` (`grammar`), `openai` (JSON-schema `response_format`), `plain`
   * (parse the answer).
   */
  kind: RemoteKind;
  /** Most requests in flight to this version at once (>= 1). */
  concurrency: number;
  /** Per-attempt timeout of one HTTP request, ms. */
  timeoutMs: number;
  /** Retries after a 429, 5xx, timeout or connection error (exponential backoff). */
  maxRetries: number;
  /** Token caps of actions and reflections. */
  maxActionTokens: number;
  maxReflectionTokens: number;
  /**
   * Most bytes of one answer's body; a longer answer is cut off there (read as a stream) and the
   * try fails. Absent (versions stored before it existed): `REMOTE_DEFAULTS.maxResponseBytes`.
   */
  maxResponseBytes?: number;
  /**
   * Most time one model call may take, ms: every try, the backoffs between them and the wait for
   * a free slot together; then it fails (503 engine-unavailable). Keep it below the clients' own
   * timeout (120 s for clients/python). Absent: `REMOTE_DEFAULTS.callTimeoutMs`.
   */
  callTimeoutMs?: number;
}

/** The integer settings of a remote version. */
export type RemoteIntegerSetting =
  | 'concurrency' | 'timeoutMs' | 'maxRetries' | 'maxActionTokens' | 'maxReflectionTokens' | 'maxResponseBytes' | 'callTimeoutMs';

/**
 * Default and inclusive bounds of each integer setting, with the environment variable that sets
 * it for LAMER_ENGINE=openai (the field of the same name sets it in `POST /v1/models`).
 */
export const REMOTE_SETTINGS: Readonly<Record<RemoteIntegerSetting, { env: string; default: number; min: number; max: number }>> = {
  concurrency: { env: 'LAMER_OPENAI_CONCURRENCY', default: 8, min: 1, max: 100_000 },
  timeoutMs: { env: 'LAMER_OPENAI_TIMEOUT_MS', default: 60_000, min: 1, max: 3_600_000 },
  maxRetries: { env: 'LAMER_OPENAI_MAX_RETRIES', default: 3, min: 0, max: 100 },
  maxActionTokens: { env: 'LAMER_OPENAI_MAX_ACTION_TOKENS', default: 64, min: 1, max: 1_000_000 },
  maxReflectionTokens: { env: 'LAMER_OPENAI_MAX_REFLECTION_TOKENS', default: 512, min: 1, max: 1_000_000 },
  /** 4 MiB: an action's answer is a few KB; prompt token ids of a 500k-token prompt fit. */
  maxResponseBytes: { env: 'LAMER_OPENAI_MAX_RESPONSE_BYTES', default: 4 * 1024 * 1024, min: 1024, max: 1 << 30 },
  /** 100 s: below the 120 s default timeout of clients/python, so the client reads the 503. */
  callTimeoutMs: { env: 'LAMER_OPENAI_CALL_TIMEOUT_MS', default: 100_000, min: 1, max: 3_600_000 },
};

/** The integer settings in the order a remote version's configuration lists them. */
export const REMOTE_INTEGER_SETTINGS = Object.keys(REMOTE_SETTINGS) as RemoteIntegerSetting[];

/** Defaults of a remote version's settings: kind `plain` and each integer setting's `REMOTE_SETTINGS` default. */
export const REMOTE_DEFAULTS: { readonly kind: RemoteKind } & { readonly [K in RemoteIntegerSetting]: number } = {
  kind: 'plain',
  ...(Object.fromEntries(REMOTE_INTEGER_SETTINGS.map((k) => [k, REMOTE_SETTINGS[k].default])) as Record<RemoteIntegerSetting, number>),
};

/** What is wrong with a remote server's base URL: not a URL, not http(s), or carrying a user name or password. */
export type RemoteUrlFault = 'not-url' | 'not-http' | 'credentials';

/**
 * The rule for a remote server's base URL: an absolute http(s) URL without a user name or
 * password (fetch refuses URLs with credentials, and the URL is shown in listings and logs, so the
 * key goes in `apiKey`). Each caller words the fault for its input (an environment variable, a
 * request field).
 * @returns the first fault found, in the order not-url, not-http, credentials; null for a good URL.
 */
export function remoteUrlFault(baseUrl: string): RemoteUrlFault | null {
  if (!URL.canParse(baseUrl)) return 'not-url';
  const u = new URL(baseUrl);
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return 'not-http';
  return u.username !== '' || u.password !== '' ? 'credentials' : null;
}

/** The settings a registration gives: server and model, the rest optional (absent or undefined: the default). */
export type RemoteVersionInput = Pick<RemoteVersionConfig, 'baseUrl' | 'model'> & {
  apiKey?: string | undefined;
  kind?: RemoteKind | undefined;
} & { [K in RemoteIntegerSetting]?: number | undefined };

/**
 * A remote version's full configuration: `input` with every setting it leaves out set to its
 * default (`REMOTE_DEFAULTS`); `apiKey` only when given. Checks nothing (the URL rule is
 * `remoteUrlFault`, the bounds are `REMOTE_SETTINGS`, each checked by the caller that reads the input).
 */
export function remoteVersionConfig(input: RemoteVersionInput): RemoteVersionConfig {
  // Keys in this order (the stored configuration's JSON): server, model, key, kind, then REMOTE_SETTINGS's order.
  const c = {
    baseUrl: input.baseUrl,
    model: input.model,
    ...(input.apiKey !== undefined ? { apiKey: input.apiKey } : {}),
    kind: input.kind ?? REMOTE_DEFAULTS.kind,
  } as RemoteVersionConfig;
  for (const k of REMOTE_INTEGER_SETTINGS) c[k] = input[k] ?? REMOTE_DEFAULTS[k];
  return c;
}
