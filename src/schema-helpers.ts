/**
 * TypeBox building blocks shared by the domain schemas (src/agent/schemas.ts,
 * src/training/schemas.ts) and the route schemas: nullable types, string enums, free JSON objects,
 * and a step position. Plain JSON Schema (OpenAPI 3.1 dialect). A bottom-layer module: it imports
 * nothing of this project.
 */
import { Type, type TSchema, type Static } from 'typebox';

/** `T | null` as `{type: [T, 'null']}` (fast to serialise; valid OpenAPI 3.1). */
export function Nullable<T extends TSchema>(schema: T, opts: Record<string, unknown> = {}) {
  const s = schema as unknown as { type?: string | string[] };
  if (typeof s.type === 'string') {
    return Type.Unsafe<Static<T> | null>({ ...(schema as object), ...opts, type: [s.type, 'null'] });
  }
  return Type.Unsafe<Static<T> | null>({ ...opts, anyOf: [schema, { type: 'null' }] });
}

/** A string restricted to `values`, as `{type: 'string', enum}`. */
export function StringEnum<const T extends readonly string[]>(values: T, opts: Record<string, unknown> = {}) {
  return Type.Unsafe<T[number]>({ ...opts, type: 'string', enum: [...values] });
}

/** Any JSON object. */
export function FreeObject(opts: Record<string, unknown> = {}) {
  return Type.Unsafe<Record<string, unknown>>({ ...opts, type: 'object', additionalProperties: true });
}

/** A step's position in a session: attempt and step, both from 0. */
export const Position = Type.Object(
  { attempt: Type.Integer({ minimum: 0 }), step: Type.Integer({ minimum: 0 }) },
  { additionalProperties: false },
);
