/**
 * SQLite failures by kind (src/db/errors.ts): primary and extended result codes, drizzle's
 * wrapping (`cause`), and the real codes better-sqlite3 raises for a lock held by another
 * connection and for a database at its size limit.
 */
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { DatabaseError, databaseErrorOf, sqliteErrorKind } from '../../src/db/errors.js';
import { tmpDir } from '../helpers/index.js';

describe('sqliteErrorKind', () => {
  it('maps primary and extended codes by kind; programming errors are none', () => {
    const table: Array<[string, string | null]> = [
      ['SQLITE_BUSY', 'busy'],
      ['SQLITE_BUSY_SNAPSHOT', 'busy'],
      ['SQLITE_BUSY_TIMEOUT', 'busy'],
      ['SQLITE_LOCKED', 'busy'],
      ['SQLITE_LOCKED_SHAREDCACHE', 'busy'],
      ['SQLITE_FULL', 'full'],
      ['SQLITE_IOERR', 'io'],
      ['SQLITE_IOERR_WRITE', 'io'],
      ['SQLITE_IOERR_FSYNC', 'io'],
      ['SQLITE_IOERR_SHORT_READ', 'io'],
      ['SQLITE_CANTOPEN', 'io'],
      ['SQLITE_READONLY', 'readonly'],
      ['SQLITE_READONLY_DBMOVED', 'readonly'],
      ['SQLITE_CORRUPT', 'corrupt'],
      ['SQLITE_NOTADB', 'corrupt'],
      ['SQLITE_CONSTRAINT_UNIQUE', null],
      ['SQLITE_ERROR', null],
      ['SQLITE_MISUSE', null],
    ];
    for (const [code, kind] of table) expect([code, sqliteErrorKind(code)]).toEqual([code, kind]);
  });

  it('finds the SQLite error inside a wrapper and leaves other errors alone', () => {
    const inner = Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
    const wrapped = Object.assign(new Error('Failed query: insert ...'), { cause: inner });
    const de = databaseErrorOf(wrapped);
    expect(de).toBeInstanceOf(DatabaseError);
    expect([de?.kind, de?.code, de?.cause]).toEqual(['full', 'SQLITE_FULL', inner]);
    expect(databaseErrorOf(de)).toBe(de);
    expect(databaseErrorOf(Object.assign(new Error('x'), { code: 'SQLITE_CONSTRAINT_UNIQUE' }))).toBeNull();
    expect(databaseErrorOf(new Error('x'))).toBeNull();
    expect(databaseErrorOf('text')).toBeNull();
  });

  it('classifies what better-sqlite3 really raises: a held lock is busy, no room is full', () => {
    const dir = tmpDir('lamer-dberr-');
    const file = path.join(dir, 'x.db');
    const a = new Database(file);
    const b = new Database(file);
    try {
      a.pragma('journal_mode = WAL');
      a.exec('CREATE TABLE t (v BLOB)');
      b.pragma('busy_timeout = 0');
      a.exec('BEGIN IMMEDIATE');
      let err: unknown = null;
      try {
        b.exec('BEGIN IMMEDIATE');
      } catch (e) {
        err = e;
      }
      a.exec('ROLLBACK');
      expect(databaseErrorOf(err)?.kind).toBe('busy');
      b.pragma(`max_page_count = ${b.pragma('page_count', { simple: true }) as number}`);
      err = null;
      try {
        b.prepare('INSERT INTO t VALUES (zeroblob(65536))').run();
      } catch (e) {
        err = e;
      }
      expect(databaseErrorOf(err)?.kind).toBe('full');
    } finally {
      a.close();
      b.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
