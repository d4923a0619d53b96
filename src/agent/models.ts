/**
 * Model versions (docs/protocol.md "Model versions"): the registry over the `models` table and the
 * model service of the `/v1/models` routes. One version is `active` (new sessions pin it);
 * activation loads the version in the engine before flipping, so a failed load leaves the active
 * version unchanged. Remote versions are registered by the rules of src/shared/remote-version.ts
 * (the URL rule and the defaults), the same that the server's configuration applies to
 * LAMER_ENGINE=openai; `view` is the model resource the routes answer with.
 */
import type { ModelRow } from '../db/schema.js';
import type { AsyncModels } from '../db/async-repositories.js';
import { EngineError, type EngineSpec, type PolicyEngine, type RemoteVersionConfig } from '../policy/engine.js';
import { DomainError, invalid, notFound } from './errors.js';
import { checkpointText, readCheckpointMetadata, type CheckpointText, type DefaultSampling } from '../model/checkpoint.js';
import { CHAT_FORMAT, type PromptFormat } from '../model/prompt-format.js';
import { BYTE_TOKENIZER, type Tokenizer } from '../model/tokenizers.js';
import { REMOTE_DEFAULTS, remoteUrlFault, remoteVersionConfig, type RemoteUrlFault } from '../shared/remote-version.js';
import { Value } from 'typebox/value';
import type { ModelView, RegisterModelBody } from './model-schemas.js';
import { GateReport, type GateReportView } from './gate-schemas.js';

/**
 * A version's promotion gate: `metrics.gate` when it holds a gate report (a training job's gate
 * writes one there, src/training/run/gate-run.ts), else null, so that the free metrics of a
 * registered version never break the model resource.
 */
function gateOf(metrics: Record<string, unknown>): GateReportView | null {
  const g = metrics.gate;
  return g !== undefined && Value.Check(GateReport, g) ? g : null;
}

/** What a version reads when it declares nothing: bytes and the chat layout. */
const DEFAULT_TEXT: Required<CheckpointText> = { tokenizer: BYTE_TOKENIZER, promptFormat: CHAT_FORMAT, sampling: null };

/** The sampling of sessions that give none, on versions that declare none. */
export const SERVER_DEFAULT_SAMPLING: DefaultSampling = { temperature: 1, topP: 1, topK: 0 };

/** How the engine serves a row's version: undefined for builtin (a checkpoint folder), else the remote spec. */
export function specOf(row: ModelRow): EngineSpec | undefined {
  return row.engine === 'openai' ? { engine: 'openai', remote: row.engineConfig as unknown as RemoteVersionConfig } : undefined;
}

/** Each fault of a registration's `baseUrl` (src/shared/remote-version.ts `remoteUrlFault`) as the field's message. */
const BASE_URL_FAULTS: Record<RemoteUrlFault, string> = {
  'not-url': 'is not a URL',
  'not-http': 'is not an http(s) URL',
  credentials: 'must not contain a user name or password (send the key as apiKey)',
};

/** A remote server's configuration as shown: the API key only as `hasApiKey`, absent settings as their defaults. */
const remoteView = (c: RemoteVersionConfig) => ({
  baseUrl: c.baseUrl, model: c.model, kind: c.kind, hasApiKey: c.apiKey !== undefined, concurrency: c.concurrency,
  timeoutMs: c.timeoutMs, maxRetries: c.maxRetries, maxActionTokens: c.maxActionTokens, maxReflectionTokens: c.maxReflectionTokens,
  maxResponseBytes: c.maxResponseBytes ?? REMOTE_DEFAULTS.maxResponseBytes, callTimeoutMs: c.callTimeoutMs ?? REMOTE_DEFAULTS.callTimeoutMs,
});

export class ModelRegistry {
  private activeRow: ModelRow | null = null;
  /** Activations started here (a read of the active version begun before one is stale). */
  private activations = 0;
  private readonly loading = new Map<string, Promise<void>>();
  /** Tokenizer and prompt format per `version|checkpointDir` (a checkpoint folder is immutable once registered). */
  private readonly texts = new Map<string, Promise<Required<CheckpointText>>>();
  /**
   * Rows read by version, so that a step (which reads its version's prompt layout) reads no
   * table. Every write of this registry drops them, and so does {@link ModelRegistry.invalidate}
   * (a change made elsewhere: another replica's activation, a write past the registry). Versions
   * not found are not kept, so a version registered elsewhere is seen at once.
   */
  private readonly rows = new Map<string, ModelRow>();
  /** @param repo the `models` table (`app.repos.models`). */
  constructor(
    private readonly repo: AsyncModels,
    private readonly engine: PolicyEngine,
  ) {}

  /** Forget the rows read so far (the table was changed by other means than this registry). */
  invalidate(): void {
    this.rows.clear();
  }

