/**
 * Turns: the calls an agent makes to its session's OpenAI-compatible endpoint
 * (`/v1/sessions/{id}/openai/v1`, src/routes/openai/session.ts). Each call is served by the
 * session's pinned version and recorded as one row of the `steps` table at the session's next
 * position (kind `action`), so the trajectory, statistics, dashboard, export and the reflection
 * after a failed attempt read turns as they read steps. This module holds the pure parts: the chat
 * template, what a turn shows as its observation, where the memory goes, the checks of whether a
 * session can take a turn and of what a version can serve, and the row and session update a turn
 * commits. The service (src/agent/sessions.ts) orders and commits; its model calls
 * (src/agent/model-calls.ts) render the turn's prompt and call the engine.
 *
 * A turn row: `observation` = the text the agent added since the model last spoke (the messages
 * after the last assistant message, joined with "\n"; for `completions`, the whole prompt);
 * `prompt` = the text the model saw (memory included); `output` = the answer's text; `action` = the
 * output, or the tool calls as JSON when the answer is only tool calls; token ids and logprobs as
 * the engine returned them; `turn` = {@link TurnRecord}; reward 0 (the attempt's reward comes with
 * the call that ends it).
 */
import { createHash } from 'node:crypto';
import type { MemoryPlacement } from '../domain.js';
import type { StepCommit, StepInsert } from '../db/queries.js';
import type { AttemptSummary, SessionRow } from '../db/schema.js';
import type { Generation, SamplingParams } from '../policy/engine.js';
import { DomainError, invalid } from './errors.js';
import { canonicalJson } from './step-hash.js';
import { recorded } from './prompt-seen.js';

/** One chat message as an agent sends it (OpenAI's shape; fields besides these are kept as sent). */
export interface AgentMessage {
  role: string;
  content: string | Array<{ type: string; text?: string }> | null;
  name?: string;
  tool_calls?: unknown;
  [k: string]: unknown;
}

/** The text of one message: its string content, or its text parts joined; '' for none. */
export function messageText(m: Pick<AgentMessage, 'content'>): string {
  if (typeof m.content === 'string') return m.content;
  return Array.isArray(m.content) ? m.content.map((p) => p.text ?? '').join('') : '';
}

/** The chat template of this server's builtin versions: every message's text, in order, joined with "\n". */
export function renderChat(messages: ReadonlyArray<Pick<AgentMessage, 'content'>>): string {
  return messages.map(messageText).join('\n');
}

/**
 * What a turn shows as its observation: the texts of the messages after the last `assistant`
 * message (all messages when there is none), joined with "\n". In an agent's loop these are the
 * environment's answer (user or tool messages) to the model's last output.
 */
export function turnObservation(messages: ReadonlyArray<AgentMessage>): string {
  let last = -1;
  messages.forEach((m, i) => {
    if (m.role === 'assistant') last = i;
  });
  return renderChat(messages.slice(last + 1));
}

/**
 * The messages served for a turn with the session's memory `memory` (the text of
 * src/agent/prompt.ts memorySection without its leading "\n"; '' adds nothing):
 * - `system`: one `{role: 'system', content: memory}` message inserted after the request's leading
 *   `system` / `developer` messages (first when there are none);
 * - `user_prefix`: the first `user` message's text starts with `memory + "\n\n"` (a string content
 *   is prefixed; an array content gets a text part in front); with no user message, as `system`.
 * The input is not changed.
 */
export function withMemory(messages: readonly AgentMessage[], memory: string, placement: MemoryPlacement): AgentMessage[] {
  const out = messages.map((m) => ({ ...m }));
  if (memory === '') return out;
  if (placement === 'user_prefix') {
    const i = out.findIndex((m) => m.role === 'user');
    if (i >= 0) {
      const m = out[i]!;
      const prefix = `${memory}\n\n`;
      m.content = Array.isArray(m.content) ? [{ type: 'text', text: prefix }, ...m.content] : prefix + (m.content ?? '');
      return out;
    }
  }
  let at = 0;
  while (at < out.length && (out[at]!.role === 'system' || out[at]!.role === 'developer')) at++;
  out.splice(at, 0, { role: 'system', content: memory });
  return out;
}

