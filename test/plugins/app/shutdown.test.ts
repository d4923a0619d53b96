/**
 * src/plugins/app/shutdown.ts over real sockets: during `close()` an in-flight request is answered
 * (with `connection: close`), a connection accepted but still silent gets time to send its request
 * and is refused with the 503 problem, an idle keep-alive connection is closed without a reset,
 * and once the listener is closed new connections are refused (not reset).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { startTestServer, tmpDir } from '../../helpers/index.js';

/** A raw socket that collects everything it receives and how it ended. */
function rawSocket(port: number): Promise<{ sock: net.Socket; text: () => string; ended: Promise<string | null> }> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let text = '';
    sock.on('data', (d) => (text += d.toString('utf8')));
    const ended = new Promise<string | null>((r) => {
      sock.on('error', (e: NodeJS.ErrnoException) => r(e.code ?? e.message));
      sock.on('close', () => r(null));
    });
    sock.once('connect', () => resolve({ sock, text: () => text, ended }));
    sock.once('error', reject);
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('graceful shutdown over real sockets', () => {
  it('in-flight request answered with connection: close; a silent fresh connection gets its 503; an idle keep-alive connection is closed cleanly; later connections are refused', async () => {
    const s = await startTestServer();
    const port = Number(new URL(s.url).port);
    // 1. keep-alive connection that already had an answer, now idle
    const idle = await rawSocket(port);
    idle.sock.write('GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n');
    while (!idle.text().includes('\r\n\r\n')) await sleep(5);
    // 2. a request in flight: headers sent, body not complete
    const body = JSON.stringify({ taskId: 't', instructions: 'x', maxAttempts: 1, maxSteps: 2 });
    const inflight = await rawSocket(port);
    inflight.sock.write(`POST /v1/sessions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body.slice(0, 5)}`);
    // 3. a fresh connection that has not sent anything yet
    const fresh = await rawSocket(port);
    await sleep(50);

    const closing = s.close();
    // Past the drain window: waits for the listener to close (a fixed sleep raced it on a loaded
    // machine), then sends at once, well inside the fresh connection's time to send its request.
    while (s.app.server.listening) await sleep(5);
    inflight.sock.write(body.slice(5));
    fresh.sock.write('GET /v1/sessions HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n');
    const refused = await new Promise<string>((resolve) => {
      const c = net.connect(port, '127.0.0.1');
      c.on('connect', () => resolve('connected'));
      c.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
    });
    await closing;

    expect(await inflight.ended).toBeNull();
    expect(inflight.text()).toMatch(/^HTTP\/1\.1 201 /);
    expect(inflight.text()).toMatch(/\r\nconnection: close\r\n/i);
    expect(await fresh.ended).toBeNull();
    expect(fresh.text()).toMatch(/^HTTP\/1\.1 503 /);
    expect(fresh.text()).toContain('"type":"https://lamer-server.dev/problems/shutting-down"');
    expect(fresh.text()).toMatch(/\r\nretry-after: 1\r\n/i);
    expect(await idle.ended).toBeNull();
    expect(refused).toBe('ECONNREFUSED');
  }, 30_000);
});

/** Raw HTTP/1.1 exchange on one socket: the whole answer text until the server closes. */
function rawExchange(port: number, onConnected: (sock: import('node:net').Socket) => void): Promise<{ text: string; error: string | null }> {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1', () => onConnected(sock));
    let text = '';
    sock.on('data', (d) => (text += d.toString('utf8')));
    sock.on('error', (e) => resolve({ text, error: (e as NodeJS.ErrnoException).code ?? e.message }));
    sock.on('close', () => resolve({ text, error: null }));
  });
}

describe('graceful shutdown at the edge of the event loop', () => {
  it('a request whose bytes arrived just before close gets 503 shutting-down problem+json with Retry-After, not a reset', async () => {
    const t = await startTestServer();
    const port = Number(new URL(t.url).port);
    const req = 'GET /v1/sessions HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n';
    let closed: Promise<void> | undefined;
    const answer = await rawExchange(port, (sock) => {
      // Connected and idle; then the request bytes reach the server in the same turn as close().
      setTimeout(() => {
        sock.write(req);
        const until = Date.now() + 30;
        while (Date.now() < until); // the event loop is busy (a forward pass): the bytes wait unread
        closed = t.close();
      }, 50);
    });
    await closed;
    expect(answer.error).toBeNull();
    expect(answer.text).toMatch(/^HTTP\/1\.1 503 /);
    expect(answer.text).toMatch(/content-type: application\/problem\+json/i);
    expect(answer.text).toMatch(/retry-after: 1\r\n/i);
    expect(answer.text).toContain('"type":"https://lamer-server.dev/problems/shutting-down"');
  });

  it('a connection still in the accept backlog (event loop busy) at close gets the 503 answer, not a reset', async () => {
    const t = await startTestServer();
    const port = Number(new URL(t.url).port);
    // A client in another process connects and sends a request while this process is busy.
    const marker = path.join(tmpDir('lamer-backlog-'), 'sent');
    const client = spawn(process.execPath, ['-e', `
      const s = require('node:net').connect(${port}, '127.0.0.1', () => { s.write('GET /healthz HTTP/1.1\\r\\nhost: x\\r\\n\\r\\n'); console.log('SENT'); require('node:fs').writeFileSync(${JSON.stringify(marker)}, ''); });
      let t = ''; s.on('data', (d) => t += d); s.on('error', (e) => { console.log('ERROR ' + e.code); });
      s.on('close', () => console.log('ANSWER ' + t.split('\\r\\n')[0]));
    `]);
    let out = '';
    client.stdout.on('data', (d) => (out += d));
    const exited = new Promise((r) => client.once('exit', r));
    // Busy until the client has sent (its bytes sit in the backlog, unread), then close. The client
    // says so with a file (this event loop cannot read its output); a slow machine may need seconds.
    const until = Date.now() + 20_000;
    while (!fs.existsSync(marker) && Date.now() < until);
    await t.close();
    await exited;
    expect(out).not.toContain('ERROR');
    expect(out).toContain('ANSWER HTTP/1.1 503 Service Unavailable');
  });
});

describe('operations routes during the shutdown', () => {
  it('/readyz and /healthz answer 503 shutting-down (problem+json, Retry-After) once the shutdown has begun, not 500', async () => {
    const t = await startTestServer();
    try {
      expect((await t.call('GET', '/readyz')).status).toBe(200);
      t.app.beginShutdown();
      for (const p of ['/readyz', '/healthz']) {
        const r = await t.call('GET', p);
        expect(r.status, p).toBe(503);
        expect(r.type, p).toMatch(/^application\/problem\+json/);
        expect(r.body.type, p).toBe('https://lamer-server.dev/problems/shutting-down');
        expect(r.headers.get('retry-after'), p).toBe('1');
        expect(r.headers.get('connection'), p).toBe('close');
      }
    } finally {
      await t.close();
    }
  });
});
