// How often the push-memory target (model:sft-base --push-memory-targets on) differs from the plain
// solver's: plays N noisy solver trials of a Sokoban env with push reflections and push-memory
// targets (src/envs/compact-data.ts playCompactTrial), and counts, among the decisions of later
// attempts whose memory names at least one dead push, those whose target avoids the named pushes
// and differs from the plain solver's (pushMemoryTarget), those where a named push is one move away
// on the target path (deadMoves[0], the memory decisions of --push-reflections alone), and those
// where no solution avoids the named pushes (the plain target is kept). Also prints, for each
// named push, whether its box's new cell is a dead square (a box alone there, the others removed,
// can reach no target: the push is then fatal whatever the other boxes, and no solution makes it).
// usage: npx tsx push-memory-targets.mts [ENV=sokoban-6x6-2] [N=200] [NOISE=0.3]
import { noisyPolicy, playCompactTrial } from '../../../src/envs/compact-data.js';
import { namedDeadPushes, type SokobanPush } from '../../../src/envs/sokoban-pushes.js';
import { parseSokoban, solveSokoban } from '../../../src/envs/sokoban.js';
import { solveSokobanAvoiding } from '../../../src/envs/solvers/sokoban-solver.js';
import { trainSeed } from '../../../src/envs/index.js';

/** Whether the push `p` on the board of `observation` puts its box on a dead square (see above). */
function deadSquare(observation: string, p: SokobanPush): boolean {
  const s = parseSokoban(observation);
  const from = p.row * s.cols + p.col;
  const to = from + { up: -s.cols, down: s.cols, left: -1, right: 1 }[p.move];
  return solveSokoban({ ...s, boxes: [to], player: from }) === null;
}

const envName = process.argv[2] ?? 'sokoban-6x6-2';
const n = Number(process.argv[3] ?? 200);
const noise = Number(process.argv[4] ?? 0.3);
let trials = 0, withMemory = 0, differs = 0, near = 0, eitherMatters = 0, noAvoiding = 0, reflections = 0, pushReflections = 0, squares = 0;
for (let i = 0; i < n; i++) {
  const seed = trainSeed(7_000_000, i);
  const t = playCompactTrial({ envName, seed, maxAttempts: 3, policy: noisyPolicy(noise), rngSeed: seed ^ 0x5bd1e995, pushReflections: true, pushMemoryTargets: true });
  trials++;
  const memory: string[] = [];
  for (const a of t.attempts) {
    const named = namedDeadPushes(memory);
    for (const s of a.steps) {
      if (named.length === 0 || !s.choices) continue;
      withMemory++;
      if (s.pushMemoryTarget) differs++;
      if ((s.deadMoves?.[0]?.length ?? 0) > 0) near++;
      if (s.memoryMatters) eitherMatters++;
      if (solveSokobanAvoiding(parseSokoban(s.observation), named) === null) noAvoiding++;
    }
    if (a.reflection !== null) {
      reflections++;
      const [p] = namedDeadPushes([a.reflection]);
      if (p) {
        pushReflections++;
        if (deadSquare(a.steps[a.steps.length - 1]!.observation, p)) squares++;
      }
      memory.push(a.reflection);
    }
  }
}
const pct = (k: number) => `${k} (${withMemory ? ((100 * k) / withMemory).toFixed(1) : '-'}%)`;
console.log(`${envName}, ${trials} trials, noise ${noise}: ${reflections} reflections, ${pushReflections} naming a dead push, ${squares} of them onto a dead square`);
console.log(`later-attempt decisions with a push memory: ${withMemory}`);
console.log(`  target differs where the named pushes are forbidden (pushMemoryTarget): ${pct(differs)}`);
console.log(`  a named push one move away (deadMoves[0], memoryMatters without the option): ${pct(near)}`);
console.log(`  memoryMatters with the option (either): ${pct(eitherMatters)}`);
console.log(`  no solution avoids the named pushes (plain target kept): ${pct(noAvoiding)}`);
