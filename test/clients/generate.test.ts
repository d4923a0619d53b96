/**
 * Generated clients are in sync with the OpenAPI document: regenerating them gives byte-equal
 * files (CI fails when stale: run `npm run generate`), and the Python generator's naming and
 * type mapping rules hold.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { generatePythonClient, OPERATION_NAMES, pascalCase, snakeCase, type OpenApiDoc } from '../../scripts/generate-python-client.js';
import { FIXTURE_SPEC_PATH, generateClients, ROOT, specSource } from '../../scripts/generate.js';
import { tmpDir } from '../helpers/index.js';

describe('npm run generate', () => {
  it('committed clients equal a fresh generation from the OpenAPI document', async () => {
    const source = specSource();
    const doc = JSON.parse(readFileSync(join(ROOT, source), 'utf8')) as OpenApiDoc;
    const files = await generateClients(doc, source);
    expect([...files.keys()].sort()).toEqual([
      'clients/python/lamer_client/__init__.py',
      'clients/python/lamer_client/client.py',
      'clients/typescript/src/schema.d.ts',
    ]);
    const stale = [...files].filter(([path, text]) => readFileSync(join(ROOT, path), 'utf8') !== text).map(([p]) => p);
    expect(stale, 'stale generated files: run `npm run generate`').toEqual([]);
    // deterministic: a second generation is byte-equal to the first
    const again = await generateClients(doc, source);
    expect([...again.values()]).toEqual([...files.values()]);
  });

  it.each([...new Set([specSource(), FIXTURE_SPEC_PATH])])('the Python module generated from %s compiles and has one method per operation', (source) => {
    const dir = tmpDir('lamer-py-');
    try {
      const doc = JSON.parse(readFileSync(join(ROOT, source), 'utf8')) as OpenApiDoc;
      writeFileSync(join(dir, 'client.py'), generatePythonClient(doc, source));
      const ops: string[] = [];
      for (const [path, item] of Object.entries(doc.paths)) {
        for (const m of ['get', 'put', 'post', 'delete', 'patch']) {
          const op = (item as Record<string, { operationId?: string } | undefined>)[m];
          if (!op) continue;
          const name = op.operationId ? snakeCase(op.operationId) : OPERATION_NAMES[`${m.toUpperCase()} ${path}`];
          expect(name, `a Python name for ${m} ${path}`).toBeDefined();
          ops.push(name!);
        }
      }
      expect(ops).toContain('create_session');
      expect(ops).toContain('post_step');
      const out = execFileSync('python3', ['-c', 'import sys, client; print(" ".join(sorted(n for n in vars(client.LamerClient) if not n.startswith("_"))))'], {
        cwd: dir,
        encoding: 'utf8',
      });
      expect(out.trim().split(' ')).toEqual([...new Set(ops)].sort());
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('Python generator rules', () => {
  it('names operations and types', () => {
    expect(snakeCase('createSession')).toBe('create_session');
    expect(snakeCase('getHTTPStatus')).toBe('get_http_status');
    expect(snakeCase('post /v1/steps:batch')).toBe('post_v1_steps_batch');
    expect(snakeCase('return')).toBe('return_');
    expect(pascalCase('def-0')).toBe('Def0');
    expect(pascalCase('session_list')).toBe('SessionList');
  });

  it('maps schemas to TypedDicts, Literals, Optionals and lists', () => {
    const doc: OpenApiDoc = {
      openapi: '3.1.0',
      info: { title: 't', version: '1' },
      components: {
        schemas: {
          Kind: { type: 'string', enum: ['a', 'b'] },
          Thing: {
            type: 'object',
            required: ['id', 'return'],
            properties: {
              id: { type: 'string' },
              return: { type: 'number' },
              kind: { $ref: '#/components/schemas/Kind' },
              tags: { type: 'array', items: { type: 'string' } },
              parent: { anyOf: [{ type: 'string' }, { type: 'null' }] },
              n: { type: ['integer', 'null'] },
              ok: { const: true },
              extra: { type: 'object', additionalProperties: { type: 'boolean' } },
              child: { type: 'object', properties: { x: { type: 'integer' } }, required: ['x'] },
            },
          },
        },
      },
      paths: {
        '/things/{id}': {
          get: {
            operationId: 'getThing',
            parameters: [
              { name: 'id', in: 'path', required: true, schema: { type: 'string' } },
              { name: 'limit', in: 'query', schema: { type: 'integer' } },
            ],
            responses: { 200: { description: 'ok', content: { 'application/json': { schema: { $ref: '#/components/schemas/Thing' } } } } },
          },
        },
      },
    };
    const py = generatePythonClient(doc, 'x.json');
    expect(py).toContain(`Kind = Literal['a', 'b']\n`);
    expect(py).toContain(
      [
        `Thing = TypedDict('Thing', {`,
        `    'id': str,`,
        `    'return': float,`,
        `    'kind': NotRequired['Kind'],`,
        `    'tags': NotRequired[List[str]],`,
        `    'parent': NotRequired[Optional[str]],`,
        `    'n': NotRequired[Optional[int]],`,
        `    'ok': NotRequired[Literal[True]],`,
        `    'extra': NotRequired[Dict[str, bool]],`,
        `    'child': NotRequired['ThingChild'],`,
        `})`,
      ].join('\n'),
    );
    expect(py).toContain(`ThingChild = TypedDict('ThingChild', {\n    'x': int,\n})`);
    expect(py).toContain(`    def get_thing(self, id: str, *, limit: Optional[int] = None) -> 'Thing':`.replace(`'Thing'`, 'Thing'));
    expect(py).toContain(`return self._request('GET', '/things/{id}', {'id': id}, {'limit': limit}, None, False)`);
  });

  it('names operations without operationId from OPERATION_NAMES and shared inline shapes from TYPE_NAMES', () => {
    const session = { type: 'object', required: ['id'], properties: { id: { type: 'string' }, next: { type: 'object', properties: { step: { type: 'integer' } } } } };
    const json = (schema: object) => ({ content: { 'application/json': { schema } } });
    const doc: OpenApiDoc = {
      openapi: '3.1.0',
      info: { title: 't', version: '1' },
      paths: {
        '/v1/sessions': { post: { requestBody: json({ type: 'object', properties: { taskId: { type: 'string' } } }), responses: { 201: json(session) } } },
        '/v1/sessions/{id}': { get: { parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }], responses: { 200: json(session) } } },
        '/v1/things/{thingId}': { delete: { parameters: [{ name: 'thingId', in: 'path', required: true, schema: { type: 'integer' } }], responses: { 204: { description: 'gone' } } } },
        '/metrics': { get: { responses: { 200: { description: 'Prometheus text' } } } },
      },
    };
    const py = generatePythonClient(doc, 'x.json');
    expect(py).toContain(`Session = TypedDict('Session', {\n    'id': str,\n    'next': NotRequired['SessionNext'],\n})`);
    expect(py).toContain(`CreateSessionRequest = TypedDict('CreateSessionRequest', {\n    'taskId': NotRequired[str],\n})`);
    expect(py).toContain('    def create_session(self, body: CreateSessionRequest) -> Session:');
    expect(py).toContain('    def get_session(self, id: str) -> Session:');
    expect(py).toContain('    def delete_v1_things_thing_id(self, thing_id: int) -> None:');
    expect(py).toContain(`return self._request('DELETE', '/v1/things/{thingId}', {'thingId': thing_id}, {}, None, False)`);
    expect(py).toContain('    def get_metrics(self) -> Any:');
  });
});
