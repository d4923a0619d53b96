/**
 * Shapes of the session service (src/agent/sessions.ts): what it takes, what it answers, its
 * limits, protection bounds and event hooks.
 */
import type { AttemptSummary, SessionRow } from '../db/schema.js';
import type { SamplingParams } from '../policy/engine.js';
import type { EndReason, ReflectionSource, SessionMode } from '../domain.js';
import type { MemoryMode } from './prompt.js';

export interface CreateSessionInput {
  taskId: string;
  instructions: string;
  maxAttempts?: number;
  maxSteps?: number;
  memory?: MemoryMode;
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

export interface Position {
  attempt: number;
  step: number;
}

export interface ReflectionView {
  attempt: number;
  text: string;
  source: ReflectionSource;
  updatedAt: string;
}

export interface SessionView {
  id: string;
  taskId: string;
  env: string | null;
  mode: SessionMode;
  status: SessionRow['status'];
  maxAttempts: number;
  maxSteps: number;
  memory: MemoryMode;
  sampling: SamplingParams;
  modelVersion: string;
  metadata: Record<string, unknown>;
  createdAt: string;
  updatedAt: string;
  next: Position | null;
  attempts: AttemptSummary[];
  passAtK: Record<string, boolean>;
  reflections: ReflectionView[];
}

/** The memory resource: the session's memory mode and its reflections. */
export interface MemoryView {
  sessionId: string;
  memory: MemoryMode;
  reflections: ReflectionView[];
}

export interface AttemptResult {
  attempt: number;
  success: boolean;
  return: number;
  steps: number;
  endReason: EndReason;
}

export interface StepAnswer {
  sessionId: string;
  attempt: number;
  step: number;
  action: string | null;
  output: string | null;
  modelVersion: string;
  attemptResult: AttemptResult | null;
  reflection: { attempt: number; text: string } | null;
  session: { status: SessionRow['status']; next: Position | null };
}

export interface Limits {
  maxAttempts: number;
  maxStepsCap: number;
  defaultMaxSteps: number;
  reflectionChars: number;
  /** Most candidate tokens of one step: each available action's UTF-8 bytes + 1, summed (absent or 0: no bound). */
  candidateTokens?: number;
  /** Most tokens (UTF-8 bytes) of a rendered prompt, before it is fitted to the model's context (absent or 0: no bound). */
  promptTokens?: number;
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
  onStep?(kind: 'action' | 'reflection', modelVersion: string): void;
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
