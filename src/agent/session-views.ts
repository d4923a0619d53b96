/**
 * Session rows as the service answers them: new rows with defaults filled in, the session view
 * (ISO dates, next position, pass@k, reflections) and trajectory rows.
 */
import type { ReflectionRow, SessionRow, StepRow } from '../db/schema.js';
import type { SamplingParams } from '../policy/engine.js';
import { passAtK } from '../shared/passk.js';
import type { CreateSessionInput, SessionView } from './session-types.js';
import { newSessionId } from './step-hash.js';

export const iso = (ms: number): string => new Date(ms).toISOString();

/**
 * A new active session row of `tenant` at `now` (ms), with the defaults of `input` filled in: each
 * sampling field the input leaves out from `defaults.sampling` (the model version's default
 * sampling, src/agent/models.ts defaultSampling). The row records the sampling used.
 */
export function newSessionRow(
  tenant: string, input: CreateSessionInput,
  defaults: { maxAttempts: number; maxSteps: number; modelVersion: string; sampling: { temperature: number; topP: number; topK: number } }, now: number,
): SessionRow {
  const sampling: SamplingParams = {
    temperature: input.sampling?.temperature ?? defaults.sampling.temperature,
    topP: input.sampling?.topP ?? defaults.sampling.topP,
    topK: input.sampling?.topK ?? defaults.sampling.topK,
  };
  if (input.sampling?.seed !== undefined) sampling.seed = input.sampling.seed;
  return {
    id: newSessionId(now),
    tenant,
    taskId: input.taskId,
    env: input.env ?? null,
    mode: input.mode ?? 'train',
    status: 'active',
    instructions: input.instructions,
    maxAttempts: defaults.maxAttempts,
    maxSteps: defaults.maxSteps,
    memory: input.memory ?? 'reflection_only',
    memoryPlacement: input.memoryPlacement ?? 'system',
    sampling,
    modelVersion: defaults.modelVersion,
    metadata: input.metadata ?? {},
    nextAttempt: 0,
    nextStep: 0,
    attempts: [],
    createdAt: now,
    updatedAt: now,
  };
}

/** The session resource of `row` with its reflections. */
export function sessionView(row: SessionRow, refl: ReadonlyArray<Pick<ReflectionRow, 'attempt' | 'text' | 'source' | 'updatedAt'>>): SessionView {
  return {
    id: row.id,
    taskId: row.taskId,
    env: row.env,
    mode: row.mode,
    status: row.status,
    maxAttempts: row.maxAttempts,
    maxSteps: row.maxSteps,
    memory: row.memory,
    memoryPlacement: row.memoryPlacement,
    sampling: row.sampling as SamplingParams,
    modelVersion: row.modelVersion,
    metadata: row.metadata as Record<string, unknown>,
    createdAt: iso(row.createdAt),
    updatedAt: iso(row.updatedAt),
    next: row.status === 'active' ? { attempt: row.nextAttempt, step: row.nextStep } : null,
    attempts: row.attempts,
    passAtK: passAtK(row.attempts, row.maxAttempts),
    reflections: refl.map((r) => ({ attempt: r.attempt, text: r.text, source: r.source, updatedAt: iso(r.updatedAt) })),
  };
}

/** One recorded row of a trajectory page, as sent. */
export function trajectoryStep(r: StepRow) {
  return {
    attempt: r.attempt,
    step: r.step,
    kind: r.kind,
    observation: r.observation,
    reward: r.reward,
    done: r.done,
    success: r.success,
    invalidAction: r.invalidAction,
    availableActions: r.availableActions ?? null,
    info: r.info ?? null,
    prompt: r.prompt,
    output: r.output,
    action: r.action,
    promptTokenIds: r.promptTokenIds ?? null,
    outputTokenIds: r.outputTokenIds ?? null,
    logprobs: r.logprobs ?? null,
    droppedSteps: r.droppedSteps,
    promptTruncatedChars: r.promptTruncatedChars ?? null,
    turn: r.turn ?? null,
    modelVersion: r.modelVersion,
    return: r.return,
    advantage: r.advantage,
    createdAt: iso(r.createdAt),
  };
}
