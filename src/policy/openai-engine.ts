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
 *   returned; the messages always; `record.available` says which arrays are real. Ids outside
 *   [0, 2^31), disagreeing with `usage`, beyond the token cap, or (kind `lamer`) not spelling the
 *   end of the prompt sent count as not returned.
 * - Size: the answer's body is read as a stream and given up past `maxResponseBytes`; its text is
 *   cut at 32 characters per token of the cap (the token arrays are then not returned).
 * - Failures: each HTTP try has `timeoutMs`; 429, 5xx, timeouts and connection errors are retried
 *   up to `maxRetries` times with exponential backoff (200 ms x 2^i, or the server's Retry-After,
 *   at most 10 s); anything else (4xx, a malformed or oversized answer) fails at once. The whole
 *   call (slot wait, tries, backoffs) is bounded by `callTimeoutMs`. Failures throw `EngineError`,
 *   which the agent answers 503 engine-unavailable with nothing recorded.
 * - `/readyz`: {@link RemoteVersion.probe} asks `GET <baseUrl>/models` (cached, short timeout).
 * - At most `concurrency` requests per version are in flight; more wait in FIFO order.
 */
import { extractAction } from './actions.js';
import { decode, VOCAB_SIZE } from '../model/tokenizer.js';
import {
  EngineError, type ActRequest, type Generation, type GenerationRecord, type PromptParts, type ReflectRequest,
  type RemoteProbe, type RemoteVersionConfig, type SamplingParams,
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
  /** 4 MiB: an action's answer is a few KB; prompt token ids of a 500k-token prompt fit. */
  maxResponseBytes: 4 * 1024 * 1024,
  /** 100 s: below the 120 s default timeout of clients/python, so the client reads the 503. */
  callTimeoutMs: 100_000,
} as const;

/**
 * Most characters (code points) of an answer per token of its `max_tokens` cap: longer than any
 * tokenizer's tokens give on average, so only an answer that ignored the cap is cut.
 */
export const MAX_CHARS_PER_TOKEN = 32;

/** Token ids taken from an answer lie in [0, 2^31): an int32 vocabulary index, as in every tokenizer in use. */
export const TOKEN_ID_LIMIT = 2 ** 31;

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

/** Token ids as an answer may give them: integers in [0, {@link TOKEN_ID_LIMIT}) (`1e300` is an integer to JS, but no token id). */
const isTokenIds = (v: unknown): v is number[] =>
  Array.isArray(v) && v.every((x) => Number.isInteger(x) && (x as number) >= 0 && (x as number) < TOKEN_ID_LIMIT);

interface ParsedAnswer {
  content: string;
  promptTokenIds: number[] | null;
  outputTokenIds: number[] | null;
  logprobs: number[] | null;
}

/**
 * Reads a chat-completion answer. Token ids outside [0, 2^31), or whose count differs from the
 * answer's `usage` (`prompt_tokens`, `completion_tokens`), are treated as not returned (null).
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
    const ids = items.map((t) => (typeof t.token === 'string' ? /^token_id:(\d{1,10})$/.exec(t.token) : null));
    if (ids.every((m) => m !== null)) {
      const parsed = ids.map((m) => Number(m![1]));
      if (isTokenIds(parsed)) idsFromTokens = parsed;
    }
  }
  let outputTokenIds = isTokenIds(choice.token_ids) ? choice.token_ids : idsFromTokens;
  if (outputTokenIds && logprobs && outputTokenIds.length !== logprobs.length) outputTokenIds = idsFromTokens;
  let promptTokenIds = isTokenIds(b?.prompt_token_ids) ? b!.prompt_token_ids : null;
  // The answer's own counts bound its arrays: ids that disagree with `usage` describe something else.
  const u = (body as { usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } } | null)?.usage;
  if (promptTokenIds && typeof u?.prompt_tokens === 'number' && promptTokenIds.length !== u.prompt_tokens) promptTokenIds = null;
  if (outputTokenIds && typeof u?.completion_tokens === 'number' && outputTokenIds.length !== u.completion_tokens) outputTokenIds = null;
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

/** Code points of `s` from UTF-16 index `from` on (a surrogate pair counts once). */
function codePoints(s: string, from = 0): number {
  let n = 0;
  for (let i = from; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (!(c >= 0xdc00 && c <= 0xdfff && i > from && s.charCodeAt(i - 1) >= 0xd800 && s.charCodeAt(i - 1) <= 0xdbff)) n++;
  }
  return n;
}

/** The first `max` code points of `s` at most (never half of a surrogate pair). */
function cutCodePoints(s: string, max: number): string {
  let units = 0;
  let n = 0;
  for (const ch of s) {
    if (n === max) break;
    units += ch.length;
    n++;
  }
  return s.slice(0, units);
}

