/**
 * Static checks of docker/compose.yaml (no Docker engine runs here): it parses as YAML (merge keys
 * resolved, as compose does), and its structure is asserted: PostgreSQL with a readiness check,
 * two replicas of the image on that database with one training role among them, health checks on
 * /readyz, nothing published but the gateway, one data volume every replica shares, and nginx
 * mounting docker/nginx.conf, whose upstream names exactly the replicas. The nginx file itself is
 * run by a real nginx in test/docker/nginx-gateway.test.ts.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

const ROOT = join(import.meta.dirname, '..', '..');
const DOCKER = join(ROOT, 'docker');
const text = readFileSync(join(DOCKER, 'compose.yaml'), 'utf8');
const compose = parse(text, { merge: true }) as Record<string, any>;
const services = compose.services as Record<string, any>;
const replicas = Object.keys(services).filter((n) => /^lamer-\d+$/.test(n));
const nginxConf = readFileSync(join(DOCKER, 'nginx.conf'), 'utf8');

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/** Seconds of a compose duration such as `60s`, `1m30s`. */
function seconds(d: string): number {
  let total = 0;
  for (const m of d.matchAll(/(\d+)(h|m|s)/g)) total += Number(m[1]) * { h: 3600, m: 60, s: 1 }[m[2] as 'h' | 'm' | 's'];
  return total;
}

describe('docker/compose.yaml', () => {
  it('is YAML with the four services: postgres, two replicas and the gateway', () => {
    expect(Object.keys(services).sort()).toEqual(['gateway', 'lamer-1', 'lamer-2', 'postgres']);
    expect(replicas).toEqual(['lamer-1', 'lamer-2']);
  });

  it('every interpolation is a variable with an optional default or a required-message', () => {
    const refs = [...text.matchAll(/\$\{([^}]*)\}/g)].map((m) => m[1]!);
    expect(refs.length).toBeGreaterThan(0);
    for (const r of refs) expect(r).toMatch(/^[A-Z_][A-Z0-9_]*(?::?[-?][^}]*)?$/);
    // secrets have no defaults: the run stops with the message when they are unset
    expect(text).toContain('${LAMER_API_KEYS:?');
    expect(text).toContain('${LAMER_PG_PASSWORD:?');
  });

  it('postgres: PostgreSQL 15 (the version the tests run), a data volume and pg_isready as its health check', () => {
    const pg = services.postgres;
    expect(pg.image).toMatch(/^postgres:15[-.]/);
    expect(pg.volumes).toContain('pg-data:/var/lib/postgresql/data');
    expect(pg.healthcheck.test).toEqual(['CMD', 'pg_isready', '-U', pg.environment.POSTGRES_USER, '-d', pg.environment.POSTGRES_DB]);
    expect(pg.ports).toBeUndefined();
  });

  it('each replica: the image, the database URL of that service, API keys, ready only when /readyz is 200, after postgres is healthy', () => {
    const pg = services.postgres.environment;
    for (const name of replicas) {
      const s = services[name];
      expect(s.image, name).toMatch(/lamer-server/);
      const url = new URL(String(s.environment.LAMER_DATABASE_URL).replace(/\$\{[^}]*\}/, 'secret'));
      expect([url.protocol, url.hostname, url.port, url.pathname, url.username]).toEqual(['postgres:', 'postgres', '5432', `/${pg.POSTGRES_DB}`, pg.POSTGRES_USER]);
      expect(s.environment.LAMER_API_KEYS).toMatch(/^\$\{LAMER_API_KEYS:\?/);
      expect(s.healthcheck.test.join(' ')).toContain("fetch('http://127.0.0.1:8080/readyz')");
      expect(s.depends_on.postgres.condition).toBe('service_healthy');
      expect(s.expose).toEqual(['8080']);
      expect(s.ports, `${name} must not be published`).toBeUndefined();
      expect(s.init).toBe(true);
      expect(seconds(s.stop_grace_period)).toBeGreaterThanOrEqual(60);
    }
  });

  it('one replica may train (role both or trainer), the others only serve', () => {
    const roles = replicas.map((n) => services[n].environment.LAMER_ROLE);
    for (const r of roles) expect(['server', 'trainer', 'both']).toContain(r);
    expect(roles.filter((r) => r !== 'server')).toHaveLength(1);
  });

  it('every replica mounts the one shared data volume at /data, its data directory (checkpoints, demonstrations), and nothing else', () => {
    // on PostgreSQL the data directory holds files only: what one replica writes (a trained
    // checkpoint, a job's demonstrations) another reads, so all mount the same volume
    for (const n of replicas) expect(services[n].volumes, n).toEqual(['lamer-data:/data']);
    for (const n of replicas) expect(services[n].environment.LAMER_DATA_DIR ?? '/data', n).toBe('/data');
    for (const v of ['lamer-data', 'pg-data']) expect(compose.volumes).toHaveProperty(v);
  });

  it('replicas believe X-Forwarded-* only from the gateway, whose fixed address lies in the network', () => {
    const address = services.gateway.networks.lamer.ipv4_address as string;
    const subnet = compose.networks.lamer.ipam.config[0].subnet as string;
    expect(address.split('.').slice(0, 3)).toEqual(subnet.split('/')[0]!.split('.').slice(0, 3));
    expect(subnet.endsWith('/24')).toBe(true);
    for (const n of replicas) expect(services[n].environment.LAMER_TRUST_PROXY).toBe(address);
  });

  it('gateway: nginx with docker/nginx.conf, after both replicas are healthy, published on loopback only', () => {
    const g = services.gateway;
    expect(g.image).toMatch(/^nginx:\d+\.\d+/);
    expect(g.volumes).toContain('./nginx.conf:/etc/nginx/nginx.conf:ro');
    expect(existsSync(join(DOCKER, 'nginx.conf'))).toBe(true);
    for (const n of replicas) expect(g.depends_on[n].condition).toBe('service_healthy');
    expect(g.ports).toHaveLength(1);
    expect(g.ports[0]).toMatch(/^127\.0\.0\.1:.*:8080$/);
    expect(g.healthcheck.test.join(' ')).toContain('/gateway/healthz');
  });

  it("nginx.conf's upstream is exactly the replicas on their port, and it listens where the gateway is published", () => {
    const upstream = /upstream\s+lamer\s*\{([\s\S]*?)\n\s*\}/.exec(nginxConf)![1]!;
    const servers = [...upstream.matchAll(/^\s*server\s+(\S+)/gm)].map((m) => m[1]);
    expect(servers).toEqual(replicas.map((n) => `${n}:8080`));
    expect(nginxConf).toMatch(/^\s*listen 8080;/m);
    expect(nginxConf).toMatch(/^\s*location = \/gateway\/healthz \{/m);
  });

  it('passes only LAMER_* settings the server reads', () => {
    const src = sources(join(ROOT, 'src')).map((f) => readFileSync(f, 'utf8')).join('\n');
    const used = new Set(replicas.flatMap((n) => Object.keys(services[n].environment)));
    const unknown = [...used].filter((v) => v.startsWith('LAMER_') && !new RegExp(`\\b${v}\\b`).test(src));
    expect(unknown).toEqual([]);
  });
});
