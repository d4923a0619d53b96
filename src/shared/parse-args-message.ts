/**
 * The one-line message of an error thrown by node:util parseArgs, shared by every command line
 * (the lamer commands, model:init, model:sft-base, model:sft-chat, eval:base and the bench
 * scripts). It lives here, with no imports, so that scripts below src/cli (src/model/scripts) can
 * use it without importing against the layer order.
 */

/**
 * parseArgs reads `--workers -1` as `--workers` without its value ("Option '--workers' argument is
 * ambiguous" plus two lines of advice), which becomes "--workers needs a value (one that starts
 * with '-' must be written --workers=VALUE)". Any other error gives the first line of its message.
 */
export function parseArgsMessage(e: unknown): string {
  const msg = (e instanceof Error ? e.message : String(e)).split('\n')[0]!;
  const ambiguous = /^Option '(--[a-z0-9-]+)' argument is ambiguous/.exec(msg);
  return ambiguous ? `${ambiguous[1]} needs a value (one that starts with '-' must be written ${ambiguous[1]}=VALUE)` : msg;
}
