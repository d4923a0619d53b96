/**
 * `TestEngine`: a deterministic, constant-time policy engine for tests and HTTP benchmarks
 * (no model). It implements the full `PolicyEngine` interface so the server's own overhead can be
 * measured apart from the model's.
 *
 * - act with `availableActions`: picks index `fnv1a(promptText + '|' + seed) % n` and outputs that
 *   action exactly; without: outputs `move <h % 4>` where h is the same hash.
 * - reflect: `Attempt <n> failed. Next time try a different first move (<h % 97>).` where n is the
 *   attempt number found in the prompt tail ("Attempt <n> ended"), or 0.
 * - token ids: UTF-8 bytes of prompt and output (a byte-level vocabulary of 256); each output
 *   logprob is log(1/256) (a uniform distribution).
 * - observer (/metrics): every act and reflect is reported as one forward pass of 1 row taking 0 ms
 *   (score: one pass of `candidates.length` rows); its queue depth is always 0.
 */
import type {
  ActRequest,
  EngineInfo,
  Generation,
  PolicyEngine,
  PromptParts,
  ReflectRequest,
  ScoreRequest,
  EngineObserver,
  CompleteRequest,
  Completion,
  ReplayAnswer,
  ReplayRequest,
} from './engine.js';

const LOG_UNIFORM = Math.log(1 / 256);

/**
 * 32-bit FNV-1a hash of a string's UTF-16 code units; `from` (a previous result) continues the
 * hash, so `fnv1a(b, fnv1a(a))` is `fnv1a(a + b)`.
 */
export function fnv1a(s: string, from = 0x811c9dc5): number {
  let h = from;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

function promptText(p: PromptParts): string {
  return p.head + p.steps.join('') + p.tail;
}

/** The hash that picks an answer: of the prompt text, '|', and the seed ('' when none). */
function answerHash(text: string, seed: number | undefined): number {
  return fnv1a(String(seed ?? ''), fnv1a('|', fnv1a(text)));
}

function bytes(s: string | Buffer): number[] {
  const b = typeof s === 'string' ? Buffer.from(s, 'utf8') : s;
  const out = new Array<number>(b.length);
  for (let i = 0; i < b.length; i++) out[i] = b[i]!;
  return out;
}

export class TestEngine implements PolicyEngine {
  private readonly loaded = new Set<string>();
  private observer: EngineObserver | null = null;

  setObserver(observer: EngineObserver): void {
    this.observer = observer;
  }

  /** Always 0: nothing is ever queued. */
  queueDepth(): number {
    return 0;
  }

  info(): EngineInfo {
    return { engine: 'test', backend: 'none', loadedVersions: [...this.loaded] };
  }

  async load(version: string, _checkpointDir: string): Promise<void> {
    this.loaded.add(version);
  }

  isLoaded(version: string): boolean {
    return this.loaded.has(version);
  }

  /** `text`: the prompt's text (promptText(req.prompt)), built once per call. */
  private generation(req: { modelVersion: string; prompt: PromptParts }, text: string, output: string, choiceIndex?: number): Generation {
    const outputTokenIds = bytes(output);
    const promptBytes = Buffer.from(text, 'utf8');
    const g: Generation = {
      output,
      promptTokenIds: bytes(promptBytes),
      // the text those bytes decode to (a lone surrogate becomes U+FFFD in UTF-8)
      promptText: promptBytes.toString('utf8'),
      promptTruncatedChars: 0,
      outputTokenIds,
      logprobs: outputTokenIds.map(() => LOG_UNIFORM),
      droppedSteps: 0,
      modelVersion: req.modelVersion,
    };
    if (choiceIndex !== undefined) g.choiceIndex = choiceIndex;
    return g;
  }

  async act(req: ActRequest): Promise<Generation> {
    this.observer?.forward(1, 0);
    const text = promptText(req.prompt);
    const h = answerHash(text, req.sampling.seed);
    if (req.availableActions && req.availableActions.length > 0) {
      const i = h % req.availableActions.length;
      return this.generation(req, text, req.availableActions[i]!, i);
    }
    return this.generation(req, text, `move ${h % 4}`);
  }

  async reflect(req: ReflectRequest): Promise<Generation> {
    this.observer?.forward(1, 0);
    const text = promptText(req.prompt);
    const h = answerHash(text, req.sampling.seed);
    const m = /Attempt (\d+) ended/.exec(req.prompt.tail);
    const n = m ? Number(m[1]) : 0;
    return this.generation(req, text, `Attempt ${n} failed. Next time try a different first move (${h % 97}).`);
  }

  /** Sum of log(1/256) over each candidate's UTF-8 bytes. */
  async score(req: ScoreRequest): Promise<number[]> {
    this.observer?.forward(req.candidates.length, 0);
    return req.candidates.map((c) => (c === '' ? 0 : Buffer.byteLength(c, 'utf8') * LOG_UNIFORM));
  }

  /**
   * Sessionless completion: with `choices`, the act rule over them; otherwise `move <h % 4>` cut to
   * `maxTokens` bytes and before the first stop string. finishReason 'length' when cut by
   * `maxTokens`, else 'stop'.
   */
  async complete(req: CompleteRequest): Promise<Completion> {
    this.observer?.forward(1, 0);
    const prompt = promptText(req.prompt);
    const h = answerHash(prompt, req.sampling.seed);
    if (req.choices && req.choices.length > 0) {
      const i = h % req.choices.length;
      return { ...this.generation(req, prompt, req.choices[i]!, i), finishReason: 'stop' };
    }
    let text = `move ${h % 4}`;
    let finishReason: Completion['finishReason'] = 'stop';
    for (const s of req.stop ?? []) {
      const k = s === '' ? -1 : text.indexOf(s);
      if (k >= 0) text = text.slice(0, k);
    }
    if (Buffer.byteLength(text, 'utf8') > req.maxTokens) {
      text = Buffer.from(text, 'utf8').subarray(0, req.maxTokens).toString('utf8');
      finishReason = 'length';
    }
    return { ...this.generation(req, prompt, text), finishReason };
  }

  /**
   * A recorded call replayed: the answer is `complete`'s over the same prompt (with `candidates` as
   * its choices, `maxTokens` default 48); each scored token gets log(1/256). The prompt is read as
   * text (`promptFrom` 'text') unless token ids are given.
   */
  async replay(req: ReplayRequest): Promise<ReplayAnswer> {
    const generation = await this.complete({
      modelVersion: req.modelVersion, prompt: req.prompt, sampling: req.sampling, maxTokens: req.maxTokens ?? 48, stop: req.stop,
      ...(req.candidates ? { choices: req.candidates } : {}),
    });
    return {
      generation,
      promptFrom: req.promptTokenIds ? 'tokens' : 'text',
      scoredLogprobs: req.score ? req.score.tokenIds.map(() => LOG_UNIFORM) : null,
    };
  }

  release(_sessionId: string): void {}

  async dispose(): Promise<void> {
    this.loaded.clear();
  }
}
