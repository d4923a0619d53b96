/**
 * The policy engine interface (docs/architecture.md "The policy engine and the model"): everything
 * the agent needs from a language model. Implementations: `BuiltinEngine` (tfjs transformer,
 * src/policy/builtin-engine.ts) and `TestEngine` (deterministic, constant time, for tests and HTTP
 * benchmarks).
 *
 * Units: token ids are integers of the engine's tokenizer; logprobs are natural-log probabilities
 * of each sampled token under the sampling distribution itself, the behaviour policy: the model's
 * logits divided by the temperature, restricted to the support (the tokens `availableActions`
 * allow at that position, top-k, top-p) and renormalised (src/model/sampling.ts
 * samplingLogprobs), so that training, which recomputes the same distribution with the session's
 * recorded sampling settings, starts PPO at ratio 1. Greedy calls (temperature 0) are scored at
 * temperature 1.
 */

// The sampling settings and prompt parts are defined next to the model code that reads them
// (src/model/sampling.ts, src/model/tokenizer.ts), so that model/ does not import policy/.
import type { SamplingParams } from '../model/sampling.js';
import type { PromptParts } from '../model/tokenizer.js';
import type { RemoteVersionConfig } from '../shared/remote-version.js';
// The settings of a remote version are written once, below config.ts (src/shared/remote-version.ts).
export type { PromptParts, RemoteVersionConfig, SamplingParams };

export interface ActRequest {
  /** Session id: the key for a per-session KV cache. */
  sessionId: string;
  /** Model version the session pinned. */
  modelVersion: string;
  prompt: PromptParts;
  /** When present, the answer's `output` is exactly one of these strings. */
  availableActions?: string[];
  sampling: SamplingParams;
  /**
   * The session's instructions, which `prompt.head` starts with. Engines that speak chat (remote
   * OpenAI-compatible servers) send them as the system message and the rest of the prompt as the
   * user message; the builtin engine ignores it.
   */
  instructions?: string;
}

export interface ReflectRequest {
  sessionId: string;
  modelVersion: string;
  prompt: PromptParts;
  sampling: SamplingParams;
  /** As in {@link ActRequest.instructions}. */
  instructions?: string;
}

/**
 * One sessionless completion (the OpenAI-compatible endpoint, src/routes/openai/): free text of at
 * most `maxTokens` tokens, or, with `choices`, exactly one of them (scored and sampled like
 * `act` with `availableActions`).
 */
export interface CompleteRequest {
  modelVersion: string;
  prompt: PromptParts;
  sampling: SamplingParams;
  /** >= 1; the engine may cap it further (its context). */
  maxTokens: number;
  /**
   * The request field that set `maxTokens` (e.g. `body/max_tokens`); absent when it is a default.
   * When present, a `maxTokens` over the engine's cap is an EngineLimitError naming this field
   * instead of being cut to the cap (the caller asked for more than can be generated).
   */
  maxTokensField?: string;
  /** Text stops before the first occurrence of any of these (not included in the output). */
  stop?: string[];
  /** When present and non-empty, the output is exactly one of these strings. */
  choices?: string[];
}

/**
 * One turn of an agent on a remote version (the session's OpenAI-compatible endpoint): the agent's
 * chat messages (the session's memory added) sent to the remote server as they are, with the
 * tool and format fields passed through.
 */
export interface ChatTurnRequest {
  modelVersion: string;
  /** OpenAI chat messages, sent as they are (fields such as `tool_calls` and `tool_call_id` included). */
  messages: Array<Record<string, unknown>>;
  sampling: SamplingParams;
  /** Token cap of the answer (>= 1). */
  maxTokens: number;
  stop?: string[];
  /** `tools`, `tool_choice`, `parallel_tool_calls`, `response_format`: added to the request as they are. */
  passthrough: Record<string, unknown>;
}

/** The answer to a {@link ChatTurnRequest}: a generation (its record lists the messages sent), why it ended, its tool calls. */
export interface ChatTurn extends Generation {
  /** The server's `finish_reason` (`stop`, `length`, `tool_calls`, ...). */
  finishReason: string;
  /** `choices[0].message.tool_calls` as returned; null without. */
  toolCalls: unknown[] | null;
  /** `choices[0].logprobs` as returned; null without. */
  rawLogprobs: unknown;
}

/** A completion: a generation and why it ended. */
export interface Completion extends Generation {
  /** 'stop': a stop token, stop string or chosen candidate ended it; 'length': `maxTokens` or the context. */
  finishReason: 'stop' | 'length';
}

/** How a version is served: by this process (`builtin`) or by a remote OpenAI-compatible server. */
export type EngineSpec = { engine: 'builtin' } | { engine: 'openai'; remote: RemoteVersionConfig };

