/**
 * The gateway configuration, docker/nginx.conf, run by a real nginx on loopback (test/helpers/nginx.ts).
 *
 * First against two small stand-in upstreams, so that which requests nginx passes on is certain:
 * one that resets every connection once it has read a request (as a replica killed mid-request
 * does) or a port nothing listens on, and one that records what reaches it. Steps (idempotent by
 * session, attempt and step) are passed on to the next upstream with their whole body; other POSTs
 * are passed on only when the first replica never got them (a refused connection), never once sent.
 *
 * Then in front of two real `lamer serve` processes, each on its own SQLite data directory
 * (sessions cannot move between them, so only requests that need no session state are checked
 * across them): routing to both, request ids, body limits, /metrics kept off the gateway, and one
 * replica killed with SIGKILL while clients keep sending GETs: no client sees an error, and the
 * gateway's log shows the requests it passed on from the dead replica.
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import Database from 'better-sqlite3';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startDetached, type Started } from '../helpers/cli.js';
import { playSessions, type StoredStep, storedOnceProblems } from '../helpers/scale-out.js';
import { GATEWAY_CONFIG, type NginxGateway, nginxUnavailable, renderGatewayConfig, startNginx } from '../helpers/nginx.js';

const skip = nginxUnavailable();
if (skip) console.warn(`nginx tests skipped: ${skip}`);

const gateways: NginxGateway[] = [];
afterAll(async () => {
  for (const g of gateways.splice(0)) await g.stop();
});

async function gatewayFor(ports: number[]): Promise<NginxGateway> {
  const g = await startNginx({ upstreams: ports });
  if ('skip' in g) throw new Error(`nginx could not start: ${g.skip}`);
  gateways.push(g);
  return g;
}

/** An upstream that reads one request's head on each connection, counts it, and resets the connection. */
async function resetter(): Promise<{ port: number; seen: () => number; close: () => Promise<void> }> {
  let seen = 0;
  const srv = net.createServer((sock) => {
    let head = '';
    sock.on('data', (d: Buffer) => {
      head += d.toString('latin1');
      if (head.includes('\r\n\r\n')) {
        seen++;
        sock.resetAndDestroy();
      }
    });
    sock.on('error', () => {});
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  return { port: (srv.address() as net.AddressInfo).port, seen: () => seen, close: () => new Promise((r) => srv.close(() => r())) };
}

interface Recorded {
  method: string;
  url: string;
  body: string;
}

/** An upstream that answers 200 `{"recorded": n}` and keeps every request it got. */
async function recorder(): Promise<{ port: number; got: Recorded[]; close: () => Promise<void> }> {
  const got: Recorded[] = [];
  const srv = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      got.push({ method: req.method!, url: req.url!, body: Buffer.concat(chunks).toString('utf8') });
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ recorded: got.length }));
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  return {
    port: (srv.address() as net.AddressInfo).port,
    got,
    close: () => new Promise((r) => srv.close(() => r())),
  };
}

async function send(base: string, method: string, p: string, body?: string): Promise<{ status: number; text: string; headers: Headers }> {
  const r = await fetch(base + p, { method, body, headers: body === undefined ? {} : { 'content-type': 'application/json' } });
  return { status: r.status, text: await r.text(), headers: r.headers };
}

