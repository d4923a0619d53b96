/**
 * `lamer serve` with LAMER_HEALTH_PORT (src/plugins/app/health-port.ts), as a real process: the
 * start log names the health listener's URL and it answers; SIGTERM still exits 0; a health port in
 * use is one line naming LAMER_HEALTH_PORT (exit 1, before any database is created); a bad value
 * is one line naming the variable (exit 2).
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { occupiedPort, serveOnce, startDetached, tmpDataDir } from '../helpers/cli.js';

describe('lamer serve with LAMER_HEALTH_PORT', () => {
  it('logs healthUrl in "lamer-server ready", answers there, and exits 0 on SIGTERM', async () => {
    const s = await startDetached('node', { LAMER_HEALTH_PORT: '0' });
    try {
      const m = /"healthUrl":"(http:\/\/127\.0\.0\.1:\d+)".*"msg":"lamer-server ready"/.exec(s.out());
      expect(m, s.out()).not.toBeNull();
      expect(s.out()).toContain('"msg":"health listener started (/healthz, /readyz on its own port)"');
      const r = await fetch(`${m![1]}/healthz`);
      expect(r.status).toBe(200);
      expect(await r.json()).toEqual({ status: 'ok' });
    } finally {
      process.kill(s.child.pid!, 'SIGTERM');
    }
    expect(await s.exited).toBe(0);
  }, 120_000);

  it('a health port in use -> one line naming LAMER_HEALTH_PORT, exit 1; no database is created', async () => {
    const { server: blocker, port } = await occupiedPort();
    try {
      const dir = path.join(tmpDataDir(), 'data');
      const r = await serveOnce({ LAMER_DATA_DIR: dir, LAMER_HEALTH_PORT: String(port), LAMER_LOG_LEVEL: 'silent' });
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(`lamer serve: cannot start: port ${port} on 127.0.0.1 is already in use (LAMER_HEALTH_PORT, LAMER_HOST)\n`);
      expect(fs.readdirSync(dir)).toEqual(['lamer.lock']);
    } finally {
      blocker.close();
    }
  }, 120_000);

  it('a bad LAMER_HEALTH_STALL_SECONDS -> one line naming it, exit 2', async () => {
    const r = await serveOnce({ LAMER_DATA_DIR: tmpDataDir(), LAMER_HEALTH_PORT: '0', LAMER_HEALTH_STALL_SECONDS: '0.1', LAMER_LOG_LEVEL: 'silent' });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('lamer serve: invalid configuration: LAMER_HEALTH_STALL_SECONDS="0.1": expected a number in [0.5, 3600]\n');
  }, 120_000);
});