/**
 * What a remote engine could and could not record for one generation (stored with the step, so
 * training and export know which arrays are real).
 */
export interface GenerationRecord {
  engine: 'openai';
  /** The chat messages sent, exactly (an agent's turn may carry more roles and fields: tool messages, tool_calls). */
  messages: Array<{ role: 'system' | 'user' | 'assistant'; content: string }>;
  /** An agent's turn: the fields passed through besides the messages (`tools`, `tool_choice`, `response_format`, ...). */
  passthrough?: Record<string, unknown>;
  /** Which of the token arrays the server returned (false: stored as an empty array or null). */
  available: { promptTokenIds: boolean; outputTokenIds: boolean; logprobs: boolean };
  /** How the answer was kept inside `availableActions` (absent without them). */
  constraint?: 'structured_outputs' | 'guided_choice' | 'grammar' | 'json_schema' | 'parse';
  /** With `availableActions`: the answer matched none of them (the action is the parsed text). */
  invalidChoice?: boolean;
  /**
   * Characters (code points) cut from the end of an answer longer than its token cap could give
   * (32 characters a token, src/policy/openai/bounds.ts MAX_CHARS_PER_TOKEN); its token ids and
   * logprobs are then recorded as not returned. Absent when nothing was cut.
   */
  outputCutChars?: number;
  /** Remote model name and the request's HTTP attempts (1 = no retry). */
  model: string;
  tries: number;
  /** The sampling sent (the call's own seed included) and the token cap. */
  sampling: SamplingParams & { maxTokens: number };
}

/**
 * One recorded model call replayed on a version served by this process (docs/replay.md): the
 * version's own answer to the prompt, and the logprob it gives the recorded answer's tokens.
 * Sessionless: no session's KV cache is read or changed.
 */
export interface ReplayRequest {
  modelVersion: string;
  /** The prompt as text parts, fitted to the version's context as `act` fits one. */
  prompt: PromptParts;
  /**
   * The prompt as token ids of the version's tokenizer (BOS first), used as they are when they
   * leave room for the answer in the version's context; otherwise `prompt` is fitted instead.
   */
  promptTokenIds?: number[];
  /** When present and non-empty, the answer is one of these (as `act` with `availableActions`), and the scored tokens walk their trie. */
  candidates?: string[];
  /** Token cap of a free answer (>= 1); absent: the engine's action cap. */
  maxTokens?: number;
  /** A free answer stops before the first occurrence of any of these (as `complete`). */
  stop?: string[];
  /** How the version's own answer is decoded (temperature 0: greedy). */
  sampling: SamplingParams;
  /**
   * The recorded answer to score, as token ids of the version's tokenizer (EOS included when the
   * recorded answer ended with it), and the sampling whose distribution scores it (the recorded
   * call's temperature, top-p and top-k, over the support the recorded call sampled from: the
   * candidates' trie, or the UTF-8 guard of free text); absent: nothing is scored.
   */
  score?: { tokenIds: number[]; sampling: SamplingParams };
}

/** The answer to a {@link ReplayRequest}. */
export interface ReplayAnswer {
  /** The version's own answer; `finishReason` as for a completion. */
  generation: Completion;
  /** Which prompt the version read: the given token ids, or the text parts fitted. */
  promptFrom: 'tokens' | 'text';
  /**
   * Natural-log probability of each scored token under the scoring distribution,
   * `[score.tokenIds.length]`; null for a token outside its support (the version would never
   * sample it there). Null when nothing was scored.
   */
  scoredLogprobs: Array<number | null> | null;
}

export interface ScoreRequest {
  modelVersion: string;
  prompt: PromptParts;
  candidates: string[];
}

/** One sampled output with everything training needs, stored as sampled (docs/architecture.md
 *  "The policy engine and the model"). */
export interface Generation {
  /** The model's full text (for act with availableActions: exactly the chosen action). */
  output: string;
  /** Prompt as fed to the model after truncation, `[promptLen]`. */
  promptTokenIds: number[];
  /** Sampled tokens, `[outLen]`, stop token included when one was sampled. */
  outputTokenIds: number[];
  /** Natural-log probability of each output token under the sampling distribution, `[outLen]`. */
  logprobs: number[];
  /** How many of `prompt.steps` were dropped (from the front) to fit the context. 0 = not truncated. */
  droppedSteps: number;
  /**
   * The prompt text exactly as the model saw it (for token engines `decode(promptTokenIds)`); when
   * absent the agent records `head + steps[droppedSteps..] + tail`.
   */
  promptText?: string;
  /**
   * Characters (code points) cut from the start of the prompt's head and tail beyond the dropped
   * steps, when even `head + tail` did not fit the context; 0 or absent otherwise.
   */
  promptTruncatedChars?: number;
  /** Version that produced it. */
  modelVersion: string;
  /** With availableActions: index of the chosen candidate. */
  choiceIndex?: number;
  /** Remote engines: the messages sent and which arrays were available (see GenerationRecord). */
  record?: GenerationRecord;
}

