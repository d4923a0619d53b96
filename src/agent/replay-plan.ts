/**
 * Replay, the pure parts (docs/replay.md): for one recorded model call of a session, the request
 * that asks another version for its own answer and for the logprob of the recorded one, and the
 * report entry made of the answer; then the report's summary. The service (./replays.ts) reads the
 * rows, calls the engine and stores the report.
 *
 * Prompts (docs/replay.md "Prompts"):
 * - A step, on a builtin version: the recorded prompt token ids as they are when the other version
 *   reads the same tokens and prompt format as the recorded one and they fit its context
 *   (`recorded-tokens`); otherwise the acting prompt re-rendered in the other version's format from
 *   the recorded observations, actions and reflections (`rendered`, src/agent/prompt.ts), as the
 *   session service renders it (instructions, memory by the session's memory mode, the attempt's
 *   earlier steps, the observation), fitted to its context.
 * - A turn: the recorded messages with the recorded memory put back where it went (the text the
 *   model saw, `recorded-messages`), or the recorded prompt token ids under the same rule.
 * - A remote version reads the rendered prompt (steps: its `act`, system = instructions) or the
 *   recorded messages (chat turns: its `chatTurn`, tools and response_format passed through).
 *
 * The recorded answer is scored as recorded (its token ids) when the tokenizers agree, else as its
 * text in the other version's tokenizer (an action among candidates: its tokens + EOS; free text:
 * its tokens, + EOS when the recorded answer ended with it). Scoring uses the recorded call's
 * sampling (temperature, top-p, top-k), so that it is comparable with the recorded logprobs.
 */
import type { ReplayDecoding } from '../domain.js';
import type { ReplayedRow } from '../db/replays-repo.js';
import type { SessionRow } from '../db/schema.js';
import { callSeed } from '../model/sampling.js';
import { EOS } from '../model/tokenizer.js';
import type { Tokenizer } from '../model/tokenizers.js';
import type { ActRequest, ChatTurnRequest, Generation, ReplayAnswer, ReplayRequest, SamplingParams } from '../policy/engine.js';
import { cutChars, renderActPrompt, type PromptAttempt, type PromptFormat, type PromptStep } from './prompt.js';
import { MOST_DIFFERENT, REPLAY_OBSERVATION_CHARS, type ReplayStepView, type ReplaySummaryView } from './replay-schemas.js';
import { actionOf } from './step-transition.js';
import { renderChat, toolFieldOf, turnAction, withMemory, type AgentMessage, type TurnGeneration, type TurnRecord } from './turns.js';

/** What a replay knows of a model version. */
export interface VersionText {
  version: string;
  /** Served by a remote OpenAI-compatible server. */
  remote: boolean;
  format: PromptFormat;
  tokenizer: Tokenizer;
  /** Equal for versions whose token ids mean the same (their tokenizer spec); null for remote versions (their servers' own ids). */
  tokenKey: string | null;
}

/** One recorded call in its session: the session, its action rows in order, its reflections, and the row's index. */
export interface RecordedCall {
  session: SessionRow;
  rows: readonly ReplayedRow[];
  reflections: ReadonlyMap<number, string>;
  index: number;
}

/** How a replay decodes and whether it scores. */
export interface ReplayOptions {
  decoding: ReplayDecoding;
  logprobs: boolean;
  /** Id of the replay (remote `act` calls carry it as their session id). */
  replayId: string;
}

/** The model call that replays one recorded call, or why there is none. */
export type PlannedCall =
  | { kind: 'skip'; reason: string }
  | { kind: 'local'; req: ReplayRequest; source: 'rendered' | 'recorded-messages' }
  | { kind: 'remote-act'; req: ActRequest }
  | { kind: 'remote-chat'; req: ChatTurnRequest };

const GREEDY: SamplingParams = { temperature: 0, topP: 1, topK: 0 };

