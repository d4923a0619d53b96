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
 *
 * This module holds the version itself (slots, the call's steps, the record); the parts live in
 * src/policy/openai/: `request.ts` (messages, sampling and constraint fields), `transport.ts`
 * (HTTP, retries, size cap, probe), `answer.ts` (reading the answer and its token arrays),
 * `bounds.ts` (the token cap) and `choice.ts` (matching candidates). Their public names are
 * exported from here as well.
 */
import {
  type ActRequest, type ChatTurn, type ChatTurnRequest, type Generation, type GenerationRecord, type PromptParts, type ReflectRequest,
  type RemoteProbe, type RemoteVersionConfig, type SamplingParams,
} from './engine.js';
import { lamerPromptSeen, parseChatAnswer, parseTurnAnswer, type ParsedAnswer } from './openai/answer.js';
import { boundToCap, type BoundedAnswer } from './openai/bounds.js';
import { matchChoice } from './openai/choice.js';
import { constraintFields, samplingFields, toMessages, tokenFields, type ChatMessage } from './openai/request.js';
import { postChat, probeServer } from './openai/transport.js';
import { REMOTE_DEFAULTS } from '../shared/remote-version.js';

export { TOKEN_ID_LIMIT, parseChatAnswer, parseTurnAnswer, type ParsedAnswer, type ParsedTurnAnswer } from './openai/answer.js';
export { MAX_CHARS_PER_TOKEN } from './openai/bounds.js';
export { invalidChoiceAction, matchChoice } from './openai/choice.js';
export { constraintFields, toMessages, type ChatMessage } from './openai/request.js';
export { PROBE_TIMEOUT_MS } from './openai/transport.js';

/** A Generation whose record is set (every remote generation has one). */
type RecordedGeneration = Generation & { record: GenerationRecord };

/** How long a probe result of a remote version is reused, ms. */
export const PROBE_CACHE_MS = 5_000;

export interface RemoteDeps {
  /** Waits `ms` (tests may shorten backoffs). */
  sleep?: (ms: number) => Promise<void>;
  logger?: { warn(o: object, msg?: string): void };
}

/** One remote model version: its server, settings and request slots. */
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
   * Whether the server answers (src/policy/openai/transport.ts probeServer: `GET <baseUrl>/models`,
   * short timeout). The result is reused for {@link PROBE_CACHE_MS}, and concurrent callers share
   * one probe, so /readyz polled by many load balancers sends the server one request every few
   * seconds at most. Never throws.
   */
  async probe(now: number = Date.now()): Promise<RemoteProbe> {
    if (this.lastProbe && now - this.lastProbe.checkedAt < PROBE_CACHE_MS) return this.lastProbe;
    this.probing ??= probeServer(this.config).then((r) => {
      this.lastProbe = r;
      this.probing = null;
      return r;
    });
    return this.probing;
  }

  /** Requests waiting for a free slot now. */
  queued(): number {
    return this.waiters.length;
  }

  /** Runs `fn` in one of the version's `concurrency` slots; callers past them wait in FIFO order. */
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
   * (ms since the epoch; default: the call bound from now): see src/policy/openai/transport.ts postChat.
   * @returns the parsed JSON answer and the number of tries it took.
   * @throws EngineError when every try failed, the server refused the request, or the time ran out.
   */
  post(body: Record<string, unknown>, deadline: number = Date.now() + this.callTimeoutMs): Promise<{ json: unknown; tries: number }> {
    return postChat(this.config, body, deadline, {
      version: this.version,
      maxResponseBytes: this.maxResponseBytes,
      callTimeoutMs: this.callTimeoutMs,
      sleep: this.sleep,
      logger: this.deps.logger,
    });
  }

  /**
   * One generation: sends the prompt as chat messages (constrained to `actions` when given), reads
   * the answer, bounds it by `maxTokens`, and builds the Generation with its record.
   * @throws EngineError as {@link post}, or when the answer is malformed.
   */
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
      ...samplingFields(this.config.kind, sampling),
      logprobs: true,
      ...tokenFields(this.config.kind),
      ...(c ? c.fields : {}),
    };
    // The call bound counts from here: the wait for a free slot is part of the client's wait.
    const deadline = Date.now() + this.callTimeoutMs;
    const { json, tries } = await this.gate(() => this.post(body, deadline));
    const a = this.bounded(parseChatAnswer(json), maxTokens, actions);
    const seen = this.config.kind === 'lamer' && a.answer.promptTokenIds !== null ? lamerPromptSeen(messages, a.answer.promptTokenIds) : null;
    if (this.config.kind === 'lamer' && seen === null) a.answer.promptTokenIds = null;
    const g = this.generation(a.answer, messages, tries, { ...sampling, maxTokens });
    if (a.cutChars > 0) g.record.outputCutChars = a.cutChars;
    if (seen) Object.assign(g, seen);
    if (actions && actions.length > 0 && c) {
      g.record.constraint = c.constraint;
      applyChoice(g, a.answer.content, actions);
    }
    return g;
  }

  /**
   * The answer bounded by its token cap (src/policy/openai/bounds.ts), with a warning logged when
   * its text was cut.
   */
  private bounded(answer: ParsedAnswer, maxTokens: number, actions?: string[]): BoundedAnswer {
    const b = boundToCap(answer, maxTokens, actions);
    if (b.cutChars > 0) {
      this.deps.logger?.warn({ version: this.version, maxTokens, keptChars: b.maxChars, cutChars: b.cutChars }, 'remote answer longer than its token cap allows; cut');
    }
    return b;
  }

  /** The Generation of an answer, arrays not returned recorded as empty and marked in `record.available`. */
  private generation(a: ParsedAnswer, messages: ChatMessage[], tries: number, sampling: GenerationRecord['sampling']): RecordedGeneration {
    const record: GenerationRecord = {
      engine: 'openai',
      messages,
      available: { promptTokenIds: a.promptTokenIds !== null, outputTokenIds: a.outputTokenIds !== null, logprobs: a.logprobs !== null },
      model: this.config.model,
      tries,
      sampling,
    };
    return {
      output: a.content,
      promptTokenIds: a.promptTokenIds ?? [],
      outputTokenIds: a.outputTokenIds ?? [],
      logprobs: a.logprobs ?? [],
      droppedSteps: 0,
      modelVersion: this.version,
      record,
    };
  }

  /**
   * One action. With `availableActions` the output is the matched candidate (`choiceIndex` set) or,
   * when none matched, the raw answer with `record.invalidChoice` (the agent executes its parsed
   * text, see src/policy/openai/choice.ts invalidChoiceAction).
   */
  act(req: ActRequest): Promise<Generation> {
    return this.chat(req.prompt, req.instructions, req.sampling, this.config.maxActionTokens, req.availableActions);
  }

  /**
   * An agent's chat turn: its messages and passthrough fields (tools, tool_choice,
   * response_format) sent as they are, with the turn's sampling, `stop`, the token cap and the
   * kind's token-id fields; the answer read as {@link parseTurnAnswer} and bounded by the cap. The
   * record lists the messages and passthrough fields sent.
   * @throws EngineError as {@link post}, or when the answer is malformed.
   */
  async turn(req: ChatTurnRequest): Promise<ChatTurn> {
    const body = {
      model: this.config.model,
      messages: req.messages,
      max_tokens: req.maxTokens,
      ...samplingFields(this.config.kind, req.sampling),
      ...(req.stop && req.stop.length > 0 ? { stop: req.stop } : {}),
      logprobs: true,
      ...tokenFields(this.config.kind),
      ...req.passthrough,
    };
    const deadline = Date.now() + this.callTimeoutMs;
    const { json, tries } = await this.gate(() => this.post(body, deadline));
    const parsed = parseTurnAnswer(json);
    const a = this.bounded(parsed, req.maxTokens);
    const g = this.generation(a.answer, req.messages as unknown as ChatMessage[], tries, { ...req.sampling, maxTokens: req.maxTokens });
    if (a.cutChars > 0) g.record.outputCutChars = a.cutChars;
    if (Object.keys(req.passthrough).length > 0) g.record.passthrough = req.passthrough;
    return { ...g, finishReason: parsed.finishReason, toolCalls: parsed.toolCalls, rawLogprobs: parsed.rawLogprobs };
  }

  /** One reflection, capped at the version's `maxReflectionTokens`. */
  reflect(req: ReflectRequest): Promise<Generation> {
    return this.chat(req.prompt, req.instructions, req.sampling, this.config.maxReflectionTokens);
  }
}

/**
 * Sets `g.output` to the candidate `content` names (and `g.choiceIndex`), or, when it names none,
 * keeps the raw answer and marks `record.invalidChoice`.
 */
function applyChoice(g: RecordedGeneration, content: string, actions: string[]): void {
  const i = matchChoice(content, actions);
  if (i >= 0) {
    g.output = actions[i]!;
    g.choiceIndex = i;
  } else {
    g.record.invalidChoice = true;
    g.output = content;
  }
}
