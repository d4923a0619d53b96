import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Http, HttpError, describeHttpFailure } from '../../src/eval/http.js';

/** The 408 body `lamer serve` writes when a request did not arrive in time (plugins/app/errors.ts). */
const TIMEOUT_408 = JSON.stringify({
  type: 'https://lamer-server.dev/problems/request-timeout',
  title: 'Request Timeout',
  status: 408,
  detail: 'the request was not received in time',
  instance: '',
});

interface Seen {
  method: string;
  url: string;
  body: string;
}

let server: Server | null = null;

/**
 * A stub server on an ephemeral port: the n-th request (0-based) is answered by `answers[n]`
 * (the last one repeats). Resolves with its base URL and the requests it saw.
 */
async function stub(answers: Array<(res: ServerResponse) => void>): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString('utf8')));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', body });
      answers[Math.min(seen.length - 1, answers.length - 1)]!(res);
    });
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

const answer408 = (res: ServerResponse) => {
  // As the server does: problem+json, then the connection is closed.
  res.writeHead(408, { 'content-type': 'application/problem+json', connection: 'close' });
  res.end(TIMEOUT_408);
};
const answerJson = (status: number, body: unknown) => (res: ServerResponse) => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
};

afterEach(async () => {
  if (server) await new Promise<void>((r) => server!.close(() => r()));
  server = null;
});

describe('Http (eval harness client)', () => {
  it('408 request-timeout once, then 200: the same step is sent again and its answer returned', async () => {
    const { url, seen } = await stub([answer408, answerJson(200, { action: 'reveal 1 1' })]);
    const http = new Http(url, undefined, 5000);
    const step = { attempt: 0, step: 3, observation: 'board' };
    await expect(http.post('/v1/sessions/ses_1/steps', step)).resolves.toEqual({ action: 'reveal 1 1' });
    expect(seen).toEqual([
      { method: 'POST', url: '/v1/sessions/ses_1/steps', body: JSON.stringify(step) },
      { method: 'POST', url: '/v1/sessions/ses_1/steps', body: JSON.stringify(step) },
    ]);
  });

  it('408 on every try: gives up after 6 requests with the 408 HttpError', async () => {
    // Retry-After (fractional seconds, which the client honours) keeps the five waits short.
    const quick408 = (res: ServerResponse) => {
      res.writeHead(408, { 'content-type': 'application/problem+json', connection: 'close', 'retry-after': '0.02' });
      res.end(TIMEOUT_408);
    };
    const { url, seen } = await stub([quick408]);
    const http = new Http(url, undefined, 5000);
    const err = await http.get('/v1/models').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HttpError);
    expect((err as HttpError).status).toBe(408);
    expect(describeHttpFailure(err)).toBe('408 request-timeout: the request was not received in time');
    expect(seen.length).toBe(6);
  });

  it('a 400 is not retried', async () => {
    const { url, seen } = await stub([answerJson(400, { type: 'https://lamer-server.dev/problems/validation', detail: 'bad' })]);
    const http = new Http(url, undefined, 5000);
    const err = await http.post('/v1/sessions', {}).catch((e: unknown) => e);
    expect((err as HttpError).status).toBe(400);
    expect(seen.length).toBe(1);
  });
});
