/**
 * A benchmark client that plays MineSweeper sessions through the HTTP API, one request at a time
 * over one keep-alive connection (bench/healthz-burst.ts, bench/builtin-http.ts): create a session
 * of `attempts` attempts, post each attempt's steps (every one with `availableActions`, so the
 * builtin engine samples among the legal moves) until the attempt ends, then the next task.
 */
import http from 'node:http';
import { request } from './bench-http-client.js';
import { makeEnv, MAX_STEPS } from '../src/envs/index.js';

/** The env the benchmarks play. */
export const MINESWEEPER_ENV = 'minesweeper-6x6-3';

export interface PlayOptions {
  port: number;
  /** The next task seed to play, or null to stop after the session in progress. */
  nextSeed: () => number | null;
  /** true: stop now, even inside a session. */
  stop: () => boolean;
  /** Attempts per session (default 3). */
  attempts?: number;
  /** Turns per attempt (`maxSteps`; default MAX_STEPS.minesweeper). */
  maxSteps?: number;
  /** Told each answered step's latency, ms (request sent to answer parsed). */
  onStep?: (ms: number) => void;
}

/**
 * Plays sessions until `nextSeed()` gives null or `stop()` is true.
 * @returns the steps answered 200 and the requests that were not.
 */
export async function playMineSweeper(o: PlayOptions): Promise<{ steps: number; errors: number }> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const env = makeEnv(MINESWEEPER_ENV);
  const attempts = o.attempts ?? 3;
  const maxSteps = o.maxSteps ?? MAX_STEPS.minesweeper;
  let steps = 0;
  let errors = 0;
  for (let seed = o.nextSeed(); seed !== null && !o.stop(); seed = o.nextSeed()) {
    const created = await request(agent, o.port, 'POST', '/v1/sessions', {
      taskId: `${MINESWEEPER_ENV}:seed=${seed}`, instructions: env.instructions, env: 'minesweeper', maxAttempts: attempts, maxSteps, mode: 'eval',
    });
    if (created.status !== 201) {
      errors++;
      continue;
    }
    const id = created.json.id as string;
    let status = 'active';
    for (let a = 0; a < attempts && status === 'active' && !o.stop(); a++) {
      let { observation, availableActions } = env.reset(seed);
      let reward = 0;
      let done = false;
      let success = false;
      for (let t = 0; !o.stop(); t++) {
        const t0 = performance.now();
        const r = await request(agent, o.port, 'POST', `/v1/sessions/${id}/steps`, { attempt: a, step: t, observation, reward, done, success, ...(done ? {} : { availableActions }) });
        if (r.status !== 200) {
          errors++;
          status = 'error';
          break;
        }
        steps++;
        o.onStep?.(performance.now() - t0);
        status = r.json.session.status;
        if (done || r.json.action === null) break;
        const s = env.step(r.json.action as string);
        observation = s.observation;
        reward = s.reward;
        done = s.done; // the step at index maxSteps ends the attempt whatever done says
        success = s.success;
        availableActions = env.legalActions();
      }
    }
  }
  agent.destroy();
  return { steps, errors };
}
