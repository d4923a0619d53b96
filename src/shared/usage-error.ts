/**
 * The error of a bad command line and the integer check that the command lines share (the lamer
 * commands through src/cli/args.ts, the trainers' option tables in src/recipes/options.ts). It lives
 * here, with no imports, so that both can use it without importing against the layer order.
 */

/** A bad command line: printed as one line, exit code 2. */
export class UsageError extends Error {}

/**
 * An integer option written as digits (optional leading '-'): `def` when absent (required when
 * `def` is undefined). @throws UsageError outside [min, max] or when not written in digits ('1e2',
 * '2.5'); the message says both, since '1e12' is an integer to the reader.
 */
export function intOpt(name: string, v: string | undefined, def: number | undefined, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  if (v === undefined) {
    if (def === undefined) throw new UsageError(`--${name} is required`);
    return def;
  }
  const n = Number(v);
  if (!/^-?\d+$/.test(v.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `in [${min}, ${max}]`;
    throw new UsageError(`--${name} must be an integer ${range} written in digits, got '${v}'`);
  }
  return n;
}
