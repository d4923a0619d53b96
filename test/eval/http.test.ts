/**
 * The eval harness's HTTP client over real HTTP against stub servers: which failures are retried
 * (408/429/503 always; network errors only for requests that are safe to send twice, or that never
 * reached a server) and how a failure is described.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTcpServer, type AddressInfo } from 'node:net';
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

/** The answer lost: the request was read (and could have been processed), then the connection is cut. */
const drop = (res: ServerResponse) => {
  res.socket?.destroy();
};

/** A loopback port nothing listens on (bound, then closed). */
async function freePort(): Promise<number> {
  const srv = createTcpServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const port = (srv.address() as AddressInfo).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

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

describe('Http: network errors are retried only where a second send is harmless', () => {
  const create = { taskId: 't', instructions: 'x' };

  it('POST /v1/sessions whose connection is cut after the request was read is not sent again (it may have opened a session)', async () => {
    const { url, seen } = await stub([drop, answerJson(201, { id: 'ses_2' })]);
    const err = await new Http(url, undefined, 5000).post('/v1/sessions', create).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TypeError);
    expect((err as Error).message).toBe('fetch failed');
    expect(seen).toEqual([{ method: 'POST', url: '/v1/sessions', body: JSON.stringify(create) }]);
  });

  it('a step (idempotent: the server returns the stored answer) is sent again after the same cut', async () => {
    const { url, seen } = await stub([drop, answerJson(200, { action: 'reveal 1 1' })]);
    const step = { attempt: 0, step: 1, observation: 'board', reward: 0 };
    await expect(new Http(url, undefined, 5000).post('/v1/sessions/ses_1/steps', step, { idempotent: true })).resolves.toEqual({ action: 'reveal 1 1' });
    expect(seen.map((x) => [x.method, x.url, x.body])).toEqual([
      ['POST', '/v1/sessions/ses_1/steps', JSON.stringify(step)],
      ['POST', '/v1/sessions/ses_1/steps', JSON.stringify(step)],
    ]);
  });

  it('GET and DELETE are sent again after the same cut', async () => {
    const { url, seen } = await stub([drop, answerJson(200, { active: 'base' }), drop, answerJson(200, {})]);
    const http = new Http(url, undefined, 5000);
    await expect(http.get('/v1/models')).resolves.toEqual({ active: 'base' });
    await expect(http.del('/v1/sessions/ses_1')).resolves.toBeUndefined();
    expect(seen.map((x) => `${x.method} ${x.url}`)).toEqual(['GET /v1/models', 'GET /v1/models', 'DELETE /v1/sessions/ses_1', 'DELETE /v1/sessions/ses_1']);
  });

  it('POST /v1/sessions answered 503 (nothing processed) is sent again', async () => {
    const busy = (res: ServerResponse) => {
      res.writeHead(503, { 'content-type': 'application/problem+json', 'retry-after': '0.02' });
      res.end(JSON.stringify({ type: 'https://lamer-server.dev/problems/overloaded', status: 503, detail: 'busy' }));
    };
    const { url, seen } = await stub([busy, answerJson(201, { id: 'ses_1' })]);
    await expect(new Http(url, undefined, 5000).post('/v1/sessions', create)).resolves.toEqual({ id: 'ses_1' });
    expect(seen.length).toBe(2);
  });

  it('POST /v1/sessions refused at connect (never reached a server) is sent again once the server listens', async () => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const seen: string[] = [];
    setTimeout(() => {
      server = createServer((req, res) => {
        seen.push(`${req.method} ${req.url}`);
        req.resume().on('end', () => answerJson(201, { id: 'ses_1' })(res));
      });
      server.listen(port, '127.0.0.1');
    }, 200);
    await expect(new Http(url, undefined, 5000).post('/v1/sessions', create)).resolves.toEqual({ id: 'ses_1' });
    expect(seen).toEqual(['POST /v1/sessions']);
  });
});
