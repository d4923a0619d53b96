/**
 * The HTTP client of the eval harness: JSON requests to a lamer server with retries, and one-line
 * descriptions of failed requests.
 */

/** An HTTP answer that was not 2xx (after retries for 408/429/503). */
export class HttpError extends Error {
  constructor(message: string, readonly status: number, readonly body: string) {
    super(message);
  }
}

/** One line for a failed request: "connection refused", "HTTP 400 validation: ...", etc. */
export function describeHttpFailure(err: unknown): string {
  if (err instanceof HttpError) {
    let detail = err.body.slice(0, 300);
    try {
      // problem+json (docs/protocol.md): "<last segment of type>: <detail>"; else error / message
      const j = JSON.parse(err.body) as { type?: unknown; detail?: unknown; error?: unknown; message?: unknown };
      const kind = typeof j.type === 'string' ? j.type.split('/').pop() : typeof j.error === 'string' ? j.error : null;
      const what = typeof j.detail === 'string' ? j.detail : typeof j.message === 'string' ? j.message : null;
      const parts = [kind, what].filter(Boolean);
      if (parts.length) detail = parts.join(': ');
    } catch {
      /* not JSON: keep the text */
    }
    return `${err.status}${detail ? ` ${detail}` : ''}`;
  }
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  const code = e?.cause?.code;
  if (code === 'ECONNREFUSED') return 'connection refused';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'host not found';
  if (code) return code;
  if (e?.name === 'TimeoutError') return 'timed out';
  return e?.cause?.message ?? e?.message ?? String(err);
}

/**
 * Statuses retried: 408 `request-timeout` (the server closed the connection before it had the whole
 * request, so it processed nothing; a loaded server can also misjudge a request that arrived during a
 * long model call), 429 `rate-limited`, 503 (`overloaded`, `engine-unavailable`, `database-busy`,
 * `shutting-down`, ...: nothing recorded). docs/protocol.md, "Errors".
 */
export const RETRYABLE_STATUSES: ReadonlySet<number> = new Set([408, 429, 503]);

/**
 * Error codes of a request that never reached a server (no connection was made), so sending it
 * again cannot repeat its effect: connection refused, host name not resolved.
 */
const NOT_SENT_CODES: ReadonlySet<string> = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN']);

/** True when fetch's error `err` says the request never reached a server (see NOT_SENT_CODES). */
export function neverSent(err: unknown): boolean {
  const code = (err as { cause?: { code?: unknown } } | null)?.cause?.code;
  return typeof code === 'string' && NOT_SENT_CODES.has(code);
}

/** Options of a POST. */
export interface PostOptions {
  /**
   * Sending the request twice has the effect of sending it once, so it may be sent again after a
   * network error (the answer lost, the request maybe processed). Steps are (the same (attempt,
   * step) with the same body returns the stored answer: docs/protocol.md); creating a session is
   * not (the server takes no idempotency key: a resend after a lost answer would open a second
   * session). Default false.
   */
  idempotent?: boolean;
}

/** A request about to be sent again: which, why (describeHttpFailure), the try that comes next (2..6) and the wait before it, ms. */
export interface RetryInfo {
  method: string;
  path: string;
  why: string;
  /** True when no HTTP answer came back (a network error), false for a retried status. */
  network: boolean;
  nextTry: number;
  tries: number;
  waitMs: number;
}

/** Options of an Http client beyond its base URL, key and timeout. */
export interface HttpOptions {
  /** Once aborted, no request is sent or retried: the pending one rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Told before each retry (e.g. to print progress while a server does not answer). */
  onRetry?: (info: RetryInfo) => void;
}

/** The most tries of one request (the first send and 5 retries). */
export const HTTP_TRIES = 6;

/**
 * Minimal JSON client: up to 5 retries (waiting Retry-After seconds, at most 30, else exponential
 * backoff from 0.5 s) for 408/429/503, which the server answers without processing the request;
 * for network errors of GET, DELETE and POSTs marked idempotent; and for other POSTs only when the
 * connection was never made (`neverSent`), since one that timed out or lost its connection may
 * have been processed. Throws HttpError for any other non-2xx answer or when retries run out, and
 * fetch's error for a network error that is not retried.
 */
export class Http {
  constructor(private base: string, private apiKey: string | undefined, private timeoutMs: number, private readonly opts: HttpOptions = {}) {
    this.base = base.replace(/\/+$/, '');
  }

  /** GET `path`; resolves with the parsed JSON answer. */
  async get<T>(path: string): Promise<T> {
    return this.request<T>('GET', path);
  }

  /** POST `body` as JSON to `path`; resolves with the parsed JSON answer. */
  async post<T>(path: string, body: unknown, opts: PostOptions = {}): Promise<T> {
    return this.request<T>('POST', path, body, opts.idempotent ?? false);
  }

  /** DELETE `path` (idempotent: deleting twice leaves the same state). */
  async del(path: string): Promise<void> {
    await this.request('DELETE', path);
  }

  private async request<T>(method: string, path: string, body?: unknown, idempotent = true): Promise<T> {
    const headers: Record<string, string> = {};
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (this.apiKey) headers.authorization = `Bearer ${this.apiKey}`;
    const { signal, onRetry } = this.opts;
    let lastErr: unknown;
    let waitMs = 0;
    for (let tryNo = 0; tryNo < HTTP_TRIES; tryNo++) {
      if (tryNo > 0) {
        const wait = waitMs || 250 * 2 ** tryNo;
        onRetry?.({ method, path, why: describeHttpFailure(lastErr), network: !(lastErr instanceof HttpError), nextTry: tryNo + 1, tries: HTTP_TRIES, waitMs: wait });
        await sleep(wait, signal);
      }
      signal?.throwIfAborted();
      waitMs = 0;
      let res: Response;
      try {
        const timeout = AbortSignal.timeout(this.timeoutMs);
        res = await fetch(this.base + path, {
          method,
          headers,
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: signal ? AbortSignal.any([timeout, signal]) : timeout,
        });
      } catch (e) {
        signal?.throwIfAborted();
        lastErr = e;
        if (idempotent || neverSent(e)) continue;
        break;
      }
      const text = await res.text();
      if (res.ok) return (text ? JSON.parse(text) : undefined) as T;
      lastErr = new HttpError(`${method} ${path}: HTTP ${res.status} ${text.slice(0, 500)}`, res.status, text);
      const retryAfter = Number(res.headers.get('retry-after'));
      if (Number.isFinite(retryAfter) && retryAfter > 0) waitMs = Math.min(retryAfter, 30) * 1000;
      if (!RETRYABLE_STATUSES.has(res.status)) break;
    }
    throw lastErr instanceof Error ? lastErr : new Error(String(lastErr));
  }
}

/** Resolves after `ms`, or rejects with the signal's reason as soon as `signal` is aborted. */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
