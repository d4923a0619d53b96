/**
 * Create a directory and its missing parents, one level at a time, and fail with a clear error
 * where `fs.mkdir(dir, { recursive: true })` can hang.
 *
 * Why not `recursive: true`: Node's recursive mkdir retries a level whose creation answers ENOENT
 * by creating its parent again, forever when the parent exists but the file system refuses the
 * child. procfs does exactly that for root (`mkdir /proc/x` is ENOENT although /proc exists), so
 * `mkdirSync('/proc/x', { recursive: true })` never returns and blocks the event loop (signals
 * included). Here the deepest existing ancestor is found with stat, the missing levels below it
 * are created with plain (non-recursive) mkdir, and any refusal is final.
 *
 * Errors: `DirectoryError` with `code` (the file system's code: ENOENT, ENOTDIR, EACCES, EROFS,
 * ...; EEXIST when `dir` itself is a file), `dir` (the absolute directory asked for) and `path`
 * (the level that failed), message `cannot create directory <dir>: <code>` (plus `at <level>` when
 * a parent failed).
 */
import fs from 'node:fs';
import path from 'node:path';

/** A directory could not be created (or a non-directory is in the way). */
export class DirectoryError extends Error {
  constructor(
    /** The absolute directory asked for. */
    readonly dir: string,
    /** The level that failed: `dir` or one of its parents. */
    readonly path: string,
    /** The file system's error code (EEXIST: `dir` is a file; ENOTDIR: a parent is a file). */
    readonly code: string,
    options?: { cause?: unknown },
  ) {
    super(`cannot create directory ${dir}: ${code}${path === dir ? '' : ` at ${path}`}`, options);
    this.name = 'DirectoryError';
  }
}

const codeOf = (err: unknown): string => (err as NodeJS.ErrnoException).code ?? 'EIO';

/**
 * What stat says about one level: 'dir', 'file' (exists, not a directory), 'missing' (ENOENT; or
 * ENOTDIR, a parent is a file, which the walk up then finds), or any other error.
 */
type Kind = 'dir' | 'file' | 'missing' | { err: unknown };
const kindOfStats = (st: fs.Stats): Kind => (st.isDirectory() ? 'dir' : 'file');
const kindOfError = (err: unknown): Kind => (codeOf(err) === 'ENOENT' || codeOf(err) === 'ENOTDIR' ? 'missing' : { err });

function statKindSync(level: string): Kind {
  try {
    return kindOfStats(fs.statSync(level));
  } catch (err) {
    return kindOfError(err);
  }
}

const statKind = (level: string): Promise<Kind> => fs.promises.stat(level).then(kindOfStats, kindOfError);

/**
 * One level of the walk up from `abs`: true when `level` is an existing directory (the walk
 * stops), false when it is missing (to be created). @throws DirectoryError otherwise.
 */
function existingDir(abs: string, level: string, kind: Kind): boolean {
  if (kind === 'dir') return true;
  if (kind === 'file') throw new DirectoryError(abs, level, level === abs ? 'EEXIST' : 'ENOTDIR');
  if (kind !== 'missing') throw new DirectoryError(abs, level, codeOf(kind.err), { cause: kind.err });
  if (path.dirname(level) === level) throw new DirectoryError(abs, level, 'ENOENT'); // no root: nothing to build on
  return false;
}

/** A plain mkdir's error: EEXIST is accepted (the level appeared meanwhile; the final check decides). */
function mkdirFailed(abs: string, level: string, err: unknown): void {
  if (codeOf(err) !== 'EEXIST') throw new DirectoryError(abs, level, codeOf(err), { cause: err });
}

/**
 * Make `dir` (relative to the working directory, or absolute) a directory: return at once when it
 * already is one; else create each missing level below its deepest existing ancestor with a plain
 * mkdir (a level that appears meanwhile is accepted), then check that `dir` is a directory.
 * @throws DirectoryError naming `dir` and the file system's code when a level cannot be created
 *   (ENOENT, EACCES, EROFS, ...), a file is in the way (EEXIST for `dir` itself, ENOTDIR for a
 *   parent), or a level cannot be inspected.
 */
export function ensureDirSync(dir: string): void {
  const abs = path.resolve(dir);
  const missing: string[] = [];
  for (let level = abs; !existingDir(abs, level, statKindSync(level)); level = path.dirname(level)) missing.push(level);
  if (missing.length === 0) return;
  for (const level of missing.reverse()) {
    try {
      fs.mkdirSync(level);
    } catch (err) {
      mkdirFailed(abs, level, err);
    }
  }
  if (!existingDir(abs, abs, statKindSync(abs))) throw new DirectoryError(abs, abs, 'ENOENT');
}

/**
 * `ensureDirSync` without blocking the event loop: the same steps with fs/promises.
 * @throws DirectoryError as ensureDirSync.
 */
export async function ensureDir(dir: string): Promise<void> {
  const abs = path.resolve(dir);
  const missing: string[] = [];
  for (let level = abs; !existingDir(abs, level, await statKind(level)); level = path.dirname(level)) missing.push(level);
  if (missing.length === 0) return;
  for (const level of missing.reverse()) {
    try {
      await fs.promises.mkdir(level);
    } catch (err) {
      mkdirFailed(abs, level, err);
    }
  }
  if (!existingDir(abs, abs, await statKind(abs))) throw new DirectoryError(abs, abs, 'ENOENT');
}