  /**
   * When the table is empty, register `version` at `checkpointDir` as active (first start). When
   * it is registered already, its folder is updated to `checkpointDir` (the configuration says
   * where the base checkpoint lives, e.g. after a move or in a new image). Then load the active
   * version in the engine.
   */
  async init(version: string, checkpointDir: string, spec?: EngineSpec): Promise<void> {
    const remote = spec?.engine === 'openai' ? spec.remote : null;
    this.invalidate();
    if (await this.repo.isEmpty()) {
      await this.repo.insert({
        version, parent: null, jobId: null, checkpointDir, status: 'active', metrics: {}, createdAt: Date.now(),
        engine: remote ? 'openai' : 'builtin', engineConfig: remote as unknown as Record<string, unknown> | null,
      });
    } else if (remote) {
      // The remote server of the configured version may have moved (URL, key, limits); its kind may not change.
      const row = await this.repo.get(version);
      if (row && row.engine !== 'openai') {
        throw new Error(`model version '${version}' is a builtin version in this database; LAMER_ENGINE=openai needs a new LAMER_DATA_DIR (or register the remote server with POST /v1/models)`);
      }
      if (row) await this.repo.setEngineConfig(version, remote as unknown as Record<string, unknown>);
    } else {
      await this.repo.setCheckpointDir(version, checkpointDir);
    }
    this.invalidate();
    this.activeRow = (await this.repo.active()) ?? null;
    if (!this.activeRow) throw new Error('no active model version in the models table');
    await this.ensureLoaded(this.activeRow.version);
  }

  active(): ModelRow {
    if (!this.activeRow) throw new Error('ModelRegistry.init() was not called');
    return this.activeRow;
  }

  /** Every version, oldest first, as the table holds them now. */
  list(): Promise<ModelRow[]> {
    return this.repo.list();
  }

  /** The row of `version` (see `rows`: read once, then from memory), or undefined. A copy: changing it changes nothing here. */
  async get(version: string): Promise<ModelRow | undefined> {
    let row = this.rows.get(version);
    if (!row) {
      row = await this.repo.get(version);
      if (!row) return undefined;
      this.rows.set(version, row);
    }
    return { ...row };
  }

  /**
   * The row of `version` as the table holds it now (read past the rows kept in memory, which it
   * refreshes), or undefined: what the model resource shows, since a version's metrics change
   * outside this registry (a training job's promotion gate writes its report there, on this server
   * or on the one that runs the job).
   */
  async current(version: string): Promise<ModelRow | undefined> {
    const row = await this.repo.get(version);
    if (!row) return undefined;
    this.rows.set(version, row);
    return { ...row };
  }

  /**
   * How `version` reads text: a builtin checkpoint's declared tokenizer and `promptFormat`
   * (src/model/checkpoint.ts), else the byte tokenizer and `chat` (remote versions, older
   * checkpoints, and engines whose folders are not checkpoints, such as the test engine's). Read
   * once per version and folder.
   */
  private async text(version: string): Promise<Required<CheckpointText>> {
    const row = await this.get(version);
    if (!row || specOf(row) || !row.checkpointDir) return DEFAULT_TEXT;
    const key = `${version}|${row.checkpointDir}`;
    let p = this.texts.get(key);
    if (!p) {
      p = readCheckpointMetadata(row.checkpointDir).then((m) => checkpointText(m), () => DEFAULT_TEXT);
      this.texts.set(key, p);
    }
    return p;
  }

  /** How `version` reads prompts (see `text`): `compact` for a checkpoint declaring it, else `chat`. */
  promptFormat(version: string): Promise<PromptFormat> {
    return this.text(version).then((t) => t.promptFormat);
  }

  /**
   * The tokenizer of `version`'s token ids (see `text`): what its logprob tokens and `bytes` mean
   * on the OpenAI-compatible endpoint. Byte for versions that are not builtin checkpoints.
   */
  tokenizer(version: string): Promise<Tokenizer> {
    return this.text(version).then((t) => t.tokenizer);
  }

  /**
   * The sampling `version`'s sessions get for the fields they leave out: a builtin checkpoint's
   * declared `sampling` (see `text`), else `SERVER_DEFAULT_SAMPLING` (temperature 1, topP 1, topK 0:
   * the full distribution, what RL rollouts assume unless they say otherwise).
   */
  defaultSampling(version: string): Promise<DefaultSampling> {
    return this.text(version).then((t) => t.sampling ?? SERVER_DEFAULT_SAMPLING);
  }

  /** Load `version` in the engine if needed (one load at a time per version). */
  async ensureLoaded(version: string): Promise<void> {
    if (this.engine.isLoaded(version)) return;
    let p = this.loading.get(version);
    if (!p) {
      p = this.load(version).finally(() => this.loading.delete(version));
      this.loading.set(version, p);
    }
    try {
      await p;
    } catch (err) {
      if (err instanceof DomainError) throw err;
      // EngineError messages are written for clients (they name the version, never a folder or a
      // server address); anything else may carry paths or internals: it stays in the log, through
      // `cause` (the error handler logs 5xx problems with their causes).
      const detail = err instanceof EngineError
        ? err.message
        : `model version '${version}' could not be loaded; an operator must check the server log`;
      const e = new DomainError('engine-unavailable', detail);
      e.cause = err;
      throw e;
    }
  }

