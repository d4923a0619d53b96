/**
 * The model calls of the session service (src/agent/sessions.ts): the prompt of a step's act or
 * reflect call and of a turn, the checks made before the engine is called (the prompt's size, what
 * a version can serve), and the engine call itself under the bound on queued model calls, its
 * errors answered as DomainErrors (`overloaded`, `engine-unavailable`, `validation`).
 *
 * Apart from sessions.ts because none of it reads or writes the store, takes the session's mutex
 * or tells the step events: it works on the session's state as the service read it and hands back
 * what the engine generated (and, for a turn, the commit to write); the service orders, commits
 * and counts.
 */
import type { StepCommit } from '../db/queries.js';
import type { SessionRow } from '../db/schema.js';
import { callSeed, type CallKind } from '../model/sampling.js';
import { EngineError, EngineLimitError, type PolicyEngine, type PromptParts, type SamplingParams } from '../policy/engine.js';
import type { ModelRegistry } from './models.js';
import type { SessionState } from './active-sessions.js';
import { DomainError, invalid, overloaded } from './errors.js';
import { cutChars, memorySection, renderActPrompt, renderReflectionPrompt, type PromptAttempt } from './prompt.js';
import { promptAsSeen, promptTokenCount } from './prompt-seen.js';
import type { AgentProtection, Limits, StepInput, TurnAnswer, TurnInput } from './session-types.js';
import type { StepGenerations, StepPlan } from './step-transition.js';
import {
  promptWithMemory, refuseToolsOnBuiltin, renderChat, turnCommit, turnObservation, turnSampling, withMemory,
  type TurnGeneration, type TurnRecord,
} from './turns.js';

/** The sampling of one call: a seeded session reproduces itself, and each call (attempt, step, act/reflect) has its own stream. */
function callSampling(row: SessionRow, input: StepInput, kind: CallKind): SamplingParams {
  const s = row.sampling as SamplingParams;
  return s.seed === undefined ? s : { ...s, seed: callSeed(s.seed, input.attempt, input.step, kind) };
}

/** The model calls of one session service; `inFlight` is the count the queue bound reads. */
export class ModelCalls {
  private modelCalls = 0;

  /** @param protection its `maxQueuedSteps` bounds the model calls waiting on or running in the engine (0: no bound). */
  constructor(
    private readonly engine: PolicyEngine,
    private readonly models: ModelRegistry,
    private readonly limits: Limits,
    private readonly protection: AgentProtection,
  ) {}

  /** Model calls (act/reflect) waiting on or running in the engine now. */
  inFlight(): number {
    return this.modelCalls;
  }

  /** The attempts before `attempt` (the session's next attempt) as prompts show them, from the session's state in memory. */
  private previousAttempts(state: SessionState, attempt: number): PromptAttempt[] {
    const { row, reflections } = state;
    const withHistory = row.memory !== 'reflection_only';
    const out: PromptAttempt[] = [];
    for (let a = 0; a < attempt; a++) {
      const summary = row.attempts[a];
      // Only the most recent attempt's steps are shown (history modes).
      const shown = withHistory && a === attempt - 1 ? state.previous : null;
      out.push({
        steps: shown?.steps ?? [],
        finalObservation: shown?.finalObservation ?? '',
        success: summary?.success ?? false,
        reflection: reflections.get(a) ?? null,
      });
    }
    return out;
  }

  /** Refuses a prompt larger than `limits.promptTokens` before it is encoded. @throws DomainError `validation`. */
  private checkPrompt(prompt: PromptParts): void {
    const cap = this.limits.promptTokens ?? 0;
    if (cap <= 0) return;
    const n = promptTokenCount(prompt);
    if (n > cap) {
      throw invalid('body', `makes a prompt of ${n} tokens (UTF-8 bytes of the instructions, observations, actions and reflections it shows); at most ${cap} (LAMER_MAX_PROMPT_TOKENS)`);
    }
  }

