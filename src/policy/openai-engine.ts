/**
 * Remote model versions on an OpenAI-compatible inference server (vLLM, SGLang, llama.cpp's
 * server, Ollama, TGI, or another lamer-server's `/openai/v1`), behind the `act`/`reflect` part of
 * the `PolicyEngine` interface. docs/remote-engines.md has the table of server kinds.
 *
 * - Prompts are sent as chat messages: `system` = the session's instructions, `user` = the rest of
 *   the LaMer prompt (memory: reflections and/or history, this attempt's
 *   steps, the current observation and the answer cue), see {@link toMessages}.
 * - Sampling: the call's temperature, top_p, seed (and top_k where the kind accepts it); token caps
 *   `maxActionTokens` / `maxReflectionTokens` of the version.
 * - Actions inside `availableActions`: the kind's constrained decoding (vLLM `structured_outputs`
 *   or `guided_choice`, llama.cpp `grammar`, JSON-schema `response_format`); the answer is then
 *   matched against the candidates ({@link matchChoice}); when it matches none the generation is
 *   marked `invalidChoice` and its action is the parsed text.
 * - Recording: output token ids (`choices[0].token_ids`, or `token_id:<id>` logprob tokens),
 *   logprobs (`choices[0].logprobs.content[].logprob`), prompt token ids (`prompt_token_ids`) when
 *   returned; the messages always; `record.available` says which arrays are real.
 * - Failures: each HTTP try has `timeoutMs`; 429, 5xx, timeouts and connection errors are retried
 *   up to `maxRetries` times with exponential backoff (200 ms x 2^i, or the server's Retry-After,
 *   at most 10 s); anything else (4xx, a malformed answer) fails at once. Failures throw
 *   `EngineError`, which the agent answers 503 engine-unavailable with nothing recorded.
 * - At most `concurrency` requests per version are in flight; more wait in FIFO order.
 */
import { extractAction } from './actions.js';
import { decode, VOCAB_SIZE } from '../model/tokenizer.js';
import {
  EngineError, type ActRequest, type Generation, type GenerationRecord, type PromptParts, type ReflectRequest,
  type RemoteVersionConfig, type SamplingParams,
} from './engine.js';

export type ChatMessage = GenerationRecord['messages'][number];

/** Defaults of a remote version's settings (docs/remote-engines.md). */
export const REMOTE_DEFAULTS = {
  kind: 'plain',
  concurrency: 8,
  timeoutMs: 60_000,
  maxRetries: 3,
  maxActionTokens: 64,
  maxReflectionTokens: 512,
} as const;

/** Longest backoff between two tries, ms. */
const MAX_BACKOFF_MS = 10_000;

/**
 * The chat messages of a LaMer prompt: `system` = `instructions` when the prompt text starts with
 * them, `user` = the rest of the text (its leading newline removed); without instructions (or when
 * the text does not start with them) one `user` message with the whole text.
 * Joined with "\n" the contents give back the prompt text exactly (this server's own chat template).
 */
export function toMessages(prompt: PromptParts, instructions?: string): ChatMessage[] {
  const text = prompt.head + prompt.steps.join('') + prompt.tail;
  if (instructions && instructions.length > 0 && text.startsWith(instructions + '\n')) {
    return [
      { role: 'system', content: instructions },
      { role: 'user', content: text.slice(instructions.length + 1) },
    ];
  }
  return [{ role: 'user', content: text }];
}

/** A GBNF string literal (llama.cpp grammar) of `s`. */
function gbnfLiteral(s: string): string {
  return '"' + s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n').replace(/\r/g, '\\r').replace(/\t/g, '\\t') + '"';
}

