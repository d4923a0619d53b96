#!/usr/bin/env node
/**
 * Online backup of the server's SQLite database while it runs (docs/deploy.md "Backups").
 *
 *   node docker/backup.mjs [DEST] [--db PATH]
 *   docker exec lamer node docker/backup.mjs /data/backups/lamer-2026-11-29.db
 *
 * Uses SQLite's online backup API through better-sqlite3 (`db.backup()`): the copy is a
 * consistent snapshot that includes what is still in the WAL file, taken without stopping
 * writers (the server keeps answering steps). The copy is then opened and checked with
 * `PRAGMA integrity_check`. DB defaults to $LAMER_DATA_DIR/lamer.db (LAMER_DATA_DIR defaults to
 * ./data); DEST defaults to <data dir>/backups/lamer-<UTC timestamp>.db.
 * Exit status 0 and one JSON line {"file", "bytes", "pages", "seconds"} on success; 1 on error.
 * Model checkpoints (<data dir>/checkpoints/) are immutable files: copy them with cp/rsync.
 */
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const Database = require('better-sqlite3');

async function main(argv) {
  const dbIdx = argv.indexOf('--db');
  const dataDir = path.resolve(process.env.LAMER_DATA_DIR || 'data');
  const src = dbIdx >= 0 ? path.resolve(argv[dbIdx + 1]) : path.join(dataDir, 'lamer.db');
  const positional = argv.filter((a, i) => !a.startsWith('--') && (dbIdx < 0 || (i !== dbIdx + 1)));
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
  const dest = path.resolve(positional[0] ?? path.join(path.dirname(src), 'backups', `lamer-${stamp}.db`));
  if (!fs.existsSync(src)) throw new Error(`no database at ${src}`);
  if (fs.existsSync(dest)) throw new Error(`${dest} exists; not overwriting`);
  fs.mkdirSync(path.dirname(dest), { recursive: true });
  const t0 = process.hrtime.bigint();
  const db = new Database(src, { readonly: true, fileMustExist: true });
  db.pragma('busy_timeout = 5000');
  let pages = 0;
  try {
    const result = await db.backup(dest);
    pages = result.totalPages;
  } finally {
    db.close();
  }
  const copy = new Database(dest, { readonly: true, fileMustExist: true });
  try {
    const check = copy.pragma('integrity_check', { simple: true });
    if (check !== 'ok') throw new Error(`integrity_check of ${dest}: ${check}`);
  } finally {
    copy.close();
  }
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  console.log(JSON.stringify({ file: dest, bytes: fs.statSync(dest).size, pages, seconds: Number(seconds.toFixed(3)) }));
}

main(process.argv.slice(2)).catch((err) => {
  console.error(`backup: ${err instanceof Error ? err.message : err}`);
  process.exitCode = 1;
});