  /**
   * One model call under the queue bound.
   * @throws DomainError `overloaded` (bound reached; the call is not made), `engine-unavailable`, or
   *   `validation` for a request too large for the model (EngineLimitError: nothing was computed).
   */
  async generate<T>(fn: () => Promise<T>): Promise<T> {
    const bound = this.protection.maxQueuedSteps;
    if (bound > 0 && this.modelCalls >= bound) {
      throw overloaded(`${this.modelCalls} model calls are queued (limit ${bound}); retry this step later`, this.protection.overloadRetryAfterSeconds);
    }
    this.modelCalls++;
    try {
      return await fn();
    } catch (err) {
      if (err instanceof DomainError) throw err;
      if (err instanceof EngineLimitError) throw invalid(err.field, err.message);
      const msg = err instanceof Error ? err.message : String(err);
      // Retry-After as for an overloaded server: the same step can be sent again once the engine
      // (or the remote server) answers.
      // EngineError messages are written for clients; any other error's message (a tfjs shape
      // error, a file path) stays in the log, through `cause`.
      const e = new DomainError('engine-unavailable', err instanceof EngineError ? msg : 'the engine failed on this request; an operator must check the server log', {
        retryAfterSeconds: this.protection.overloadRetryAfterSeconds,
      });
      e.cause = err;
      throw e;
    } finally {
      this.modelCalls--;
    }
  }

  /** The model's work of a planned step: act while the attempt runs; reflect after a failed attempt with attempts left. */
  async generateStep(state: SessionState, input: StepInput, plan: StepPlan): Promise<StepGenerations> {
    const { row } = state;
    const none: StepGenerations = { act: null, actPrompt: null, refl: null, reflPrompt: null, reflectionText: null };
    if (plan.ends && !plan.reflects) return none;
    const base = { sessionId: row.id, modelVersion: row.modelVersion, instructions: row.instructions };
    // what both prompts read: the version's prompt layout (a compact checkpoint reads a short one),
    // the env it may name, the memory, the earlier attempts and this attempt's steps
    const context = {
      format: await this.models.promptFormat(row.modelVersion),
      env: row.env,
      instructions: row.instructions,
      memory: row.memory,
      attempt: input.attempt,
      previousAttempts: input.attempt > 0 ? this.previousAttempts(state, input.attempt) : [],
      steps: state.current,
    };
    if (!plan.ends) {
      const prompt = renderActPrompt({ ...context, observation: input.observation });
      this.checkPrompt(prompt);
      const req = { ...base, prompt, sampling: callSampling(row, input, 'act'), ...(input.availableActions ? { availableActions: input.availableActions } : {}) };
      const act = await this.generate(() => this.engine.act(req));
      return { ...none, act, actPrompt: act.promptText ?? promptAsSeen(prompt, act.droppedSteps) };
    }
    const prompt = renderReflectionPrompt({ ...context, finalObservation: input.observation });
    this.checkPrompt(prompt);
    const refl = await this.generate(() => this.engine.reflect({ ...base, prompt, sampling: callSampling(row, input, 'reflect') }));
    // the model's reflection is cut to the limit (a human edit over it is refused instead)
    const reflectionText = cutChars(refl.output.trim(), this.limits.reflectionChars);
    return { ...none, refl, reflPrompt: refl.promptText ?? promptAsSeen(prompt, refl.droppedSteps), reflectionText };
  }

