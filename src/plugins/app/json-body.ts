/**
 * JSON request bodies, hardened. The bytes must be UTF-8 (RFC 8259 §8.1): a `charset` parameter
 * other than utf-8 is 415 (the body is not decoded as anything else), and bytes that are not valid
 * UTF-8 are a 400 naming the offset of the first bad byte (decoding them leniently would store
 * U+FFFD in place of what the client sent). Then Fastify's parser (it refuses
 * `__proto__`/`constructor` prototype poisoning), then one iterative walk of the parsed value that
 * refuses, anywhere (also inside the free-form `info`/`metadata` and batch items), with a 400
 * naming the path (`body/info/x`):
 * - nesting deeper than `maxDepth` levels (LAMER_MAX_JSON_DEPTH; the body itself is level 1);
 * - numbers that are not finite after parsing (`1e400`, a 400-digit integer: JSON.parse gives
 *   Infinity, which would be stored as null);
 * - integer literals beyond +-(2^53 - 1) (`1152921504606846977`): JSON.parse rounds them to
 *   another integer, a value silently changed (a float such as `1.5e300` is kept as written). In
 *   free-form JSON the answer says to send such a number as a string; in a number field whose
 *   schema bounds it (`maxAttempts`) the schema's check answers with the field's range instead;
 *   in another number field it says the field takes a number within +-(2^53 - 1);
 * - strings and keys that are not well-formed UTF-16 (a lone surrogate, `"\ud800"`).
 * An empty body with a JSON content type is no body on a DELETE/OPTIONS or a route that takes
 * none (clients often send the header on every request); elsewhere it is a 400.
 * Content-encoded bodies (gzip, br, ...) are not decoded: 415 instead of parsing bytes. text/plain
 * is not JSON: 415 like any other non-JSON type (Fastify parses it as a string by default).
 */
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { DomainError, invalid } from '../../agent/errors.js';

/** Decodes a body, throwing on any byte sequence that is not well-formed UTF-8 (a leading BOM is dropped). */
const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** Charset labels that name UTF-8 (compared lower-cased). */
const UTF8_LABELS = new Set(['utf-8', 'utf8']);

/** The `charset` parameters of a content-type header, lower-cased and unquoted, in order. */
function charsetsOf(contentType: string | undefined): string[] {
  // no parameters (plain `application/json`, what most requests send): nothing to match
  if (contentType === undefined || !contentType.includes(';')) return [];
  return [...contentType.matchAll(/;\s*charset\s*=\s*(?:"([^"]*)"|([^;\s]*))/gi)].map((m) => (m[1] ?? m[2] ?? '').toLowerCase());
}

/**
 * The offset of the first byte of `b` that does not start (or continue) a well-formed UTF-8
 * sequence (Unicode Table 3-7: no overlong forms, no surrogates, nothing above U+10FFFF, no
 * truncated sequence), or -1 when `b` is all UTF-8. Only run once decoding failed, to name where.
 */
export function firstInvalidUtf8(b: Uint8Array): number {
  let i = 0;
  while (i < b.length) {
    const c = b[i]!;
    if (c < 0x80) {
      i++;
      continue;
    }
    let more: number;
    let lo = 0x80;
    let hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) more = 1;
    else if (c >= 0xe0 && c <= 0xef) {
      more = 2;
      if (c === 0xe0) lo = 0xa0;
      else if (c === 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      more = 3;
      if (c === 0xf0) lo = 0x90;
      else if (c === 0xf4) hi = 0x8f;
    } else return i;
    if (i + more >= b.length) return i;
    if (b[i + 1]! < lo || b[i + 1]! > hi) return i;
    for (let k = 2; k <= more; k++) if ((b[i + k]! & 0xc0) !== 0x80) return i;
    i += more + 1;
  }
  return -1;
}

/** A `\uD800`-`\uDFFF` escape: the only way JSON.parse yields a lone UTF-16 surrogate. */
const SURROGATE_CANDIDATE = /\\u[dD][89a-fA-F]/;

/**
 * An integer literal of 16 or more digits (no fraction, no exponent): the only spelling whose value
 * JSON.parse can silently change into another integer (2^53 + 1 becomes 2^53).
 */
const LONG_INTEGER = /(?<![\d.])-?\d{16,}(?![\d.eE])/g;
const JSON_STRING = /"(?:[^"\\]|\\.)*"/g;

/**
 * The parsed values of the integer literals in a JSON text that a double cannot hold exactly
 * (beyond +-(2^53 - 1)), or null when there are none. Strings are blanked first, so digits inside
 * a string are not numbers.
 */
