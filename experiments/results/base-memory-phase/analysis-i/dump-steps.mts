// Replays every MineSweeper attempt of an eval:base report from its task seed and writes one JSON
// line per step: the board before the click, the click, what it did, and the solver's exact mine
// probabilities (src/envs/solvers/minesweeper-solver.ts analyseMines) of the clicked cell
// (a) from the board alone, (b) from the board plus "the named cells are mines" (the cells the
// session's earlier reflections named; for independent retries: the mines earlier attempts hit,
// i.e. what a reflection would have named), (c) from the board plus the full memory of earlier
// attempts (every symbol they saw). Also whether a provably safe hidden cell exists under each.
// usage: npx tsx dump-steps.mts REPORT.json > OUT.jsonl
import { readFileSync } from 'node:fs';
import { MineSweeperEnv, neighbours, parseCellAction, parseMineSweeperObservation } from '../../../../src/envs/minesweeper.js';
import { analyseMines, rememberMines, type MineMemory } from '../../../../src/envs/solvers/minesweeper-solver.js';

const rep = JSON.parse(readFileSync(process.argv[2]!, 'utf8'));
const ROWS = 6, COLS = 6, MINES = 3;
const r3 = (x: number) => (Number.isNaN(x) ? null : Math.round(x * 1000) / 1000);
let mismatch = 0;
for (const s of rep.sessions) {
  const seed = Number(String(s.taskId).split('seed=')[1]);
  const named: number[] = []; // cells named "was a mine" by earlier reflections (lamer) or hit earlier (independent)
  const full: MineMemory = new Map();
  let prevTraj: string[] = [];
  for (const a of s.attempts) {
    const env = new MineSweeperEnv();
    let obs = env.reset(seed).observation;
    const mineIdx = env.mineCells().map((c) => c.row * COLS + c.col);
    let ret = 0, inv = 0, success = false, done = false;
    const steps: any[] = [];
    a.trajectory.forEach((act: string, t: number) => {
      const cells = parseMineSweeperObservation(obs);
      const flat = cells.flat();
      const mNamed: MineMemory = new Map(named.map((i) => [i, '*']));
      const A0 = analyseMines(cells, MINES);
      const A1 = analyseMines(cells, MINES, mNamed);
      const A2 = analyseMines(cells, MINES, full);
      const c = parseCellAction(act);
      const inRange = !!c && c.row >= 1 && c.row <= ROWS && c.col >= 1 && c.col <= COLS;
      const idx = inRange ? (c!.row - 1) * COLS + (c!.col - 1) : -1;
      const hidden = flat.map((x, i) => (x === '?' ? i : -1)).filter((i) => i >= 0);
      const namedHidden = named.filter((i) => flat[i] === '?');
      const minP = (A: any, excl: number[]) => Math.min(...hidden.filter((i) => !excl.includes(i)).map((i) => A.probability[i]));
      const r = env.step(act);
      ret += r.reward; if (r.invalidAction) inv++;
      steps.push({
        t, obs, act, idx, invalid: r.invalidAction, revealedClick: idx >= 0 && flat[idx] !== '?',
        mine: idx >= 0 && !r.invalidAction && mineIdx.includes(idx), done: r.done, success: r.success,
        p0: idx >= 0 ? r3(A0.probability[idx]) : null, p1: idx >= 0 ? r3(A1.probability[idx]) : null, p2: idx >= 0 ? r3(A2.probability[idx]) : null,
        safe0: A0.safe.length, safe1: A1.safe.filter((i) => !named.includes(i)).length, safe2: A2.safe.length,
        exact0: A0.exact, exact1: A1.exact, minP0: r3(minP(A0, [])), minP1: r3(minP(A1, named)),
        pNamed0: namedHidden.map((i) => r3(A0.probability[i])),
        clickIsNamed: named.includes(idx), namedHidden, adjNamed: idx >= 0 && named.some((n) => neighbours(n, ROWS, COLS).includes(idx)),
      });
      obs = r.observation; done = r.done; success = r.success;
    });
    const okReplay = Math.abs(ret - a.return) < 1e-6 && success === a.success && (a.endReason === 'done') === done && inv === a.invalidActions;
    if (!okReplay) mismatch++;
    console.log(JSON.stringify({ taskId: s.taskId, trial: s.trial, attempt: a.attempt, success: a.success, endReason: a.endReason,
      reflection: a.reflection ?? null, named: [...named], mines: mineIdx, trajectory: a.trajectory, prevTrajectory: prevTraj, okReplay, steps }));
    // Memory for the next attempt.
    const last = steps[steps.length - 1];
    if (rep.sessions && a.reflection && a.reflection.includes('was a mine')) {
      const c = parseCellAction(a.reflection.split(' was a mine')[0]);
      if (c) named.push((c.row - 1) * COLS + (c.col - 1));
    } else if (!('reflection' in a) && last && last.mine) {
      named.push(last.idx); // independent retries: what a reflection would have named
    }
    for (const st of steps) rememberMines(full, st.obs);
    rememberMines(full, obs); // the board after the last click
    if (last && last.mine) full.set(last.idx, '*');
    prevTraj = a.trajectory;
  }
}
console.error(`replay mismatches: ${mismatch}`);
