/**
 * Schema validation with ajv: bodies are validated as sent (a string "1" is not an integer);
 * path and query strings are coerced to the schema's types (they are always strings on the wire).
 * No additional properties are removed (schemas refuse them), defaults are applied. Decorates
 * `app.bodyAjv`, the body validator, for routes that validate parts of a body themselves.
 */
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { Ajv } from 'ajv';

declare module 'fastify' {
  interface FastifyInstance {
    /** The ajv instance that validates bodies (no coercion, no removal, defaults applied). */
    bodyAjv: Ajv;
  }
}

export default fp(
  async function validation(app: FastifyInstance) {
    const ajvOptions = { removeAdditional: false, useDefaults: true, allErrors: false, strict: false } as const;
    const ajvBody = new Ajv({ ...ajvOptions, coerceTypes: false });
    const ajvCoerce = new Ajv({ ...ajvOptions, coerceTypes: 'array' });
    app.decorate('bodyAjv', ajvBody);
    app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === 'body' ? ajvBody : ajvCoerce).compile(schema as object));
  },
  { name: 'validation' },
);