describe.skipIf(skip)('docker/nginx.conf: which requests nginx passes on to the next replica', () => {
  const stepBody = JSON.stringify({ attempt: 0, step: 3, observation: 'x'.repeat(40_000), reward: -0.1 });
  // Two requests of each kind on a fresh gateway: round robin sends one of them to the failing
  // upstream first (the other goes straight to the recorder), whichever comes first.
  const passedOn: Array<[string, string, string | undefined]> = [
    ['POST', '/v1/sessions/s-1/steps', stepBody],
    ['POST', '/v1/steps:batch', JSON.stringify({ items: [{ sessionId: 's-1', attempt: 0, step: 3, observation: 'x' }] })],
    ['GET', '/v1/sessions?limit=5', undefined],
    ['PUT', '/v1/sessions/s-1/memory/0', JSON.stringify({ text: 'remember the box' })],
  ];
  for (const [method, p, body] of passedOn) {
    it(`${method} ${p} whose replica reset the connection after reading it is passed on with its whole body: the client sees 200`, async () => {
      const [bad, good] = [await resetter(), await recorder()];
      const g = await gatewayFor([bad.port, good.port]);
      try {
        const answers = [await send(g.url, method, p, body), await send(g.url, method, p, body)];
        expect(answers.map((a) => a.status)).toEqual([200, 200]);
        expect(bad.seen()).toBe(1);
        expect(good.got).toEqual([0, 1].map(() => ({ method, url: p, body: body ?? '' })));
        const log = await g.accessLogAtLeast(2);
        expect(log.map((e) => e.upstreamStatus).sort()).toEqual(['200', '502, 200']);
        expect(log.find((e) => e.upstreamStatus === '502, 200')!.upstream).toBe(`127.0.0.1:${bad.port}, 127.0.0.1:${good.port}`);
      } finally {
        await Promise.all([bad.close(), good.close(), g.stop()]);
      }
    });
  }

  // POSTs that are not idempotent: a session created twice, a turn recorded twice, an attempt ended twice.
  const notPassedOn: Array<[string, string]> = [
    ['/v1/sessions', JSON.stringify({ taskId: 't', instructions: 'x' })],
    ['/v1/sessions/s-1/openai/v1/chat/completions', JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] })],
    ['/v1/sessions/s-1/attempts/0/end', JSON.stringify({ reward: 1, success: true })],
    ['/v1/sessions/s-1/steps/extra', JSON.stringify({})],
    ['/v1/training/jobs', JSON.stringify({})],
  ];
  for (const [p, body] of notPassedOn) {
    it(`POST ${p} that reached a replica which then reset the connection is answered 502, never sent twice`, async () => {
      const [bad, good] = [await resetter(), await recorder()];
      const g = await gatewayFor([bad.port, good.port]);
      try {
        const answers = [await send(g.url, 'POST', p, body), await send(g.url, 'POST', p, body)];
        expect(answers.map((a) => a.status).sort()).toEqual([200, 502]);
        expect(bad.seen()).toBe(1);
        expect(good.got).toEqual([{ method: 'POST', url: p, body }]);
        expect((await g.accessLogAtLeast(2)).map((e) => e.upstreamStatus).sort()).toEqual(['200', '502']);
      } finally {
        await Promise.all([bad.close(), good.close(), g.stop()]);
      }
    });
  }

  it('a replica that refuses connections is skipped for every request, POST /v1/sessions included (it never got it)', async () => {
    const [closed, good] = [await freePort(), await recorder()];
    const g = await gatewayFor([closed, good.port]);
    try {
      const body = JSON.stringify({ taskId: 't', instructions: 'x' });
      const answers = [await send(g.url, 'POST', '/v1/sessions', body), await send(g.url, 'POST', '/v1/sessions', body)];
      expect(answers.map((a) => a.status)).toEqual([200, 200]);
      expect(good.got).toHaveLength(2);
      expect((await g.accessLogAtLeast(2)).map((e) => e.upstreamStatus).sort()).toEqual(['200', '502, 200']);
    } finally {
      await Promise.all([good.close(), g.stop()]);
    }
  });

  it('when every replica fails, the client gets 502 after one try on each, with a request id', async () => {
    const [bad1, bad2] = [await resetter(), await resetter()];
    const g = await gatewayFor([bad1.port, bad2.port]);
    try {
      const a = await send(g.url, 'POST', '/v1/sessions/s-1/steps', stepBody);
      expect(a.status).toBe(502);
      expect(a.headers.get('x-request-id')).toMatch(/^[0-9a-f]{32}$/);
      expect([bad1.seen(), bad2.seen()]).toEqual([1, 1]);
    } finally {
      await Promise.all([bad1.close(), bad2.close(), g.stop()]);
    }
  });
});

