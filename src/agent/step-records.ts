/**
 * The rows one step writes to the `steps` table: the action record (every step) and the
 * reflection record (a failed attempt with attempts left).
 */
import type { StepInsert } from '../db/queries.js';
import type { Generation } from '../policy/engine.js';
import { recorded } from './prompt-seen.js';
import type { StepInput } from './session-types.js';

/** What the action record holds besides the step body. */
export interface ActionRecordInput {
  sessionId: string;
  input: StepInput;
  /** The act generation; null on the step that ends an attempt (no model call). */
  act: Generation | null;
  /** The prompt as the engine saw it (null without act). */
  prompt: string | null;
  /** The action to execute (null without act). */
  action: string | null;
  /** The session's pinned version (recorded when no act gave its own). */
  modelVersion: string;
  requestHash: string;
  /** The JSON answer returned, kept for identical retries. */
  answer: string;
  createdAt: number;
}

/** The `action` row of a step: the observation posted and, unless the attempt ended, the model's act. */
export function actionRecord(r: ActionRecordInput): StepInsert {
  const { input, act } = r;
  return {
    sessionId: r.sessionId,
    attempt: input.attempt,
    step: input.step,
    kind: 'action',
    observation: input.observation,
    reward: input.reward ?? 0,
    done: input.done ?? false,
    success: (input.done ?? false) && (input.success ?? false),
    invalidAction: input.invalidAction ?? false,
    availableActions: input.availableActions ?? null,
    info: input.info ?? null,
    prompt: r.prompt,
    output: act?.output ?? null,
    action: r.action,
    promptTokenIds: act ? recorded(act, 'promptTokenIds') : null,
    outputTokenIds: act ? recorded(act, 'outputTokenIds') : null,
    logprobs: act ? recorded(act, 'logprobs') : null,
    droppedSteps: act?.droppedSteps ?? null,
    engineRecord: act?.record ?? null,
    promptTruncatedChars: act ? (act.promptTruncatedChars ?? 0) : null,
    modelVersion: act?.modelVersion ?? r.modelVersion,
    requestHash: r.requestHash,
    answer: r.answer,
    createdAt: r.createdAt,
  };
}

/** The `reflection` row written after a failed attempt: the reflect generation at the attempt's last position. */
export function reflectionRecord(sessionId: string, input: StepInput, refl: Generation, prompt: string | null, requestHash: string, createdAt: number): StepInsert {
  return {
    sessionId,
    attempt: input.attempt,
    step: input.step,
    kind: 'reflection',
    observation: input.observation,
    reward: 0,
    done: true,
    success: false,
    invalidAction: false,
    availableActions: null,
    info: null,
    prompt,
    output: refl.output,
    action: null,
    promptTokenIds: recorded(refl, 'promptTokenIds'),
    outputTokenIds: recorded(refl, 'outputTokenIds'),
    logprobs: recorded(refl, 'logprobs'),
    droppedSteps: refl.droppedSteps,
    engineRecord: refl.record ?? null,
    promptTruncatedChars: refl.promptTruncatedChars ?? 0,
    modelVersion: refl.modelVersion,
    requestHash,
    answer: null,
    createdAt,
  };
}