/** The sampling the recorded call used (a step: the session's, with the call's seed; a turn: its record's). */
export function recordedSampling(session: SessionRow, row: ReplayedRow): SamplingParams {
  const turn = row.turn as TurnRecord | null;
  if (turn) {
    const { maxTokens: _cap, ...s } = turn.sampling;
    return s;
  }
  const s = session.sampling as SamplingParams;
  return s.seed === undefined ? s : { ...s, seed: callSeed(s.seed, row.attempt, row.step, 'act') };
}

/** An attempt's steps with actions and the observation it ended on, from its rows. */
function attemptSteps(rows: readonly ReplayedRow[], attempt: number): { steps: PromptStep[]; finalObservation: string } {
  const of = rows.filter((r) => r.attempt === attempt);
  return {
    steps: of.filter((r) => r.action !== null).map((r) => ({ observation: r.observation, action: r.action! })),
    finalObservation: of.length > 0 ? of[of.length - 1]!.observation : '',
  };
}

/**
 * The acting prompt of the call in `format`, rendered as the session service renders it
 * (src/agent/model-calls.ts previousAttempts: only the latest earlier attempt's steps, in history modes).
 */
export function renderedPrompt(c: RecordedCall, format: PromptFormat) {
  const { session, rows } = c;
  const row = rows[c.index]!;
  const withHistory = session.memory !== 'reflection_only';
  const previousAttempts: PromptAttempt[] = [];
  for (let a = 0; a < row.attempt; a++) {
    const shown = withHistory && a === row.attempt - 1 ? attemptSteps(rows, a) : null;
    previousAttempts.push({
      steps: shown?.steps ?? [],
      finalObservation: shown?.finalObservation ?? '',
      success: session.attempts[a]?.success ?? false,
      reflection: c.reflections.get(a) ?? null,
    });
  }
  const steps = rows
    .filter((r) => r.attempt === row.attempt && r.step < row.step && r.action !== null)
    .map((r) => ({ observation: r.observation, action: r.action! }));
  return renderActPrompt({
    format,
    env: session.env,
    instructions: session.instructions,
    memory: session.memory,
    attempt: row.attempt,
    previousAttempts,
    steps,
    observation: row.observation,
  });
}

/** A turn's messages as served (the recorded memory put back where it went), or its completions prompt with the memory. */
function servedTurn(turn: TurnRecord): { messages: AgentMessage[] | null; text: string } {
  const req = turn.request as { messages?: AgentMessage[]; prompt?: string | string[] };
  const memory = turn.memory;
  if (turn.api === 'chat') {
    const placement = memory?.placement === 'user_prefix' ? 'user_prefix' : 'system';
    const messages = withMemory(req.messages ?? [], memory?.text ?? '', placement);
    return { messages, text: renderChat(messages) };
  }
  const prompt = typeof req.prompt === 'string' ? req.prompt : (req.prompt?.[0] ?? '');
  return { messages: null, text: memory ? `${memory.text}\n\n${prompt}` : prompt };
}

/** The stop strings of a turn's request. */
function turnStops(turn: TurnRecord): string[] {
  const s = (turn.request as { stop?: unknown }).stop;
  return typeof s === 'string' ? [s] : Array.isArray(s) ? s.filter((x): x is string => typeof x === 'string') : [];
}

/**
 * Whether the recorded answer ended, so that its re-tokenised form ends with EOS: its last recorded
 * token is EOS (builtin ids), else a turn not cut by its length cap, else (a remote step) true.
 */
function answerEnded(row: ReplayedRow): boolean {
  const ids = row.outputTokenIds;
  const turn = row.turn as TurnRecord | null;
  if (ids && ids.length > 0 && !row.engineRecord) return ids[ids.length - 1] === EOS;
  return turn ? turn.finishReason !== 'length' : true;
}

/** The recorded answer as token ids of `target` (see the top of this file). */
export function scoredTokenIds(row: ReplayedRow, target: VersionText, recorded: VersionText | null): number[] {
  if (recorded?.tokenKey && recorded.tokenKey === target.tokenKey && row.outputTokenIds) return row.outputTokenIds;
  if (row.availableActions && row.availableActions.length > 0) return target.tokenizer.encodeCandidate(row.output ?? '');
  const ids = target.tokenizer.encode(row.output ?? '');
  if (answerEnded(row)) ids.push(EOS);
  return ids;
}

