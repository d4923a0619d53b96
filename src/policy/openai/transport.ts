/**
 * HTTP to a remote OpenAI-compatible server: `POST <baseUrl>/chat/completions` with a per-try
 * timeout, retries with exponential backoff, a deadline for the whole call and a cap on the
 * answer's size; and `GET <baseUrl>/models` as a reachability probe. The details of failures name
 * the version, never the server's address, and carry at most a short plain-text excerpt of what
 * the server answered (never its body as sent: an HTML error page, scripts included): they reach
 * any tenant's client.
 */
import { EngineError, type RemoteProbe, type RemoteVersionConfig } from '../engine.js';

/** Longest backoff between two tries, ms. */
const MAX_BACKOFF_MS = 10_000;
/** A retry needs at least this much of the call bound left after its backoff, ms: a try of a few ms cannot be answered. */
const MIN_RETRY_MS = 50;

/** Longest wait for a probe's answer, ms (cut further by the version's own timeout). */
export const PROBE_TIMEOUT_MS = 2_000;

/** Thrown inside a try: whether another try may succeed, and after how long the server asked (ms). */
class TryError extends Error {
  constructor(message: string, readonly retryable: boolean, readonly retryAfterMs: number | null = null) {
    super(message);
  }
}

/** The settings of a remote version the transport uses. */
export type Endpoint = Pick<RemoteVersionConfig, 'baseUrl' | 'apiKey' | 'timeoutMs' | 'maxRetries'>;

/** What a call needs besides the endpoint: names and bounds for its messages, and its waits. */
export interface PostOptions {
  /** The version's name, for error details and logs. */
  version: string;
  /** Most bytes of one answer's body. */
  maxResponseBytes: number;
  /** The call bound, ms: only named in error details (the deadline itself is passed). */
  callTimeoutMs: number;
  /** Waits `ms` between tries. */
  sleep: (ms: number) => Promise<void>;
  logger?: { warn(o: object, msg?: string): void };
}

/** `<baseUrl>/<path>` (trailing slashes of the base removed) and the JSON headers, with the key when set. */
function request(endpoint: Endpoint, path: string, extra: Record<string, string> = {}): { url: string; headers: Record<string, string> } {
  const url = endpoint.baseUrl.replace(/\/+$/, '') + '/' + path;
  const headers: Record<string, string> = { ...extra, accept: 'application/json' };
  if (endpoint.apiKey) headers.authorization = `Bearer ${endpoint.apiKey}`;
  return { url, headers };
}

/** Most characters of a remote answer's own words shown in an error detail. */
export const EXCERPT_CHARS = 80;

/** Most characters of a remote answer that {@link remoteExcerpt} looks at. */
const EXCERPT_SCAN_CHARS = 64 * 1024;

/** The message of an error answer in JSON: OpenAI's `error.message` (or a string `error`), else `message` or `detail`. */
function jsonErrorMessage(text: string): string | null {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return null;
  }
  if (v === null || typeof v !== 'object') return null;
  const o = v as { error?: unknown; message?: unknown; detail?: unknown };
  const e = o.error as { message?: unknown } | string | undefined;
  if (typeof e === 'string') return e;
  if (e && typeof e === 'object' && typeof e.message === 'string') return e.message;
  if (typeof o.message === 'string') return o.message;
  if (typeof o.detail === 'string') return o.detail;
  return null;
}

/**
 * A short plain-text excerpt of a remote answer's body, for error details (which reach any
 * tenant's client, and may be shown in a browser): the message of a JSON error answer when it has
 * one, else the text; then HTML comments, `<script>`/`<style>` blocks and tags removed, any `<` or
 * `>` left dropped, terminal escapes and control characters removed, whitespace collapsed, and
 * cut to {@link EXCERPT_CHARS} characters (code points, `...` added). '' when nothing readable is
 * left. Only the first 64 KiB of `text` are looked at.
 */
