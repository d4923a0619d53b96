/**
 * What the route folders share: the RFC 9457 problem document and the error responses every route
 * declares, the bearer security requirement and the JSON size check. The TypeBox building blocks
 * (nullable types, string enums, free JSON objects, positions) live in src/schema-helpers.ts, below
 * the domain, and are re-exported here for the route schemas.
 */
import { Type } from 'typebox';
import { invalid } from '../../agent/errors.js';
import { Nullable, Position } from '../../schema-helpers.js';

export { FreeObject, Nullable, Position, StringEnum } from '../../schema-helpers.js';

/**
 * Refuse a free-form JSON value (`info`, `metadata`) whose JSON text is longer than `maxBytes`
 * (UTF-8 bytes of `JSON.stringify(value)`); `undefined` (absent) passes.
 * @throws DomainError `validation` naming `field` (e.g. `body/items/3/info`) and `variable`, the
 * setting that holds the limit.
 */
export function checkJsonBytes(value: unknown, maxBytes: number, field: string, variable: string): void {
  if (value === undefined) return;
  const n = Buffer.byteLength(JSON.stringify(value), 'utf8');
  if (n > maxBytes) throw invalid(field, `is ${n} bytes of JSON; at most ${maxBytes} are allowed (${variable})`);
}

export const Problem = Type.Object(
  {
    type: Type.String({ description: 'stable URI of the problem kind, e.g. https://lamer-server.dev/problems/validation' }),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    instance: Type.String({ description: 'the request path' }),
    requestId: Type.Optional(Type.String()),
    errors: Type.Optional(
      Type.Array(Type.Object({ field: Type.String({ description: 'e.g. body/observation' }), message: Type.String() })),
    ),
    expected: Type.Optional(Nullable(Position)),
  },
  { description: 'RFC 9457 problem details' },
);

const problemContent = { 'application/problem+json': { schema: Problem } };

/** Error responses every route declares (all `/v1` routes are under the rate limit when one is set). */
export const errorResponses = {
  '429': {
    description: 'rate limit of the API key exceeded (problem rate-limited); the Retry-After header gives the seconds to wait',
    content: problemContent,
  },
  '4xx': { description: 'client error (problem details)', content: problemContent },
  '5xx': { description: 'server error (problem details)', content: problemContent },
};

/**
 * Error responses of the routes that post steps: 503 overloaded, engine-unavailable, database-busy,
 * storage-full or storage-unavailable (overloaded and the database problems with Retry-After).
 */
export const stepErrorResponses = {
  ...errorResponses,
  '503': {
    description:
      'overloaded (too many queued model calls), engine-unavailable, database-busy (another connection holds the database lock), ' +
      'storage-full or storage-unavailable (the database cannot be written); overloaded and the database problems carry a Retry-After header; ' +
      'nothing was recorded, retry the same step',
    content: problemContent,
  },
};

export const bearer = [{ bearerAuth: [] as string[] }];

export const ErrorOnly = Type.Object({ error: Problem });
