/**
 * The step transition of the LaMer session state machine (docs/protocol.md "Post a step";
 * docs/method.md#sessions-attempts-and-steps) as pure functions: whether a step request is admitted
 * (a new step at the expected position, an identical retry, or a conflict), what the step does
 * (act, end the attempt, reflect, complete the session), and, given the model's generations, the
 * answer and the records to commit. No I/O here: the service (src/agent/sessions.ts) reads the
 * state, makes the model calls and commits.
 */
import type { StepCommit, StepInsert } from '../db/queries.js';
import type { AttemptSummary, SessionRow } from '../db/schema.js';
import type { Generation } from '../policy/engine.js';
import { invalidChoiceAction } from '../policy/openai-engine.js';
import { extractAction } from '../policy/actions.js';
import { DomainError, invalid } from './errors.js';
import { candidateTokenCount } from './prompt-seen.js';
import { cutChars } from './prompt.js';
import type { AttemptResult, Position, StepAnswer, StepInput } from './session-types.js';
import { actionRecord, reflectionRecord } from './step-records.js';

/**
 * Admit a step request against the session row and the record at its position, if any.
 * @returns `{ replay }`, the stored answer of an identical retry (same body hash), or null for a new step.
 * @throws DomainError `step-conflict` (position recorded with another body), `session-not-active`,
 *   `validation` naming `body/attempt` (an attempt index at or beyond the session's maxAttempts,
 *   checked before the order), `step-out-of-order` (with `expected`), `validation` (success without
 *   done; done, or a non-zero reward, at step 0: the step-0 observation follows a reset, not an
 *   action, so it has no reward).
 */
export function admitStep(row: SessionRow, existing: { requestHash: string; answer: string | null } | undefined, input: StepInput, hash: string): { replay: StepAnswer } | null {
  if (existing) {
    if (existing.requestHash === hash) return { replay: JSON.parse(existing.answer ?? 'null') as StepAnswer };
    throw new DomainError('step-conflict', `attempt ${input.attempt} step ${input.step} was already recorded with a different body`);
  }
  if (row.status !== 'active') throw new DomainError('session-not-active', `session '${row.id}' is ${row.status}`);
  // An attempt index the session can never reach is the caller's mistake about the session
  // (maxAttempts), not an ordering problem: saying "expected attempt 0" would hide it.
  if (input.attempt >= row.maxAttempts) {
    throw invalid('body/attempt', `is ${input.attempt}, beyond the session's maxAttempts of ${row.maxAttempts} (attempts are numbered 0 to ${row.maxAttempts - 1})`);
  }
  if (input.attempt !== row.nextAttempt || input.step !== row.nextStep) {
    const expected = { attempt: row.nextAttempt, step: row.nextStep };
    throw new DomainError(
      'step-out-of-order',
      `expected attempt ${expected.attempt} step ${expected.step}, got attempt ${input.attempt} step ${input.step}`,
      { expected },
    );
  }
  if (input.success === true && input.done !== true) throw invalid('body/success', 'may be true only with done: true');
  if (input.step === 0 && input.done === true) throw invalid('body/done', 'must be false at step 0 (no action was taken yet)');
  if (input.step === 0 && (input.reward ?? 0) !== 0) throw invalid('body/reward', 'must be 0 or absent at step 0 (no action was taken yet)');
  return null;
}

/** What an admitted step does. */
export interface StepPlan {
  /** The attempt ends here: `done`, or step index `maxSteps`. No act call then. */
  ends: boolean;
  /** The attempt ends successfully (done with success). */
  success: boolean;
  /** The attempt ends failed with attempts left: the policy writes a reflection. */
  reflects: boolean;
}

/**
 * The plan of an admitted step. The model work of one step is bounded before any of it is done
 * (docs/deploy.md "7. Configuration"): available actions over `candidateCap` tokens (0: no bound) are refused.
 * @throws DomainError `validation` on body/availableActions.
 */
export function planStep(row: SessionRow, input: StepInput, candidateCap: number): StepPlan {
  const done = input.done ?? false;
  const success = done && (input.success ?? false);
  const ends = done || input.step >= row.maxSteps;
  if (candidateCap > 0 && input.availableActions && !ends) {
    const n = candidateTokenCount(input.availableActions);
    if (n > candidateCap) {
      throw invalid('body/availableActions', `total ${n} tokens (UTF-8 bytes + 1 per action); at most ${candidateCap} per step (LAMER_MAX_CANDIDATE_TOKENS)`);
    }
  }
  return { ends, success, reflects: ends && !success && input.attempt + 1 < row.maxAttempts };
}