/** The request fields that keep the answer inside `actions`, per kind (docs/remote-engines.md). */
export function constraintFields(kind: RemoteVersionConfig['kind'], actions: string[]): { fields: Record<string, unknown>; constraint: NonNullable<GenerationRecord['constraint']> } {
  switch (kind) {
    case 'vllm':
      return { fields: { structured_outputs: { choice: actions } }, constraint: 'structured_outputs' };
    case 'vllm-legacy':
    case 'lamer':
      return { fields: { guided_choice: actions }, constraint: 'guided_choice' };
    case 'llamacpp':
      return { fields: { grammar: `root ::= ${actions.map(gbnfLiteral).join(' | ')}` }, constraint: 'grammar' };
    case 'openai':
      return {
        fields: {
          response_format: {
            type: 'json_schema',
            json_schema: {
              name: 'action',
              strict: true,
              schema: { type: 'object', properties: { action: { type: 'string', enum: actions } }, required: ['action'], additionalProperties: false },
            },
          },
        },
        constraint: 'json_schema',
      };
    default:
      return { fields: {}, constraint: 'parse' };
  }
}

/**
 * Index of the candidate an answer names, or -1: the answer trimmed; else, for JSON-schema answers,
 * its `action` field; else the first line without an "Action:" label (src/policy/actions.ts); each
 * compared exactly, then ignoring case and surrounding spaces.
 */
export function matchChoice(output: string, actions: string[]): number {
  const tries: string[] = [output.trim()];
  try {
    const j = JSON.parse(output) as { action?: unknown };
    if (j && typeof j === 'object' && typeof j.action === 'string') tries.push(j.action.trim());
  } catch {
    /* not JSON */
  }
  tries.push(extractAction(output));
  for (const t of tries) {
    const i = actions.indexOf(t);
    if (i >= 0) return i;
  }
  for (const t of tries) {
    const i = actions.findIndex((a) => a.trim().toLowerCase() === t.toLowerCase());
    if (i >= 0) return i;
  }
  return -1;
}

/** The action text of an answer that matched no candidate (JSON `action` field, else extractAction). */
function parsedAction(output: string): string {
  try {
    const j = JSON.parse(output) as { action?: unknown };
    if (j && typeof j === 'object' && typeof j.action === 'string') return j.action;
  } catch {
    /* not JSON */
  }
  return extractAction(output);
}

const isIntArray = (v: unknown): v is number[] => Array.isArray(v) && v.every((x) => Number.isInteger(x));

interface ParsedAnswer {
  content: string;
  promptTokenIds: number[] | null;
  outputTokenIds: number[] | null;
  logprobs: number[] | null;
}

/**
 * Reads a chat-completion answer.
 * @throws EngineError when it has no `choices[0].message.content` string.
 */
export function parseChatAnswer(body: unknown): ParsedAnswer {
  const b = body as { choices?: unknown; prompt_token_ids?: unknown } | null;
  const choice = Array.isArray(b?.choices) ? (b!.choices[0] as Record<string, unknown> | undefined) : undefined;
  const message = choice?.message as { content?: unknown } | undefined;
  if (!choice || !message || typeof message.content !== 'string') {
    throw new EngineError('remote answer is malformed: no choices[0].message.content string');
  }
  const content = message.content;
  let logprobs: number[] | null = null;
  let idsFromTokens: number[] | null = null;
  const lp = (choice.logprobs as { content?: unknown } | null | undefined)?.content;
  if (Array.isArray(lp) && lp.every((t) => t && typeof t === 'object' && typeof (t as { logprob?: unknown }).logprob === 'number')) {
    const items = lp as Array<{ logprob: number; token?: unknown }>;
    logprobs = items.map((t) => t.logprob);
    const ids = items.map((t) => (typeof t.token === 'string' ? /^token_id:(\d+)$/.exec(t.token) : null));
    if (ids.every((m) => m !== null)) idsFromTokens = ids.map((m) => Number(m![1]));
  }
  let outputTokenIds = isIntArray(choice.token_ids) ? choice.token_ids : idsFromTokens;
  if (outputTokenIds && logprobs && outputTokenIds.length !== logprobs.length) outputTokenIds = idsFromTokens;
  const promptTokenIds = isIntArray(b?.prompt_token_ids) ? b!.prompt_token_ids : null;
  return { content, promptTokenIds, outputTokenIds, logprobs };
}

export interface RemoteDeps {
  /** Waits `ms` (tests may shorten backoffs). */
  sleep?: (ms: number) => Promise<void>;
  logger?: { warn(o: object, msg?: string): void };
}

