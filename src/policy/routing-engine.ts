/**
 * `RoutingEngine`: one `PolicyEngine` over the versions of every kind. Versions loaded with an
 * `openai` spec (src/policy/openai-engine.ts) are served by their remote server; every other
 * version goes to the local engine (builtin tfjs or test). The server always talks to a
 * RoutingEngine (src/plugins/app/engine.ts wraps whatever engine it is given).
 *
 * `NoLocalEngine` is the local engine of `LAMER_ENGINE=openai`: it serves no version itself.
 */
import {
  EngineError, type ActRequest, type ChatTurn, type ChatTurnRequest, type CompleteRequest, type Completion, type EngineInfo, type EngineObserver, type EngineSpec,
  type Generation, type PolicyEngine, type ReflectRequest, type RemoteProbe, type ReplayAnswer, type ReplayRequest, type ScoreRequest,
} from './engine.js';
import { RemoteVersion, type RemoteDeps } from './openai-engine.js';

/** Local engine of a server that only serves remote versions. */
export class NoLocalEngine implements PolicyEngine {
  info(): EngineInfo {
    return { engine: 'openai', backend: 'none', loadedVersions: [] };
  }
  private refuse(): never {
    throw new EngineError('this server runs no local model (LAMER_ENGINE=openai): builtin versions cannot be served');
  }
  async load(): Promise<void> {
    this.refuse();
  }
  isLoaded(): boolean {
    return false;
  }
  async act(): Promise<Generation> {
    this.refuse();
  }
  async reflect(): Promise<Generation> {
    this.refuse();
  }
  async score(): Promise<number[]> {
    this.refuse();
  }
  release(): void {}
  async dispose(): Promise<void> {}
}

export class RoutingEngine implements PolicyEngine {
  private readonly remotes = new Map<string, RemoteVersion>();

  constructor(
    readonly local: PolicyEngine,
    private readonly deps: RemoteDeps = {},
  ) {}

  /** The remote version `version`, or undefined when it is local (or not loaded). */
  remote(version: string): RemoteVersion | undefined {
    return this.remotes.get(version);
  }

  /** The cached probe of a remote version's server (RemoteVersion.probe); null for a local or unloaded version. */
  async probe(version: string): Promise<RemoteProbe | null> {
    const r = this.remotes.get(version);
    return r ? r.probe() : null;
  }

  info(): EngineInfo {
    const i = this.local.info();
    return { ...i, loadedVersions: [...i.loadedVersions, ...this.remotes.keys()] };
  }

  /** Remote specs replace an earlier one of the same version (its URL or key may have moved). */
  async load(version: string, checkpointDir: string, spec?: EngineSpec): Promise<void> {
    if (spec?.engine === 'openai') {
      const cur = this.remotes.get(version);
      if (!cur || JSON.stringify(cur.config) !== JSON.stringify(spec.remote)) this.remotes.set(version, new RemoteVersion(version, spec.remote, this.deps));
      return;
    }
    await this.local.load(version, checkpointDir, spec);
  }

  isLoaded(version: string): boolean {
    return this.remotes.has(version) || this.local.isLoaded(version);
  }

  act(req: ActRequest): Promise<Generation> {
    const r = this.remotes.get(req.modelVersion);
    return r ? r.act(req) : this.local.act(req);
  }

  reflect(req: ReflectRequest): Promise<Generation> {
    const r = this.remotes.get(req.modelVersion);
    return r ? r.reflect(req) : this.local.reflect(req);
  }

  async score(req: ScoreRequest): Promise<number[]> {
    if (this.remotes.has(req.modelVersion)) throw new EngineError(`model version '${req.modelVersion}' is remote: candidates are not scored here`);
    return this.local.score(req);
  }

  /**
   * An agent's chat turn on a remote version, passed through to its server (RemoteVersion.turn).
   * @throws EngineError for a version that is not remote (local versions are served by `complete`).
   */
  async chatTurn(req: ChatTurnRequest): Promise<ChatTurn> {
    const r = this.remotes.get(req.modelVersion);
    if (!r) throw new EngineError(`model version '${req.modelVersion}' is not a remote version`);
    return r.turn(req);
  }

  async complete(req: CompleteRequest): Promise<Completion> {
    if (this.remotes.has(req.modelVersion) || !this.local.complete) {
      throw new EngineError(`model version '${req.modelVersion}' is not served by this process`);
    }
    return this.local.complete(req);
  }

  /**
   * A recorded call replayed on a version of the local engine (remote versions are replayed with
   * `act` and `chatTurn`, which score nothing). @throws EngineError for a remote version or a local
   * engine without replay.
   */
  async replay(req: ReplayRequest): Promise<ReplayAnswer> {
    if (this.remotes.has(req.modelVersion) || !this.local.replay) {
      throw new EngineError(`model version '${req.modelVersion}' cannot be replayed by this process's engine`);
    }
    return this.local.replay(req);
  }

  release(sessionId: string): void {
    this.local.release(sessionId);
  }

  async dispose(): Promise<void> {
    this.remotes.clear();
    await this.local.dispose();
  }

  setObserver(observer: EngineObserver): void {
    this.local.setObserver?.(observer);
  }

  /** Requests queued in the local engine's batchers and waiting for a remote version's slot. */
  queueDepth(): number {
    let n = this.local.queueDepth?.() ?? 0;
    for (const r of this.remotes.values()) n += r.queued();
    return n;
  }
}
