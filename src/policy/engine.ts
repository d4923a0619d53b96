/**
 * The policy engine interface (shared/DESIGN.md §4): everything the agent needs from a language
 * model. Implementations: `BuiltinEngine` (tfjs transformer, src/policy/builtin-engine.ts) and
 * `TestEngine` (deterministic, constant time, for tests and HTTP benchmarks).
 *
 * Units: token ids are integers of the engine's tokenizer; logprobs are natural-log probabilities
 * of each sampled token under the sampling distribution itself, the behaviour policy: the model's
 * logits divided by the temperature, restricted to the support (the tokens `availableActions`
 * allow at that position, top-k, top-p) and renormalised (src/model/sampling.ts
 * samplingLogprobs), so that training, which recomputes the same distribution with the session's
 * recorded sampling settings, starts PPO at ratio 1. Greedy calls (temperature 0) are scored at
 * temperature 1.
 */

/** Sampling settings of one generation (DESIGN §2 `sampling`). */
export interface SamplingParams {
  /** > 0; 0 means greedy (argmax). */
  temperature: number;
  /** (0, 1]; nucleus sampling mass. 1 disables. */
  topP: number;
  /** >= 0; 0 disables. */
  topK: number;
  /** Optional integer seed: one seed gives one output for one prompt and model version. A session
   *  derives each call's seed from its own seed, attempt, step and call kind (callSeed). */
  seed?: number;
}

/**
 * A prompt in parts so that the engine can fit it to its context window by tokens:
 * - `head`: instructions, initial observation and memory; never dropped.
 * - `steps`: the current attempt's earlier steps, oldest first, one rendered string each; when the
 *   whole prompt exceeds the context, whole steps are dropped from the front.
 * - `tail`: the current observation and the answer cue; never dropped.
 * The full prompt text is `head + steps.join('') + tail`.
 */
export interface PromptParts {
  head: string;
  steps: string[];
  tail: string;
}

export interface ActRequest {
  /** Session id: the key for a per-session KV cache. */
  sessionId: string;
  /** Model version the session pinned. */
  modelVersion: string;
  prompt: PromptParts;
  /** When present, the answer's `output` is exactly one of these strings. */
  availableActions?: string[];
  sampling: SamplingParams;
}

export interface ReflectRequest {
  sessionId: string;
  modelVersion: string;
  prompt: PromptParts;
  sampling: SamplingParams;
}

export interface ScoreRequest {
  modelVersion: string;
  prompt: PromptParts;
  candidates: string[];
}

/** One sampled output with everything training needs (DESIGN §4: stored as sampled). */
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
  /** Version that produced it. */
  modelVersion: string;
  /** With availableActions: index of the chosen candidate. */
  choiceIndex?: number;
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
  /** Load a checkpoint (tfjs format folder with model.json) under `version`; idempotent and cheap when loaded. */
  load(version: string, checkpointDir: string): Promise<void>;
  /** Whether `version` is loaded now. */
  isLoaded(version: string): boolean;
  /** Sample an action for one step. */
  act(req: ActRequest): Promise<Generation>;
  /** Sample a reflection after a failed attempt. */
  reflect(req: ReflectRequest): Promise<Generation>;
  /** Sum of logprobs of each candidate continuation, `[candidates.length]`. */
  score(req: ScoreRequest): Promise<number[]>;
  /** Forget per-session state (KV cache) of a session that ended. */
  release(sessionId: string): void;
  /** Free all tensors / workers. */
  dispose(): Promise<void>;
  /** Optional: report internal events (forward passes and their batch sizes) to `observer`. */
  setObserver?(observer: EngineObserver): void;
  /** Optional: requests queued in the engine's batchers now, waiting for a forward pass. */
  queueDepth?(): number;
}

/** Thrown by engines for failures that are not the caller's fault. */
export class EngineError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'EngineError';
  }
}
