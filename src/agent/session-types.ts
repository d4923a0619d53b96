/**
 * Shapes of the session service (src/agent/sessions.ts): what it takes, what it answers, its
 * limits, protection bounds and event hooks. The answers are the wire shapes, so their types are
 * derived from the session schemas (./schemas.ts), which the session routes declare.
 */
import type { SessionRow } from '../db/schema.js';
import type { SamplingParams } from '../policy/engine.js';
import type { MemoryMode, MemoryPlacement, SessionMode, StepKind } from '../domain.js';
import type { Static } from 'typebox';
import type { AgentMessage, RequestSampling, TurnGeneration } from './turns.js';
import type { Position as PositionSchema } from '../schema-helpers.js';
import type {
  AttemptResult as AttemptResultSchema,
  Memory,
  Reflection,
  Session,
  StepAnswer as StepAnswerSchema,
} from './schemas.js';

export interface CreateSessionInput {
  taskId: string;
  instructions: string;
  maxAttempts?: number;
  maxSteps?: number;
  memory?: MemoryMode;
  /** Where the memory goes in requests to the session's OpenAI-compatible endpoint (default `system`). */
  memoryPlacement?: MemoryPlacement;
  mode?: SessionMode;
  sampling?: Partial<SamplingParams>;
  modelVersion?: string;
  env?: string;
  metadata?: Record<string, unknown>;
}

export interface StepInput {
  attempt: number;
  step: number;
  observation: string;
  reward?: number;
  done?: boolean;
  success?: boolean;
  availableActions?: string[];
  invalidAction?: boolean;
  info?: Record<string, unknown>;
}

/** One call of an agent on the session's OpenAI-compatible endpoint, as the service serves it (src/agent/turns.ts). */
export interface TurnInput {
  /** `chat` (chat/completions, `messages`) or `completions` (`prompt`). */
  api: 'chat' | 'completions';
  /** The request body exactly as sent (recorded). */
  body: Record<string, unknown>;
  messages?: AgentMessage[];
  prompt?: string;
  /** The request's sampling fields (absent or null: the session's). */
  sampling: RequestSampling;
  /** Token cap of the answer (>= 1; the engine may cap it further). */
  maxTokens: number;
  /**
   * The request field that set `maxTokens`, absent for a default (CompleteRequest.maxTokensField:
   * more than the engine can generate is a 400 naming it).
   */
  maxTokensField?: string;
  stop: string[];
  /** `guided_choice` (builtin versions): the output is one of these. */
  choices?: string[];
  /** Remote versions: `tools`, `tool_choice`, `parallel_tool_calls`, `response_format`, sent as they are. */
  passthrough?: Record<string, unknown>;
  /** The agent asked for server-sent events (recorded). */
  stream: boolean;
}

/** A served turn: where it was recorded, by which version, the generation and the model call's wall time (ms). */
export interface TurnAnswer {
  sessionId: string;
  attempt: number;
  step: number;
  modelVersion: string;
  /** The version is served by a remote server (its logprob tokens are the remote's). */
  remote: boolean;
  generation: TurnGeneration;
  latencyMs: number;
}

/** The end of an attempt of a session driven by turns. */
export interface EndAttemptInput {
  attempt: number;
  /** The attempt's reward (added to its return); default 0. */
  reward?: number;
  success?: boolean;
  /** The final observation shown to the reflection (default ''). */
  observation?: string;
}

/** An (attempt, step) position of a session. */
export type Position = Static<typeof PositionSchema>;

/** A reflection as answered (the Reflection schema). */
export type ReflectionView = Static<typeof Reflection>;

/** The session resource (the Session schema). */
export type SessionView = Static<typeof Session>;

/** The memory resource: the session's memory mode and its reflections (the Memory schema). */
export type MemoryView = Static<typeof Memory>;

/** How an attempt ended (the AttemptResult schema). */
export type AttemptResult = Static<typeof AttemptResultSchema>;

/** The answer to a step (the StepAnswer schema). */
export type StepAnswer = Static<typeof StepAnswerSchema>;

export interface Limits {
  maxAttempts: number;
  maxStepsCap: number;
  defaultMaxSteps: number;
  reflectionChars: number;
  /** Most candidate tokens of one step: each available action's UTF-8 bytes + 1, summed (absent or 0: no bound). */
  candidateTokens?: number;
  /** Most tokens (UTF-8 bytes) of a rendered prompt, before it is fitted to the model's context (absent or 0: no bound). */
  promptTokens?: number;
  /** Most characters of an action parsed from a free answer (LAMER_MAX_ACTION_CHARS; absent: no bound). */
  actionChars?: number;
}

/**
 * How one step request ended: `recorded` (committed), `replayed` (an identical retry answered
 * from the stored answer), `overloaded` (503, queue bound), `engine_error` (503 engine-unavailable),
 * `database_error` (the commit failed: database locked, storage full or failing; 503, nothing
 * recorded), `rejected` (any other problem: 4xx).
 */
export type StepOutcome = 'recorded' | 'replayed' | 'overloaded' | 'engine_error' | 'database_error' | 'rejected';

export interface StepEvents {
  /** Called after each committed step record; kind 'action' or 'reflection'. */
  onStep?(kind: StepKind, modelVersion: string): void;
  onSessionEnd?(status: SessionRow['status']): void;
  /** Called once per step request when it ends; not for 4xx problems (counted by the step routes). */
  onStepOutcome?(outcome: StepOutcome): void;
}

/** Overload protection of the agent (src/config.ts ProtectionConfig); 0 disables a bound. */
export interface AgentProtection {
  maxQueuedSteps: number;
  maxOpenSessionsPerTenant: number;
  /** Retry-After seconds of 503 overloaded. */
  overloadRetryAfterSeconds: number;
}
