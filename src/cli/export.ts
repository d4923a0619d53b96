/**
 * `lamer export [--data-dir DIR] [--out FILE] [--since WHEN] [--env NAME] [--mode train|eval]
 *  [--model-version V] [--tenant T] [--completed-only]`: write recorded steps as JSONL for external
 * trainers, one line per step record (docs/export.md; JSON Schema docs/export.schema.json); the
 * query and the line type are src/db/export.ts.
 *
 * Streaming: rows are read from the SQLite database `<dataDir>/lamer.db` (opened read-only, so a
 * running server is not disturbed) in chunks of EXPORT_CHUNK_ROWS rows, each its own short read
 * transaction (no snapshot pinned for the whole export, so the server's WAL can still be
 * checkpointed), and written with back-pressure; memory does not grow with the data. Order:
 * session id (time-ordered), attempt, step, kind (action before reflection).
 */
import fs from 'node:fs';
import path from 'node:path';
import { once } from 'node:events';
import type { Writable } from 'node:stream';
import { SESSION_MODES } from '../domain.js';
import { exportLines, type ExportFilter, type ExportLine } from '../db/export.js';
import { checkOutPath, choiceOpt, parseCommand, usageError, UsageError } from './args.js';

const HELP = `usage: lamer export [options]

Write recorded steps as JSONL, one line per step (schema: docs/export.md, docs/export.schema.json).

  --data-dir DIR      data directory holding lamer.db (default $LAMER_DATA_DIR or ./data)
  --out FILE          output file (default: standard output)
  --since WHEN        sessions created at or after WHEN: ISO 8601 date/time or ms since the epoch
  --env NAME          sessions with this env label
  --mode MODE         train | eval
  --model-version V   sessions pinned to model version V
  --tenant T          sessions of tenant T
  --completed-only    only completed sessions (what training jobs use)`;

/**
 * Write `lines` as JSONL to `out`, waiting for 'drain' when the stream's buffer is full.
 * @returns the number of lines and distinct sessions written.
 */
export async function writeJsonl(lines: Iterable<ExportLine>, out: Writable): Promise<{ lines: number; sessions: number }> {
  let n = 0;
  let sessions = 0;
  let last: string | null = null;
  let failed: Error | null = null;
  const onError = (e: Error) => {
    failed = e;
  };
  out.on('error', onError);
  try {
    for (const line of lines) {
      if (failed) throw failed;
      if (line.sessionId !== last) {
        sessions++;
        last = line.sessionId;
      }
      n++;
      // events.once settles on 'drain' or rejects on 'error' and removes both listeners either way
      // (racing two once() calls left the loser's listener behind on every wait).
      if (!out.write(JSON.stringify(line) + '\n')) await once(out, 'drain');
    }
    if (failed) throw failed;
  } finally {
    out.off('error', onError);
  }
  return { lines: n, sessions };
}

/** `--since` (or the option `name`): ms since the epoch, or an ISO 8601 date/time. @throws UsageError for anything else. */
export function parseSince(v: string, name = 'since'): number {
  if (/^\d+$/.test(v)) return Number(v);
  const t = Date.parse(v);
  if (Number.isNaN(t)) throw new UsageError(`--${name} must be an ISO 8601 date/time or ms since the epoch, got '${v}'`);
  return t;
}

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommand('export', argv, {
    'data-dir': { type: 'string' }, out: { type: 'string' }, since: { type: 'string' }, env: { type: 'string' },
    mode: { type: 'string' }, 'model-version': { type: 'string' }, tenant: { type: 'string' },
    'completed-only': { type: 'boolean' },
  }, HELP);
  if ('code' in parsed) return parsed.code;
  const values = parsed.values;
  let filter: ExportFilter;
  let dbFile: string;
  try {
    filter = {};
    if (values.since !== undefined) filter.since = parseSince(values.since);
    if (values.env !== undefined) filter.env = values.env;
    if (values.mode !== undefined) filter.mode = choiceOpt('mode', values.mode, SESSION_MODES, 'train');
    if (values['model-version'] !== undefined) filter.modelVersion = values['model-version'];
    if (values.tenant !== undefined) filter.tenant = values.tenant;
    if (values['completed-only']) filter.completedOnly = true;
    const dataDir = path.resolve(values['data-dir'] ?? (process.env.LAMER_DATA_DIR || 'data'));
    dbFile = path.join(dataDir, 'lamer.db');
    if (!fs.existsSync(dbFile)) throw new UsageError(`no database at ${dbFile} (is --data-dir right?)`);
    if (values.out !== undefined && values.out !== '-') checkOutPath('out', values.out);
  } catch (e) {
    return usageError('export', e);
  }
  const toFile = values.out !== undefined && values.out !== '-';
  const out: Writable = toFile ? fs.createWriteStream(values.out!) : process.stdout;
  try {
    const r = await writeJsonl(exportLines(dbFile, filter), out);
    if (toFile) {
      out.end();
      await once(out, 'finish');
    }
    console.error(`lamer export: ${r.lines} step${r.lines === 1 ? '' : 's'} of ${r.sessions} session${r.sessions === 1 ? '' : 's'}${toFile ? ` to ${values.out}` : ''}`);
    return 0;
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.code === 'EPIPE') return 0; // the reader went away (e.g. `| head`)
    console.error(`lamer export: ${err.message}`);
    if (toFile) out.destroy();
    return 1;
  }
}