/**
 * The body of `res` as UTF-8 text, read chunk by chunk: past `maxBytes` the stream is cancelled
 * (the connection is dropped, nothing more is buffered) and a TryError (not retryable) is thrown.
 */
async function readCapped(res: Response, maxBytes: number): Promise<string> {
  const declared = Number(res.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > maxBytes) {
    await res.body?.cancel().catch(() => {});
    throw new TryError(`answer of ${declared} bytes is larger than the limit of ${maxBytes} bytes`, false);
  }
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel().catch(() => {});
      throw new TryError(`answer is larger than the limit of ${maxBytes} bytes (cut off there)`, false);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}


/**
 * What a lamer-server behind `/openai/v1` saw of the prompt: its byte-level token ids decode to the
 * text it kept (the messages joined with newlines, as its chat template renders them, cut from the
 * start when longer than its context). Recording that text and the number of characters (code
 * points) cut keeps `decode(promptTokenIds) === prompt` true for remote versions of kind `lamer`.
 * null when the ids are not all bytes and specials (a version with a game vocabulary, whose pieces
 * only its checkpoint lists): the caller then records the text it sent.
 */
function lamerPromptSeen(messages: readonly ChatMessage[], promptTokenIds: readonly number[]): { promptText: string; promptTruncatedChars: number } | null {
  // Ids of another vocabulary, or ids that do not spell the end of what was sent, describe some
  // other prompt: the caller records them as not returned, and the prompt as sent.
  if (promptTokenIds.some((t) => t >= VOCAB_SIZE)) return null;
  const seen = decode(promptTokenIds);
  const full = messages.map((m) => m.content).join('\n');
  if (!full.endsWith(seen) || (seen === '' && full !== '')) return null;
  return { promptText: seen, promptTruncatedChars: [...full].length - [...seen].length };
}

/** How long a probe result of a remote version is reused, ms. */
export const PROBE_CACHE_MS = 5_000;
/** Longest wait for a probe's answer, ms (cut further by the version's own timeout). */
export const PROBE_TIMEOUT_MS = 2_000;

export class RemoteVersion {
  private lastProbe: RemoteProbe | null = null;
  private probing: Promise<RemoteProbe> | null = null;
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

  /**
   * Whether the server answers: `GET <baseUrl>/models` (every OpenAI-compatible server has it)
   * with the version's key, at most {@link PROBE_TIMEOUT_MS}; 2xx, or 404/405 (up, without that
   * route), is reachable; another status, a timeout or a refused connection is not. The result
   * is reused for {@link PROBE_CACHE_MS}, and concurrent callers share one probe, so /readyz
   * polled by many load balancers sends the server one request every few seconds at most.
   * Never throws.
   */
  async probe(now: number = Date.now()): Promise<RemoteProbe> {
    if (this.lastProbe && now - this.lastProbe.checkedAt < PROBE_CACHE_MS) return this.lastProbe;
    this.probing ??= this.probeOnce().then((r) => {
      this.lastProbe = r;
      this.probing = null;
      return r;
    });
    return this.probing;
  }

