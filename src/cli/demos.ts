/**
 * `lamer demos --env minesweeper|sokoban --tasks N --seed S --out FILE.jsonl [--fail-rate 0.3]
 *  [--attempts 3] [--max-steps 7] [--params JSON]`: write solver demonstration sessions
 * (src/envs/demos.ts, contract 5) for the SFT warm start. Seeds come from the training range.
 */
import { parseArgs } from 'node:util';
import { generateDemos, writeDemos } from '../envs/demos.js';
import { ENV_KINDS, MAX_STEPS, type EnvKind } from '../envs/index.js';

const HELP = `usage: lamer demos --env minesweeper|sokoban --tasks N --out FILE.jsonl [options]

  --env NAME        minesweeper | sokoban (required)
  --tasks N         number of sessions (required)
  --out FILE        JSONL output, one session per line (required)
  --seed S          offset into the training seed range [0, 1e9) (default 0)
  --fail-rate P     fraction of sessions whose first attempt fails on purpose (default 0.3)
  --attempts K      attempts per session (default 3)
  --max-steps T     turns per attempt (default 7)
  --params JSON     env parameters, e.g. '{"mines":5}' or '{"boxes":3}'`;

/** Parse an integer option. @throws Error naming the option. */
export function intOpt(name: string, v: string | undefined, def: number | undefined, min = 0): number {
  if (v === undefined) {
    if (def === undefined) throw new Error(`--${name} is required`);
    return def;
  }
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer >= ${min}, got '${v}'`);
  return n;
}

export async function run(argv: string[]): Promise<number> {
  let values;
  try {
    values = parseArgs({
      args: argv,
      options: {
        env: { type: 'string' }, tasks: { type: 'string' }, seed: { type: 'string' }, out: { type: 'string' },
        'fail-rate': { type: 'string' }, attempts: { type: 'string' }, 'max-steps': { type: 'string' },
        params: { type: 'string' }, help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    }).values;
  } catch (e) {
    console.error(`lamer demos: ${(e as Error).message}\n\n${HELP}`);
    return 2;
  }
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  try {
    const env = values.env as EnvKind;
    if (!ENV_KINDS.includes(env)) throw new Error(`--env must be one of ${ENV_KINDS.join(', ')}, got '${values.env ?? ''}'`);
    if (!values.out) throw new Error('--out is required');
    const failRate = values['fail-rate'] === undefined ? 0.3 : Number(values['fail-rate']);
    if (!(failRate >= 0 && failRate <= 1)) throw new Error(`--fail-rate must be a number in [0, 1], got '${values['fail-rate']}'`);
    let params = {};
    if (values.params) {
      try {
        params = JSON.parse(values.params);
      } catch {
        throw new Error(`--params must be JSON, got '${values.params}'`);
      }
    }
    const sessions = generateDemos({
      env, params, failRate,
      tasks: intOpt('tasks', values.tasks, undefined, 1),
      seed: intOpt('seed', values.seed, 0),
      maxAttempts: intOpt('attempts', values.attempts, 3, 1),
      maxSteps: intOpt('max-steps', values['max-steps'], MAX_STEPS[env], 1),
    });
    writeDemos(values.out, sessions);
    const attempts = sessions.reduce((a, s) => a + s.attempts.length, 0);
    const solved = sessions.filter((s) => s.attempts[s.attempts.length - 1].steps.at(-1)!.success).length;
    const reflections = sessions.reduce((a, s) => a + s.attempts.filter((x) => x.reflection).length, 0);
    console.log(`wrote ${sessions.length} sessions (${attempts} attempts, ${reflections} reflections, ${solved} solved) to ${values.out}`);
    return 0;
  } catch (e) {
    console.error(`lamer demos: ${(e as Error).message}`);
    return 2;
  }
}
