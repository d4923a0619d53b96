/**
 * Plain HTTP helpers shared by the benches that start a server process and drive it
 * (bench/http.ts, bench/healthz-burst.ts).
 */
import http from 'node:http';
import net from 'node:net';

/** A TCP port free on 127.0.0.1 at the moment of asking. @throws Error when none is given. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const a = srv.address();
      srv.close(() => (typeof a === 'object' && a ? resolve(a.port) : reject(new Error('no port'))));
    });
  });
}

/**
 * One request to 127.0.0.1:`port` through `agent`, `body` sent as JSON: the answer's status and
 * parsed JSON body (null when empty). @throws Error on a connection error or a body that is not JSON.
 */
export function request(agent: http.Agent, port: number, method: string, p: string, body?: unknown): Promise<{ status: number; json: any }> {
  const data = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, method, path: p, agent, headers: data ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } : {} },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, json: text ? JSON.parse(text) : null });
        });
      },
    );
    req.on('error', reject);
    if (data) req.write(data);
    req.end();
  });
}