describe.skipIf(skip)('docker/nginx.conf in front of two lamer-server replicas (SQLite, one data directory each)', () => {
  let a: Started;
  let b: Started;
  let g: NginxGateway;
  const portOf = (s: Started) => Number(new URL(s.url).port);

  beforeAll(async () => {
    // one after the other, each given 90 s: under a full test run on 2 busy cores a start can take long
    a = await startDetached('node', {}, [], 90_000);
    b = await startDetached('node', {}, [], 90_000);
    g = await gatewayFor([portOf(a), portOf(b)]);
  }, 200_000);

  afterAll(async () => {
    for (const s of [a, b]) {
      if (s && s.child.exitCode === null && s.child.signalCode === null) {
        process.kill(-s.child.pid!, 'SIGTERM');
        await s.exited;
      }
    }
  });

  it('routes requests to both replicas (round robin) and passes /readyz through', async () => {
    const before = g.accessLog().length;
    for (let i = 0; i < 6; i++) expect((await send(g.url, 'GET', '/readyz')).status).toBe(200);
    const used = new Set((await g.accessLogAtLeast(before + 6)).slice(before).map((e) => e.upstream));
    expect(used).toEqual(new Set([`127.0.0.1:${portOf(a)}`, `127.0.0.1:${portOf(b)}`]));
  });

  it("keeps the client's request id, makes one when there is none, and returns it once", async () => {
    const before = (await g.accessLogAtLeast(0)).length;
    const kept = await fetch(`${g.url}/healthz`, { headers: { 'x-request-id': 'client-id-7' } });
    expect(kept.headers.get('x-request-id')).toBe('client-id-7');
    const made = await fetch(`${g.url}/healthz`);
    expect(made.headers.get('x-request-id')).toMatch(/^[0-9a-f]{32}$/);
    expect((await g.accessLogAtLeast(before + 2)).slice(before, before + 2).map((e) => e.requestId)).toEqual(['client-id-7', made.headers.get('x-request-id')]);
  });

  it("passes bodies up to the batch limit to the replica (its own 413 problem for a 3 MiB session body), and refuses over 16 MiB itself", async () => {
    const big = JSON.stringify({ taskId: 't', instructions: 'x'.repeat(3 * 1024 * 1024) });
    const r = await fetch(`${g.url}/v1/sessions`, { method: 'POST', body: big, headers: { 'content-type': 'application/json' } });
    expect(r.status).toBe(413);
    expect(r.headers.get('content-type')).toContain('application/problem+json');
    await r.text();
    const huge = Buffer.alloc(16 * 1024 * 1024 + 1, 0x20);
    const n = await fetch(`${g.url}/v1/steps:batch`, { method: 'POST', body: huge, headers: { 'content-type': 'application/json' } });
    expect(n.status).toBe(413);
    expect(n.headers.get('content-type')).toContain('text/html');
    await n.text();
  });

  it('answers /metrics 404 (scraped on the private network, not through the gateway)', async () => {
    expect((await send(g.url, 'GET', '/metrics')).status).toBe(404);
  });

  it('a replica killed with SIGKILL while 8 clients send GETs: every request is answered 200, the dead one is passed over', async () => {
    const paths = ['/readyz', '/v1/sessions?limit=5', '/healthz', '/v1/models'];
    const rounds = 60;
    let done = 0;
    const failures: string[] = [];
    let killedAt = Infinity;
    const client = async (c: number) => {
      for (let i = 0; i < rounds; i++) {
        const p = paths[(c + i) % paths.length]!;
        try {
          const r = await fetch(g.url + p);
          await r.arrayBuffer();
          if (r.status !== 200) failures.push(`${p}: ${r.status}`);
        } catch (err) {
          failures.push(`${p}: ${(err as Error).message}`);
        }
        if (++done === (8 * rounds) / 3) {
          killedAt = g.accessLog().length;
          process.kill(-b.child.pid!, 'SIGKILL');
        }
      }
    };
    await Promise.all(Array.from({ length: 8 }, (_, c) => client(c)));
    expect(await b.exited).toBe(-1);
    expect(failures).toEqual([]);
    expect(done).toBe(8 * rounds);
    const dead = `127.0.0.1:${portOf(b)}`;
    const afterKill = g.accessLog().slice(killedAt);
    // requests sent to the dead replica after the kill were passed on to the live one
    const passed = afterKill.filter((e) => e.upstream.startsWith(`${dead}, `));
    expect(passed.length).toBeGreaterThan(0);
    for (const e of passed) expect(e.upstreamStatus).toBe('502, 200');
    // a session is created on the live replica: the dead one refused the connection, so nothing was sent twice
    const created = await send(g.url, 'POST', '/v1/sessions', JSON.stringify({ taskId: 't', instructions: 'x' }));
    expect(created.status).toBe(201);
  });

  it('with the other replica dead, 32 clients play sessions through the gateway: no error, every answered step stored once', async () => {
    const before = g.accessLog().length;
    const played = await playSessions({ url: g.url, clients: 32, sessionsPerClient: 1, attempts: 2, steps: 4 });
    expect(played.errors).toEqual([]);
    expect(played.answered.size).toBe(32 * 2 * 5);
    const db = new Database(path.join(a.dataDir, 'lamer.db'), { readonly: true });
    try {
      const rows = db.prepare("SELECT session_id, attempt, step, kind, answer FROM steps WHERE session_id IN (SELECT id FROM sessions WHERE env = 'scale-out')").all();
      expect(storedOnceProblems(played, rows as StoredStep[])).toEqual([]);
      // the failed first attempts got their reflections
      expect(rows.filter((r) => (r as StoredStep).kind === 'reflection')).toHaveLength(32);
    } finally {
      db.close();
    }
    // the dead replica was probed again now and then (fail_timeout), and each such step was passed on
    const probed = g.accessLog().slice(before).filter((e) => e.upstream.includes(`:${portOf(b)}`));
    for (const e of probed) expect([e.upstreamStatus, e.status]).toEqual(['502, 200', e.uri.endsWith('/steps') ? 200 : 201]);
  });
});

