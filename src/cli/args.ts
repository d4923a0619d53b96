/**
 * Option parsing shared by the `lamer` commands (eval, demos, export, train) and the npm scripts
 * (eval:base, the bench scripts): node:util parseArgs with `--help`, negative
 * numbers as option values, the `lamer <cmd>: message` + exit code 2 convention for usage errors,
 * integer / number range checks, the held-out tasks within the eval seeds, the session limits of
 * an in-process server, output paths checked before any work, and the `--env` / `--params` pair
 * of the built-in environments (src/envs/index.ts).
 *
 * Errors: every check throws `UsageError` with a one-line message naming the option; `usageError`
 * prints it as `lamer <cmd>: <message>` and returns exit code 2.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { Sampling } from '../agent/schemas.js';
import { ConfigError, defaultLimits, loadConfig, type Limits } from '../config.js';
import { ENV_KINDS, type EnvKind } from '../domain.js';
import { EVAL_SEED_COUNT, EVAL_SEED_START, makeEnv, parseEnvName, type EnvParams } from '../envs/index.js';
import { MINESWEEPER_DEFAULTS } from '../envs/minesweeper.js';
import { SOKOBAN_DEFAULTS } from '../envs/sokoban.js';
import { parseArgsMessage } from '../shared/parse-args-message.js';
import { intOpt, UsageError } from '../shared/usage-error.js';

// Re-exported: the commands and bench scripts take them from here with the other option helpers.
export { intOpt, parseArgsMessage, UsageError };

type Options = NonNullable<ParseArgsConfig['options']>;

/**
 * `--opt -3` -> `--opt=-3` for options that take a value, so parseArgs does not read a negative
 * number as an unknown short option ("argument is ambiguous"). Other arguments are unchanged.
 */
export function joinNegativeValues(argv: string[], options: Options): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const name = a.startsWith('--') && !a.includes('=') ? a.slice(2) : null;
    const next = argv[i + 1];
    if (name && options[name]?.type === 'string' && next !== undefined && /^-[\d.]/.test(next)) {
      out.push(`${a}=${next}`);
      i++;
    } else out.push(a);
  }
  return out;
}

/**
 * Parse `argv` of command `cmd` (strict). Returns the values, or an exit code: 0 after printing
 * `help` for --help / -h, 2 after printing `lamer <cmd>: <message>` for an unknown option or a
 * missing value.
 */
export function parseCommand<O extends Options>(
  cmd: string,
  argv: string[],
  options: O,
  help: string,
): { values: ReturnType<typeof parseArgs<{ options: O; strict: true }>>['values'] } | { code: number } {
  const all = { ...options, help: { type: 'boolean', short: 'h' } } as O;
  let values;
  try {
    values = parseArgs({ args: joinNegativeValues(argv, all), options: all, strict: true, allowPositionals: false }).values;
  } catch (e) {
    console.error(`lamer ${cmd}: ${parseArgsMessage(e)} (lamer ${cmd} --help for the options)`);
    return { code: 2 };
  }
  if ((values as { help?: boolean }).help) {
    console.log(help);
    return { code: 0 };
  }
  return { values: values as never };
}

/**
 * Print an error as one line `lamer <cmd>: <message>` and return the exit code: 2 for a
 * UsageError (or a RangeError from option checks), 1 for anything else.
 */
export function usageError(cmd: string, e: unknown): number {
  console.error(`lamer ${cmd}: ${e instanceof Error ? e.message : String(e)}`);
  return e instanceof UsageError || e instanceof RangeError ? 2 : 1;
}

/**
 * `f()`, or `fail(message)` when it throws UsageError: for scripts that print their usage errors
 * themselves (their own prefix and exit code). Any other error is rethrown.
 */
export function orFail<T>(f: () => T, fail: (msg: string) => never): T {
  try {
    return f();
  } catch (e) {
    if (e instanceof UsageError) fail(e.message);
    throw e;
  }
}

/**
 * The held-out tasks of an evaluation: task i plays eval seed EVAL_SEED_START + seed + i
 * (src/envs/index.ts evalSeed), so `--seed` + the tasks (`names`, e.g. '--seed + --tasks') must
 * stay within the EVAL_SEED_COUNT eval seeds. @throws UsageError otherwise.
 */
export function checkEvalSeeds(names: string, seed: number, tasks: number): void {
  if (seed + tasks > EVAL_SEED_COUNT) throw new UsageError(`${names} must be at most ${EVAL_SEED_COUNT} (the eval seeds [${EVAL_SEED_START}, 2^32)), got ${seed + tasks}`);
}