export interface EngineInfo {
  /** 'builtin' | 'test' | ... */
  engine: string;
  /** tfjs backend name ('tensorflow' | 'wasm' | 'cpu' | 'webgl'...) or 'none'. */
  backend: string;
  /** Versions currently loaded in memory. */
  loadedVersions: string[];
}

/** Receiver of an engine's internal events, for /metrics (src/plugins/app/metrics.ts). */
export interface EngineObserver {
  /** One forward pass of the model over `rows` rows (requests' token rows) took `ms` milliseconds. */
  forward(rows: number, ms: number): void;
}

/**
 * What the agent calls. All methods may throw `EngineError`; the agent maps it to a 503/500 problem
 * and records nothing for the failed step.
 */
export interface PolicyEngine {
  info(): EngineInfo;
  /**
   * Load a checkpoint (tfjs format folder with model.json) under `version`; idempotent and cheap
   * when loaded. `spec` (default builtin) says when the version lives on a remote server instead.
   */
  load(version: string, checkpointDir: string, spec?: EngineSpec): Promise<void>;
  /** Whether `version` is loaded now. */
  isLoaded(version: string): boolean;
  /** Sample an action for one step. */
  act(req: ActRequest): Promise<Generation>;
  /** Sample a reflection after a failed attempt. */
  reflect(req: ReflectRequest): Promise<Generation>;
  /** Sum of logprobs of each candidate continuation, `[candidates.length]`. */
  score(req: ScoreRequest): Promise<number[]>;
  /** Optional: an agent's chat turn on a remote version, passed through (src/policy/routing-engine.ts serves it). */
  chatTurn?(req: ChatTurnRequest): Promise<ChatTurn>;
  /** Optional: a sessionless completion (the OpenAI-compatible endpoint serves engines that have it). */
  complete?(req: CompleteRequest): Promise<Completion>;
  /** Optional: one recorded model call replayed on a version this process serves (replays need it for builtin versions). */
  replay?(req: ReplayRequest): Promise<ReplayAnswer>;
  /** Forget per-session state (KV cache) of a session that ended. */
  release(sessionId: string): void;
  /** Free all tensors / workers. */
  dispose(): Promise<void>;
  /** Optional: report internal events (forward passes and their batch sizes) to `observer`. */
  setObserver?(observer: EngineObserver): void;
  /** Optional: whether the engine can serve (absent: always `ok`). */
  health?(): EngineHealth;
  /** Optional: requests queued in the engine's batchers now, waiting for a forward pass. */
  queueDepth?(): number;
  /**
   * Optional: whether the server of a remote version answers (for /readyz), from a short probe
   * whose result is cached; null for a version served by this process.
   */
  probe?(version: string): Promise<RemoteProbe | null>;
}

/** The result of probing a remote version's server (src/policy/openai-engine.ts RemoteVersion.probe). */
export interface RemoteProbe {
  /** The server answered `GET <baseUrl>/models` with 2xx (or 404/405: up, without that route). */
  reachable: boolean;
  /** Why not (`HTTP 503`, `cannot reach the server: ECONNREFUSED`, `no answer within 2000 ms`); absent when reachable. */
  detail?: string;
  /** When the probe ran, ms since the epoch. */
  checkedAt: number;
}

/** Thrown by engines for failures that are not the caller's fault. */
export class EngineError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'EngineError';
  }
}

/**
 * Thrown by engines, before any model work, for a request the engine cannot serve by its size
 * (e.g. a candidate action longer than the model's context allows). The caller's fault: the agent
 * answers 400 `validation` naming `field`, and records nothing.
 */
export class EngineLimitError extends Error {
  constructor(
    /** JSON pointer of the request part at fault, e.g. `body/availableActions/3`. */
    readonly field: string,
    message: string,
  ) {
    super(message);
    this.name = 'EngineLimitError';
  }
}

/** An engine's own view of whether it can serve (for /readyz). */
export interface EngineHealth {
  /** `ok`; `recovering` (re-initialising after a backend fault; steps answer 503 meanwhile); `failed`. */
  state: 'ok' | 'recovering' | 'failed';
  /** Backend faults recovered from since start. */
  recoveries: number;
  /** Why the engine failed or is recovering. */
  detail?: string;
}
