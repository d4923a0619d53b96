/**
 * bench/http.ts, which starts a server, stops at once when that server exits before it is ready:
 * exit 1, the server's exit status and the last lines of its output, instead of polling /readyz
 * until its timeout. Run as a user runs it, with a setting that makes its server exit at start.
 * (The same for experiments/lamer-vs-gigpo.sh: test/experiments/lamer-vs-gigpo.test.ts.)
 */
import { readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { tmpDir } from '../helpers/index.js';
import { runFor } from '../helpers/cli.js';

describe('bench scripts and a server that exits before it is ready', () => {
  it('bench/http.ts: a server refusing its configuration stops the bench at once with its status and last output; its data directory is removed', async () => {
    const tmp = tmpDir('lamer-bench-http-');
    const r = await runFor(process.execPath, ['--import', 'tsx', 'bench/http.ts'], { LAMER_BODY_LIMIT_BYTES: 'abc', TMPDIR: tmp }, 90_000);
    expect(r.killed).toBe(false);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      'bench:http: the server exited (status 2) before it was ready; its last output:\nlamer serve: invalid configuration: LAMER_BODY_LIMIT_BYTES="abc": expected an integer in [1024, 1073741824]\n',
    );
    expect(readdirSync(tmp).filter((f) => f.startsWith('lamer-bench-'))).toEqual([]);
  }, 120_000);
});
