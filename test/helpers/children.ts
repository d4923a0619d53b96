/**
 * Child processes that tests start (`lamer serve`, scripts that start servers), never left running:
 * each one passed to {@link track} is killed with SIGKILL (its whole process group when it has its
 * own, `group: true`, i.e. spawned with `detached: true`) when the test that started it ends, passed,
 * failed or timed out (a timed-out test's own `finally` may never run: it can still be awaiting);
 * one started outside a test (beforeAll, describe body) when the test file ends; and any left when
 * the test worker exits or is stopped by SIGINT or SIGTERM.
 *
 * Importing this module registers the hooks on the importing test file (as ./index.ts does for
 * temporary directories): its afterEach and afterAll run after the file's own, so a test's graceful
 * stop (SIGTERM, then awaiting the exit) comes first, and before ./index.ts removes the directories
 * the servers used.
 */
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { afterAll, afterEach, beforeEach } from 'vitest';
import './index.js';

interface Tracked {
  child: ChildProcess;
  /** Kill the process group (-pid), not the pid alone. */
  group: boolean;
  /** The test that started it (a number per test of the file), null outside a test. */
  test: number | null;
}

const REGISTRY = Symbol.for('lamer-server.test.children');

/**
 * Every tracked child of this worker process, across test files (one registry per process, so the
 * exit and signal handlers are installed once).
 */
const tracked: Set<Tracked> = ((globalThis as { [REGISTRY]?: Set<Tracked> })[REGISTRY] ??= installRegistry());

function installRegistry(): Set<Tracked> {
  const all = new Set<Tracked>();
  process.once('exit', () => killWhere(all, () => true));
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      killWhere(all, () => true);
      // the default action (exit by the signal) unless someone else handles it
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    });
  }
  return all;
}

/** SIGKILL every tracked child that `which` selects and forget it; a child already gone is skipped. */
function killWhere(set: Set<Tracked>, which: (t: Tracked) => boolean): void {
  for (const t of [...set]) {
    if (!which(t)) continue;
    set.delete(t);
    try {
      // A group is killed even when its leader has exited: `npm start`'s node may outlive npm.
      if (t.group) process.kill(-t.child.pid!, 'SIGKILL');
      else if (t.child.exitCode === null && t.child.signalCode === null) t.child.kill('SIGKILL');
    } catch {
      /* already gone (ESRCH) */
    }
  }
}

let tests = 0;
let currentTest: number | null = null;
beforeEach(() => {
  currentTest = ++tests;
});
afterEach(() => {
  const test = currentTest;
  currentTest = null;
  killWhere(tracked, (t) => t.test === test);
});
afterAll(() => killWhere(tracked, () => true));

/**
 * Kill `child` (with `group`, its process group: spawn it with `detached: true`) when the current
 * test ends, or when the test file ends if no test is running (beforeAll). Returns `child`.
 */
export function track<T extends ChildProcess>(child: T, opts: { group?: boolean } = {}): T {
  if (child.pid === undefined) return child; // the spawn failed: nothing runs ('error' says why)
  const t: Tracked = { child, group: opts.group ?? false, test: currentTest };
  tracked.add(t);
  // a lone process that exited is forgotten, so that a later kill cannot reach a reused pid
  if (!t.group) child.once('exit', () => tracked.delete(t));
  return child;
}

/** True while process `pid` runs (exists and is not a zombie); reads /proc (Linux). */
export function isRunning(pid: number): boolean {
  try {
    // the state is the field after the command name, which is in parentheses and may hold spaces
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}
