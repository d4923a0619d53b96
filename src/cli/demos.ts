/**
 * `lamer demos --env minesweeper|sokoban --tasks N --seed S --out FILE.jsonl [--fail-rate 0.3]
 *  [--attempts 3] [--max-steps 7] [--params JSON]`: write solver demonstration sessions
 * (src/envs/demos.ts) for the SFT warm start. Seeds come from the training range.
 */
import { generateDemos, writeDemos } from '../envs/demos.js';
import { MAX_STEPS } from '../envs/index.js';
import { checkOutPath, envOpt, intOpt, numOpt, parseCommand, usageError, UsageError } from './args.js';

export { intOpt };

const HELP = `usage: lamer demos --env minesweeper|sokoban --tasks N --out FILE.jsonl [options]

  --env NAME        minesweeper | sokoban, or a sized name such as minesweeper-4x4-2 (required)
  --tasks N         number of sessions (required)
  --out FILE        JSONL output, one session per line (required)
  --seed S          offset into the training seed range [0, 1e9) (default 0)
  --fail-rate P     fraction of sessions whose first attempt fails on purpose (default 0.3)
  --attempts K      attempts per session (default 3)
  --max-steps T     turns per attempt (default 7)
  --params JSON     env parameters, e.g. '{"mines":5}' (minesweeper: rows, cols, mines;
                    sokoban: rows, cols, boxes, minMoves, maxMoves)`;

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommand('demos', argv, {
    env: { type: 'string' }, tasks: { type: 'string' }, seed: { type: 'string' }, out: { type: 'string' },
    'fail-rate': { type: 'string' }, attempts: { type: 'string' }, 'max-steps': { type: 'string' },
    params: { type: 'string' },
  }, HELP);
  if ('code' in parsed) return parsed.code;
  const values = parsed.values;
  try {
    const { kind: env, params } = envOpt(values.env, values.params);
    if (!values.out) throw new UsageError('--out is required');
    const failRate = numOpt('fail-rate', values['fail-rate'], 0.3, 0, 1);
    const tasks = intOpt('tasks', values.tasks, undefined, 1);
    const seed = intOpt('seed', values.seed, 0, 0, 1e9 - 1);
    if (seed + tasks > 1e9) throw new UsageError('--seed + --tasks exceeds the training seed range [0, 1e9)');
    const maxAttempts = intOpt('attempts', values.attempts, 3, 1);
    const maxSteps = intOpt('max-steps', values['max-steps'], MAX_STEPS[env], 1);
    checkOutPath('out', values.out);
    const sessions = generateDemos({ env, params, failRate, tasks, seed, maxAttempts, maxSteps });
    writeDemos(values.out, sessions);
    const attempts = sessions.reduce((a, s) => a + s.attempts.length, 0);
    const solved = sessions.filter((s) => s.attempts[s.attempts.length - 1].steps.at(-1)!.success).length;
    const reflections = sessions.reduce((a, s) => a + s.attempts.filter((x) => x.reflection).length, 0);
    console.log(`wrote ${sessions.length} sessions (${attempts} attempts, ${reflections} reflections, ${solved} solved) to ${values.out}`);
    return 0;
  } catch (e) {
    return usageError('demos', e);
  }
}