/** The largest `--top-k` a server accepts: the bound of the session schema's sampling (src/agent/schemas.ts). */
// (TypeBox keeps the JSON Schema keywords on the schema object; its TInteger type does not declare them)
export const MAX_TOP_K: number = (Sampling.properties.topK as unknown as { maximum: number }).maximum;

/** The session limits that `--attempts` and `--max-steps` must respect. */
export type SessionLimits = Pick<Limits, 'maxAttempts' | 'maxStepsCap'>;

/**
 * The session limits of a server that this process starts: startServer (src/server.ts) reads them
 * with loadConfig, so src/config.ts defaultLimits unless LAMER_MAX_ATTEMPTS / LAMER_MAX_STEPS_CAP
 * say otherwise. Read here to check the options before the server and its model are loaded. When
 * the environment does not load, the defaults: starting the server then fails with its own message.
 */
export function inProcessSessionLimits(): SessionLimits {
  let limits: Limits = defaultLimits;
  try {
    limits = loadConfig().limits;
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
  }
  return { maxAttempts: limits.maxAttempts, maxStepsCap: limits.maxStepsCap };
}

/**
 * Check the attempts per session and the turns per attempt of an evaluation against the session
 * limits of the server that will play it (the server answers 400 to a session past them).
 * @throws UsageError naming the option, the limit and the variable that sets it.
 */
export function checkSessionLimits(limits: SessionLimits, attempts: number, maxSteps: number): void {
  if (attempts > limits.maxAttempts) throw new UsageError(`--attempts ${attempts} is more than the server allows: at most ${limits.maxAttempts} attempts per session (LAMER_MAX_ATTEMPTS)`);
  if (maxSteps > limits.maxStepsCap) throw new UsageError(`--max-steps ${maxSteps} is more than the server allows: at most ${limits.maxStepsCap} turns per attempt (LAMER_MAX_STEPS_CAP)`);
}

/** A finite number option in [lo, hi]; `def` when absent. @throws UsageError otherwise. */
export function numOpt(name: string, v: string | undefined, def: number, lo: number, hi: number): number {
  if (v === undefined) return def;
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || n < lo || n > hi) throw new UsageError(`--${name} must be a number in [${lo}, ${hi}], got '${v}'`);
  return n;
}

/** One of `allowed`; `def` when absent. @throws UsageError otherwise. */
export function choiceOpt<T extends string>(name: string, v: string | undefined, allowed: readonly T[], def: T): T {
  if (v === undefined) return def;
  if (!(allowed as readonly string[]).includes(v)) throw new UsageError(`--${name} must be one of ${allowed.join(', ')}, got '${v}'`);
  return v as T;
}

/** Parameter names of each built-in env. */
export const ENV_PARAM_KEYS: Record<EnvKind, readonly string[]> = {
  minesweeper: Object.keys(MINESWEEPER_DEFAULTS),
  sokoban: Object.keys(SOKOBAN_DEFAULTS),
};

/**
 * `--env` (a kind, or a full env name such as `minesweeper-4x4-2`, see parseEnvName) and
 * `--params` (a JSON object of that env's parameters, overriding the name's). Returns the kind and
 * the merged parameters, checked by constructing the env.
 * @throws UsageError when --env is missing or unknown, --params is not a JSON object, names a key
 *   the env does not have, or holds a value the env rejects.
 */
export function envOpt(env: string | undefined, params: string | undefined): { kind: EnvKind; params: EnvParams } {
  if (env === undefined) throw new UsageError('--env is required');
  let parsed: { kind: EnvKind; params: EnvParams };
  try {
    parsed = parseEnvName(env);
  } catch {
    throw new UsageError(`--env must be one of ${ENV_KINDS.join(', ')} or a name such as minesweeper-6x6-3 or sokoban-6x6-2, got '${env}'`);
  }
  let extra: Record<string, unknown> = {};
  if (params !== undefined) {
    try {
      extra = JSON.parse(params);
    } catch {
      throw new UsageError(`--params must be JSON, got '${params}'`);
    }
    if (typeof extra !== 'object' || extra === null || Array.isArray(extra)) throw new UsageError(`--params must be a JSON object, got '${params}'`);
    const keys = ENV_PARAM_KEYS[parsed.kind];
    const bad = Object.keys(extra).filter((k) => !keys.includes(k));
    if (bad.length) throw new UsageError(`--params: ${bad.join(', ')} ${bad.length > 1 ? 'are not parameters' : 'is not a parameter'} of ${parsed.kind} (valid: ${keys.join(', ')})`);
  }
  const merged = { ...parsed.params, ...extra } as EnvParams;
  try {
    makeEnv(parsed.kind, merged);
  } catch (e) {
    throw new UsageError(`--params: ${(e as Error).message}`);
  }
  return { kind: parsed.kind, params: merged };
}

