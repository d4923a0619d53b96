/** Readiness probe of the database handle (src/db/index.ts `ping`), used by GET /readyz. */
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/index.js';
import { tmpDir } from '../helpers/index.js';

describe('DatabaseConnection.ping', () => {
  it('is true while the connection is open and false once it is closed, without throwing', () => {
    const dir = tmpDir('lamer-ping-');
    const d = openDatabase(dir);
    try {
      expect(d.ping()).toBe(true);
      d.close();
      expect(d.ping()).toBe(false);
    } finally {
      d.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
