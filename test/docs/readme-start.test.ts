/**
 * README.md's first screen: the set-up block stays two commands, and right below it one line says
 * how to change the port, with the option and the variable that the server really reads.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';

const readme = readFileSync(join(import.meta.dirname, '..', '..', 'README.md'), 'utf8');

describe('README.md first screen', () => {
  it('keeps the two set-up commands and says how to change the port before the tests section', () => {
    const firstScreen = readme.slice(0, readme.indexOf('**Run the tests:**'));
    expect(firstScreen).toContain('```sh\nnpm ci && npm start\n```');
    const portLine = firstScreen.split('\n\n').find((p) => p.startsWith('Another port:'));
    expect(portLine).toBeDefined();
    expect(portLine).toContain('`npm start -- --port 9090`');
    expect(portLine).toContain('`LAMER_PORT=9090 npm start`');
  });

  it('names the variable the configuration reads', () => {
    expect(loadConfig({ LAMER_PORT: '9090' }).port).toBe(9090);
  });
});