/**
 * Check, before any work, that `file` can be written: not a directory, its directory exists, and
 * both are writable; a file that does not exist yet is created and removed again (an existing one
 * is left untouched). @throws UsageError naming the problem.
 */
export function checkOutPath(name: string, file: string): void {
  const dir = path.dirname(path.resolve(file));
  let st: fs.Stats | undefined;
  try {
    st = fs.statSync(file);
  } catch {
    st = undefined;
  }
  if (st?.isDirectory()) throw new UsageError(`--${name} ${file} is a directory`);
  let d: fs.Stats;
  try {
    d = fs.statSync(dir);
  } catch {
    throw new UsageError(`--${name} ${file}: directory ${dir} does not exist`);
  }
  if (!d.isDirectory()) throw new UsageError(`--${name} ${file}: ${dir} is not a directory`);
  try {
    fs.accessSync(st ? file : dir, fs.constants.W_OK);
  } catch {
    throw new UsageError(`--${name} ${file} is not writable`);
  }
  if (st) return;
  probeNewFile(name, file);
}

/**
 * Create the missing `file` for real and remove it again: access() passes where creating it still
 * fails (procfs and other special file systems for root), so the run fails now and not at its end.
 * @throws UsageError with the file system's code.
 */
function probeNewFile(name: string, file: string): void {
  let fd: number;
  try {
    fd = fs.openSync(file, 'wx');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return; // created meanwhile by someone else: not ours to remove
    throw new UsageError(`--${name} ${file} cannot be created (${code ?? (e as Error).message})`);
  }
  fs.closeSync(fd);
  fs.rmSync(file, { force: true });
}

const errCode = (e: unknown): string => (e as NodeJS.ErrnoException).code ?? (e as Error).message;

/**
 * Why the absolute folder `dir` cannot be written in once ensureDirSync (src/ensure-dir.ts) has
 * made it, or null when it can. `dir` itself, or else its nearest existing ancestor (found with
 * stat), must be a folder this process may write in; below a missing level, a probe folder is
 * made there with one plain mkdir and removed at once, since access() passes where the file
 * system still refuses (procfs for root). No recursive mkdir, which can hang on such a file
 * system, and nothing is left behind.
 */
function folderProblem(dir: string): string | null {
  let level = dir;
  let st: fs.Stats;
  for (;;) {
    try {
      st = fs.statSync(level);
      break;
    } catch (e) {
      const code = errCode(e);
      // ENOTDIR: a level above is a file, which the walk up then finds
      if ((code !== 'ENOENT' && code !== 'ENOTDIR') || path.dirname(level) === level) return `cannot create folder ${dir}: ${code} at ${level}`;
      level = path.dirname(level);
    }
  }
  if (level === dir) {
    if (!st.isDirectory()) return `${dir} exists and is not a folder`;
    return canWrite(dir) ? null : `folder ${dir} is not writable`;
  }
  if (!st.isDirectory()) return `cannot create folder ${dir}: ${level} is not a folder`;
  if (!canWrite(level)) return `cannot create folder ${dir}: ${level} is not writable`;
  try {
    fs.rmdirSync(fs.mkdtempSync(path.join(level, '.lamer-check-')));
  } catch (e) {
    return `cannot create folder ${dir}: ${errCode(e)} in ${level}`;
  }
  return null;
}

/** Whether this process may write to `p` (access W_OK; root passes almost everywhere). */
function canWrite(p: string): boolean {
  try {
    fs.accessSync(p, fs.constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * Check, before any work, that `file` can be written where a missing folder is created first
 * (ensureDirSync): in an existing folder, as checkOutPath checks it; otherwise that folder can be
 * made (folderProblem). Nothing is left behind.
 * @throws UsageError naming the option, the path and the problem.
 */
export function checkOutFile(name: string, file: string): void {
  const dir = path.dirname(path.resolve(file));
  // biome-ignore lint/correctness/noVoidTypeReturn: returns checkOutPath's void: an existing folder is its case
  if (fs.statSync(dir, { throwIfNoEntry: false })?.isDirectory()) return checkOutPath(name, file);
  const problem = folderProblem(dir);
  if (problem !== null) throw new UsageError(`--${name} ${file}: ${problem}`);
}

/**
 * Check, before any work, that `dir` is a folder that can be written in, or can be made one by
 * ensureDirSync (folderProblem). Nothing is left behind.
 * @throws UsageError naming the option, the path and the problem.
 */
export function checkOutFolder(name: string, dir: string): void {
  const problem = folderProblem(path.resolve(dir));
  if (problem !== null) throw new UsageError(`--${name} ${dir}: ${problem}`);
}
