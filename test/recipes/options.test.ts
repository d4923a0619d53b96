/**
 * The recipes' option tables (src/recipes/options.ts): each kind's reading and refusal, defaults,
 * `--config FILE` under the command line, and the usage text made from the table.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { flagOf, opt, parseTable, usageText } from '../../src/recipes/options.js';
import { UsageError } from '../../src/shared/usage-error.js';
import { tmpDir } from '../helpers/index.js';

const TABLE = {
  minutes: opt.number({ meta: 'M', default: 95, range: [0.05, 10_000], help: 'budget in minutes' }),
  steps: opt.int({ default: null, range: [1, 1000], help: 'optimiser steps' }),
  sessions: opt.digits({ default: 12, min: 1, help: 'sessions' }),
  dataThread: opt.onOff({ default: false, help: 'a data thread' }),
  memoryAt: opt.choice({ default: 'tail', choices: ['head', 'tail'], help: 'where the memory goes' }),
  curriculum: opt.text({ meta: 'LIST', default: 'a:1,b:2', parse: (t) => t.split(',').map((x) => x.split(':')[0]!), help: 'envs' }),
  from: opt.text({ meta: 'DIR', default: null, help: 'start checkpoint' }),
  overwrite: opt.flag({ help: 'replace' }),
};

const parse = (argv: string[]) => parseTable(TABLE, argv);
const refusal = (argv: string[]) => {
  try {
    parse(argv);
  } catch (e) {
    expect(e).toBeInstanceOf(UsageError);
    return (e as Error).message;
  }
  throw new Error(`${argv.join(' ')} was accepted`);
};

/** A config file with `json` in a fresh folder. */
function configFile(json: unknown): string {
  const file = path.join(tmpDir('lamer-recipe-config-'), 'run.json');
  fs.writeFileSync(file, typeof json === 'string' ? json : JSON.stringify(json));
  return file;
}

