/**
 * Shared test helpers: temporary directories removed when the test file ends, a real server on an
 * ephemeral port over a SQLite file, raw HTTP calls, database dumps, a quiet console and a tiny
 * GPT checkpoint. Importing this module registers one `afterAll` on the importing test file that
 * removes every directory made by {@link tmpDir} (it runs after the file's own afterAll hooks, so
 * servers are closed first).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, vi } from 'vitest';
import type { RunningServer } from '../../src/server.js';
import type { Config } from '../../src/config.js';

const made: string[] = [];
afterAll(() => {
  for (const dir of made.splice(0)) {
    try {
      fs.rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
    } catch {
      /* a file still held open (a child process being reaped) must not fail the test file */
    }
  }
});

export interface TestServer extends RunningServer {
  dataDir: string;
  /** Fetch JSON: returns status, parsed body and content-type. */
  call(method: string, p: string, body?: unknown, headers?: Record<string, string>): Promise<Res>;
}

export interface Res {
  status: number;
  body: any;
  type: string;
  headers: Headers;
}

/** A new empty directory under `parent` (default the OS temp dir), removed after the test file. */
export function tmpDir(prefix = 'lamer-test-', parent = os.tmpdir()): string {
  const dir = fs.mkdtempSync(path.join(parent, prefix));
  made.push(dir);
  return dir;
}

/**
 * Capture console.error and console.log until `restore()` (so expected CLI messages do not clutter
 * the test output). `errors()`/`logs()`: the first argument of each call as a string, also after
 * `restore()`; `err`/`log`: the vitest spies.
 */
export function quietConsole() {
  const errLines: string[] = [];
  const logLines: string[] = [];
  const err = vi.spyOn(console, 'error').mockImplementation((m: unknown) => void errLines.push(String(m)));
  const log = vi.spyOn(console, 'log').mockImplementation((m: unknown) => void logLines.push(String(m)));
  return {
    err,
    log,
    errors: (): string[] => [...errLines],
    logs: (): string[] => [...logLines],
    restore: (): void => {
      err.mockRestore();
      log.mockRestore();
    },
  };
}

/**
 * Write a tiny random GPT checkpoint (byte vocabulary of 260, a context of `blockSize` tokens
 * (default 384), 1 layer, 2 heads, 16 wide; initialised from `seed`) to `dir` as version 'base', for
 * servers with the builtin engine (`baseModelDir: dir`). @returns `dir`.
 */
export async function writeTinyGptCheckpoint(dir: string, seed: number, blockSize = 384): Promise<string> {
  // imported here so that test files using only the small helpers do not load the server or tfjs
  const { initModel } = await import('../../src/model/gpt.js');
  const { saveCheckpoint } = await import('../../src/model/checkpoint.js');
  const m = initModel({ vocab_size: 260, block_size: blockSize, n_layer: 1, n_head: 2, n_embd: 16 }, seed);
  try {
    await saveCheckpoint(m, dir, { version: 'base' });
  } finally {
    m.dispose();
  }
  return dir;
}

export async function call(base: string, method: string, p: string, body?: unknown, headers: Record<string, string> = {}): Promise<Res> {
  const init: RequestInit = { method, headers: { ...headers } };
  if (body !== undefined) {
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
    (init.headers as Record<string, string>)['content-type'] ??= 'application/json';
  }
  const r = await fetch(base + p, init);
  const text = await r.text();
  let parsed: unknown = text;
  try {
    parsed = text === '' ? null : JSON.parse(text);
  } catch {
    /* keep text */
  }
  return { status: r.status, body: parsed, type: r.headers.get('content-type') ?? '', headers: r.headers };
}

export async function startTestServer(overrides: Partial<Config> = {}): Promise<TestServer> {
  const { startServer } = await import('../../src/server.js');
  const dataDir = overrides.dataDir ?? tmpDir();
  const s = await startServer({ host: '127.0.0.1', port: 0, engine: 'test', logLevel: 'silent', apiKeys: [], dataDir, ...overrides });
  return {
    ...s,
    dataDir,
    call: (method, p, body, headers) => call(s.url, method, p, body, headers),
    close: async () => {
      await s.close();
    },
  };
}

/**
 * Opens a session (task `t`) on `s` and records its first step (attempt 0, step 0, observation
 * `o`), so the next expected step is (0, 1). Returns the session id; throws when either answer is
 * not a success.
 */