function unsafeIntegerValues(body: string): Set<number> | null {
  if (!/\d{16}/.test(body)) return null;
  let found: Set<number> | null = null;
  for (const m of body.replace(JSON_STRING, '""').matchAll(LONG_INTEGER)) {
    const v = Number(m[0]);
    if (!Number.isSafeInteger(v) && Number.isFinite(v)) (found ??= new Set()).add(v);
  }
  return found;
}

/** What {@link bodyProblem} checks besides depth. */
interface BodyChecks {
  /** Most nesting levels of objects/arrays; the body itself is level 1. */
  maxDepth: number;
  /** Look for numbers that overflowed to +-Infinity (`1e400`, or an integer literal of 309+ digits). */
  numbers: boolean;
  /** Values that were written as integer literals beyond +-(2^53 - 1) (see {@link unsafeIntegerValues}), or null. */
  unsafeIntegers: Set<number> | null;
  /** The route's body schema (JSON Schema), to tell a typed number field from free-form JSON; undefined when none. */
  schema?: unknown;
  /** Look for strings (values and keys) that are not well-formed UTF-16 (a lone surrogate). */
  strings: boolean;
  /** Look for `__proto__` keys and `constructor` objects with a `prototype` key. */
  forbiddenKeys: boolean;
}

const isWellFormed = (s: string): boolean => (s as unknown as { isWellFormed(): boolean }).isWellFormed();

/** Whether {@link bodyProblem} finds a problem in `root` (the same checks, no paths built). */
function hasProblem(root: unknown, checks: BodyChecks): boolean {
  const values: unknown[] = [root];
  const depths: number[] = [1];
  while (values.length > 0) {
    const v = values.pop();
    const depth = depths.pop()!;
    if (typeof v === 'number') {
      if ((checks.numbers && !Number.isFinite(v)) || checks.unsafeIntegers?.has(v)) return true;
      continue;
    }
    if (typeof v === 'string') {
      if (checks.strings && !isWellFormed(v)) return true;
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (depth > checks.maxDepth) return true;
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        values.push(v[i]);
        depths.push(depth + 1);
      }
      continue;
    }
    const o = v as Record<string, unknown>;
    for (const k of Object.keys(o)) {
      const x = o[k];
      if (checks.strings && !isWellFormed(k)) return true;
      if (checks.forbiddenKeys && (k === '__proto__' || (k === 'constructor' && x !== null && typeof x === 'object' && 'prototype' in x))) return true;
      values.push(x);
      depths.push(depth + 1);
    }
  }
  return false;
}

/**
 * The first problem of a parsed JSON body, as a `validation` (or, for a forbidden key,
 * `bad-request`) error naming its path ('body/info/x'), or null. Walks iteratively (an explicit
 * stack), so a body nested deeper than the call stack allows is reported, not a RangeError:
 * nesting beyond `maxDepth` levels, a non-finite number, a lone surrogate, a forbidden prototype key.
 */