  /**
   * The model's work of one turn (src/agent/turns.ts) at the session's next position, from the
   * session's state in memory: the version's checks, the memory, the prompt, the engine call, and
   * the commit that records the turn with the answer to give once it is committed.
   * @throws DomainError `validation` for tools or response_format on a builtin version, completions
   *   or guided_choice on a remote one, or a prompt too large; `overloaded`, `engine-unavailable`
   *   as for a step. Nothing is recorded then.
   */
  async generateTurn(state: SessionState, t: TurnInput): Promise<{ commit: StepCommit; answer: TurnAnswer }> {
    const { row } = state;
    const id = row.id;
    const version = row.modelVersion;
    const remote = ((await this.models.get(version))?.engine ?? 'builtin') !== 'builtin';
    if (!remote) refuseToolsOnBuiltin(t.body, version);
    if (remote && t.api === 'completions') {
      throw invalid('body/prompt', `is not served: the session's model version '${version}' is remote, and remote versions serve chat/completions only`);
    }
    if (remote && t.choices) throw invalid('body/guided_choice', `is not served: the session's model version '${version}' is remote (pass its server's own fields instead)`);
    const attempt = row.nextAttempt;
    const step = row.nextStep;
    const memory = attempt > 0 ? memorySection({ memory: row.memory, previousAttempts: this.previousAttempts(state, attempt) }).replace(/^\n/, '') : '';
    const s = row.sampling as SamplingParams;
    const sampling = turnSampling(s, t.sampling, s.seed === undefined ? undefined : callSeed(s.seed, attempt, step, 'act'));
    let memoryRecord: TurnRecord['memory'] = null;
    let text: string;
    let served: Array<Record<string, unknown>> | null = null;
    if (t.api === 'chat') {
      const messages = withMemory(t.messages ?? [], memory, row.memoryPlacement);
      const placement = row.memoryPlacement === 'user_prefix' && messages.some((m) => m.role === 'user') ? 'user_prefix' : 'system';
      if (memory !== '') memoryRecord = { placement, text: memory };
      text = renderChat(messages);
      served = messages;
    } else {
      if (memory !== '') memoryRecord = { placement: 'prompt_prefix', text: memory };
      text = promptWithMemory(t.prompt ?? '', memory);
    }
    const prompt = { head: text, steps: [], tail: '' };
    if (!remote) this.checkPrompt(prompt);
    await this.models.ensureLoaded(version);
    const started = performance.now();
    let gen: TurnGeneration;
    if (remote) {
      const engine = this.engine;
      if (!engine.chatTurn) throw new DomainError('engine-unavailable', 'this engine does not serve remote chat turns');
      gen = await this.generate(() =>
        engine.chatTurn!({ modelVersion: version, messages: served!, sampling, maxTokens: t.maxTokens, stop: t.stop, passthrough: t.passthrough ?? {} }),
      );
    } else {
      const engine = this.engine;
      if (!engine.complete) throw new DomainError('engine-unavailable', 'this engine does not serve completions');
      const req = {
        modelVersion: version, prompt, sampling, maxTokens: t.maxTokens, stop: t.stop,
        ...(t.maxTokensField ? { maxTokensField: t.maxTokensField } : {}), ...(t.choices ? { choices: t.choices } : {}),
      };
      gen = await this.generate(() => engine.complete!(req)).catch((err: unknown) => {
        // The engine checks `choices` as a step's candidates; here they are the request's guided_choice.
        if (err instanceof DomainError && err.kind === 'validation' && err.details.errors?.[0]?.field.startsWith('body/availableActions')) {
          const f = err.details.errors[0]!;
          throw invalid(f.field.replace('body/availableActions', 'body/guided_choice'), f.message.replace(' per action', ' per choice'));
        }
        throw err;
      });
    }
    const latencyMs = Math.round((performance.now() - started) * 1000) / 1000;
    const record: TurnRecord = {
      api: t.api,
      request: t.body,
      memory: memoryRecord,
      sampling: { ...sampling, maxTokens: t.maxTokens },
      latencyMs,
      finishReason: gen.finishReason,
      toolCalls: gen.toolCalls ?? null,
      stream: t.stream,
    };
    const observation = t.api === 'chat' ? turnObservation(t.messages ?? []) : (t.prompt ?? '');
    const commit = turnCommit({ row, gen, prompt: gen.promptText ?? text, observation, record, choices: t.choices ?? null, now: Date.now() });
    return { commit, answer: { sessionId: id, attempt, step, modelVersion: version, remote, generation: gen, latencyMs } };
  }
}