describe('parseTable', () => {
  it('gives every default when nothing is given, a text default read by its parse', () => {
    const r = parse([])!;
    expect(r.args).toEqual({ minutes: 95, steps: null, sessions: 12, dataThread: false, memoryAt: 'tail', curriculum: ['a', 'b'], from: null, overwrite: false });
    expect([...r.given]).toEqual([]);
  });

  it('reads each kind from the command line and names what was given', () => {
    const r = parse(['--minutes', '1.5', '--steps', '1e2', '--sessions', '7', '--data-thread', 'on', '--memory-at', 'head', '--curriculum', 'x:1', '--from', 'ck', '--overwrite'])!;
    expect(r.args).toEqual({ minutes: 1.5, steps: 100, sessions: 7, dataThread: true, memoryAt: 'head', curriculum: ['x'], from: 'ck', overwrite: true });
    expect([...r.given].sort()).toEqual(['curriculum', 'dataThread', 'from', 'memoryAt', 'minutes', 'overwrite', 'sessions', 'steps']);
  });

  it('refuses each kind\'s bad values with one line naming the option', () => {
    expect(refusal(['--minutes', 'x'])).toBe("--minutes must be a number in [0.05, 10000], got 'x'");
    expect(refusal(['--minutes', ' '])).toBe("--minutes must be a number in [0.05, 10000], got ' '");
    expect(refusal(['--steps', '2.5'])).toBe("--steps must be an integer in [1, 1000], got '2.5'");
    expect(refusal(['--steps', '1001'])).toBe("--steps must be an integer in [1, 1000], got '1001'");
    expect(refusal(['--sessions', '1e2'])).toBe("--sessions must be an integer >= 1 written in digits, got '1e2'");
    expect(refusal(['--data-thread', 'yes'])).toBe("--data-thread must be on or off, got 'yes'");
    expect(refusal(['--memory-at', 'middle'])).toBe("--memory-at must be head or tail, got 'middle'");
    expect(refusal(['--bogus'])).toMatch(/^Unknown option '--bogus'/);
    expect(refusal(['stray'])).toMatch(/positional/);
    expect(refusal(['--minutes', '-5'])).toBe("--minutes needs a value (one that starts with '-' must be written --minutes=VALUE)");
  });

  it('--help gives null, whatever else is there', () => {
    expect(parse(['--help'])).toBeNull();
    expect(parse(['-h', '--minutes', '3'])).toBeNull();
  });

  it('--config FILE gives values by flag name, the command line overrides them, and $comment is skipped', () => {
    const file = configFile({ $comment: 'a run', minutes: 110, 'data-thread': 'on', steps: null, curriculum: 'c:1', overwrite: true, sessions: '30' });
    const r = parse(['--config', file, '--minutes', '2'])!;
    expect(r.args).toEqual({ minutes: 2, steps: null, sessions: 30, dataThread: true, memoryAt: 'tail', curriculum: ['c'], from: null, overwrite: true });
    // null is the option's "none": not given
    expect([...r.given].sort()).toEqual(['curriculum', 'dataThread', 'minutes', 'overwrite', 'sessions']);
  });

  it('refuses a config file that cannot be read or names what the table does not have, saying which file', () => {
    const missing = path.join(tmpDir('lamer-recipe-config-'), 'none.json');
    expect(refusal(['--config', missing])).toBe(`--config ${missing}: ENOENT (a JSON object of options expected)`);
    const notJson = configFile('{"minutes": ');
    expect(refusal(['--config', notJson])).toMatch(new RegExp(`^--config ${notJson}: .*JSON`));
    const list = configFile([1, 2]);
    expect(refusal(['--config', list])).toBe(`--config ${list}: not a JSON object of options`);
    const unknown = configFile({ minuts: 3 });
    expect(refusal(['--config', unknown])).toBe(`--config ${unknown}: unknown option 'minuts' (the keys are the options' names without their dashes)`);
    const camel = configFile({ dataThread: 'on' });
    expect(refusal(['--config', camel])).toMatch(/unknown option 'dataThread'/);
  });

  it('checks a config file\'s values as the command line\'s, and refuses JSON values of the wrong type', () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ minutes: 0 }, "--minutes must be a number in [0.05, 10000], got '0'"],
      [{ 'data-thread': true }, '--data-thread must be a number or a string, got true'],
      [{ 'data-thread': 1 }, "--data-thread must be on or off, got '1'"],
      [{ minutes: null }, '--minutes must be a number or a string, got null'],
      [{ steps: [3] }, '--steps must be a number or a string or null, got [3]'],
      [{ overwrite: 'yes' }, '--overwrite must be true or false'],
      [{ 'memory-at': 'middle' }, "--memory-at must be head or tail, got 'middle'"],
    ];
    for (const [json, message] of cases) {
      const file = configFile(json);
      expect(refusal(['--config', file])).toBe(`--config ${file}: ${message}`);
    }
    // a bad value in the file is not read when the command line gives the option
    expect(parse(['--config', configFile({ minutes: 0 }), '--minutes', '3'])!.args.minutes).toBe(3);
  });
});

describe('usageText', () => {
  const text = usageText(TABLE, 'usage: npm run x -- [options]', 'a footer');

  it('has one entry per option in the table\'s order, with its placeholder, default and range, then --config, --help and the footer', () => {
    const flags = [...text.matchAll(/^ {2}(--[a-z-]+)/gm)].map((m) => m[1]);
    expect(flags).toEqual([...Object.keys(TABLE).map((k) => `--${flagOf(k)}`), '--config', '--help']);
    expect(text.startsWith('usage: npm run x -- [options]\n  --minutes M ')).toBe(true);
    expect(text).toContain('budget in minutes (default 95; a number in [0.05, 10000])');
    expect(text).toContain('optimiser steps (default none; an integer in [1, 1000])');
    expect(text).toContain('sessions (default 12; an integer >= 1)');
    expect(text).toContain('--data-thread on|off');
    expect(text).toContain('--memory-at head|tail');
    expect(text).toMatch(/--overwrite +replace\n/);
    expect(text.endsWith('\n\na footer')).toBe(true);
    for (const line of text.split('\n')) expect(line.length, line).toBeLessThanOrEqual(100);
  });

  it('names options in kebab case', () => {
    expect(flagOf('moveUnlikelihood')).toBe('move-unlikelihood');
    expect(flagOf('out')).toBe('out');
  });
});