/** The request fields a remote version passes through (`tools`, `tool_choice`, ...), as the turn sent them. */
function passthroughOf(turn: TurnRecord): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of ['tools', 'tool_choice', 'parallel_tool_calls', 'response_format']) {
    const v = turn.request[k];
    if (v !== undefined && v !== null) out[k] = v;
  }
  return out;
}

/** The call that replays a turn on a remote version, or why there is none. */
function planRemoteTurn(turn: TurnRecord, row: ReplayedRow, target: VersionText, sampling: SamplingParams): PlannedCall {
  if (turn.api !== 'chat')
    return { kind: 'skip', reason: `a completions turn: remote version '${target.version}' serves chat/completions only` };
  if (row.availableActions)
    return { kind: 'skip', reason: `a guided_choice turn: remote version '${target.version}' is not sent guided_choice` };
  const { messages } = servedTurn(turn);
  return {
    kind: 'remote-chat',
    req: {
      modelVersion: target.version,
      messages: messages as Array<Record<string, unknown>>,
      sampling,
      maxTokens: turn.sampling.maxTokens,
      stop: turnStops(turn),
      passthrough: passthroughOf(turn),
    },
  };
}

/**
 * The model call that replays recorded call `c` on `target` (`recorded`: what is known of the
 * version that recorded it, null when it is not registered), or why there is none.
 */
export function planCall(c: RecordedCall, target: VersionText, recorded: VersionText | null, opts: ReplayOptions): PlannedCall {
  const row = c.rows[c.index]!;
  const turn = row.turn as TurnRecord | null;
  const rec = recordedSampling(c.session, row);
  const sampling = opts.decoding === 'greedy' ? GREEDY : rec;
  const candidates = row.availableActions && row.availableActions.length > 0 ? row.availableActions : undefined;
  if (target.remote) {
    if (turn) return planRemoteTurn(turn, row, target, sampling);
    const prompt = renderedPrompt(c, target.format);
    return {
      kind: 'remote-act',
      req: {
        sessionId: opts.replayId,
        modelVersion: target.version,
        prompt,
        sampling,
        instructions: c.session.instructions,
        ...(candidates ? { availableActions: candidates } : {}),
      },
    };
  }
  const sameTokens = recorded?.tokenKey != null && recorded.tokenKey === target.tokenKey && row.promptTokenIds !== null;
  const score = opts.logprobs
    ? { tokenIds: scoredTokenIds(row, target, recorded), sampling: { temperature: rec.temperature, topP: rec.topP, topK: rec.topK } }
    : undefined;
  const base = { modelVersion: target.version, sampling, ...(candidates ? { candidates } : {}), ...(score ? { score } : {}) };
  if (turn) {
    const tools = toolFieldOf({ ...turn.request, messages: (turn.request as { messages?: AgentMessage[] }).messages ?? [] });
    if (tools) return { kind: 'skip', reason: `a turn with ${tools.what}: builtin version '${target.version}' has none` };
    const prompt = { head: servedTurn(turn).text, steps: [], tail: '' };
    const req: ReplayRequest = {
      ...base,
      prompt,
      maxTokens: turn.sampling.maxTokens,
      stop: turnStops(turn),
      ...(sameTokens ? { promptTokenIds: row.promptTokenIds! } : {}),
    };
    return { kind: 'local', req, source: 'recorded-messages' };
  }
  const sameFormat = recorded !== null && JSON.stringify(recorded.format) === JSON.stringify(target.format);
  const req: ReplayRequest = {
    ...base,
    prompt: renderedPrompt(c, target.format),
    ...(sameTokens && sameFormat ? { promptTokenIds: row.promptTokenIds! } : {}),
  };
  return { kind: 'local', req, source: 'rendered' };
}

const sum = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0);

