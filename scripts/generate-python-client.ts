/**
 * Python client generator: turns the OpenAPI 3.1 document (`openapi/openapi.json`) into one
 * standard-library-only module, `clients/python/lamer_client/client.py`, with
 *  - a `TypedDict` per object schema (component schemas by name; inline objects named after the
 *    operation and property that hold them, identical shapes shared),
 *  - `LamerProblem`, the exception raised for every `application/problem+json` (RFC 9457) answer,
 *  - `LamerClient`, one method per operation (snake_case of its `operationId`): path parameters
 *    positional, the JSON request body as `body`, query parameters keyword-only; it returns the
 *    decoded JSON of the 2xx answer.
 *
 * Pure: `generatePythonClient(doc)` returns the file contents; equal documents give byte-equal
 * output (the generator sorts nothing the document orders, and uses no clock or randomness).
 * Throws `Error` for a document it cannot express (a `$ref` outside `#/components/schemas/`).
 */
import { createHash } from 'node:crypto';

/** The parts of an OpenAPI 3.1 document this generator reads. */
export interface OpenApiDoc {
  openapi: string;
  info: { title: string; version: string };
  paths: Record<string, Record<string, unknown>>;
  components?: { schemas?: Record<string, Schema>; securitySchemes?: Record<string, SecurityScheme> };
  security?: Array<Record<string, string[]>>;
}
type Schema = Record<string, any>;
interface SecurityScheme {
  type: string;
  scheme?: string;
  in?: string;
  name?: string;
}
interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  schema?: Schema;
  description?: string;
}
interface Operation {
  operationId?: string;
  summary?: string;
  description?: string;
  parameters?: Parameter[];
  requestBody?: { required?: boolean; content?: Record<string, { schema?: Schema }>; $ref?: string };
  responses?: Record<string, { description?: string; content?: Record<string, { schema?: Schema }> }>;
  security?: Array<Record<string, string[]>>;
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'] as const;

/**
 * Method names for operations that have no `operationId` in the document (the server's route
 * schemas do not set them): 'METHOD path' -> Python method name. An `operationId`, when present,
 * wins; an operation in neither gets `<method>_<path words>`.
 */
export const OPERATION_NAMES: Record<string, string> = {
  'GET /healthz': 'get_healthz',
  'GET /readyz': 'get_readyz',
  'GET /metrics': 'get_metrics',
  'POST /v1/sessions': 'create_session',
  'GET /v1/sessions': 'list_sessions',
  'GET /v1/sessions/{id}': 'get_session',
  'DELETE /v1/sessions/{id}': 'close_session',
  'POST /v1/sessions/{id}/steps': 'post_step',
  'GET /v1/sessions/{id}/trajectory': 'get_trajectory',
  'GET /v1/sessions/{id}/memory': 'get_memory',
  'PUT /v1/sessions/{id}/memory/{attempt}': 'put_reflection',
  'POST /v1/steps:batch': 'post_steps_batch',
  'GET /v1/models': 'list_models',
  'POST /v1/models': 'register_model',
  'GET /v1/models/{version}': 'get_model',
  'POST /v1/models/{version}/activate': 'activate_model',
  'GET /v1/stats': 'get_stats',
  'GET /v1/stats/diversity': 'get_diversity',
  'GET /v1/whoami': 'whoami',
  'POST /v1/training/jobs': 'create_training_job',
  'GET /v1/training/jobs': 'list_training_jobs',
  'GET /v1/training/jobs/{id}': 'get_training_job',
  'POST /v1/training/jobs/{id}/cancel': 'cancel_training_job',
  'DELETE /v1/training/jobs/{id}': 'cancel_training_job',
  'GET /openai/v1/models': 'openai_list_models',
  'GET /openai/v1/models/{model}': 'openai_get_model',
  'POST /openai/v1/chat/completions': 'openai_chat_completion',
  'POST /openai/v1/completions': 'openai_completion',
  'POST /v1/sessions/{id}/openai/v1/chat/completions': 'session_chat_completion',
  'POST /v1/sessions/{id}/openai/v1/completions': 'session_completion',
  'GET /v1/sessions/{id}/openai/v1/models': 'session_list_models',
  'POST /v1/sessions/{id}/attempts/{attempt}/end': 'end_attempt',
  'POST /v1/sessions/{id}/replay': 'replay_session',
  'POST /v1/replays': 'replay_sessions',
  'GET /v1/replays': 'list_replays',
  'GET /v1/replays/{id}': 'get_replay',
};

/**
 * Names of inline (unnamed) request and response schemas: 'METHOD path body|response' -> name.
 * They are registered first, in this order, so a shape used by several operations (a Session is
 * the answer of create, get, close and the items of list) is named after the resource.
 */
export const TYPE_NAMES: Array<[string, string]> = [
  ['PUT /v1/sessions/{id}/memory/{attempt} response', 'Reflection'],
  ['GET /v1/sessions/{id} response', 'Session'],
  ['POST /v1/sessions body', 'CreateSessionRequest'],
  ['GET /v1/sessions response', 'SessionList'],
  ['POST /v1/sessions/{id}/steps body', 'StepRequest'],
  ['POST /v1/sessions/{id}/steps response', 'StepResponse'],
  ['POST /v1/steps:batch body', 'BatchStepRequest'],
  ['POST /v1/steps:batch response', 'BatchStepResponse'],
  ['GET /v1/sessions/{id}/trajectory response', 'Trajectory'],
  ['GET /v1/sessions/{id}/memory response', 'SessionMemory'],
  ['PUT /v1/sessions/{id}/memory/{attempt} body', 'ReflectionEdit'],
  ['GET /v1/models/{version} response', 'ModelVersion'],
  ['GET /v1/models response', 'ModelList'],
  ['POST /v1/models body', 'RegisterModelRequest'],
  ['POST /openai/v1/chat/completions body', 'ChatCompletionRequest'],
  ['POST /openai/v1/chat/completions response', 'ChatCompletion'],
  ['POST /openai/v1/completions body', 'CompletionRequest'],
  ['POST /openai/v1/completions response', 'Completion'],
  ['GET /openai/v1/models response', 'OpenAiModelList'],
  ['POST /v1/sessions/{id}/openai/v1/chat/completions body', 'SessionChatCompletionRequest'],
  ['POST /v1/sessions/{id}/openai/v1/chat/completions response', 'SessionChatCompletion'],
  ['POST /v1/sessions/{id}/openai/v1/completions body', 'SessionCompletionRequest'],
  ['POST /v1/sessions/{id}/openai/v1/completions response', 'SessionCompletion'],
  ['POST /v1/sessions/{id}/attempts/{attempt}/end body', 'EndAttemptRequest'],
  ['GET /v1/stats response', 'Stats'],
  ['GET /v1/stats/diversity response', 'Diversity'],
  ['GET /v1/whoami response', 'WhoAmI'],
  ['GET /healthz response', 'Health'],
  ['GET /readyz response', 'Readiness'],
  ['POST /v1/training/jobs body', 'CreateTrainingJobRequest'],
  ['GET /v1/training/jobs/{id} response', 'TrainingJob'],
  ['GET /v1/training/jobs response', 'TrainingJobList'],
  ['GET /v1/replays/{id} response', 'Replay'],
  ['POST /v1/sessions/{id}/replay body', 'ReplaySessionRequest'],
  ['POST /v1/replays body', 'ReplaySessionsRequest'],
  ['GET /v1/replays response', 'ReplayList'],
];
const PY_KEYWORDS = new Set(
  ('False None True and as assert async await break class continue def del elif else except finally for ' +
    'from global if import in is lambda nonlocal not or pass raise return try while with yield').split(' '),
);

/** `createSession` / `create-session` / `get /v1/steps:batch` -> `create_session` etc. */
export function snakeCase(s: string): string {
  const out = s
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1_$2')
    .replace(/[^A-Za-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .toLowerCase();
  const safe = /^[0-9]/.test(out) ? `_${out}` : out || '_';
  return PY_KEYWORDS.has(safe) ? `${safe}_` : safe;
}

/** `session-list` / `def-0` / `create_session` -> `SessionList`, `Def0`, `CreateSession`. */
export function pascalCase(s: string): string {
  const out = s
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join('');
  return /^[0-9]/.test(out) ? `T${out}` : out || 'Anon';
}

function pyLiteral(v: unknown): string {
  if (v === null) return 'None';
  if (v === true) return 'True';
  if (v === false) return 'False';
  if (typeof v === 'number') return String(v);
  return pyString(String(v));
}

function pyString(s: string): string {
  return `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'").replace(/\n/g, '\\n')}'`;
}

/** Canonical JSON (sorted keys, annotations dropped) used to share identical inline shapes. */
function shapeKey(s: unknown): string {
  const skip = new Set(['description', 'title', 'examples', 'example', 'default', '$id']);
  const canon = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(canon);
    if (v && typeof v === 'object') {
      const o: Record<string, unknown> = {};
      for (const k of Object.keys(v).sort()) if (!skip.has(k)) o[k] = canon((v as Record<string, unknown>)[k]);
      return o;
    }
    return v;
  };
  return JSON.stringify(canon(s));
}

class PyTypes {
  /** emitted TypedDict definitions and aliases, in definition order */
  readonly defs: string[] = [];
  private readonly byShape = new Map<string, string>();
  private readonly used = new Set<string>();
  private readonly componentNames = new Map<string, string>();

  constructor(private readonly doc: OpenApiDoc) {
    for (const name of Object.keys(doc.components?.schemas ?? {})) {
      this.componentNames.set(name, this.reserve(pascalCase(name)));
    }
  }

  private reserve(name: string): string {
    let n = name;
    for (let i = 2; this.used.has(n); i++) n = `${name}${i}`;
    this.used.add(n);
    return n;
  }

  /** Emits every component schema under its own name (aliases for non-objects). */
  emitComponents(): void {
    for (const [raw, schema] of Object.entries(this.doc.components?.schemas ?? {})) {
      const name = this.componentNames.get(raw)!;
      if (this.isObject(schema)) this.emitTypedDict(name, schema);
      else this.defs.push(`${comment(schema)}${name} = ${this.typeOf(schema, name, false)}\n`);
    }
  }

  private refName(ref: string): string {
    const m = /^#\/components\/schemas\/(.+)$/.exec(ref);
    if (!m) throw new Error(`unsupported $ref ${ref} (only #/components/schemas/...)`);
    const name = this.componentNames.get(decodeURIComponent(m[1]!.replace(/~1/g, '/').replace(/~0/g, '~')));
    if (!name) throw new Error(`$ref to a missing schema: ${ref}`);
    return name;
  }

  private resolve(s: Schema): Schema {
    let cur = s;
    for (let i = 0; cur && typeof cur.$ref === 'string' && i < 32; i++) {
      const m = /^#\/components\/schemas\/(.+)$/.exec(cur.$ref);
      cur = (m && this.doc.components?.schemas?.[m[1]!]) || {};
    }
    return cur;
  }

  private isObject(s: Schema): boolean {
    if (s.properties) return true;
    if (Array.isArray(s.allOf)) return s.allOf.every((p: Schema) => this.isObject(this.resolve(p)));
    return false;
  }

  /** allOf of objects -> one object: union of properties and of required names. */
  private flatten(s: Schema): { properties: Record<string, Schema>; required: Set<string> } {
    const properties: Record<string, Schema> = {};
    const required = new Set<string>();
    const parts: Schema[] = Array.isArray(s.allOf) ? s.allOf.map((p: Schema) => this.resolve(p)) : [s];
    for (const p of parts) {
      const sub = Array.isArray(p.allOf) ? this.flatten(p) : { properties: p.properties ?? {}, required: new Set<string>(p.required ?? []) };
      Object.assign(properties, sub.properties);
      for (const r of sub.required) required.add(r);
    }
    if (Array.isArray(s.allOf) && s.properties) Object.assign(properties, s.properties);
    for (const r of s.required ?? []) required.add(r);
    return { properties, required };
  }

  private emitTypedDict(name: string, s: Schema): void {
    const { properties, required } = this.flatten(s);
    const fields = Object.entries(properties).map(([key, ps]) => {
      const t = this.typeOf(ps, name + pascalCase(key), true);
      return `    ${pyString(key)}: ${required.has(key) ? t : `NotRequired[${t}]`},${inlineComment(ps)}`;
    });
    this.defs.push(`${comment(s)}${name} = TypedDict(${pyString(name)}, {\n${fields.join('\n')}${fields.length ? '\n' : ''}})\n`);
  }

  /**
   * The Python annotation for a schema. `quote` wraps generated names in quotes (forward
   * references inside TypedDict fields); `hint` names an inline object schema.
   */
  typeOf(s: Schema | undefined, hint: string, quote: boolean): string {
    const q = (n: string) => (quote ? pyString(n) : n);
    if (!s || typeof s !== 'object' || Object.keys(s).length === 0) return 'Any';
    if (typeof s.$ref === 'string') return q(this.refName(s.$ref));
    const union = (s.anyOf ?? s.oneOf) as Schema[] | undefined;
    if (Array.isArray(union)) {
      const nonNull = union.filter((m) => !(m.type === 'null' || (m.const === null)));
      const members = uniq(nonNull.map((m, i) => this.typeOf(m, nonNull.length > 1 ? `${hint}${i}` : hint, quote)));
      const inner = members.length === 0 ? 'None' : members.length === 1 ? members[0]! : `Union[${members.join(', ')}]`;
      return nonNull.length < union.length ? `Optional[${inner}]` : inner;
    }
    if (Array.isArray(s.allOf)) {
      if (this.isObject(s)) return q(this.named(s, hint));
      return s.allOf.length === 1 ? this.typeOf(s.allOf[0], hint, quote) : 'Any';
    }
    if ('const' in s) return `Literal[${pyLiteral(s.const)}]`;
    if (Array.isArray(s.enum)) return `Literal[${s.enum.map(pyLiteral).join(', ')}]`;
    if (Array.isArray(s.type)) {
      const types = s.type as string[];
      const nonNull = types.filter((t) => t !== 'null');
      const members = uniq(nonNull.map((t) => this.typeOf({ ...s, type: t }, hint, quote)));
      const inner = members.length === 1 ? members[0]! : members.length === 0 ? 'None' : `Union[${members.join(', ')}]`;
      return nonNull.length < types.length ? `Optional[${inner}]` : inner;
    }
    switch (s.type) {
      case 'string':
        return 'str';
      case 'integer':
        return 'int';
      case 'number':
        return 'float';
      case 'boolean':
        return 'bool';
      case 'null':
        return 'None';
      case 'array':
        return `List[${this.typeOf(s.items, `${hint}Item`, quote)}]`;
      default:
        break;
    }
    if (s.properties) return q(this.named(s, hint));
    if (s.type === 'object' || s.additionalProperties !== undefined) {
      const ap = s.additionalProperties;
      return ap && typeof ap === 'object' && Object.keys(ap).length > 0
        ? `Dict[str, ${this.typeOf(ap, `${hint}Value`, quote)}]`
        : 'Dict[str, Any]';
    }
    return 'Any';
  }

  /** Names an inline object schema (its title, else the hint); identical shapes share one name. */
  private named(s: Schema, hint: string): string {
    const key = shapeKey(s);
    const known = this.byShape.get(key);
    if (known) return known;
    const name = this.reserve(pascalCase(typeof s.title === 'string' ? s.title : hint));
    this.byShape.set(key, name);
    this.emitTypedDict(name, s);
    return name;
  }
}

function uniq<T>(xs: T[]): T[] {
  return [...new Set(xs)];
}

function comment(s: Schema): string {
  const d = typeof s.description === 'string' ? s.description : typeof s.title === 'string' ? s.title : '';
  return d ? d.split('\n').map((l) => `# ${l}`.trimEnd()).join('\n') + '\n' : '';
}

function inlineComment(s: Schema): string {
  const d = typeof s?.description === 'string' ? s.description.split('\n')[0]! : '';
  return d ? `  # ${d}` : '';
}

function jsonSchemaOf(content: Record<string, { schema?: Schema }> | undefined): Schema | undefined {
  if (!content) return undefined;
  const key = Object.keys(content).find((k) => k === 'application/json') ?? Object.keys(content).find((k) => k.includes('json'));
  return key ? (content[key]!.schema ?? {}) : undefined;
}

/** JSON schema of the first 2xx answer that has a JSON body. */
function okSchemaOf(op: Operation): Schema | undefined {
  const codes = Object.keys(op.responses ?? {}).filter((c) => /^2\d\d$/.test(c)).sort();
  return codes.map((c) => jsonSchemaOf(op.responses![c]!.content)).find((x) => x !== undefined);
}

/**
 * True when a 2xx answer other than 204 may have a body the document does not describe as JSON
 * (no content declared, as for /metrics' Prometheus text, or a non-JSON media type).
 */
function hasOkBody(op: Operation): boolean {
  return Object.entries(op.responses ?? {}).some(([c, r]) => /^2\d\d$/.test(c) && c !== '204' && (!r.content || Object.keys(r.content).length > 0));
}

interface PyOperation {
  method: string;
  path: string;
  name: string;
  doc: string;
  pathParams: Array<{ name: string; py: string; type: string }>;
  queryParams: Array<{ name: string; py: string; type: string; required: boolean }>;
  body: { type: string; required: boolean } | null;
  returns: string;
  auth: boolean;
}

/** Returns the source of `lamer_client/client.py` for `doc`. */
export function generatePythonClient(doc: OpenApiDoc, source = 'openapi/openapi.json'): string {
  const types = new PyTypes(doc);
  types.emitComponents();
  // preferred names of inline request/response shapes first (see TYPE_NAMES)
  for (const [key, name] of TYPE_NAMES) {
    const [method, path, part] = key.split(' ') as [string, string, 'body' | 'response'];
    const op = doc.paths[path]?.[method.toLowerCase()] as Operation | undefined;
    if (!op) continue;
    const schema = part === 'body' ? jsonSchemaOf(op.requestBody?.content) : okSchemaOf(op);
    if (schema && !schema.$ref) types.typeOf(schema, name, false);
  }
  const ops: PyOperation[] = [];
  const names = new Set<string>();
  for (const [path, item] of Object.entries(doc.paths)) {
    const shared = (item.parameters as Parameter[] | undefined) ?? [];
    for (const method of METHODS) {
      const op = item[method] as Operation | undefined;
      if (!op) continue;
      let name = snakeCase(op.operationId ?? OPERATION_NAMES[`${method.toUpperCase()} ${path}`] ?? `${method} ${path.replace(/[{}]/g, '')}`);
      for (let i = 2; names.has(name); i++) name = `${name}_${i}`;
      names.add(name);
      const base = pascalCase(op.operationId ?? name);
      const params = [...shared.filter((p) => !(op.parameters ?? []).some((o) => o.name === p.name && o.in === p.in)), ...(op.parameters ?? [])];
      const pathParams = params
        .filter((p) => p.in === 'path')
        .map((p) => ({ name: p.name, py: snakeCase(p.name), type: types.typeOf(p.schema, `${base}${pascalCase(p.name)}`, false) }));
      const queryParams = params
        .filter((p) => p.in === 'query')
        .map((p) => ({ name: p.name, py: snakeCase(p.name), type: types.typeOf(p.schema, `${base}${pascalCase(p.name)}`, false), required: !!p.required }));
      const bodySchema = jsonSchemaOf(op.requestBody?.content);
      const body = bodySchema ? { type: types.typeOf(bodySchema, `${base}Body`, false), required: op.requestBody?.required !== false } : null;
      const okSchema = okSchemaOf(op);
      const returns = okSchema ? types.typeOf(okSchema, `${base}Response`, false) : hasOkBody(op) ? 'Any' : 'None';
      const security = op.security ?? doc.security ?? [];
      ops.push({
        method: method.toUpperCase(),
        path,
        name,
        doc: [op.summary, op.description].filter((x): x is string => !!x).join('\n\n') || `${method.toUpperCase()} ${path}`,
        pathParams,
        queryParams,
        body,
        returns,
        auth: security.length > 0,
      });
    }
  }

  // authentication: the first security scheme the document declares
  const schemes = Object.values(doc.components?.securitySchemes ?? {});
  const scheme = schemes[0];
  let authHeader = 'Authorization';
  let authPrefix = 'Bearer ';
  if (scheme?.type === 'apiKey' && scheme.in === 'header' && scheme.name) {
    authHeader = scheme.name;
    authPrefix = '';
  }

  const hash = createHash('sha256').update(JSON.stringify(doc)).digest('hex').slice(0, 16);
  const methods = ops.map((o) => renderMethod(o)).join('\n');
  return `${HEADER(source, doc, hash)}
${PRELUDE}
# ---------------------------------------------------------------------------------------------
# Schemas (TypedDicts: responses are plain dicts that type checkers read with these shapes)
# ---------------------------------------------------------------------------------------------

${types.defs.join('\n')}
# ---------------------------------------------------------------------------------------------
# Client
# ---------------------------------------------------------------------------------------------

_AUTH_HEADER = ${pyString(authHeader)}
_AUTH_PREFIX = ${pyString(authPrefix)}


${CLIENT_BASE(authHeader, authPrefix)}
${methods}${PY_FOOTER}`;
}

function renderMethod(o: PyOperation): string {
  const args = ['self', ...o.pathParams.map((p) => `${p.py}: ${p.type}`)];
  if (o.body) args.push(o.body.required ? `body: ${o.body.type}` : `body: Optional[${o.body.type}] = None`);
  if (o.queryParams.length) {
    args.push('*');
    for (const q of o.queryParams) args.push(q.required ? `${q.py}: ${q.type}` : `${q.py}: Optional[${q.type}] = None`);
  }
  const pathDict = `{${o.pathParams.map((p) => `${pyString(p.name)}: ${p.py}`).join(', ')}}`;
  const queryDict = `{${o.queryParams.map((q) => `${pyString(q.name)}: ${q.py}`).join(', ')}}`;
  const docLines = o.doc.split('\n').map((l) => (l ? `        ${l.replace(/"""/g, '\\"\\"\\"')}` : ''));
  return `    def ${o.name}(${args.join(', ')}) -> ${o.returns}:
        """${docLines.join('\n').trimStart()}

        \`${o.method} ${o.path}\`. Raises LamerProblem for an error answer.
        """
        return self._request(${pyString(o.method)}, ${pyString(o.path)}, ${pathDict}, ${queryDict}, ${o.body ? 'body' : 'None'}, ${o.auth ? 'True' : 'False'})${o.returns === 'Any' ? '' : '  # type: ignore[no-any-return]'}
`;
}

const HEADER = (source: string, doc: OpenApiDoc, hash: string) => `# Generated by scripts/generate.ts from ${source} (${doc.info.title} ${doc.info.version}, sha256 ${hash}).
# Do not edit by hand: run \`npm run generate\`.
"""Typed client for lamer-server (standard library only: urllib, json, typing).

Usage::

    from lamer_client import LamerClient, LamerProblem
    client = LamerClient("http://127.0.0.1:8080", api_key="...")
    session = client.create_session({"taskId": "minesweeper-6x6-3:seed=42", "instructions": "..."})

Every error answer (\`application/problem+json\`, RFC 9457) raises \`LamerProblem\` with its
\`status\`, \`type\`, \`title\`, \`detail\` and, for 429/503, \`retry_after\` in seconds.
"""`;

const PRELUDE = `
from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import TYPE_CHECKING, Any, Dict, List, Literal, Mapping, Optional, TypedDict, Union

if sys.version_info >= (3, 11):
    from typing import NotRequired
elif TYPE_CHECKING:  # type checkers targeting Python < 3.11 read typing_extensions' stubs
    from typing_extensions import NotRequired
else:  # pragma: no cover - Python 3.8-3.10 at run time: NotRequired[...] is only a marker

    class _NotRequired:
        def __getitem__(self, item: Any) -> Any:
            return item

    NotRequired = _NotRequired()


class LamerError(Exception):
    """Base class of the errors this client raises (besides urllib's connection errors)."""


class LamerProblem(LamerError):
    """An error answer from the server: an RFC 9457 problem document.

    Attributes: status (HTTP status), type (stable URI per error kind, e.g.
    '.../problems/step-out-of-order'), title, detail, problem (the whole decoded document,
    with extra members such as 'errors' or 'expected'), retry_after (seconds, from the
    Retry-After header, or None).
    """

    def __init__(self, status: int, problem: Dict[str, Any], retry_after: Optional[float] = None) -> None:
        self.status = status
        self.problem = problem
        self.type: str = str(problem.get("type", "about:blank"))
        self.title: str = str(problem.get("title", ""))
        self.detail: Optional[str] = problem.get("detail")
        self.retry_after = retry_after
        super().__init__(f"{status} {self.title}: {self.detail or self.type}")

    @property
    def kind(self) -> str:
        """The last segment of the problem type URI, e.g. 'step-conflict'."""
        return self.type.rstrip("/").rsplit("/", 1)[-1]
`;

const CLIENT_BASE = (authHeader: string, authPrefix: string) => `class LamerClient:
    """One method per API operation; answers are decoded JSON dicts typed by the TypedDicts above.

    base_url: e.g. 'http://127.0.0.1:8080'. api_key: sent as the '${authHeader}' header${authPrefix ? ` (as '${authPrefix}<key>')` : ''}.
    timeout: seconds per request (a step that writes a reflection takes longer than an action).
    retries: how many times a 408/429/503 answer is retried after its Retry-After (1 s without
    one); the server processed none of them (steps are safe to retry: the server answers a
    repeated (attempt, step) with the stored answer).
    """

    def __init__(self, base_url: str, api_key: Optional[str] = None, timeout: float = 120.0,
                 retries: int = 0, headers: Optional[Mapping[str, str]] = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self.headers = dict(headers or {})

    def _request(self, method: str, path: str, path_params: Mapping[str, Any],
                 query: Mapping[str, Any], body: Any, auth: bool) -> Any:
        for name, value in path_params.items():
            path = path.replace("{" + name + "}", urllib.parse.quote(str(value), safe=""))
        url = self.base_url + path
        pairs = [(k, _query_value(v)) for k, v in query.items() if v is not None]
        if pairs:
            url += "?" + urllib.parse.urlencode(pairs)
        headers = {"accept": "application/json, application/problem+json"}
        headers.update(self.headers)
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["content-type"] = "application/json"
        if auth and self.api_key:
            headers[_AUTH_HEADER] = _AUTH_PREFIX + self.api_key
        attempt = 0
        while True:
            req = urllib.request.Request(url, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as res:
                    raw = res.read()
                    if not raw:
                        return None
                    if "json" in (res.headers.get("content-type") or "application/json"):
                        return json.loads(raw)
                    return raw.decode("utf-8", "replace")  # e.g. /metrics (Prometheus text)
            except urllib.error.HTTPError as err:
                problem = _problem_of(err)
                if problem.status in (408, 429, 503) and attempt < self.retries:
                    attempt += 1
                    time.sleep(problem.retry_after if problem.retry_after is not None else 1.0)
                    continue
                raise problem from None
`;

/** Helpers appended after the generated methods (module-level functions). */
const PY_FOOTER = `

def _query_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _problem_of(err: urllib.error.HTTPError) -> LamerProblem:
    raw = err.read() or b""
    retry = err.headers.get("retry-after") if err.headers else None
    retry_after: Optional[float] = None
    if retry is not None:
        try:
            retry_after = float(retry)
        except ValueError:
            retry_after = None
    try:
        doc = json.loads(raw)
        if not isinstance(doc, dict):
            raise ValueError("not an object")
    except ValueError:
        doc = {"type": "about:blank", "title": err.reason if isinstance(err.reason, str) else str(err.code),
               "status": err.code, "detail": raw.decode("utf-8", "replace")[:500]}
    return LamerProblem(int(doc.get("status", err.code)), doc, retry_after)
`;

/** The package's `__init__.py`: re-exports the generated module. */
export function generatePythonInit(): string {
  return `# Generated by scripts/generate.ts. Do not edit by hand: run \`npm run generate\`.
"""lamer_client: typed, standard-library-only client for lamer-server."""
from .client import *  # noqa: F401,F403
from .client import LamerClient, LamerError, LamerProblem

__all__ = ["LamerClient", "LamerError", "LamerProblem"]
`;
}