/** Thrown inside a try: whether another try may succeed. */
class TryError extends Error {
  constructor(message: string, readonly retryable: boolean, readonly retryAfterMs: number | null = null) {
    super(message);
  }
}

/** One remote model version: its settings, a concurrency gate and the HTTP calls. */

/**
 * What a lamer-server behind `/openai/v1` saw of the prompt: its byte-level token ids decode to the
 * text it kept (the messages joined with newlines, as its chat template renders them, cut from the
 * start when longer than its context). Recording that text and the number of characters (code
 * points) cut keeps `decode(promptTokenIds) === prompt` true for remote versions of kind `lamer`.
 * null when the ids are not all bytes and specials (a version with a game vocabulary, whose pieces
 * only its checkpoint lists): the caller then records the text it sent.
 */
function lamerPromptSeen(messages: readonly ChatMessage[], promptTokenIds: readonly number[]): { promptText: string; promptTruncatedChars: number } | null {
  // ids beyond the byte vocabulary (a game-vocabulary checkpoint's pieces, src/model/tokenizer.ts)
  // cannot be decoded here: the prompt recorded stays the text sent
  if (promptTokenIds.some((t) => t >= VOCAB_SIZE)) return null;
  const seen = decode(promptTokenIds);
  const full = messages.map((m) => m.content).join('\n');
  const cut = full.endsWith(seen) ? [...full].length - [...seen].length : 0;
  return { promptText: seen, promptTruncatedChars: cut };
}

export class RemoteVersion {
  private inFlight = 0;
  private readonly waiters: Array<() => void> = [];
  private readonly sleep: (ms: number) => Promise<void>;

