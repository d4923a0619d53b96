/**
 * Identities of sessions and steps: time-ordered session ids, and the hash of a step body that
 * tells an identical retry (answered from the stored answer) from a conflicting one.
 */
import crypto, { randomFillSync } from 'node:crypto';
import type { StepInput } from './session-types.js';

/** JSON with object keys sorted, so equal values give equal text. */
export function canonicalJson(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v) ?? 'null';
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o)
    .filter((k) => o[k] !== undefined)
    .sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`).join(',')}}`;
}

/**
 * sha256 as lowercase hex of a string's UTF-8 bytes: `crypto.hash` (one call, no Hash object) where
 * the runtime has it (Node >= 20.12), else `createHash`. Same digest either way.
 */
const sha256Hex: (text: string) => string =
  typeof (crypto as { hash?: unknown }).hash === 'function'
    ? (text) => (crypto as unknown as { hash(alg: string, data: string): string }).hash('sha256', text)
    : (text) => crypto.createHash('sha256').update(text).digest('hex');

/** sha256 (hex) of `canonicalJson` of the step body with defaults filled in: equal retries hash equal. */
export function stepHash(b: StepInput): string {
  const norm = {
    attempt: b.attempt,
    step: b.step,
    observation: b.observation,
    reward: b.reward ?? 0,
    done: b.done ?? false,
    success: b.success ?? false,
    availableActions: b.availableActions ?? null,
    invalidAction: b.invalidAction ?? false,
    info: b.info ?? null,
  };
  return sha256Hex(canonicalJson(norm));
}

/** Shape of a session id (see newSessionId). */
export const SESSION_ID = /^ses_[0-9a-z]{9}[0-9a-f]{12}$/;

/** Random bytes drawn 4 KiB at a time (one call into the CSPRNG per 682 ids, not one per id). */
const pool = Buffer.alloc(4096);
let poolAt = pool.length;

/** The next `n` (<= 4096) bytes of the pool, refilled from the CSPRNG when it runs out. */
function randomHex(n: number): string {
  if (poolAt + n > pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  const hex = pool.toString('hex', poolAt, poolAt + n);
  poolAt += n;
  return hex;
}

/** Time-ordered session id: `ses_` + 9 base-36 digits of ms + 12 hex random. */
export function newSessionId(now = Date.now()): string {
  return `ses_${now.toString(36).padStart(9, '0')}${randomHex(6)}`;
}

/** Shape of a replay report id (see newReplayId). */
export const REPLAY_ID = /^rpl_[0-9a-z]{9}[0-9a-f]{12}$/;

/** Time-ordered replay report id: `rpl_` + 9 base-36 digits of ms + 12 hex random. */
export function newReplayId(now = Date.now()): string {
  return `rpl_${now.toString(36).padStart(9, '0')}${randomHex(6)}`;
}