function bodyProblem(root: unknown, checks: BodyChecks): DomainError | null {
  // Most bodies have no problem: a walk that builds no paths says so; only a body with a problem
  // is walked again to name where.
  if (!hasProblem(root, checks)) return null;
  const stack: Array<[value: unknown, path: string, depth: number]> = [[root, 'body', 1]];
  while (stack.length > 0) {
    const [v, path, depth] = stack.pop()!;
    if (typeof v === 'number') {
      if (checks.numbers && !Number.isFinite(v)) return invalid(path, 'must be a finite number');
      if (checks.unsafeIntegers?.has(v)) {
        const p = unsafeIntegerProblem(path, v, schemaAt(checks.schema, path.split('/').slice(1)));
        if (p) return p;
      }
      continue;
    }
    if (typeof v === 'string') {
      if (checks.strings && !isWellFormed(v)) return invalid(path, 'contains a lone UTF-16 surrogate (not valid Unicode text)');
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (depth > checks.maxDepth) return invalid(path, `is nested deeper than ${checks.maxDepth} levels (LAMER_MAX_JSON_DEPTH)`);
    const entries = Array.isArray(v) ? v.map((x, i) => [String(i), x] as const) : Object.entries(v as Record<string, unknown>);
    for (let i = entries.length - 1; i >= 0; i--) {
      const [k, x] = entries[i]!;
      const p = `${path}/${k}`;
      if (checks.strings && !isWellFormed(k)) return invalid(p, 'key contains a lone UTF-16 surrogate (not valid Unicode text)');
      if (checks.forbiddenKeys && (k === '__proto__' || (k === 'constructor' && x !== null && typeof x === 'object' && 'prototype' in x))) {
        return new DomainError('bad-request', `${p} is a forbidden key (prototype poisoning)`, {
          errors: [{ field: p, message: 'is a forbidden key' }],
        });
      }
      stack.push([x, p, depth + 1]);
    }
  }
  return null;
}

/** The JSON Schema subset this module reads: types, bounds, object properties, array items. */
interface SchemaNode {
  type?: unknown;
  properties?: Record<string, SchemaNode>;
  additionalProperties?: unknown;
  items?: SchemaNode;
  minimum?: unknown;
  maximum?: unknown;
  exclusiveMinimum?: unknown;
  exclusiveMaximum?: unknown;
}

/**
 * The sub-schema of `schema` at the path `keys` (object keys and array indices), or undefined
 * where the schema says nothing (no schema, free-form JSON such as `info` and `metadata`).
 */
function schemaAt(schema: unknown, keys: readonly string[]): SchemaNode | undefined {
  let node = schema as SchemaNode | undefined;
  for (const k of keys) {
    if (!node || typeof node !== 'object') return undefined;
    if (node.properties && Object.hasOwn(node.properties, k)) node = node.properties[k];
    else if (node.items && typeof node.items === 'object') node = node.items;
    else return undefined;
  }
  return node;
}

/**
 * The problem of an integer literal `v` beyond +-(2^53 - 1) at `path`, told as is true of the field:
 * - a number field whose schema bounds keep it within +-(2^53 - 1) on that side: null, so that the
 *   schema's own check answers with the field's range (`must be <= 10`);
 * - another number field: it cannot be stored exactly (a string would be refused too);
 * - free-form JSON (`info`, `metadata`): send it as a string, which such a field keeps exactly.
 */
function unsafeIntegerProblem(path: string, v: number, node: SchemaNode | undefined): DomainError | null {
  const beyond = 'is an integer beyond +-(2^53 - 1), which cannot be stored exactly';
  if (node && (node.type === 'integer' || node.type === 'number')) {
    const bounds = v > 0 ? [node.maximum, node.exclusiveMaximum] : [node.minimum, node.exclusiveMinimum];
    if (bounds.some((b) => typeof b === 'number' && Number.isSafeInteger(Math.trunc(b)))) return null;
    return invalid(path, `${beyond}; this field takes a number within +-(2^53 - 1)`);
  }
  return invalid(path, `${beyond}; send it as a string`);
}

export default fp(
  async function jsonBody(app: FastifyInstance, opts: { maxDepth: number }) {
    const jsonParser = app.getDefaultJsonParser('error', 'error');
    // Read as bytes (under the same body limits) so that the decoding is ours: strict UTF-8.
    app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, raw, done) => {
      // parseAs 'buffer' hands over a Buffer; Fastify's parser type also admits a string
      const bytes = typeof raw === 'string' ? Buffer.from(raw, 'utf8') : raw;
      if (bytes.length === 0 && (req.method === 'DELETE' || req.method === 'OPTIONS' || req.routeOptions.schema?.body === undefined)) {
        return done(null, undefined);
      }
      const other = charsetsOf(req.headers['content-type']).find((c) => !UTF8_LABELS.has(c));
      if (other !== undefined) {
        return done(
          new DomainError('unsupported-media-type', `charset=${other} is not supported; send JSON as UTF-8 (content-type: application/json, or application/json; charset=utf-8)`),
          undefined,
        );
      }
      let body: string;
      try {
        body = UTF8.decode(bytes);
      } catch {
        const at = firstInvalidUtf8(bytes);
        const where = at >= 0 ? ` (the byte at offset ${at}, 0x${bytes[at]!.toString(16).padStart(2, '0')})` : '';
        return done(new DomainError('bad-request', `body is not valid UTF-8${where}; JSON must be sent as UTF-8`), undefined);
      }
      jsonParser(req, body, (err: Error | null, value?: unknown) => {
        if (err) {
          // Valid JSON refused by the parser: a forbidden key; say which.
          if ((err as { code?: string }).code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
            let plain: unknown;
            try {
              plain = JSON.parse(body);
            } catch {
              return done(err, undefined);
            }
            const p = bodyProblem(plain, { maxDepth: Infinity, numbers: false, unsafeIntegers: null, strings: false, forbiddenKeys: true });
            if (p) return done(p, undefined);
          }
          return done(err, undefined);
        }
        const p = bodyProblem(value, {
          maxDepth: opts.maxDepth,
          numbers: true,
          unsafeIntegers: unsafeIntegerValues(body),
          schema: req.routeOptions.schema?.body,
          strings: SURROGATE_CANDIDATE.test(body),
          forbiddenKeys: false,
        });
        if (p) return done(p, undefined);
        done(null, value);
      });
    });
    app.addHook('preParsing', (req, _reply, payload, done) => {
      const enc = req.headers['content-encoding'];
      if (enc !== undefined && enc.trim().toLowerCase() !== 'identity') {
        return done(new DomainError('unsupported-media-type', `content-encoding ${enc} is not supported; send the body uncompressed`));
      }
      done(null, payload);
    });
    app.removeContentTypeParser('text/plain');
  },
  { name: 'json-body' },
);
