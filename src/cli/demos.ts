/**
 * `lamer demos --env NAME --tasks N --seed S --out FILE.jsonl [--fail-rate 0.3]
 *  [--attempts 3] [--max-steps 7] [--params JSON]`, or `lamer demos --curriculum LIST ...`:
 * write solver demonstration sessions (src/envs/demos.ts) for the SFT warm start, on seeds of the
 * training range. Prints how many sessions, attempts, actions (steps), reflections and bytes were written.
 */
import { demoStats, generateCurriculum, generateDemos, parseCurriculum, writeDemos } from '../envs/demos.js';
import { MAX_STEPS } from '../envs/index.js';
import { checkOutPath, envOpt, intOpt, numOpt, parseCommand, usageError, UsageError } from './args.js';

export { intOpt };

const HELP = `usage: lamer demos (--env NAME | --curriculum LIST) --tasks N --out FILE.jsonl [options]

  --env NAME        minesweeper | sokoban (default sizes), or a sized name: minesweeper-RxC-M
                    (rows x cols, mines; e.g. minesweeper-6x6-3) or sokoban-RxC-B (rows x cols,
                    boxes; e.g. sokoban-6x6-2)
  --curriculum LIST a mix of envs instead of --env: comma-separated kind[:RxC/N][=COUNT|@WEIGHT]
                    (N = mines or boxes; COUNT sessions exactly, or a WEIGHT share of --tasks,
                    default @1), e.g. minesweeper:4x4/2,minesweeper:6x6/3@2,sokoban:6x6/2=50;
                    or a JSON array of {"env", "params"?, "count"?, "weight"?}. Every session uses
                    its own training seed.
  --tasks N         number of sessions (required, except for a curriculum of counts only)
  --out FILE        JSONL output, one session per line (required)
  --seed S          offset into the training seed range [0, 1e9) (default 0)
  --fail-rate P     fraction of sessions whose first attempt fails on purpose (default 0.3)
  --attempts K      attempts per session (default 3)
  --max-steps T     turns per attempt (default 7)
  --params JSON     env parameters with --env, e.g. '{"mines":5}' (minesweeper: rows, cols, mines;
                    sokoban: rows, cols, boxes, minMoves, maxMoves)`;

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommand('demos', argv, {
    env: { type: 'string' }, curriculum: { type: 'string' }, tasks: { type: 'string' }, seed: { type: 'string' }, out: { type: 'string' },
    'fail-rate': { type: 'string' }, attempts: { type: 'string' }, 'max-steps': { type: 'string' },
    params: { type: 'string' },
  }, HELP);
  if ('code' in parsed) return parsed.code;
  const values = parsed.values;
  try {
    if (values.env !== undefined && values.curriculum !== undefined) throw new UsageError('give --env or --curriculum, not both');
    if (!values.out) throw new UsageError('--out is required');
    checkOutPath('out', values.out);
    const failRate = numOpt('fail-rate', values['fail-rate'], 0.3, 0, 1);
    const seed = intOpt('seed', values.seed, 0, 0, 1e9 - 1);
    const maxAttempts = intOpt('attempts', values.attempts, 3, 1);
    let sessions;
    let lines: string[] = [];
    if (values.curriculum !== undefined) {
      if (values.params !== undefined) throw new UsageError('--params goes with --env; give a curriculum item its params instead');
      let items;
      try { items = parseCurriculum(values.curriculum); } catch (e) { throw new UsageError(`--curriculum: ${(e as Error).message}`); }
      const tasks = values.tasks === undefined ? undefined : intOpt('tasks', values.tasks, undefined, 1);
      const maxSteps = values['max-steps'] === undefined ? undefined : intOpt('max-steps', values['max-steps'], undefined, 1);
      let counts: number[];
      try {
        ({ sessions, counts } = generateCurriculumChecked(items, { tasks, seed, failRate, maxAttempts, maxSteps }));
      } catch (e) { throw e instanceof RangeError ? new UsageError(e.message) : e; }
      let at = 0;
      lines = items.map((it, k) => {
        const part = sessions!.slice(at, (at += counts[k]!));
        const st = demoStats(part);
        return `  ${it.env} ${JSON.stringify(it.params)}: ${st.sessions} sessions, ${st.steps} steps, ${st.reflections} reflections, ${st.solved} solved, ${st.bytes} bytes`;
      });
    } else {
      const { kind: env, params } = envOpt(values.env, values.params);
      const tasks = intOpt('tasks', values.tasks, undefined, 1);
      if (seed + tasks > 1e9) throw new UsageError('--seed + --tasks exceeds the training seed range [0, 1e9)');
      const maxSteps = intOpt('max-steps', values['max-steps'], MAX_STEPS[env], 1);
      sessions = generateDemos({ env, params, failRate, tasks, seed, maxAttempts, maxSteps });
    }
    writeDemos(values.out, sessions);
    const st = demoStats(sessions);
    console.log(`wrote ${st.sessions} sessions (${st.attempts} attempts, ${st.steps} steps, ${st.reflections} reflections, ${st.solved} solved, ${st.bytes} bytes) to ${values.out}`);
    for (const l of lines) console.log(l);
    return 0;
  } catch (e) {
    return usageError('demos', e);
  }
}

/** `generateCurriculum` after checking that its seeds stay inside the training range. */
function generateCurriculumChecked(items: Parameters<typeof generateCurriculum>[0], opts: Parameters<typeof generateCurriculum>[1]): ReturnType<typeof generateCurriculum> {
  const total = opts.tasks ?? items.reduce((a, it) => a + (it.count ?? 0), 0);
  const counted = items.reduce((a, it) => a + (it.count ?? 0), 0);
  if (opts.seed + Math.max(total, counted) > 1e9) throw new UsageError('--seed + sessions exceeds the training seed range [0, 1e9)');
  return generateCurriculum(items, opts);
}
