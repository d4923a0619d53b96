/**
 * Children that tests start are killed when their test ends, even by a timeout, and when their
 * file ends (test/helpers/children.ts): a fixture file run in a vitest of its own starts a file
 * child and, in a test that times out, a process group of two; the fixture checks the group is gone
 * once that test ended while the file child still runs, and here nothing it started outlives it.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { isRunning } from './children.js';
import { root } from './cli.js';
import { tmpDir } from './index.js';

describe('tracked children', () => {
  it('a test that times out leaves no process behind; a file child lives until its file ends', async () => {
    const dir = tmpDir('lamer-children-');
    const pidsFile = path.join(dir, 'pids');
    const report = path.join(dir, 'report.json');
    const r = spawnSync(
      process.execPath,
      [
        'node_modules/vitest/vitest.mjs', 'run', '--config', 'test/helpers/fixtures/children.vitest.config.ts',
        '--reporter=default', '--reporter=json', `--outputFile.json=${report}`,
      ],
      { cwd: root, env: { ...process.env, CHILDREN_PIDS: pidsFile }, encoding: 'utf8', timeout: 120_000 },
    );
    expect(r.status, r.stdout + r.stderr).toBe(1);
    const results = JSON.parse(fs.readFileSync(report, 'utf8')) as { testResults: Array<{ assertionResults: Array<{ title: string; status: string }> }> };
    const tests = results.testResults.flatMap((f) => f.assertionResults);
    expect(tests.map((t) => [t.title, t.status])).toEqual([
      ['starts a process group and never ends', 'failed'],
      ['after the timeout the group is gone, the file child still runs', 'passed'],
    ]);
    expect(r.stdout + r.stderr).toContain('Test timed out in 5000ms');
    const pids = fs.readFileSync(pidsFile, 'utf8').trim().split('\n').map((l) => l.split(' '));
    expect(pids.map(([name]) => name).sort()).toEqual(['file', 'grandchild', 'leader']);
    // the shell's `sleep` was reparented when the shell died; whoever reaps it may take a moment
    await vi.waitFor(() => expect(pids.filter(([, pid]) => isRunning(Number(pid)))).toEqual([]), { timeout: 10_000, interval: 50 });
  }, 150_000);
});