/** The model's work for a step: the act (unless the attempt ended) and the reflection (when the plan reflects). */
export interface StepGenerations {
  act: Generation | null;
  /** The act prompt as the engine saw it. */
  actPrompt: string | null;
  refl: Generation | null;
  reflPrompt: string | null;
  /** The reflection as stored: the model's text trimmed and cut to the limit. */
  reflectionText: string | null;
}

/** The session's attempts after the step (copies), and the attempt's result when it ended. */
function attemptsAfter(row: SessionRow, input: StepInput, plan: StepPlan): { attempts: AttemptSummary[]; attemptResult: AttemptResult | null } {
  const attempts = row.attempts.map((a) => ({ ...a }));
  if (input.step === 0) attempts.push({ attempt: input.attempt, status: 'running', steps: 0, return: 0, success: false, endReason: null });
  const cur = attempts[input.attempt]!;
  cur.steps = input.step + 1;
  cur.return += input.reward ?? 0;
  if (!plan.ends) return { attempts, attemptResult: null };
  cur.success = plan.success;
  cur.status = plan.success ? 'succeeded' : 'failed';
  cur.endReason = (input.done ?? false) ? 'done' : 'max_steps';
  return { attempts, attemptResult: { attempt: input.attempt, success: plan.success, return: cur.return, steps: cur.steps, endReason: cur.endReason } };
}

/**
 * The session's attempts once it is abandoned or expires (copies): an attempt still running can
 * never get another step, so it ends `failed` with endReason `abandoned`; its steps and return stay as
 * recorded. Attempts that already ended are unchanged.
 */
export function attemptsAbandoned(attempts: readonly AttemptSummary[]): AttemptSummary[] {
  return attempts.map((a) => (a.status === 'running' ? { ...a, status: 'failed', success: false, endReason: 'abandoned' } : { ...a }));
}

/** The session's status and expected position after the step. */
function nextOf(input: StepInput, plan: StepPlan): { status: SessionRow['status']; next: Position | null } {
  if (!plan.ends) return { status: 'active', next: { attempt: input.attempt, step: input.step + 1 } };
  if (plan.reflects) return { status: 'active', next: { attempt: input.attempt + 1, step: 0 } };
  return { status: 'completed', next: null };
}

/**
 * The action to execute: with availableActions the output is the chosen one; a remote answer that
 * matched none (record.invalidChoice) is executed as parsed; else the action parsed from the text.
 * A parsed action (not a candidate) is cut to `actionChars` characters (LAMER_MAX_ACTION_CHARS, the
 * limit of a candidate action), so no answer records or executes a longer one.
 */
export function actionOf(act: Generation | null, input: Pick<StepInput, 'availableActions'>, actionChars: number): string | null {
  if (!act) return null;
  if (act.record?.invalidChoice) return cutChars(invalidChoiceAction(act.output), actionChars);
  return input.availableActions ? act.output : cutChars(extractAction(act.output), actionChars);
}

/** What a step answers and commits. */
export interface StepResult {
  answer: StepAnswer;
  commit: StepCommit;
  status: SessionRow['status'];
}

/**
 * The step transition: session `row` (admitted at `input`'s position, body hash `hash`), its plan
 * and the model's generations -> the answer, and the records, reflection and session update to
 * commit in one transaction at `now` (ms). A parsed action is cut to `actionChars` characters.
 */
export function stepTransition(
  row: SessionRow, input: StepInput, hash: string, plan: StepPlan, gens: StepGenerations, now: number, actionChars: number = Infinity,
): StepResult {
  const { attempts, attemptResult } = attemptsAfter(row, input, plan);
  const { status, next } = nextOf(input, plan);
  const { act, refl, reflectionText } = gens;
  const action = actionOf(act, input, actionChars);
  const answer: StepAnswer = {
    sessionId: row.id,
    attempt: input.attempt,
    step: input.step,
    action,
    output: act ? act.output : null,
    modelVersion: row.modelVersion,
    attemptResult,
    reflection: reflectionText !== null ? { attempt: input.attempt, text: reflectionText } : null,
    session: { status, next },
  };
  const rows: StepInsert[] = [
    actionRecord({ sessionId: row.id, input, act, prompt: gens.actPrompt, action, modelVersion: row.modelVersion, requestHash: hash, answer: JSON.stringify(answer), createdAt: now }),
  ];
  const reflects = refl !== null && reflectionText !== null;
  if (reflects) rows.push(reflectionRecord(row.id, input, refl, gens.reflPrompt, hash, now));
  const commit: StepCommit = {
    rows,
    reflection: reflects ? { sessionId: row.id, attempt: input.attempt, text: reflectionText, updatedAt: now } : null,
    session: {
      id: row.id,
      status,
      attempts,
      nextAttempt: next ? next.attempt : row.nextAttempt,
      nextStep: next ? next.step : row.nextStep,
      updatedAt: now,
    },
  };
  return { answer, commit, status };
}
