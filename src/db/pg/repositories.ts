/**
 * The repositories of a PostgreSQL store (AsyncRepositories, src/db/async-repositories.ts): every
 * operation of the SQLite repositories, on a pool that several replicas share. Every call's
 * PostgreSQL failures of a known kind reject as DatabaseError (src/db/pg/errors.ts pgDatabaseErrorOf).
 */
import type { AsyncExport, AsyncRepositories } from '../async-repositories.js';
import type { PgConnection } from './connection.js';
import { mapPgErrors, pgDatabaseErrorOf } from './errors.js';
import { pgJobs, pgModels } from './models-jobs.js';
import { pgReplays } from './replays-repo.js';
import { pgSessions } from './sessions-repo.js';
import { pgHot, pgSteps } from './steps-repo.js';
import { pgExport, pgTrainingData } from './training-export.js';

/** `impl` with every method's rejection mapped by mapPgErrors. */
function mapped<T extends object>(impl: T): T {
  const out: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(impl)) {
    out[name] = typeof fn === 'function' ? (...args: unknown[]) => mapPgErrors(() => Promise.resolve(fn.apply(impl, args))) : fn;
  }
  return out as T;
}

/** An export whose iteration's failures are mapped as the other calls'. */
function mappedExport(impl: AsyncExport): AsyncExport {
  return {
    async *lines(filter, chunkRows) {
      try {
        yield* impl.lines(filter, chunkRows);
      } catch (err) {
        throw pgDatabaseErrorOf(err) ?? err;
      }
    },
  };
}

/** The async repositories over an open PostgreSQL store. */
export function pgRepositories(conn: PgConnection): AsyncRepositories {
  const { db } = conn;
  return {
    store: 'postgres',
    sessions: mapped(pgSessions(db, conn.pool)),
    steps: mapped(pgSteps(db)),
    hot: mapped(pgHot(db, conn.pool)),
    models: mapped(pgModels(db)),
    jobs: mapped(pgJobs(db)),
    trainingData: mapped(pgTrainingData(db)),
    replays: mapped(pgReplays(db)),
    export: mappedExport(pgExport(db)),
  };
}
