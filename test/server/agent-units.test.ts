/** Pure parts of the agent: prompts, action extraction, pass@k, the keyed mutex, request hashing, config. */
import { describe, expect, it } from 'vitest';
import { renderActPrompt, renderReflectionPrompt, HISTORY_STEPS } from '../../src/agent/prompt.js';
import { extractAction } from '../../src/policy/actions.js';
import { passAtK, passAtKRate } from '../../src/agent/passk.js';
import { KeyedMutex } from '../../src/agent/mutex.js';
import { canonicalJson, stepHash } from '../../src/agent/step-hash.js';
import { ConfigError, loadConfig, parseApiKeys } from '../../src/config.js';
import { TestEngine } from '../../src/policy/test-engine.js';

describe('renderActPrompt', () => {
  const base = { instructions: 'RULES', attempt: 0, previousAttempts: [], steps: [], observation: 'O0' };

  it('step 0 of attempt 0: instructions, initial observation, cue', () => {
    const p = renderActPrompt({ ...base, memory: 'reflection_only' });
    expect(p).toEqual({ head: 'RULES\nInitial observation:\nO0', steps: [], tail: '\nObservation:\nO0\nAction:' });
  });

  it('later steps render each earlier step, oldest first', () => {
    const p = renderActPrompt({
      ...base,
      memory: 'reflection_only',
      steps: [
        { observation: 'O0', action: 'up' },
        { observation: 'O1', action: 'left' },
      ],
      observation: 'O2',
    });
    expect(p.head).toBe('RULES\nInitial observation:\nO0');
    expect(p.steps).toEqual(['\nObservation:\nO0\nAction: up', '\nObservation:\nO1\nAction: left']);
    expect(p.tail).toBe('\nObservation:\nO2\nAction:');
  });

  const prev = [
    { steps: [{ observation: 'a', action: '1' }], finalObservation: 'lostA', success: false, reflection: 'R0' },
    {
      steps: Array.from({ length: 9 }, (_, i) => ({ observation: `b${i}`, action: String(i) })),
      finalObservation: 'lostB',
      success: false,
      reflection: 'x'.repeat(2500),
    },
  ];

  it('reflection_only lists every reflection, each cut to 2000 characters', () => {
    const p = renderActPrompt({ ...base, attempt: 2, memory: 'reflection_only', previousAttempts: prev });
    expect(p.head).toBe(`RULES\nInitial observation:\nO0\nReflections on earlier attempts:\nAttempt 0: R0\nAttempt 1: ${'x'.repeat(2000)}`);
  });

  it('cuts a reflection by characters (code points): 2000 emoji stay whole, the 2001st is left out', () => {
    const emoji = [{ steps: [], finalObservation: 'F', success: false, reflection: '😀'.repeat(2001) }];
    const p = renderActPrompt({ ...base, attempt: 1, memory: 'reflection_only', previousAttempts: emoji });
    expect(p.head).toBe(`RULES\nInitial observation:\nO0\nReflections on earlier attempts:\nAttempt 0: ${'😀'.repeat(2000)}`);
  });

  it('history_only shows the previous attempt\'s last 7 steps and no reflection', () => {
    const p = renderActPrompt({ ...base, attempt: 2, memory: 'history_only', previousAttempts: prev });
    const shown = Array.from({ length: HISTORY_STEPS }, (_, k) => k + 2)
      .map((i) => `\nObservation:\nb${i}\nAction: ${i}`)
      .join('');
    expect(p.head).toBe(`RULES\nInitial observation:\nO0\nPrevious attempt 1 (not completed), last 7 steps:${shown}\nFinal observation:\nlostB`);
  });

  it('history_and_reflection has both, history first', () => {
    const p = renderActPrompt({ ...base, attempt: 1, memory: 'history_and_reflection', previousAttempts: [prev[0]!] });
    expect(p.head).toBe(
      'RULES\nInitial observation:\nO0\nPrevious attempt 0 (not completed), last 1 steps:\nObservation:\na\nAction: 1\nFinal observation:\nlostA' +
        '\nReflections on earlier attempts:\nAttempt 0: R0',
    );
  });
});

describe('renderReflectionPrompt', () => {
  it('sees the initial state, the last 7 steps and says the task was not completed', () => {
    const steps = Array.from({ length: 10 }, (_, i) => ({ observation: `o${i}`, action: `a${i}` }));
    const p = renderReflectionPrompt({ instructions: 'RULES', attempt: 1, steps, finalObservation: 'END' });
    expect(p.head).toBe('RULES\nInitial observation:\no0');
    expect(p.steps).toEqual(steps.slice(3).map((s) => `\nObservation:\n${s.observation}\nAction: ${s.action}`));
    expect(p.tail).toBe(
      '\nObservation:\nEND\nAttempt 1 ended: the task was not completed.\nReflect on what went wrong and write a plan for the next attempt.\nReflection:',
    );
  });
});

describe('extractAction', () => {
  it.each([
    [' up\nbecause the box', 'up'],
    ['Action: (2, 3)', '(2, 3)'],
    ['\n\n  left  \n', 'left'],
    ['action:down', 'down'],
    ['', ''],
    ['\n \n', ''],
  ])('%j -> %j', (out, want) => {
    expect(extractAction(out)).toBe(want);
  });
});

