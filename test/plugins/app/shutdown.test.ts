/**
 * src/plugins/app/shutdown.ts over real sockets: during `close()` an in-flight request is answered
 * (with `connection: close`), a connection accepted but still silent gets time to send its request
 * and is refused with the 503 problem, an idle keep-alive connection is closed without a reset,
 * and once the listener is closed new connections are refused (not reset).
 */
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { startTestServer } from '../../helpers/index.js';

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
    idle.sock.write('GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n');
    while (!idle.text().includes('\r\n\r\n')) await sleep(5);
    // 2. a request in flight: headers sent, body not complete
    const body = JSON.stringify({ taskId: 't', instructions: 'x', maxAttempts: 1, maxSteps: 2 });
    const inflight = await rawSocket(port);
    inflight.sock.write(`POST /v1/sessions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body.slice(0, 5)}`);
    // 3. a fresh connection that has not sent anything yet
    const fresh = await rawSocket(port);
    await sleep(50);

    const closing = s.close();
    await sleep(250); // past the drain window: the listener is closed
    inflight.sock.write(body.slice(5));
    fresh.sock.write('GET /v1/sessions HTTP/1.1\r\nhost: x\r\n\r\n');
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