  constructor(
    readonly version: string,
    readonly config: RemoteVersionConfig,
    private readonly deps: RemoteDeps = {},
  ) {
    this.sleep = deps.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms)));
  }

  /** Requests waiting for a free slot now. */
  queued(): number {
    return this.waiters.length;
  }

  private async gate<T>(fn: () => Promise<T>): Promise<T> {
    if (this.inFlight >= this.config.concurrency) await new Promise<void>((r) => this.waiters.push(r));
    else this.inFlight++;
    try {
      return await fn();
    } finally {
      const next = this.waiters.shift();
      if (next) next();
      else this.inFlight--;
    }
  }

  /** Sampling fields of a request; `top_k` only where the kind accepts it. */
  private samplingFields(s: SamplingParams): Record<string, unknown> {
    const f: Record<string, unknown> = { temperature: s.temperature, top_p: s.topP };
    if (s.seed !== undefined) f.seed = s.seed;
    if (s.topK > 0 && ['vllm', 'vllm-legacy', 'lamer', 'llamacpp'].includes(this.config.kind)) f.top_k = s.topK;
    return f;
  }

  /** Fields asking for token ids where the kind can return them. */
  private tokenFields(): Record<string, unknown> {
    return ['vllm', 'vllm-legacy', 'lamer'].includes(this.config.kind) ? { return_token_ids: true, return_tokens_as_token_ids: true } : {};
  }

  /**
   * POSTs `body` to `<baseUrl>/chat/completions` with timeouts and retries.
   * @returns the parsed JSON answer and the number of tries it took.
   * @throws EngineError when every try failed or the server refused the request.
   */
  async post(body: Record<string, unknown>): Promise<{ json: unknown; tries: number }> {
    const url = this.config.baseUrl.replace(/\/+$/, '') + '/chat/completions';
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
    if (this.config.apiKey) headers.authorization = `Bearer ${this.config.apiKey}`;
    const payload = JSON.stringify(body);
    let last = '';
    for (let i = 0; i <= this.config.maxRetries; i++) {
      try {
        return { json: await this.tryOnce(url, headers, payload), tries: i + 1 };
      } catch (err) {
        const e = err instanceof TryError ? err : new TryError(err instanceof Error ? err.message : String(err), false);
        last = e.message;
        if (!e.retryable || i === this.config.maxRetries) break;
        const wait = Math.min(MAX_BACKOFF_MS, e.retryAfterMs ?? 200 * 2 ** i);
        this.deps.logger?.warn({ version: this.version, try: i + 1, waitMs: wait, err: e.message }, 'remote engine call failed; retrying');
        await this.sleep(wait);
      }
    }
    // The detail reaches any tenant's client: it names the version, not the server's address.
    throw new EngineError(`remote model version '${this.version}' failed: ${last}`);
  }

  private async tryOnce(url: string, headers: Record<string, string>, payload: string): Promise<unknown> {
    let res: Response;
    let text: string;
    const signal = AbortSignal.timeout(this.config.timeoutMs);
    try {
      res = await fetch(url, { method: 'POST', headers, body: payload, signal });
      text = await res.text();
    } catch (err) {
      const e = err as Error & { cause?: { code?: string } };
      if (e.name === 'TimeoutError' || e.name === 'AbortError') throw new TryError(`no answer within ${this.config.timeoutMs} ms`, true);
      throw new TryError(`cannot reach the server: ${e.cause?.code ?? e.message}`, true);
    }
    if (res.status === 429 || res.status >= 500) {
      const ra = Number(res.headers.get('retry-after'));
      throw new TryError(`HTTP ${res.status}: ${text.slice(0, 200)}`, true, Number.isFinite(ra) && ra >= 0 && res.headers.has('retry-after') ? ra * 1000 : null);
    }
    if (res.status !== 200) throw new TryError(`HTTP ${res.status}: ${text.slice(0, 200)}`, false);
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new TryError(`remote answer is not JSON: ${text.slice(0, 100)}`, false);
    }
  }

  private async chat(
    prompt: PromptParts,
    instructions: string | undefined,
    sampling: SamplingParams,
    maxTokens: number,
    actions?: string[],
  ): Promise<Generation> {
    const messages = toMessages(prompt, instructions);
    const c = actions && actions.length > 0 ? constraintFields(this.config.kind, actions) : null;
    const body = {
      model: this.config.model,
      messages,
      max_tokens: maxTokens,
      ...this.samplingFields(sampling),
      logprobs: true,
      ...this.tokenFields(),
      ...(c ? c.fields : {}),
    };
    const { json, tries } = await this.gate(() => this.post(body));
    const a = parseChatAnswer(json);
    const record: GenerationRecord = {
      engine: 'openai',
      messages,
      available: { promptTokenIds: a.promptTokenIds !== null, outputTokenIds: a.outputTokenIds !== null, logprobs: a.logprobs !== null },
      model: this.config.model,
      tries,
      sampling: { ...sampling, maxTokens },
    };
    const g: Generation = {
      output: a.content,
      promptTokenIds: a.promptTokenIds ?? [],
      outputTokenIds: a.outputTokenIds ?? [],
      logprobs: a.logprobs ?? [],
      droppedSteps: 0,
      modelVersion: this.version,
      record,
    };
    if (this.config.kind === 'lamer' && a.promptTokenIds !== null) Object.assign(g, lamerPromptSeen(messages, a.promptTokenIds) ?? {});
    if (actions && actions.length > 0 && c) {
      record.constraint = c.constraint;
      const i = matchChoice(a.content, actions);
      if (i >= 0) {
        g.output = actions[i]!;
        g.choiceIndex = i;
      } else {
        record.invalidChoice = true;
        g.output = a.content;
      }
    }
    return g;
  }

  /**
   * One action. With `availableActions` the output is the matched candidate (`choiceIndex` set) or,
   * when none matched, the raw answer with `record.invalidChoice` (the agent executes its parsed
   * text, see {@link invalidChoiceAction}).
   */
  act(req: ActRequest): Promise<Generation> {
    return this.chat(req.prompt, req.instructions, req.sampling, this.config.maxActionTokens, req.availableActions);
  }

  reflect(req: ReflectRequest): Promise<Generation> {
    return this.chat(req.prompt, req.instructions, req.sampling, this.config.maxReflectionTokens);
  }
}

/** The action to execute for an answer that matched no candidate: its JSON `action` or first line. */
export function invalidChoiceAction(output: string): string {
  return parsedAction(output);
}