  /**
   * Register a version served by a remote OpenAI-compatible server (`POST /v1/models`), as a
   * `candidate` (activate it like any version): its `baseUrl` must pass the URL rule, and the
   * settings it leaves out get their defaults (src/shared/remote-version.ts). `parent` is the
   * version it was trained from, when known.
   * @throws DomainError `validation` naming `body/baseUrl` for a URL that breaks the rule, or
   *   `body/parent` when `parent` is not registered; `conflict` when the version exists.
   */
  async register(b: RegisterModelBody): Promise<ModelRow> {
    const fault = remoteUrlFault(b.baseUrl);
    if (fault) throw invalid('body/baseUrl', BASE_URL_FAULTS[fault]);
    const remote = remoteVersionConfig(b);
    const parent = b.parent ?? null;
    if (await this.get(b.version)) throw new DomainError('conflict', `model version '${b.version}' already exists`);
    if (parent !== null && !(await this.get(parent))) throw invalid('body/parent', `is not a registered model version ('${parent}')`);
    await this.repo.insert({
      version: b.version, parent, jobId: null, checkpointDir: '', status: 'candidate', metrics: b.metrics ?? {},
      createdAt: Date.now(), engine: 'openai', engineConfig: remote as unknown as Record<string, unknown>,
    });
    return (await this.get(b.version))!;
  }

  /**
   * Register a builtin checkpoint folder that is already in place (under the data directory's
   * `checkpoints/`) as a `candidate` version, without a training job: how `lamer train --resume`
   * brings a run's last trained version, copied from its output folder, into a new data directory.
   * The folder's metadata is read now, so a folder the engine could not load is refused here.
   * `parent`, when given, must be registered.
   * @throws DomainError `conflict` when the version exists; `validation` naming `checkpointDir`
   *   when the folder holds no readable checkpoint, or `parent` when it is not registered.
   */
  async registerCheckpoint(
    version: string, checkpointDir: string, opts: { parent?: string; metrics?: Record<string, unknown> } = {},
  ): Promise<ModelRow> {
    if (await this.get(version)) throw new DomainError('conflict', `model version '${version}' already exists`);
    const parent = opts.parent ?? null;
    if (parent !== null && !(await this.get(parent))) throw invalid('parent', `is not a registered model version ('${parent}')`);
    try {
      await readCheckpointMetadata(checkpointDir);
    } catch (err) {
      throw invalid('checkpointDir', `holds no readable checkpoint: ${(err as Error).message}`);
    }
    await this.repo.insert({
      version, parent, jobId: null, checkpointDir, status: 'candidate', metrics: opts.metrics ?? {}, createdAt: Date.now(),
      engine: 'builtin', engineConfig: null,
    });
    return (await this.get(version))!;
  }

  /** The model resource of a row: `loaded` says whether the engine holds the version now; `remote` its server, the key hidden. */
  view(m: ModelRow): ModelView {
    return {
      version: m.version,
      parent: m.parent,
      jobId: m.jobId,
      status: m.status,
      metrics: m.metrics,
      createdAt: new Date(m.createdAt).toISOString(),
      loaded: this.engine.isLoaded(m.version),
      engine: m.engine,
      remote: m.engine === 'openai' && m.engineConfig ? remoteView(m.engineConfig as unknown as RemoteVersionConfig) : null,
      gate: gateOf(m.metrics),
    };
  }

  /**
   * Make `version` the active one: load it, then mark it active and the previous one retired.
   * @throws DomainError `not-found` for an unknown version, `engine-unavailable` when the engine cannot load it.
   */
  async activate(version: string): Promise<ModelRow> {
    const row = await this.get(version);
    if (!row) throw notFound(`model version '${version}'`);
    await this.ensureLoaded(version);
    this.activations++;
    this.invalidate();
    try {
      await this.repo.activate(version);
    } finally {
      this.invalidate();
    }
    this.activeRow = (await this.get(version))!;
    return this.activeRow;
  }

  /**
   * Follow an activation (or rollback) made elsewhere: another server on the same database
   * (src/plugins/app/replicas.ts calls this on each poll and notification). Reads the active
   * version; when it is not the one held here, forgets the rows read so far and holds the new one,
   * so new sessions pin it. Loading it in the engine is the caller's (`ensureLoaded`): a step of a
   * session pinned to it waits for that load, and `/readyz` is 503 until it is done.
   * @returns the new active row, or null when unchanged (or when an activation here raced the read).
   * @throws DatabaseError when the store cannot be read.
   */
  async follow(): Promise<ModelRow | null> {
    const before = this.activations;
    const row = await this.repo.active();
    if (!row || row.version === this.activeRow?.version || before !== this.activations) return null;
    this.invalidate();
    this.activeRow = row;
    return { ...row };
  }

  /** Load `version` in the engine from its row. @throws DomainError `not-found`; the engine's error. */
  private async load(version: string): Promise<void> {
    const row = await this.get(version);
    if (!row) throw notFound(`model version '${version}'`);
    const spec = specOf(row);
    await (spec ? this.engine.load(version, row.checkpointDir, spec) : this.engine.load(version, row.checkpointDir));
  }
}

export { EngineError };
