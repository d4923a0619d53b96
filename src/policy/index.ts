/**
 * Engine factory (shared contract 2): `createEngine(config)` returns the policy engine named by
 * `config.engine`: 'test' -> `TestEngine`; 'openai' -> `NoLocalEngine` (every version is remote);
 * 'builtin' -> `createBuiltinEngine` from
 * `./builtin-engine.js` (tfjs transformer), imported only when asked for.
 *
 * @throws EngineError with a clear message when the builtin engine module cannot be loaded.
 */
import type { Config } from '../config.js';
import { EngineError, type PolicyEngine } from './engine.js';
import { TestEngine } from './test-engine.js';
import { NoLocalEngine } from './routing-engine.js';

export interface EngineLogger {
  info(o: object, msg?: string): void;
  warn(o: object, msg?: string): void;
}

type BuiltinFactory = (opts: {
  backend?: 'auto' | 'tensorflow' | 'wasm' | 'cpu';
  batchWindowMs?: number;
  maxBatchSize?: number;
  maxLoadedVersions?: number;
  logger?: EngineLogger;
}) => Promise<PolicyEngine>;

export async function createEngine(
  config: Pick<Config, 'engine' | 'tfjsBackend' | 'batchWindowMs' | 'maxBatchSize'>,
  logger?: EngineLogger,
): Promise<PolicyEngine> {
  if (config.engine === 'test') return new TestEngine();
  // Remote versions only: the routing engine (src/plugins/app/engine.ts) sends them to their server.
  if (config.engine === 'openai') return new NoLocalEngine();
  if (config.engine !== 'builtin') throw new EngineError(`unknown engine '${String(config.engine)}'`);
  let mod: { createBuiltinEngine?: BuiltinFactory };
  try {
    // A variable specifier keeps TypeScript from requiring the module at compile time.
    const specifier = './builtin-engine.js';
    mod = (await import(specifier)) as { createBuiltinEngine?: BuiltinFactory };
  } catch (err) {
    throw new EngineError(
      'the builtin engine (src/policy/builtin-engine.ts) could not be loaded; ' +
        'set LAMER_ENGINE=test to run without a model. Cause: ' +
        (err instanceof Error ? err.message : String(err)),
      { cause: err },
    );
  }
  if (typeof mod.createBuiltinEngine !== 'function') {
    throw new EngineError('src/policy/builtin-engine.ts does not export createBuiltinEngine');
  }
  const opts: Parameters<BuiltinFactory>[0] = {
    backend: config.tfjsBackend,
    batchWindowMs: config.batchWindowMs,
    maxBatchSize: config.maxBatchSize,
  };
  if (logger) opts.logger = logger;
  return mod.createBuiltinEngine(opts);
}

export { TestEngine };