/** The prompt of a `completions` turn with the memory: `memory + "\n\n" + prompt` ('' memory: the prompt). */
export function promptWithMemory(prompt: string, memory: string): string {
  return memory === '' ? prompt : `${memory}\n\n${prompt}`;
}

/** Request fields that only remote versions serve (passed through to their server and recorded). */
export interface TurnPassthrough {
  tools?: unknown[];
  tool_choice?: unknown;
  parallel_tool_calls?: boolean;
  response_format?: Record<string, unknown>;
}

/**
 * The tool and format fields of a chat request that a builtin version cannot serve: `tools`
 * (non-empty), `tool_choice`, `parallel_tool_calls`, a `response_format` other than
 * `{type: 'text'}`, and messages carrying `tool_calls` or role `tool`.
 * @returns the JSON pointer of the first such field and why, or null when there is none.
 */
export function toolFieldOf(body: { messages?: readonly AgentMessage[] } & Record<string, unknown>): { field: string; what: string } | null {
  const tools = body.tools;
  if (tools !== undefined && tools !== null && !(Array.isArray(tools) && tools.length === 0)) return { field: 'body/tools', what: 'tools' };
  if (body.tool_choice !== undefined && body.tool_choice !== null && body.tool_choice !== 'none') return { field: 'body/tool_choice', what: 'tool_choice' };
  const rf = body.response_format as { type?: unknown } | null | undefined;
  if (rf !== undefined && rf !== null && rf.type !== 'text') return { field: 'body/response_format', what: 'response_format' };
  for (const [i, m] of (body.messages ?? []).entries()) {
    if (m.tool_calls !== undefined && m.tool_calls !== null) return { field: `body/messages/${i}/tool_calls`, what: 'tool_calls' };
    if (m.role === 'tool') return { field: `body/messages/${i}/role`, what: 'tool messages' };
  }
  return null;
}

/**
 * Refuses a turn on a session that cannot take one now (the service checks it before anything else).
 * @throws DomainError `session-not-active`, or `conflict` when the current attempt holds maxSteps turns.
 */
export function checkTurnable(row: SessionRow): void {
  if (row.status !== 'active') throw new DomainError('session-not-active', `session '${row.id}' is ${row.status}`);
  if (row.nextStep >= row.maxSteps) {
    throw new DomainError(
      'conflict',
      `attempt ${row.nextAttempt} already holds the session's maxSteps of ${row.maxSteps} turns; end it (POST /v1/sessions/${row.id}/attempts/${row.nextAttempt}/end)`,
    );
  }
}

/**
 * Refuses, for a builtin version, a request with tool or format fields (see {@link toolFieldOf}),
 * a message part other than text, or a message other than an assistant's without content.
 * @throws DomainError `validation` naming the field.
 */
export function refuseToolsOnBuiltin(body: { messages?: readonly AgentMessage[] } & Record<string, unknown>, version: string): void {
  const f = toolFieldOf(body);
  if (f) {
    throw invalid(
      f.field,
      `is not supported: the session's model version '${version}' is a builtin version, which has no ${f.what} (only remote versions, which pass tools, tool_calls and response_format to their server)`,
    );
  }
  // a builtin version reads text only: an image or audio part would be dropped without a word
  for (const [i, m] of (body.messages ?? []).entries()) {
    // only an assistant message (one that carried tool calls) may come without content, as in OpenAI's API
    if ((m.content === null || m.content === undefined) && m.role !== 'assistant') {
      throw invalid(`body/messages/${i}/content`, `is required for a '${String(m.role)}' message (only an assistant message may have null content)`);
    }
    if (!Array.isArray(m.content)) continue;
    const j = m.content.findIndex((p) => p.type !== 'text');
    if (j >= 0) {
      throw invalid(
        `body/messages/${i}/content/${j}/type`,
        `is '${String(m.content[j]!.type)}': the session's model version '${version}' is a builtin version, which reads text parts only`,
      );
    }
  }
}

/** The sampling fields a request may set (OpenAI's names); absent or null: the session's. */
export interface RequestSampling {
  temperature?: number | null;
  top_p?: number | null;
  top_k?: number | null;
  seed?: number | null;
}