/** The report entry of call `c` without its replayed part (`replayed` null, `skipped` set by the caller when it was not replayed). */
export function recordedEntry(c: RecordedCall): ReplayStepView {
  const row = c.rows[c.index]!;
  const lps = row.logprobs;
  return {
    sessionId: c.session.id,
    attempt: row.attempt,
    step: row.step,
    kind: row.turn ? 'turn' : 'step',
    observation: cutChars(row.observation, REPLAY_OBSERVATION_CHARS),
    recorded: {
      modelVersion: row.modelVersion,
      action: row.action ?? '',
      tokens: row.outputTokenIds ? row.outputTokenIds.length : null,
      logprob: lps && lps.length > 0 ? sum(lps) : null,
      logprobs: lps,
    },
    replayed: null,
    logprobDiff: null,
    skipped: null,
  };
}

/** The action a replayed answer stands for: a turn's output (or tool calls), a step's as the step transition reads it. */
function replayedAction(c: RecordedCall, gen: Generation | TurnGeneration, actionChars: number): string {
  const row = c.rows[c.index]!;
  if (row.turn) return turnAction(gen as TurnGeneration);
  return actionOf(gen, { availableActions: row.availableActions ?? undefined }, actionChars) ?? '';
}

/** The report entry of call `c` replayed: the answer `gen`, the scored logprobs (null: not scored), where the prompt came from. */
export function replayedEntry(
  c: RecordedCall,
  gen: Generation | TurnGeneration,
  scored: ReplayAnswer['scoredLogprobs'],
  promptFrom: NonNullable<ReplayStepView['replayed']>['promptFrom'],
  actionChars: number,
): ReplayStepView {
  const e = recordedEntry(c);
  const action = replayedAction(c, gen, actionChars);
  const logprob = scored && scored.every((x) => x !== null) ? sum(scored as number[]) : null;
  e.replayed = { action, agrees: action === e.recorded.action, promptFrom, droppedSteps: gen.droppedSteps, logprob, logprobs: scored };
  e.logprobDiff = logprob !== null && e.recorded.logprob !== null ? logprob - e.recorded.logprob : null;
  return e;
}

const mean = (xs: readonly number[]): number | null => (xs.length > 0 ? sum(xs) / xs.length : null);

/**
 * Below this |logprobDiff| (nats) a call whose actions agree counts as the same under both
 * versions (float rounding: one forward over an answer instead of one per token) and is not
 * listed among the calls that differ most.
 */
export const SAME_LOGPROB = 1e-4;

/**
 * The summary of a report's entries: agreement, logprob differences, and the calls that differ
 * most (disagreeing, or |logprobDiff| >= SAME_LOGPROB; largest |logprobDiff| first, then the
 * disagreeing ones without a difference; at most MOST_DIFFERENT).
 */
export function summarize(steps: readonly ReplayStepView[]): ReplaySummaryView {
  const replayed = steps.filter((s) => s.replayed !== null);
  const scored = steps.filter((s) => s.logprobDiff !== null);
  const agreeing = replayed.filter((s) => s.replayed!.agrees).length;
  const size = (s: ReplayStepView): number => (s.logprobDiff === null ? -1 : Math.abs(s.logprobDiff));
  const order = steps
    .map((s, i) => ({ s, i }))
    .filter(({ s }) => s.replayed !== null && (!s.replayed.agrees || size(s) >= SAME_LOGPROB))
    .sort((a, b) => size(b.s) - size(a.s) || Number(a.s.replayed!.agrees) - Number(b.s.replayed!.agrees) || a.i - b.i);
  return {
    calls: steps.length,
    replayed: replayed.length,
    skipped: steps.length - replayed.length,
    agreeing,
    agreement: replayed.length > 0 ? agreeing / replayed.length : null,
    scored: scored.length,
    meanLogprobDiff: mean(scored.map((s) => s.logprobDiff!)),
    meanRecordedLogprob: mean(scored.map((s) => s.recorded.logprob!)),
    meanReplayedLogprob: mean(scored.map((s) => s.replayed!.logprob!)),
    outsideSupport: replayed.filter((s) => s.replayed!.logprobs?.some((x) => x === null)).length,
    mostDifferent: order.slice(0, MOST_DIFFERENT).map(({ i }) => i),
  };
}