export async function sessionAfterFirstStep(s: TestServer): Promise<string> {
  const created = await s.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x' });
  if (created.status !== 201) throw new Error(`session create answered ${created.status}`);
  const id = created.body.id as string;
  const first = await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o' });
  if (first.status !== 200) throw new Error(`step 0 answered ${first.status}`);
  return id;
}

/** Every row of every table, as one string: equal strings mean an unchanged database. */
export function dumpDb(dataDir: string): string {
  const db = new Database(path.join(dataDir, 'lamer.db'), { readonly: true });
  try {
    const tables = ['sessions', 'steps', 'reflections', 'models', 'training_jobs'];
    return tables.map((t) => `${t}:${JSON.stringify(db.prepare(`SELECT * FROM ${t} ORDER BY rowid`).all())}`).join('\n');
  } finally {
    db.close();
  }
}

export function countRows(dataDir: string, sql: string, ...params: unknown[]): number {
  const db = new Database(path.join(dataDir, 'lamer.db'), { readonly: true });
  try {
    return (db.prepare(sql).get(...params) as { n: number }).n;
  } finally {
    db.close();
  }
}

/**
 * One HTTP request with the path sent exactly as given (node:http does not normalise dot
 * segments, repeated slashes or percent-escapes the way fetch/URL does). Parsed like {@link call}.
 */
export async function rawCall(base: string, method: string, rawPath: string, body?: unknown, headers: Record<string, string> = {}): Promise<Res> {
  const http = await import('node:http');
  const u = new URL(base);
  const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
  const h: Record<string, string> = { ...headers };
  if (payload !== undefined) {
    h['content-type'] ??= 'application/json';
    h['content-length'] = String(Buffer.byteLength(payload));
  }
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, method, path: rawPath, headers: h, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let parsed: unknown = text;
        try {
          parsed = text === '' ? null : JSON.parse(text);
        } catch {
          /* keep text */
        }
        const headersOut = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) headersOut.set(k, Array.isArray(v) ? v.join(', ') : v);
        resolve({ status: res.statusCode ?? 0, body: parsed, type: res.headers['content-type'] ?? '', headers: headersOut });
      });
    });
    req.on('error', reject);
    req.end(payload);
  });
}

/** What {@link writeAllThenRead} got: the status and body it read, or the socket error instead. */
export type WriteAllResult = { status: number; headers: string; body: string } | { error: string };

/**
 * One request on a raw socket that behaves like Python's urllib: the request line, headers and
 * the whole body are written, and only once the last byte is handed to the kernel does the client
 * start reading. A server that answers early and closes while the body is still being written
 * makes this client see a reset or broken pipe instead of its answer. Resolves with the status,
 * raw header block and body read (up to the server's close), or `{ error }` with the socket error.
 * @param opts.chunked send the body with `transfer-encoding: chunked` instead of a content-length
 * @param opts.headers extra request headers (`content-type` defaults to application/json, `host` to `127.0.0.1`)
 */
export async function writeAllThenRead(
  base: string,
  method: string,
  rawPath: string,
  body: Buffer,
  opts: { chunked?: boolean; headers?: Record<string, string> } = {},
): Promise<WriteAllResult> {
  const { connect } = await import('node:net');
  const u = new URL(base);
  const headers: Record<string, string> = { host: '127.0.0.1', 'content-type': 'application/json', ...opts.headers };
  if (opts.chunked) headers['transfer-encoding'] = 'chunked';
  else headers['content-length'] = String(body.length);
  headers.connection = 'close';
  return new Promise((resolve) => {
    const sock = connect(Number(u.port), u.hostname);
    const chunks: Buffer[] = [];
    sock.once('error', (e: NodeJS.ErrnoException) => resolve({ error: e.code ?? e.message }));
    sock.once('connect', () => {
      sock.write(`${method} ${rawPath} HTTP/1.1\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`);
      const payload = opts.chunked ? Buffer.concat([Buffer.from(body.length.toString(16) + '\r\n'), body, Buffer.from('\r\n0\r\n\r\n')]) : body;
      sock.write(payload, (err) => {
        if (err) return;
        sock.on('data', (c: Buffer) => chunks.push(c));
        sock.once('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
          const split = text.indexOf('\r\n\r\n');
          resolve({ status, headers: split < 0 ? text : text.slice(0, split), body: split < 0 ? '' : text.slice(split + 4) });
        });
      });
    });
  });
}