describe('pass@k', () => {
  const S = (...xs: boolean[]) => xs.map((success) => ({ success }));
  it('one session', () => {
    expect(passAtK(S(false, true), 3)).toEqual({ '1': false, '2': true, '3': true });
    expect(passAtK(S(true), 3)).toEqual({ '1': true, '2': true, '3': true });
    expect(passAtK(S(), 2)).toEqual({ '1': false, '2': false });
  });
  it('rates over sessions', () => {
    expect(passAtKRate([S(true), S(false, true), S(false, false, false), S(false, false, true)], 3)).toEqual({ '1': 0.25, '2': 0.5, '3': 0.75 });
    expect(passAtKRate([], 2)).toEqual({ '1': 0, '2': 0 });
  });
});

describe('KeyedMutex', () => {
  it('serialises one key and lets other keys run', async () => {
    const m = new KeyedMutex();
    const log: string[] = [];
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    const p1 = m.run('a', async () => {
      log.push('a1 start');
      await sleep(30);
      log.push('a1 end');
    });
    const p2 = m.run('a', async () => {
      log.push('a2 start');
    });
    const p3 = m.run('b', async () => {
      log.push('b1 start');
    });
    await Promise.all([p1, p2, p3]);
    expect(log).toEqual(['a1 start', 'b1 start', 'a1 end', 'a2 start']);
  });
  it('a failing task does not block the next; drain waits for all', async () => {
    const m = new KeyedMutex();
    await expect(m.run('k', async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    let done = false;
    void m.run('k', async () => {
      await new Promise((r) => setTimeout(r, 20));
      done = true;
    });
    await m.drain();
    expect(done).toBe(true);
  });
});

describe('request identity', () => {
  it('canonical JSON sorts keys and drops undefined', () => {
    expect(canonicalJson({ b: 1, a: [{ d: 2, c: undefined }], e: null })).toBe('{"a":[{"d":2}],"b":1,"e":null}');
  });
  it('explicit defaults hash like omitted fields; any change hashes differently', () => {
    const h = stepHash({ attempt: 0, step: 1, observation: 'o' });
    expect(stepHash({ attempt: 0, step: 1, observation: 'o', reward: 0, done: false, success: false, invalidAction: false })).toBe(h);
    expect(stepHash({ attempt: 0, step: 1, observation: 'o', reward: 1 })).not.toBe(h);
    expect(stepHash({ attempt: 0, step: 1, observation: 'o', info: { a: 1 } })).not.toBe(h);
  });
});

describe('TestEngine', () => {
  it('is deterministic and picks from availableActions', async () => {
    const e = new TestEngine();
    const req = { sessionId: 's', modelVersion: 'test', prompt: { head: 'h', steps: [], tail: 't' }, sampling: { temperature: 1, topP: 1, topK: 0, seed: 1 } };
    const a = await e.act({ ...req, availableActions: ['x', 'y', 'z'] });
    const b = await e.act({ ...req, availableActions: ['x', 'y', 'z'] });
    expect(a).toEqual(b);
    expect(['x', 'y', 'z'][a.choiceIndex!]).toBe(a.output);
    expect(a.promptTokenIds).toEqual([104, 116]);
    expect((await e.act(req)).output).toMatch(/^move [0-3]$/);
    expect(await e.score({ modelVersion: 'test', prompt: req.prompt, candidates: ['ab', ''] })).toEqual([2 * Math.log(1 / 256), 0]);
  });
});

describe('config', () => {
  it('defaults', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({ host: '127.0.0.1', port: 8080, engine: 'builtin', tfjsBackend: 'auto', apiKeys: [], logLevel: 'info' });
    expect(c.limits.observationChars).toBe(65536);
    expect(c.limits.availableActions).toBe(512);
    expect(c.limits.actionChars).toBe(1024);
  });
  it('parses API keys', () => {
    expect(parseApiKeys('key1abcd:tenantA, key2abcd:tenantB:admin')).toEqual([
      { key: 'key1abcd', tenant: 'tenantA', admin: false },
      { key: 'key2abcd', tenant: 'tenantB', admin: true },
    ]);
  });
  it.each([
    [{ LAMER_PORT: 'abc' }, /LAMER_PORT="abc": expected an integer in \[0, 65535\]/],
    [{ LAMER_PORT: '70000' }, /LAMER_PORT=70000/],
    [{ LAMER_ENGINE: 'gpt' }, /LAMER_ENGINE="gpt": expected one of builtin, test/],
    [{ LAMER_TFJS_BACKEND: 'cuda' }, /LAMER_TFJS_BACKEND/],
    [{ LAMER_LOG_LEVEL: 'loud' }, /LAMER_LOG_LEVEL/],
    [{ LAMER_API_KEYS: 'onlykey' }, /LAMER_API_KEYS: bad entry/],
    [{ LAMER_API_KEYS: 'short:t' }, /at least 8 characters/],
    [{ LAMER_API_KEYS: 'key1abcd:a,key1abcd:b' }, /duplicate key/],
    [{ LAMER_MAX_OBSERVATION_CHARS: '-5' }, /LAMER_MAX_OBSERVATION_CHARS/],
    [{ LAMER_DEFAULT_MAX_STEPS: '500', LAMER_MAX_STEPS_CAP: '100' }, /exceeds LAMER_MAX_STEPS_CAP/],
  ])('%j is rejected', (env, msg) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(msg);
  });
});