export function remoteExcerpt(text: string): string {
  const head = text.slice(0, EXCERPT_SCAN_CHARS);
  const plain = (jsonErrorMessage(head) ?? head)
    .replace(/<!--[\s\S]*?(?:-->|$)/g, ' ')
    .replace(/<(script|style)\b[\s\S]*?(?:<\/\1\s*>|$)/gi, ' ')
    .replace(/<[^>]*(?:>|$)/g, ' ')
    .replace(/[<>]/g, ' ')
    // biome-ignore lint/suspicious/noControlCharactersInRegex: matches terminal escape sequences (ESC [ ...) on purpose
    .replace(/\u001b\[[0-9;?]*[A-Za-z]/g, ' ')
    .replace(/[\p{Cc}\p{Cf}]/gu, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  const chars = [...plain];
  return chars.length > EXCERPT_CHARS ? `${chars.slice(0, EXCERPT_CHARS).join('').trimEnd()}...` : plain;
}

/** `HTTP <status>`, with the answer's excerpt (see {@link remoteExcerpt}) when there is one. */
function statusDetail(status: number, text: string): string {
  const excerpt = remoteExcerpt(text);
  return excerpt === '' ? `HTTP ${status}` : `HTTP ${status}: ${excerpt}`;
}

/** The detail of a fetch that got no answer: a timeout, else the connection's error code. */
function fetchFailure(err: unknown, timeoutMs: number): string {
  const e = err as Error & { cause?: { code?: string } };
  return e.name === 'TimeoutError' || e.name === 'AbortError' ? `no answer within ${timeoutMs} ms` : `cannot reach the server: ${e.cause?.code ?? e.message}`;
}

/**
 * The body of `res` as UTF-8 text, read chunk by chunk: past `maxBytes` the stream is cancelled
 * (the connection is dropped, nothing more is buffered) and a TryError (not retryable) is thrown.
 */
async function readCapped(res: Response, maxBytes: number): Promise<string> {
  const declared = Number(res.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > maxBytes) {
    await res.body?.cancel().catch(() => {});
    throw new TryError(`answer of ${declared} bytes is larger than the limit of ${maxBytes} bytes`, false);
  }
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel().catch(() => {});
      throw new TryError(`answer is larger than the limit of ${maxBytes} bytes (cut off there)`, false);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * One HTTP try, at most `budgetMs` (and the endpoint's per-try timeout). The body is read as a
 * stream and given up past `maxBytes` (not retried: the server would answer the same). 429 and 5xx
 * are retryable (with the server's Retry-After, seconds, when given); another non-200 status or a
 * body that is not JSON is not. Failure messages give the status and {@link remoteExcerpt} of the
 * body, never the body itself.
 * @returns the parsed JSON answer.
 * @throws TryError on any failure.
 */
async function tryOnce(endpoint: Endpoint, url: string, headers: Record<string, string>, payload: string, budgetMs: number, maxBytes: number): Promise<unknown> {
  let res: Response;
  let text: string;
  const timeoutMs = Math.min(endpoint.timeoutMs, budgetMs);
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    res = await fetch(url, { method: 'POST', headers, body: payload, signal });
    text = await readCapped(res, maxBytes);
  } catch (err) {
    if (err instanceof TryError) throw err;
    throw new TryError(fetchFailure(err, timeoutMs), true);
  }
  if (res.status === 429 || res.status >= 500) {
    const ra = Number(res.headers.get('retry-after'));
    throw new TryError(statusDetail(res.status, text), true, Number.isFinite(ra) && ra >= 0 && res.headers.has('retry-after') ? ra * 1000 : null);
  }
  if (res.status !== 200) throw new TryError(statusDetail(res.status, text), false);
  try {
    return JSON.parse(text) as unknown;
  } catch {
    const excerpt = remoteExcerpt(text);
    throw new TryError(excerpt === '' ? 'remote answer is not JSON' : `remote answer is not JSON: ${excerpt}`, false);
  }
}

/**
 * POSTs `body` to `<baseUrl>/chat/completions`, retrying retryable failures up to `maxRetries`
 * times after a backoff of 200 ms x 2^i (or the server's Retry-After), at most 10 s, all within
 * `deadline` (ms since the epoch): each try's timeout is cut to the time left, and no retry starts
 * unless at least 50 ms of the bound are left after its backoff.
 * @returns the parsed JSON answer and the number of tries it took.
 * @throws EngineError when every try failed, the server refused the request, or the time ran out.
 */
export async function postChat(endpoint: Endpoint, body: Record<string, unknown>, deadline: number, opts: PostOptions): Promise<{ json: unknown; tries: number }> {
  const { url, headers } = request(endpoint, 'chat/completions', { 'content-type': 'application/json' });
  const payload = JSON.stringify(body);
  let last = `no answer within the call bound of ${opts.callTimeoutMs} ms`;
  for (let i = 0; i <= endpoint.maxRetries; i++) {
    const left = deadline - Date.now();
    if (left <= 0) break;
    try {
      return { json: await tryOnce(endpoint, url, headers, payload, left, opts.maxResponseBytes), tries: i + 1 };
    } catch (err) {
      const e = err instanceof TryError ? err : new TryError(err instanceof Error ? err.message : String(err), false);
      last = e.message;
      if (!e.retryable || i === endpoint.maxRetries) break;
      const wait = Math.min(MAX_BACKOFF_MS, e.retryAfterMs ?? 200 * 2 ** i);
      if (Date.now() + wait + MIN_RETRY_MS > deadline) {
        last += `; no time left for a retry within the call bound of ${opts.callTimeoutMs} ms`;
        break;
      }
      opts.logger?.warn({ version: opts.version, try: i + 1, waitMs: wait, err: e.message }, 'remote engine call failed; retrying');
      await opts.sleep(wait);
    }
  }
  throw new EngineError(`remote model version '${opts.version}' failed: ${last}`);
}

/**
 * One probe of the server: `GET <baseUrl>/models` (every OpenAI-compatible server has it) with
 * the endpoint's key, at most {@link PROBE_TIMEOUT_MS} (or the endpoint's timeout when shorter);
 * 2xx, or 404/405 (up, without that route), is reachable; another status, a timeout or a refused
 * connection is not (`detail` says which). `checkedAt` is when it started, ms since the epoch.
 * Never throws.
 */
export async function probeServer(endpoint: Endpoint): Promise<RemoteProbe> {
  const { url, headers } = request(endpoint, 'models');
  const timeoutMs = Math.min(PROBE_TIMEOUT_MS, endpoint.timeoutMs);
  const checkedAt = Date.now();
  try {
    const res = await fetch(url, { headers, signal: AbortSignal.timeout(timeoutMs) });
    await res.body?.cancel().catch(() => {});
    if ((res.status >= 200 && res.status < 300) || res.status === 404 || res.status === 405) return { reachable: true, checkedAt };
    return { reachable: false, detail: `HTTP ${res.status}`, checkedAt };
  } catch (err) {
    return { reachable: false, detail: fetchFailure(err, timeoutMs), checkedAt };
  }
}