  private async probeOnce(): Promise<RemoteProbe> {
    const url = this.config.baseUrl.replace(/\/+$/, '') + '/models';
    const headers: Record<string, string> = { accept: 'application/json' };
    if (this.config.apiKey) headers.authorization = `Bearer ${this.config.apiKey}`;
    const timeoutMs = Math.min(PROBE_TIMEOUT_MS, this.config.timeoutMs);
    const checkedAt = Date.now();
    try {
      const res = await fetch(url, { headers, signal: AbortSignal.timeout(timeoutMs) });
      await res.body?.cancel().catch(() => {});
      if ((res.status >= 200 && res.status < 300) || res.status === 404 || res.status === 405) return { reachable: true, checkedAt };
      return { reachable: false, detail: `HTTP ${res.status}`, checkedAt };
    } catch (err) {
      const e = err as Error & { cause?: { code?: string } };
      const detail = e.name === 'TimeoutError' || e.name === 'AbortError' ? `no answer within ${timeoutMs} ms` : `cannot reach the server: ${e.cause?.code ?? e.message}`;
      return { reachable: false, detail, checkedAt };
    }
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

  /** Most bytes of one answer's body (the version's setting, else the default). */
  private get maxResponseBytes(): number {
    return this.config.maxResponseBytes ?? REMOTE_DEFAULTS.maxResponseBytes;
  }

  /** Most time of one model call, ms (the version's setting, else the default). */
  private get callTimeoutMs(): number {
    return this.config.callTimeoutMs ?? REMOTE_DEFAULTS.callTimeoutMs;
  }

  /**
   * POSTs `body` to `<baseUrl>/chat/completions` with timeouts and retries, all within `deadline`
   * (ms since the epoch; default: the call bound from now): each try's timeout is cut to the time
   * left, and no retry starts whose backoff would end past it.
   * @returns the parsed JSON answer and the number of tries it took.
   * @throws EngineError when every try failed, the server refused the request, or the time ran out.
   */
  async post(body: Record<string, unknown>, deadline: number = Date.now() + this.callTimeoutMs): Promise<{ json: unknown; tries: number }> {
    const url = this.config.baseUrl.replace(/\/+$/, '') + '/chat/completions';
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
    if (this.config.apiKey) headers.authorization = `Bearer ${this.config.apiKey}`;
    const payload = JSON.stringify(body);
    let last = `no answer within the call bound of ${this.callTimeoutMs} ms`;
    for (let i = 0; i <= this.config.maxRetries; i++) {
      const left = deadline - Date.now();
      if (left <= 0) break;
      try {
        return { json: await this.tryOnce(url, headers, payload, left), tries: i + 1 };
      } catch (err) {
        const e = err instanceof TryError ? err : new TryError(err instanceof Error ? err.message : String(err), false);
        last = e.message;
        if (!e.retryable || i === this.config.maxRetries) break;
        const wait = Math.min(MAX_BACKOFF_MS, e.retryAfterMs ?? 200 * 2 ** i);
        if (Date.now() + wait >= deadline) {
          last += `; no time left for a retry within the call bound of ${this.callTimeoutMs} ms`;
          break;
        }
        this.deps.logger?.warn({ version: this.version, try: i + 1, waitMs: wait, err: e.message }, 'remote engine call failed; retrying');
        await this.sleep(wait);
      }
    }
    // The detail reaches any tenant's client: it names the version, not the server's address.
    throw new EngineError(`remote model version '${this.version}' failed: ${last}`);
  }

  /**
   * One HTTP try, at most `budgetMs` (and the version's per-try timeout). The body is read as a
   * stream and given up past `maxResponseBytes` (not retried: the server would answer the same).
   */
  private async tryOnce(url: string, headers: Record<string, string>, payload: string, budgetMs: number): Promise<unknown> {
    let res: Response;
    let text: string;
    const timeoutMs = Math.min(this.config.timeoutMs, budgetMs);
    const signal = AbortSignal.timeout(timeoutMs);
    try {
      res = await fetch(url, { method: 'POST', headers, body: payload, signal });
      text = await readCapped(res, this.maxResponseBytes);
    } catch (err) {
      if (err instanceof TryError) throw err;
      const e = err as Error & { cause?: { code?: string } };
      if (e.name === 'TimeoutError' || e.name === 'AbortError') throw new TryError(`no answer within ${timeoutMs} ms`, true);
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
    // The call bound counts from here: the wait for a free slot is part of the client's wait.
    const deadline = Date.now() + this.callTimeoutMs;
    const { json, tries } = await this.gate(() => this.post(body, deadline));
    const a = parseChatAnswer(json);
    // Arrays longer than the token cap, or an answer longer than the cap could spell, are not
    // what was asked for: the arrays are recorded as not returned, the text is cut. A candidate
    // the server was made to choose may be longer than the cap: it bounds them too (its UTF-8
    // bytes + 1 tokens in any byte-level or larger vocabulary, the stop token included).
    let longestChars = 0;
    let longestTokens = 0;
    for (const x of actions ?? []) {
      longestChars = Math.max(longestChars, x.length);
      longestTokens = Math.max(longestTokens, Buffer.byteLength(x, 'utf8') + 1);
    }
    const maxIds = Math.max(maxTokens, longestTokens);
    if (a.outputTokenIds && a.outputTokenIds.length > maxIds) a.outputTokenIds = null;
    if (a.logprobs && a.logprobs.length > maxIds) a.logprobs = null;
    const maxChars = Math.max(maxTokens * MAX_CHARS_PER_TOKEN, longestChars);
    let outputCutChars = 0;
    const kept = a.content.length > maxChars ? cutCodePoints(a.content, maxChars) : a.content;
    if (kept.length < a.content.length) {
      outputCutChars = codePoints(a.content, kept.length);
      a.content = kept;
      a.outputTokenIds = null;
      a.logprobs = null;
      this.deps.logger?.warn({ version: this.version, maxTokens, keptChars: maxChars, cutChars: outputCutChars }, 'remote answer longer than its token cap allows; cut');
    }
    const seen = this.config.kind === 'lamer' && a.promptTokenIds !== null ? lamerPromptSeen(messages, a.promptTokenIds) : null;
    if (this.config.kind === 'lamer' && seen === null) a.promptTokenIds = null;
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
    if (outputCutChars > 0) record.outputCutChars = outputCutChars;
    if (seen) Object.assign(g, seen);
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