/**
 * The sampling of a turn: the session's settings, overridden by the request's fields that are set
 * (top_k -1 means 0, none). Without a request seed a seeded session's call seed `sessionSeed` is
 * used (absent: unseeded).
 */
export function turnSampling(session: SamplingParams, req: RequestSampling, sessionSeed: number | undefined): SamplingParams {
  const s: SamplingParams = {
    temperature: req.temperature ?? session.temperature,
    topP: req.top_p ?? session.topP,
    topK: req.top_k === undefined || req.top_k === null ? session.topK : Math.max(0, req.top_k),
  };
  const seed = req.seed ?? sessionSeed;
  if (seed !== undefined && seed !== null) s.seed = seed;
  return s;
}

/** What a turn's `turn` column holds (JSON). */
export interface TurnRecord {
  /** `chat` (chat/completions) or `completions`. */
  api: 'chat' | 'completions';
  /** The request body exactly as the agent sent it (messages, tools, response_format, sampling fields, ...). */
  request: Record<string, unknown>;
  /** The memory added and where (`system`, `user_prefix`, or `prompt_prefix` for completions); null when none was. */
  memory: { placement: MemoryPlacement | 'prompt_prefix'; text: string } | null;
  /** The sampling the version used (the call's seed included) and the token cap. */
  sampling: SamplingParams & { maxTokens: number };
  /** Wall time of the model call, ms (queue wait included). */
  latencyMs: number;
  /** `stop`, `length`, or the remote server's reason (`tool_calls`, ...). */
  finishReason: string;
  /** The answer's tool calls as the remote server returned them; null without. */
  toolCalls: unknown[] | null;
  /** The request asked for a server-sent-event answer. */
  stream: boolean;
}

/** A served turn: the generation, why it ended and the remote's tool calls. */
export interface TurnGeneration extends Generation {
  finishReason: string;
  toolCalls?: unknown[] | null;
}

/** The turn's position, and what it commits. */
export interface TurnCommitInput {
  row: SessionRow;
  gen: TurnGeneration;
  /** The prompt text the model saw (memory included). */
  prompt: string;
  observation: string;
  record: TurnRecord;
  /** The candidates of `guided_choice`, if any. */
  choices: string[] | null;
  now: number;
}

/** The action a turn records: its output text, or its tool calls as JSON when the text is empty. */
export function turnAction(gen: TurnGeneration): string {
  if (gen.output === '' && gen.toolCalls && gen.toolCalls.length > 0) return JSON.stringify(gen.toolCalls);
  return gen.output;
}

/**
 * The row and session update of a turn at the session's next position (attempt `nextAttempt`,
 * step `nextStep`): the attempt starts running at step 0, its step count becomes step + 1, and the
 * next position is step + 1. The request hash is the sha256 of the canonical request JSON.
 */
export function turnCommit(t: TurnCommitInput): StepCommit {
  const { row, gen } = t;
  const attempt = row.nextAttempt;
  const step = row.nextStep;
  const attempts: AttemptSummary[] = row.attempts.map((a) => ({ ...a }));
  if (step === 0) attempts.push({ attempt, status: 'running', steps: 0, return: 0, success: false, endReason: null });
  attempts[attempt]!.steps = step + 1;
  const insert: StepInsert = {
    sessionId: row.id,
    attempt,
    step,
    kind: 'action',
    observation: t.observation,
    reward: 0,
    done: false,
    success: false,
    invalidAction: false,
    availableActions: t.choices,
    info: null,
    prompt: t.prompt,
    output: gen.output,
    action: turnAction(gen),
    promptTokenIds: recorded(gen, 'promptTokenIds'),
    outputTokenIds: recorded(gen, 'outputTokenIds'),
    logprobs: recorded(gen, 'logprobs'),
    droppedSteps: gen.droppedSteps,
    promptTruncatedChars: gen.promptTruncatedChars ?? 0,
    engineRecord: gen.record ?? null,
    turn: t.record,
    modelVersion: gen.modelVersion,
    requestHash: createHash('sha256').update(canonicalJson(t.record.request)).digest('hex'),
    answer: null,
    createdAt: t.now,
  };
  return {
    rows: [insert],
    reflection: null,
    session: { id: row.id, status: row.status, attempts, nextAttempt: attempt, nextStep: step + 1, updatedAt: t.now },
  };
}
