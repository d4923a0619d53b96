/**
 * Session inserts (src/db/sessions-repo.ts SessionsRepo.insert, a statement prepared once): the
 * stored row is the one drizzle's insert stores for the same SessionRow (values and SQLite types),
 * column defaults included, and a session inserted as completed is counted in the statistics
 * aggregates.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase, type DatabaseConnection } from '../../src/db/index.js';
import { sessions, type SessionRow } from '../../src/db/schema.js';
import { SessionsRepo } from '../../src/db/sessions-repo.js';
import { tmpDir } from '../helpers/index.js';

let d: DatabaseConnection | null = null;
afterEach(() => {
  if (d) {
    const dir = path.dirname(d.file);
    d.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  d = null;
});

function row(id: string, over: Partial<SessionRow> = {}): SessionRow {
  return {
    id, tenant: 't', taskId: 'task "1"', env: null, mode: 'train', status: 'active', instructions: 'Push the box.\n', maxAttempts: 3, maxSteps: 8,
    memory: 'reflection_only', memoryPlacement: 'user_prefix', sampling: { temperature: 0.7, topP: 1, topK: 0, seed: 5 }, modelVersion: 'v1',
    metadata: { a: [1, 'x'], b: null }, nextAttempt: 0, nextStep: 0, attempts: [], createdAt: 1_700_000_000_123, updatedAt: 1_700_000_000_123,
    ...over,
  };
}

/** Every column of session `id` with its SQLite type. */
function stored(conn: DatabaseConnection, id: string): Record<string, unknown> {
  const cols = (conn.sqlite.prepare('SELECT name FROM pragma_table_info(?)').all('sessions') as Array<{ name: string }>).map((c) => c.name);
  const select = cols.map((c) => `"${c}", typeof("${c}") AS "${c}:type"`).join(', ');
  const r = conn.sqlite.prepare(`SELECT ${select} FROM sessions WHERE id = ?`).get(id) as Record<string, unknown>;
  return { ...r, id: undefined };
}

describe('SessionsRepo.insert', () => {
  it('stores what drizzle stores for the same row, defaults included', () => {
    d = openDatabase(tmpDir('lamer-sr-'));
    const repo = new SessionsRepo(d.db);
    const attempts: SessionRow['attempts'] = [{ attempt: 0, status: 'failed', steps: 3, return: -0.2, success: false, endReason: 'done' }];
    const rows = [
      row('a'),
      row('b', { env: 'sokoban', mode: 'eval', memory: 'history_and_reflection', attempts, nextAttempt: 1 }),
      // no memoryPlacement: the column's default
      { ...row('c'), memoryPlacement: undefined } as unknown as SessionRow,
    ];
    for (const r of rows) {
      repo.insert(r);
      d.db.insert(sessions).values({ ...r, id: `drizzle-${r.id}` }).run();
      expect(stored(d, r.id)).toEqual(stored(d, `drizzle-${r.id}`));
    }
    expect(stored(d, 'c')).toMatchObject({ memory_placement: 'system', 'env:type': 'null', 'sampling:type': 'text' });
  });

  it('counts a session inserted as completed in the statistics aggregates, once', () => {
    d = openDatabase(tmpDir('lamer-sr-'));
    const repo = new SessionsRepo(d.db);
    const attempts: SessionRow['attempts'] = [{ attempt: 0, status: 'succeeded', steps: 2, return: 1, success: true, endReason: 'done' }];
    repo.insert(row('done', { status: 'completed', attempts, nextAttempt: 1 }));
    repo.insert(row('open'));
    expect(repo.statsGroups('t').reduce((n, g) => n + g.sessions, 0)).toBe(1);
  });
});