describe('renderGatewayConfig: the deployed file, run on loopback', () => {
  const file = readFileSync(GATEWAY_CONFIG, 'utf8');
  const o = { upstreams: ['127.0.0.1:4001', '127.0.0.1:4002', '127.0.0.1:4003'], listen: '127.0.0.1:4000', dir: '/tmp/gw' };

  it('changes only the addresses, paths and worker count; every other line is the file’s', () => {
    const out = renderGatewayConfig(file, o).split('\n');
    const kept = file.split('\n').filter((l) => !/^\s*(server\s+lamer-|listen |pid |error_log |access_log \/dev|worker_processes )/.test(l));
    expect(out.filter((l) => !/\/tmp\/gw|127\.0\.0\.1:400|^worker_processes 1;$/.test(l))).toEqual(kept);
    expect(out.filter((l) => /^\s*server 127/.test(l)).map((l) => l.trim())).toEqual(
      o.upstreams.map((u) => `server ${u} max_fails=1 fail_timeout=5s;`),
    );
    expect(out).toContain('worker_processes 1;');
    expect(out.filter((l) => l.includes('_temp_path /tmp/gw/'))).toHaveLength(5);
  });

  it('refuses a file without one of the lines it replaces, or with one twice, naming it', () => {
    expect(() => renderGatewayConfig(file.replace('listen 8080;', 'listen 80;'), o)).toThrow('expected one listen 8080 line, found 0');
    expect(() => renderGatewayConfig(file.replace(/^pid .*$/m, (m) => `${m}\n${m}`), o)).toThrow('expected one pid line, found 2');
    expect(() => renderGatewayConfig(file.replace(/^\s*server lamer-\d.*$/gm, ''), o)).toThrow('the upstream lamer block has no server line');
    expect(() => renderGatewayConfig(file, { ...o, upstreams: [] })).toThrow('at least one upstream');
    expect(() => renderGatewayConfig(file, { ...o, dir: '/tmp/a b' })).toThrow('holds whitespace');
  });
});
